package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/internal/atomicfile"
)

// Callers are identified, in this order, by
//
//  1. a bearer token (Authorization: Bearer …): a static token, known by
//     its SHA-256, or else a JWT of a configured issuer (jwt.go);
//  2. a client certificate that a trusted proxy forwarded in
//     X-Forwarded-Client-Cert (see forwardedCert);
//  3. the verified client certificate of the TLS connection.
//
// Certificates are known by the SHA-256 of their SubjectPublicKeyInfo, so a
// re-issued certificate for the same key keeps its identity. A credential that
// is presented but unknown ends the search with 401: a wrong token does not
// fall back to the connection's certificate, and a forwarded certificate does
// not fall back to the proxy's own.

// authState holds the credentials. Nothing in it is a secret: tokens are
// kept as SHA-256 hashes only.
type authState struct {
	tokens   []tokenHash                     // admin first; always scanned whole
	certs    map[[sha256.Size]byte]*identity // SPKI hashes (public)
	proxies  []netip.Prefix                  // may forward client certificates
	limits   *rateLimiter                    // nil: no rate limit
	jwt      *jwtAuth                        // nil: no jwt_issuers
	policies map[string]*policy              // by name, for service tokens (tokens.go)
	// jwtRefresh is how often refreshJWKS fetches the issuers' keys.
	jwtRefresh time.Duration
	generated  string // admin token generated on this start, shown once
}

type tokenHash struct {
	sum [sha256.Size]byte
	id  *identity
}

const (
	adminTokenFile = "admin-token.sha256"
	adminName      = "admin"
)

var adminIdentity = &identity{name: adminName, admin: true}

// newAuth builds the credentials and policies of cfg. It drops
// cfg.AdminToken once hashed, so that the server keeps no token in clear.
func newAuth(cfg *Config, log *zap.Logger) (*authState, error) {
	admin, generated, err := adminTokenHash(cfg, log)
	if err != nil {
		return nil, err
	}
	cfg.AdminToken = ""
	a, err := buildAuth(cfg, admin, nil)
	if err != nil {
		return nil, err
	}
	a.generated = generated
	return a, nil
}

// buildAuth builds the credentials and policies of cfg around the admin
// token's hash. prev, when not nil, is the set in service, whose JWT
// issuers' keys carry over to the issuers whose keys are where they were.
func buildAuth(cfg *Config, admin [sha256.Size]byte, prev *authState) (*authState, error) {
	a := &authState{
		tokens:     []tokenHash{{admin, adminIdentity}},
		certs:      map[[sha256.Size]byte]*identity{},
		jwtRefresh: cfg.JWTRefreshInterval,
	}
	policies, err := newPolicies(cfg.Policies)
	if err != nil {
		return nil, err
	}
	if len(cfg.JWTIssuers) > 0 {
		var before *jwtAuth
		if prev != nil {
			before = prev.jwt
		}
		if a.jwt, err = newJWTAuth(cfg, before); err != nil {
			return nil, err
		}
	}
	a.policies = policies
	names := map[string]bool{adminName: true}
	for _, ic := range cfg.Identities {
		if ic.Name == "" || names[ic.Name] {
			return nil, fmt.Errorf("server: identity name %q is empty, reserved or used twice", ic.Name)
		}
		names[ic.Name] = true
		id := &identity{name: ic.Name}
		for _, pn := range ic.Policies {
			p := policies[pn]
			if p == nil {
				return nil, fmt.Errorf("server: identity %s: no policy %q", ic.Name, pn)
			}
			id.policies = append(id.policies, p)
		}
		if ic.TokenSHA256 == "" && ic.CertSHA256 == "" && ic.JWT == nil {
			return nil, fmt.Errorf("server: identity %s has none of token_sha256, cert_sha256 and jwt", ic.Name)
		}
		if ic.JWT != nil {
			if a.jwt == nil {
				return nil, fmt.Errorf("server: identity %s: jwt: no jwt_issuers are configured", ic.Name)
			}
			if err := a.jwt.add(id, ic.JWT); err != nil {
				return nil, err
			}
		}
		if ic.TokenSHA256 != "" {
			sum, err := parseSHA256(ic.TokenSHA256)
			if err != nil {
				return nil, fmt.Errorf("server: identity %s: token_sha256: %w", ic.Name, err)
			}
			if a.identifyHash(sum) != nil {
				return nil, fmt.Errorf("server: identity %s: its token is also another identity's", ic.Name)
			}
			a.tokens = append(a.tokens, tokenHash{sum, id})
		}
		if ic.CertSHA256 != "" {
			sum, err := parseSHA256(ic.CertSHA256)
			if err != nil {
				return nil, fmt.Errorf("server: identity %s: cert_sha256: %w", ic.Name, err)
			}
			if a.certs[sum] != nil {
				return nil, fmt.Errorf("server: identity %s: its certificate key is also another identity's", ic.Name)
			}
			a.certs[sum] = id
		}
	}
	for _, p := range cfg.TrustedProxies {
		pfx, err := netip.ParsePrefix(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("server: trusted proxy %q is not a CIDR", p)
		}
		a.proxies = append(a.proxies, pfx.Masked())
	}
	a.limits = newRateLimiter(cfg.RateLimit, cfg.RateBurst, names, cfg.now)
	return a, nil
}

