package server

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Callers identified by a JWT (RFC 7519) that one of jwt_issuers signed:
// a workload's OIDC token, a Kubernetes service account's projected token.
// A bearer token that is no identity's static token and has the shape of a
// JWT (three base64url segments) is verified as one, in this order:
//
//  1. its alg is one of jwtAlgorithms (never "none", never an HMAC);
//  2. its iss is a configured issuer's, exactly;
//  3. its kid names a key of that issuer that fits alg (jwk.fits), held
//     or fetched again (jwksMiss);
//  4. its signature verifies with that key;
//  5. its aud holds one of the issuer's audiences; exp is present and not
//     past, nbf and iat not in the future, each within jwt_clock_skew;
//  6. exactly one identity of that issuer matches its claims.
//
// Any failure is the same 401 to the client as an unknown static token;
// the reason goes to the debug log and to cipherd_jwt_failures_total,
// never the token or its claims. A verified token is remembered by its
// SHA-256 until its exp (jwtCache), so that the signature is verified
// once per token, not once per request.

// jwtAlgorithms are the signature algorithms a JWT may use: asymmetric
// ones only. A token with any other alg fails to parse, whatever the
// issuer's keys say: "none" signs nothing, and an HMAC's key would be a
// secret every verifier shares (and an RSA public key taken for an HMAC
// secret is the classic algorithm confusion).
var jwtAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256, jose.ES384, jose.EdDSA}

func jwtAlgorithmAllowed(alg jose.SignatureAlgorithm) bool {
	return slices.Contains(jwtAlgorithms, alg)
}

// maxJWTSize bounds the tokens parsed. A Kubernetes service account's
// token is about 1 KiB; 8 KiB leaves room for claims-heavy OIDC tokens.
const maxJWTSize = 8 << 10

// jwtReason is why a JWT did not identify a caller: a label value of
// cipherd_jwt_failures_total.
type jwtReason uint8

const (
	jwtVerified jwtReason = iota
	whyMalformed
	whyAlgorithm
	whyIssuer
	whyUnknownKey
	whySignature
	whyExpired
	whyNotYetValid
	whyAudience
	whyNoIdentity
	numJWTReasons
)

var jwtReasonNames = [numJWTReasons]string{"ok", "malformed", "algorithm", "issuer", "unknown_key", "signature", "expired", "not_yet_valid", "audience", "no_identity"}

func (r jwtReason) String() string { return jwtReasonNames[r] }

// jwtAuth is the JWT part of the credentials in service.
type jwtAuth struct {
	issuers map[string]*trustedIssuer // by iss
	skew    time.Duration
	cache   *jwtCache
}

// trustedIssuer is a configured issuer, its keys, and its identities.
type trustedIssuer struct {
	name      string
	src       *jwksSource
	audiences jwt.Audience
	ids       []jwtMatch
}

// jwtMatch is an identity and the claims that select it.
type jwtMatch struct {
	claims []claimValue // sorted by name
	id     *identity
}

type claimValue struct{ name, value string }

// newJWTAuth builds the issuers of cfg and attaches to them the
// identities that name them. prev is the JWT part in service, whose
// sources' keys carry over.
func newJWTAuth(cfg *Config, prev *jwtAuth) (*jwtAuth, error) {
	j := &jwtAuth{issuers: map[string]*trustedIssuer{}, skew: cfg.JWTClockSkew, cache: newJWTCache(jwtCacheSize)}
	for i := range cfg.JWTIssuers {
		ic := &cfg.JWTIssuers[i]
		var before *jwksSource
		if prev != nil {
			if p := prev.issuers[ic.Issuer]; p != nil && p.src.sameSource(ic) {
				before = p.src
			}
		}
		src, err := newJWKSSource(ic, before)
		if err != nil {
			return nil, fmt.Errorf("server: jwt_issuers: issuer %q: %w", ic.Issuer, err)
		}
		j.issuers[ic.Issuer] = &trustedIssuer{name: ic.Issuer, src: src, audiences: jwt.Audience(slices.Clone(ic.Audiences))}
	}
	return j, nil
}

