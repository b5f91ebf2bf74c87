package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
)

// FuzzJWT verifies bearer tokens that the fuzzer makes from real ones and
// from the attacks of TestJWTAlgorithmConfusion: the verifier must never
// panic, and a token it accepts must carry, byte for byte, the header and
// the claims of a token the issuer signed.
func FuzzJWT(f *testing.F) {
	iss := newTestIssuer(f)
	algs := []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.EdDSA}
	for _, alg := range algs {
		iss.addKey(f, "k-"+string(alg), alg, true)
	}
	file := filepath.Join(f.TempDir(), "jwks.json")
	secReplace(f, file, iss.jwks(f))
	srv, err := New(context.Background(), Config{
		DataDir: f.TempDir(), Keystore: cryptosvc.NewMemStore(), AdminToken: "fuzz-admin-token", SkipBenchmark: true, Logger: zap.NewNop(),
		JWTIssuers: []JWTIssuerConfig{{Issuer: iss.URL, Audiences: []string{jwtAudience}, JWKSFile: file}},
		Identities: []IdentityConfig{{Name: "payments-api", JWT: &JWTMatchConfig{Issuer: iss.URL, Claims: map[string]string{"sub": saPayments}}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Shutdown(context.Background()) })

	now := time.Now()
	signed := map[string]bool{} // decoded header and claims of the tokens signed
	for _, alg := range algs {
		for _, sub := range []string{saPayments, saOrders} {
			tok := iss.sign(f, "k-"+string(alg), iss.claims(now, jwtAudience, sub))
			signed[decodedJWT(tok)] = true
			f.Add(tok)
		}
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"k-RS256"}`))
	payload := strings.Split(iss.sign(f, "k-RS256", iss.claims(now, jwtAudience, saPayments)), ".")[1]
	f.Add(header + "." + payload + ".")
	f.Add(signJWT(f, jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: iss.jwks(f), KeyID: "k-RS256"}}, iss.claims(now, jwtAudience, saPayments)))

	f.Fuzz(func(t *testing.T, tok string) {
		id, why := srv.identifyJWT(srv.auth().jwt, tok, sha256.Sum256([]byte(tok)), now)
		if (id == nil) == (why == jwtVerified) {
			t.Fatalf("identity %v with reason %s", id, why)
		}
		if id != nil && !signed[decodedJWT(tok)] {
			t.Fatalf("accepted %q, whose header and claims the issuer never signed", tok)
		}
	})
}

// decodedJWT returns the decoded header and payload of a compact JWS, or ""
// when they do not decode.
func decodedJWT(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return ""
	}
	h, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	p, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	if err1 != nil || err2 != nil {
		return ""
	}
	return string(h) + "\x00" + string(p)
}