// adminTokenHash returns the SHA-256 of the admin token: of the configured
// one, or of the one stored hashed in DataDir, or of a new one that it
// stores (hashed) and returns once as generated.
func adminTokenHash(cfg *Config, log *zap.Logger) (sum [sha256.Size]byte, generated string, err error) {
	if cfg.AdminToken != "" {
		if len(cfg.AdminToken) < 16 {
			log.Warn("the configured admin token is short; use at least 32 random bytes")
		}
		return sha256.Sum256([]byte(cfg.AdminToken)), "", nil
	}
	file := filepath.Join(cfg.DataDir, adminTokenFile)
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		sum, err := parseSHA256(strings.TrimSpace(string(b)))
		if err != nil {
			return sum, "", fmt.Errorf("server: %s is damaged", file)
		}
		return sum, "", nil
	case !errors.Is(err, os.ErrNotExist):
		return sum, "", fmt.Errorf("server: reading %s: %w", file, err)
	}
	var raw [32]byte
	rand.Read(raw[:])
	tok := "cdadm_" + base64.RawURLEncoding.EncodeToString(raw[:])
	sum = sha256.Sum256([]byte(tok))
	if err := atomicfile.Write(file, []byte(hex.EncodeToString(sum[:])+"\n"), ".tmp-"); err != nil {
		return sum, "", fmt.Errorf("server: storing the admin token hash: %w", err)
	}
	log.Warn("generated an admin token; it is shown once on standard error and stored only hashed", zap.String("file", file))
	return sum, tok, nil
}

func parseSHA256(s string) (sum [sha256.Size]byte, err error) {
	if len(s) != 2*sha256.Size {
		return sum, errors.New("want 64 hex characters")
	}
	if _, err := hex.Decode(sum[:], []byte(s)); err != nil {
		return sum, errors.New("want 64 hex characters")
	}
	return sum, nil
}

// identifyBearer returns the caller presenting bearer token tok, or nil
// and why not: a static token, or else a JWT. The JWTs verified are
// remembered by the same SHA-256, computed once.
func (s *Server) identifyBearer(tok string) (*identity, string) {
	if tok == "" {
		return nil, "empty bearer token"
	}
	a := s.auth()
	// The token's bytes, not a copy: Sum256 only reads them, and a JWT's
	// copy would be a KiB more garbage per request (BenchmarkAuthJWT).
	sum := sha256.Sum256(unsafe.Slice(unsafe.StringData(tok), len(tok)))
	if id := a.identifyHash(sum); id != nil {
		return id, ""
	}
	if id := s.serviceTokenIdentity(tok, sum); id != nil {
		return id, ""
	}
	if a.jwt == nil {
		return nil, "unknown bearer token"
	}
	// A token remembered is a JWT: the cache is asked before the token's
	// shape is looked at, a scan that costs more than the lookup on a
	// 1 KiB token (BenchmarkAuthJWT).
	now := s.now()
	if id := a.jwt.cache.get(sum, now); id != nil {
		return id, ""
	}
	if !looksLikeJWT(tok) {
		return nil, "unknown bearer token"
	}
	id, why := s.identifyJWT(a.jwt, tok, sum, now)
	if id == nil {
		s.met.jwtFailure(why)
		return nil, "jwt: " + why.String()
	}
	return id, ""
}

// identifyHash returns the identity whose token hashes to sum, or nil. Every
// stored hash is compared, in constant time, so that timing tells nothing
// about the stored hashes (which would help an offline guess at a weak
// configured token).
func (a *authState) identifyHash(sum [sha256.Size]byte) *identity {
	var found *identity
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:]) == 1 {
			found = a.tokens[i].id
		}
	}
	return found
}

