package server

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// testIssuer is an OpenID Connect issuer on a loopback HTTPS listener with
// a certificate of its own CA: it serves its discovery document and its
// JSON Web Key Set, and signs tokens with real keys (RSA, ECDSA, Ed25519).
type testIssuer struct {
	srv    *httptest.Server
	URL    string // the issuer: https://127.0.0.1:port
	CAFile string // PEM of the CA of its certificate

	mu        sync.Mutex
	keys      map[string]*testKey // every key it can sign with, by kid
	published []string            // the kids its JWKS lists, in order
	extra     []jose.JSONWebKey   // listed after them (an HMAC key, say)
	gate      chan struct{}       // when set, JWKS requests wait for it to close

	jwksHits      atomic.Int64
	discoveryHits atomic.Int64
	down          atomic.Bool // answer 503 to everything
}

// testKey is a signing key of a test issuer.
type testKey struct {
	kid     string
	alg     jose.SignatureAlgorithm // the token's alg
	jwkAlg  string                  // the alg the JWKS states for it; "" for none
	private crypto.Signer
}

func newTestIssuer(t testing.TB) *testIssuer {
	t.Helper()
	iss := &testIssuer{keys: map[string]*testKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		iss.discoveryHits.Add(1)
		if iss.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                iss.URL,
			"jwks_uri":                              iss.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256", "EdDSA"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		iss.jwksHits.Add(1)
		iss.mu.Lock()
		gate := iss.gate
		iss.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if iss.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(iss.jwks(t))
	})
	iss.srv = httptest.NewTLSServer(mux)
	t.Cleanup(iss.srv.Close)
	iss.URL = iss.srv.URL
	iss.CAFile = filepath.Join(t.TempDir(), "issuer-ca.pem")
	if err := os.WriteFile(iss.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: iss.srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return iss
}

// addKey makes a key of alg (RS256 and PS256: RSA 2048; ES256: P-256;
// ES384: P-384; EdDSA: Ed25519) and publishes it when publish is set.
func (iss *testIssuer) addKey(t testing.TB, kid string, alg jose.SignatureAlgorithm, publish bool) *testKey {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.RS256, jose.PS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.ES384:
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("no key for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	k := &testKey{kid: kid, alg: alg, jwkAlg: string(alg), private: priv}
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keys[kid] = k
	if publish {
		iss.published = append(iss.published, kid)
	}
	return k
}

// publish sets the kids the JWKS lists.
func (iss *testIssuer) publish(kids ...string) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.published = kids
}

// jwks is the issuer's JSON Web Key Set: the public keys of the published
// kids.
func (iss *testIssuer) jwks(t testing.TB) []byte {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	var set jose.JSONWebKeySet
	for _, kid := range iss.published {
		k := iss.keys[kid]
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.private.Public(), KeyID: kid, Algorithm: k.jwkAlg, Use: "sig"})
	}
	set.Keys = append(set.Keys, iss.extra...)
	b, err := json.Marshal(set)
	if err != nil {
		t.Error(err)
	}
	return b
}

// testClaims are a token's claims: the registered ones and any others.
type testClaims struct {
	jwt.Claims
	Extra map[string]any
}

// claims returns claims of the issuer for aud and sub, valid from a minute
// before now for ten minutes.
func (iss *testIssuer) claims(now time.Time, aud, sub string) testClaims {
	return testClaims{Claims: jwt.Claims{
		Issuer:    iss.URL,
		Subject:   sub,
		Audience:  jwt.Audience{aud},
		IssuedAt:  jwt.NewNumericDate(now.Add(-time.Minute)),
		NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		Expiry:    jwt.NewNumericDate(now.Add(10 * time.Minute)),
	}}
}

// sign returns a JWT of c signed by the key kid, with that key's alg.
func (iss *testIssuer) sign(t testing.TB, kid string, c testClaims) string {
	t.Helper()
	iss.mu.Lock()
	k := iss.keys[kid]
	iss.mu.Unlock()
	return signJWT(t, jose.SigningKey{Algorithm: k.alg, Key: jose.JSONWebKey{Key: k.private, KeyID: kid}}, c)
}

// signJWT signs c with key, the header naming key's kid.
func signJWT(t testing.TB, key jose.SigningKey, c testClaims) string {
	t.Helper()
	sig, err := jose.NewSigner(key, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	b := jwt.Signed(sig).Claims(c.Claims)
	if c.Extra != nil {
		b = b.Claims(c.Extra)
	}
	tok, err := b.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// hold makes the JWKS requests wait until the returned function runs.
func (iss *testIssuer) hold() (release func()) {
	gate := make(chan struct{})
	iss.mu.Lock()
	iss.gate = gate
	iss.mu.Unlock()
	return func() {
		iss.mu.Lock()
		iss.gate = nil
		iss.mu.Unlock()
		close(gate)
	}
}

// testClock is the clock of token validity in a test: it moves only when
// told to.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Now().Truncate(time.Second)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// refreshJWKSNow runs the scheduled fetch of every issuer's keys, as
// refreshJWKS does each jwt_refresh_interval, and returns when it ends.
func (ts *testServer) refreshJWKSNow() {
	for _, iss := range ts.auth().jwt.issuers {
		if f := iss.src.take(true); f != nil {
			ts.fetchJWKS(context.Background(), iss.src, f)
		}
	}
}
