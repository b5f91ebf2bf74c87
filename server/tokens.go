package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/cipherd/cipherd/cryptosvc"
)

// Service tokens: bearer credentials with a lifetime and policies, issued
// and revoked through the API (handlers_tokens.go) and kept by the
// keystore (cryptosvc.TokenStore), in its memory, on every replica. A
// token reads
//
//	cdt_<id>_<secret>
//
// with id 16 lowercase hex digits (public: lists, logs, revocation) and
// secret 32 random bytes in unpadded base64url (43 characters). The store
// keeps the SHA-256 of the whole token: with 256 random bits, a fast hash
// is as good as a slow one, and it is the hash that identifyCredential
// computes for the configured tokens anyway, so a request is checked with
// one hash. Checking one is that hash, a lookup of the id in the store's
// memory and a constant-time comparison (BenchmarkIdentifyServiceToken): no
// file, no query.
//
// The identity of a token is its policies, resolved by name in the
// configuration in force: a reload that changes a policy changes what
// every token holding it may do, and a token naming a policy the
// configuration dropped loses that policy's rights.

const (
	tokenPrefix    = "cdt_"
	tokenSecretLen = 43 // base64url of 32 bytes, unpadded
	tokenLen       = len(tokenPrefix) + cryptosvc.TokenIDLen + 1 + tokenSecretLen
)

// tokenIdentity is a service token's identity under one set of
// credentials (authState), with its rate-limit bucket.
type tokenIdentity struct {
	rec    *cryptosvc.ServiceToken
	auth   *authState
	id     identity
	bucket *rate.Limiter // nil without a rate limit
}

// tokenIdentities caches the identity of each token in use by id, so that
// a request resolves no policies and allocates nothing. An entry is good
// while its record is the store's and its credentials are those in
// service; the background work drops the entries of tokens gone.
type tokenIdentities struct{ m sync.Map } // id → *tokenIdentity

// parseServiceToken splits a bearer token of the service token form into
// its id and secret; ok is false for any other string.
func parseServiceToken(tok string) (id, secret string, ok bool) {
	if len(tok) != tokenLen || tok[:len(tokenPrefix)] != tokenPrefix || tok[len(tokenPrefix)+cryptosvc.TokenIDLen] != '_' {
		return "", "", false
	}
	id = tok[len(tokenPrefix) : len(tokenPrefix)+cryptosvc.TokenIDLen]
	secret = tok[len(tokenPrefix)+cryptosvc.TokenIDLen+1:]
	return id, secret, cryptosvc.ValidTokenID(id)
}

// newServiceToken returns a new token's id, the token, and its SHA-256.
func newServiceToken() (id, tok string, sum [sha256.Size]byte) {
	var raw [8 + 32]byte
	rand.Read(raw[:])
	id = hex.EncodeToString(raw[:8])
	tok = tokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(raw[8:])
	clear(raw[:])
	return id, tok, tokenSum(tok)
}

// tokenSum returns the SHA-256 of a bearer token. Sum256 neither keeps nor
// changes its input: the token is hashed where it is, not copied to the
// heap.
func tokenSum(tok string) [sha256.Size]byte {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(tok), len(tok)))
}

// serviceTokenIdentity returns the identity of a live service token tok,
// whose SHA-256 is sum, or nil. Expired, revoked, unknown and malformed
// tokens are all nil, alike: the caller answers 401 for each.
func (s *Server) serviceTokenIdentity(tok string, sum [sha256.Size]byte) *identity {
	if s.tokens == nil {
		return nil
	}
	id, _, ok := parseServiceToken(tok)
	if !ok {
		return nil
	}
	rec := s.tokens.Token(id)
	if rec == nil {
		return nil
	}
	if subtle.ConstantTimeCompare(sum[:], rec.Hash[:]) != 1 || !s.now().Before(rec.Expires) {
		return nil
	}
	a := s.auth()
	var old *tokenIdentity
	if v, ok := s.tokenIDs.m.Load(id); ok {
		old = v.(*tokenIdentity)
		if old.rec == rec && old.auth == a {
			return &old.id
		}
	}
	ti := newTokenIdentity(rec, a, old)
	// Keyed by the record's id: id is part of the request's header, in a
	// buffer fasthttp reuses for the next request.
	s.tokenIDs.m.Store(rec.ID, ti)
	return &ti.id
}

// newTokenIdentity resolves rec's policies in a. It keeps old's bucket
// when old limited at the same rate and burst, so that a reload or a
// re-read record neither refills nor empties it.
func newTokenIdentity(rec *cryptosvc.ServiceToken, a *authState, old *tokenIdentity) *tokenIdentity {
	ti := &tokenIdentity{rec: rec, auth: a, id: identity{name: "token:" + rec.ID}}
	ti.id.token = ti
	for _, name := range rec.Policies {
		if p := a.policies[name]; p != nil {
			ti.id.policies = append(ti.id.policies, p)
		}
	}
	if l := a.limits; l != nil {
		if old != nil && old.bucket != nil && old.auth.limits != nil && old.auth.limits.rate == l.rate && old.auth.limits.burst == l.burst {
			ti.bucket = old.bucket
		} else {
			ti.bucket = rate.NewLimiter(rate.Limit(l.rate), l.burst)
		}
	}
	return ti
}

// sweepTokenIdentities drops the cached identities of tokens the store no
// longer holds as they were.
func (s *Server) sweepTokenIdentities() {
	s.tokenIDs.m.Range(func(k, v any) bool {
		if s.tokens.Token(k.(string)) != v.(*tokenIdentity).rec {
			s.tokenIDs.m.Delete(k)
		}
		return true
	})
}

// expireTokens removes the tokens expired by now from the store (they are
// refused from their expiry on, removed or not) and the cache.
func (s *Server) expireTokens(ctx context.Context) {
	if s.tokens == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	n, err := s.tokens.DeleteExpiredTokens(ctx, s.now())
	switch {
	case err != nil && !errors.Is(err, cryptosvc.ErrUnavailable) && !errors.Is(err, context.Canceled):
		s.log.Warn("removing expired service tokens failed", zap.Error(err))
	case n > 0:
		s.log.Info("expired service tokens removed", zap.Int("tokens", n))
	}
	s.sweepTokenIdentities()
}

// tokenExpiry returns when the identity's credential expires: its
// token's expiry, or zero for a credential without one.
func (id *identity) tokenExpiry() time.Time {
	if id.token == nil {
		return time.Time{}
	}
	return id.token.rec.Expires
}