// trustedProxy reports whether a TCP peer at ip may forward client
// certificates.
func (a *authState) trustedProxy(ip net.IP) bool {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return false
	}
	addr = addr.Unmap()
	for _, p := range a.proxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// authenticate identifies the caller of a route with an operation, or
// answers 401; or 429 first, without looking at the credential, when the
// client's address failed too often (authlimit.go).
func (s *Server) authenticate(c *fiber.Ctx) (*identity, error) {
	var from netip.Addr
	if s.authFails != nil {
		from = authFailKey(c.Context().RemoteIP())
		if err := s.checkAuthFailures(c, from); err != nil {
			return nil, err
		}
	}
	id, reason, err := s.identifyRequest(c)
	if err != nil {
		s.met.authFailure()
		return nil, err
	}
	if id == nil {
		s.met.authFailure()
		s.authFails.failed(from, time.Now())
		if ce := s.log.Check(zap.DebugLevel, "authentication failed"); ce != nil {
			ce.Write(zap.String("request_id", requestID(c)), zap.String("remote", c.Context().RemoteIP().String()), zap.String("reason", reason))
		}
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="cipherd"`)
		return nil, apiError(api.CodeUnauthenticated, "a valid bearer token or client certificate is required")
	}
	c.Locals(localsIdentity, id)
	return id, nil
}

// errAmbiguousAuth refuses a request that carries two credentials. Choosing
// one would let whoever adds a line (a client before a proxy's, or a proxy
// after a client's) decide which identity the request runs as.
var errAmbiguousAuth = apiError(api.CodeAmbiguousAuth, "send one credential: one Authorization header line, or one client certificate")

// identifyRequest returns the caller, or nil and why not (for the debug log;
// never a credential). A request with two credentials is an error.
func (s *Server) identifyRequest(c *fiber.Ctx) (*identity, string, error) {
	ctx := c.Context()
	h := &ctx.Request.Header
	forwarded := len(h.Peek(headerForwardedCert)) > 0
	if forwarded && !s.auth().trustedProxy(peerIP(ctx)) {
		// Only a trusted proxy may speak for a client; from anyone else
		// the header is dropped unread.
		h.Del(headerForwardedCert)
		forwarded = false
	}
	authz := c.Get(fiber.HeaderAuthorization)
	if authz != "" && forwarded || len(h.PeekAll(fiber.HeaderAuthorization)) > 1 ||
		forwarded && len(h.PeekAll(headerForwardedCert)) > 1 {
		return nil, "", errAmbiguousAuth
	}
	id, reason := s.identifyCredential(c, authz, forwarded)
	return id, reason, nil
}

// identifyCredential returns the identity of the request's one credential:
// the bearer token authz when there is one, the forwarded certificate, or
// the TLS client certificate.
func (s *Server) identifyCredential(c *fiber.Ctx, authz string, forwarded bool) (*identity, string) {
	ctx := c.Context()
	if authz != "" {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(authz), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return nil, "unsupported authorization scheme"
		}
		return s.identifyBearer(strings.TrimSpace(tok))
	}
	if forwarded {
		id, err := s.forwardedIdentity(c)
		if err != nil {
			return nil, "forwarded client certificate: " + err.Error()
		}
		if ce := s.log.Check(zap.DebugLevel, "identity from a forwarded client certificate"); ce != nil {
			ce.Write(zap.String("proxy", peerIP(ctx).String()), zap.String("identity", id.name))
		}
		return id, ""
	}
	if id := s.certIdentity(c); id != nil {
		return id, ""
	}
	return nil, "no credentials"
}

// authorize checks that the caller may do op on key, for a handler whose
// operation depends on the request's body (a data key with or without its
// plaintext); serve checks every other operation from the route's row.
func authorize(q *call, op Op) error {
	if q.id != nil && q.id.allowed(op, q.key) {
		return nil
	}
	return forbidden(op, q.key)
}

func callerName(c *fiber.Ctx) string {
	if id, _ := c.Locals(localsIdentity).(*identity); id != nil {
		return id.name
	}
	return ""
}

// certIdentity returns the identity of the caller's verified client
// certificate, if any. A certificate the handshake did not verify against
// the client CA never counts.
func (s *Server) certIdentity(c *fiber.Ctx) *identity {
	st := c.Context().TLSConnectionState()
	if st == nil || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil
	}
	return s.auth().certs[sha256.Sum256(st.PeerCertificates[0].RawSubjectPublicKeyInfo)]
}