// add makes id the caller of the tokens mc matches.
func (j *jwtAuth) add(id *identity, mc *JWTMatchConfig) error {
	iss := j.issuers[mc.Issuer]
	if iss == nil {
		return fmt.Errorf("server: identity %s: jwt: issuer %q is not in jwt_issuers", id.name, mc.Issuer)
	}
	if len(mc.Claims) == 0 {
		// Without a claim, every token of the issuer (every service
		// account of a cluster) would be this identity.
		return fmt.Errorf("server: identity %s: jwt: claims: want at least one (sub, for a service account)", id.name)
	}
	m := jwtMatch{id: id}
	for name, value := range mc.Claims {
		switch name {
		case "iss", "exp", "nbf", "iat":
			return fmt.Errorf("server: identity %s: jwt: claims: %s is checked by the issuer's settings, not matched", id.name, name)
		case "":
			return fmt.Errorf("server: identity %s: jwt: claims: a claim has no name", id.name)
		}
		m.claims = append(m.claims, claimValue{name, value})
	}
	slices.SortFunc(m.claims, func(a, b claimValue) int {
		if a.name < b.name {
			return -1
		}
		if a.name > b.name {
			return 1
		}
		return 0
	})
	for _, o := range iss.ids {
		if slices.Equal(o.claims, m.claims) {
			return fmt.Errorf("server: identity %s: jwt: the same issuer and claims as identity %s", id.name, o.id.name)
		}
	}
	iss.ids = append(iss.ids, m)
	return nil
}

// match returns the one identity whose claims the token's hold, or nil
// when none or several do: a token two identities claim identifies
// neither, rather than one chosen by the order of the configuration.
func (iss *trustedIssuer) match(claims map[string]any) *identity {
	var found *identity
	for _, m := range iss.ids {
		if m.matches(claims) {
			if found != nil {
				return nil
			}
			found = m.id
		}
	}
	return found
}

func (m *jwtMatch) matches(claims map[string]any) bool {
	for _, c := range m.claims {
		if !claimHolds(claims[c.name], c.value) {
			return false
		}
	}
	return true
}

// claimHolds reports whether a claim's value is want, or a list of
// strings that holds it. Claims of other types never match.
func claimHolds(v any, want string) bool {
	switch v := v.(type) {
	case string:
		return v == want
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

// looksLikeJWT reports whether tok has the shape of a JWS in compact
// serialization: header and payload of base64url characters, and a
// signature of them, which may be empty (as alg "none" leaves it, so that
// such a token is counted as refused for its algorithm).
func looksLikeJWT(tok string) bool {
	dots, seg := 0, 0
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case c == '.':
			if seg == 0 {
				return false
			}
			dots++
			seg = 0
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			seg++
		default:
			return false
		}
	}
	return dots == 2
}

// identifyJWT verifies JWT tok, whose SHA-256 is sum, at now, and returns
// its identity, which it remembers; or why it has none.
func (s *Server) identifyJWT(j *jwtAuth, tok string, sum [sha256.Size]byte, now time.Time) (*identity, jwtReason) {
	if len(tok) > maxJWTSize {
		return nil, whyMalformed
	}
	t, err := jwt.ParseSigned(tok, jwtAlgorithms)
	if err != nil {
		if _, ok := errors.AsType[*jose.ErrUnexpectedSignatureAlgorithm](err); ok {
			return nil, whyAlgorithm
		}
		return nil, whyMalformed
	}
	if len(t.Headers) != 1 {
		return nil, whyMalformed
	}
	h := t.Headers[0]
	var unverified jwt.Claims
	if err := t.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, whyMalformed
	}
	iss := j.issuers[unverified.Issuer]
	if iss == nil {
		return nil, whyIssuer
	}
	alg := jose.SignatureAlgorithm(h.Algorithm)
	k := iss.src.keys.Load().find(h.KeyID, alg)
	if k == nil && h.KeyID != "" && s.jwksMiss(iss.src, now) {
		k = iss.src.keys.Load().find(h.KeyID, alg)
	}
	if k == nil {
		return nil, whyUnknownKey
	}
	var claims jwt.Claims
	var all map[string]any
	if err := t.Claims(k.key, &claims, &all); err != nil {
		return nil, whySignature
	}
	if claims.Expiry == nil {
		return nil, whyExpired
	}
	switch err := claims.ValidateWithLeeway(jwt.Expected{Issuer: iss.name, AnyAudience: iss.audiences, Time: now}, j.skew); {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return nil, whyExpired
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, whyNotYetValid
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, whyAudience
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, whyIssuer
	default:
		return nil, whyMalformed
	}
	id := iss.match(all)
	if id == nil {
		return nil, whyNoIdentity
	}
	j.cache.put(sum, &jwtCached{id: id, src: iss.src, key: k, exp: int64(*claims.Expiry)}, now)
	return id, jwtVerified
}
