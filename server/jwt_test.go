package server

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// The JWT tests run a real issuer (testIssuer: HTTPS, discovery, JWKS,
// real RSA, ECDSA and Ed25519 keys) and a real listening cipherd, and send
// real requests. Token validity and the spacing of key fetches follow a
// test clock (Config.now), so nothing waits on the wall clock.

// Kubernetes service accounts of the tests, and cipherd's audience.
const (
	saPayments  = "system:serviceaccount:payments:api"
	saOrders    = "system:serviceaccount:orders:api"
	jwtAudience = "cipherd"
)

// jwtTestConfig trusts iss (by discovery, with its CA) for the audiences
// cipherd and other, with three identities: the payments and orders
// service accounts, each allowed its own keys, and the members of the
// group auditors (a list-valued claim), allowed the orders keys.
func jwtTestConfig(iss *testIssuer, clk *testClock) Config {
	return Config{
		SkipBenchmark: true,
		now:           clk.Now,
		JWTIssuers:    []JWTIssuerConfig{{Issuer: iss.URL, Audiences: []string{jwtAudience, "other"}, CAFile: iss.CAFile}},
		Policies: []PolicyConfig{
			{Name: "payments", Allow: []RuleConfig{{Ops: []string{"encrypt", "decrypt"}, Keys: []string{"payments-*"}}}},
			{Name: "orders", Allow: []RuleConfig{{Ops: []string{"encrypt", "decrypt"}, Keys: []string{"orders-*"}}}},
		},
		Identities: []IdentityConfig{
			{Name: "payments-api", JWT: &JWTMatchConfig{Issuer: iss.URL, Claims: map[string]string{"sub": saPayments}}, Policies: []string{"payments"}},
			{Name: "orders-api", JWT: &JWTMatchConfig{Issuer: iss.URL, Claims: map[string]string{"sub": saOrders}}, Policies: []string{"orders"}},
			{Name: "auditors", JWT: &JWTMatchConfig{Issuer: iss.URL, Claims: map[string]string{"groups": "auditors"}}, Policies: []string{"orders"}},
		},
	}
}

// startJWTServer starts cipherd with cfg and the keys payments-1 and
// orders-1.
func startJWTServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	ts := startTestServer(t, cfg)
	for _, k := range []string{"payments-1", "orders-1"} {
		if _, err := ts.Service().CreateKey(context.Background(), k, cryptosvc.KeyConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	return ts
}

// encryptAs sends a small JSON encrypt with key as bearer token tok and
// returns the status and body.
func (ts *testServer) encryptAs(t *testing.T, key, tok string) (int, []byte) {
	t.Helper()
	code, body, hdr := ts.do(t, "POST", "/v1/encrypt/"+key, api.ContentTypeJSON, strings.NewReader(`{"plaintext":"aGVsbG8="}`), tok)
	if code == 401 {
		// Every refused credential reads the same.
		var e api.Error
		if err := json.Unmarshal(body, &e); err != nil || e.Code != api.CodeUnauthenticated || e.Message != "a valid bearer token or client certificate is required" || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("401 %s (WWW-Authenticate %q): not the one answer to every authentication failure", body, hdr.Get("WWW-Authenticate"))
		}
	}
	return code, body
}

// wantEncrypt checks the status of an encrypt with key as tok.
func (ts *testServer) wantEncrypt(t *testing.T, what, key, tok string, want int) {
	t.Helper()
	if code, body := ts.encryptAs(t, key, tok); code != want {
		t.Errorf("%s: %d %s, want %d", what, code, body, want)
	}
}

// jwtFailures returns cipherd_jwt_failures_total by reason, and
// cipherd_jwks_fetch_failures_total and cipherd_jwks_keys of issuer.
func (ts *testServer) jwtMetrics(t *testing.T, issuer string) (failures map[string]float64, fetchFailures, keys float64) {
	t.Helper()
	fams, _ := ts.scrape(t)
	failures = map[string]float64{}
	for _, s := range fams["cipherd_jwt_failures_total"].samples {
		failures[s.labels["reason"]] = s.value
	}
	if len(failures) != int(numJWTReasons)-1 {
		t.Errorf("cipherd_jwt_failures_total has %d reasons, want every one of %d", len(failures), numJWTReasons-1)
	}
	is := map[string]string{"issuer": issuer}
	return failures, fams["cipherd_jwks_fetch_failures_total"].value("cipherd_jwks_fetch_failures_total", is), fams["cipherd_jwks_keys"].value("cipherd_jwks_keys", is)
}

// TestJWTAlgorithms: a token of each accepted algorithm identifies its
// service account, whose keys come from the issuer's discovery document,
// fetched once.
func TestJWTAlgorithms(t *testing.T) {
	iss := newTestIssuer(t)
	algs := []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256, jose.ES384, jose.EdDSA}
	for _, alg := range algs {
		iss.addKey(t, "key-"+string(alg), alg, true)
	}
	clk := newTestClock()
	ts := startJWTServer(t, jwtTestConfig(iss, clk))
	for _, alg := range algs {
		tok := iss.sign(t, "key-"+string(alg), iss.claims(clk.Now(), jwtAudience, saPayments))
		ts.wantEncrypt(t, string(alg), "payments-1", tok, 200)
		ts.wantEncrypt(t, string(alg)+" again (cached)", "payments-1", tok, 200)
	}
	if d, k := iss.discoveryHits.Load(), iss.jwksHits.Load(); d != 1 || k != 1 {
		t.Errorf("discovery fetched %d times, JWKS %d times; want 1 and 1", d, k)
	}
	if _, _, keys := ts.jwtMetrics(t, iss.URL); keys != float64(len(algs)) {
		t.Errorf("cipherd_jwks_keys %v, want %d", keys, len(algs))
	}
}

// TestJWTTimes: exp is required and honoured, nbf and iat are honoured,
// each within the clock skew (30s by default); a cached token serves no
// later than its exp.
func TestJWTTimes(t *testing.T) {
	iss := newTestIssuer(t)
	iss.addKey(t, "k1", jose.ES256, true)
	clk := newTestClock()
	ts := startJWTServer(t, jwtTestConfig(iss, clk))
	now := clk.Now()
	tok := func(edit func(c *jwt.Claims)) string {
		c := iss.claims(now, jwtAudience, saPayments)
		edit(&c.Claims)
		return iss.sign(t, "k1", c)
	}
	at := func(d time.Duration) *jwt.NumericDate { return jwt.NewNumericDate(now.Add(d)) }
	for _, c := range []struct {
		name string
		edit func(c *jwt.Claims)
		want int
	}{
		{"valid", func(c *jwt.Claims) {}, 200},
		{"expired a minute ago", func(c *jwt.Claims) { c.Expiry = at(-time.Minute) }, 401},
		{"expired 10s ago, within the skew", func(c *jwt.Claims) { c.Expiry = at(-10 * time.Second) }, 200},
		{"no exp", func(c *jwt.Claims) { c.Expiry = nil }, 401},
		{"nbf in a minute", func(c *jwt.Claims) { c.NotBefore = at(time.Minute) }, 401},
		{"nbf in 10s, within the skew", func(c *jwt.Claims) { c.NotBefore = at(10 * time.Second) }, 200},
		{"iat in a minute", func(c *jwt.Claims) { c.IssuedAt = at(time.Minute) }, 401},
		{"no nbf, no iat", func(c *jwt.Claims) { c.NotBefore, c.IssuedAt = nil, nil }, 200},
	} {
		ts.wantEncrypt(t, c.name, "payments-1", tok(c.edit), c.want)
	}

	// A token that expires in a minute, cached: served until its exp,
	// then verified again, within the skew, then refused.
	short := tok(func(c *jwt.Claims) { c.Expiry = at(time.Minute) })
	ts.wantEncrypt(t, "expiring token", "payments-1", short, 200)
	clk.Advance(75 * time.Second)
	ts.wantEncrypt(t, "15s past its exp", "payments-1", short, 200)
	clk.Advance(20 * time.Second)
	ts.wantEncrypt(t, "35s past its exp", "payments-1", short, 401)

	failures, _, _ := ts.jwtMetrics(t, iss.URL)
	if failures["expired"] != 3 || failures["not_yet_valid"] != 2 {
		t.Errorf("failures %v: want 3 expired, 2 not_yet_valid", failures)
	}
}

// TestJWTClaims: the issuer, the audience and the identity's claims must
// match; a verified token of a service account gets that account's
// policies and no other's.
func TestJWTClaims(t *testing.T) {
	iss := newTestIssuer(t)
	iss.addKey(t, "k1", jose.RS256, true)
	other := newTestIssuer(t) // another issuer, with a key of the same kid
	other.addKey(t, "k1", jose.RS256, true)
	clk := newTestClock()
	ts := startJWTServer(t, jwtTestConfig(iss, clk))
	now := clk.Now()
	claims := func(aud, sub string) testClaims { return iss.claims(now, aud, sub) }

	payments := iss.sign(t, "k1", claims(jwtAudience, saPayments))
	ts.wantEncrypt(t, "payments on its key", "payments-1", payments, 200)
	ts.wantEncrypt(t, "payments on the orders key", "orders-1", payments, 403)
	orders := iss.sign(t, "k1", claims(jwtAudience, saOrders))
	ts.wantEncrypt(t, "orders on its key", "orders-1", orders, 200)
	ts.wantEncrypt(t, "orders on the payments key", "payments-1", orders, 403)

	c := claims("someone-else", saPayments)
	ts.wantEncrypt(t, "wrong audience", "payments-1", iss.sign(t, "k1", c), 401)
	c = claims("x", saPayments)
	c.Audience = jwt.Audience{"x", "other"}
	ts.wantEncrypt(t, "audience list holding an accepted one", "payments-1", iss.sign(t, "k1", c), 200)

	c = claims(jwtAudience, saPayments)
	c.Issuer = iss.URL + "/"
	ts.wantEncrypt(t, "issuer with a trailing slash", "payments-1", iss.sign(t, "k1", c), 401)
	c.Issuer = other.URL
	ts.wantEncrypt(t, "unknown issuer", "payments-1", other.sign(t, "k1", c), 401)
	c.Issuer = iss.URL
	ts.wantEncrypt(t, "our issuer, another issuer's key", "payments-1", other.sign(t, "k1", c), 401)

	ts.wantEncrypt(t, "a service account of no identity", "payments-1", iss.sign(t, "k1", claims(jwtAudience, "system:serviceaccount:payments:batch")), 401)
	c = claims(jwtAudience, "system:serviceaccount:audit:reader")
	c.Extra = map[string]any{"groups": []string{"readers", "auditors"}}
	ts.wantEncrypt(t, "a member of auditors (list claim)", "orders-1", iss.sign(t, "k1", c), 200)
	c.Extra = map[string]any{"groups": "auditors"}
	ts.wantEncrypt(t, "a member of auditors (string claim)", "orders-1", iss.sign(t, "k1", c), 200)
	c.Extra = map[string]any{"groups": []any{"auditor", 1, map[string]string{"auditors": "auditors"}}}
	ts.wantEncrypt(t, "no member of auditors", "orders-1", iss.sign(t, "k1", c), 401)
	c = claims(jwtAudience, saOrders)
	c.Extra = map[string]any{"groups": []string{"auditors"}}
	ts.wantEncrypt(t, "both orders-api and auditors: ambiguous", "orders-1", iss.sign(t, "k1", c), 401)

	// The static tokens keep working beside the JWTs.
	ts.wantEncrypt(t, "admin token", "payments-1", ts.Token, 200)
	ts.wantEncrypt(t, "unknown static token", "payments-1", "not-a-token", 401)
	ts.wantEncrypt(t, "JWT-shaped garbage", "payments-1", "eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.AAAA", 401)

	failures, _, _ := ts.jwtMetrics(t, iss.URL)
	for reason, want := range map[string]float64{"audience": 1, "issuer": 2, "signature": 1, "no_identity": 3, "malformed": 1} {
		if failures[reason] != want {
			t.Errorf("failures[%s] = %v, want %v (all: %v)", reason, failures[reason], want, failures)
		}
	}
	if ts.Logs.FilterMessage("authentication failed").Len() == 0 {
		t.Fatal("no debug log of failed authentication")
	}
	if found := secretsIn(t, ts.cfg.DataDir, ts.Logs, payments, orders, saPayments, saOrders, strings.Split(payments, ".")[2]); len(found) > 0 {
		t.Fatalf("tokens or claims logged: %v", found)
	}
}

// TestJWTAlgorithmConfusion: "none", HMAC tokens (whose secret would be
// the RSA public key, or an HMAC key the JWKS lists) and tokens whose alg
// is not their key's are refused.
func TestJWTAlgorithmConfusion(t *testing.T) {
	iss := newTestIssuer(t)
	rs := iss.addKey(t, "rs", jose.RS256, true)
	iss.addKey(t, "es", jose.ES256, true)
	bare := iss.addKey(t, "bare", jose.RS256, true)
	bare.jwkAlg = "" // a JWK without alg: any RSA alg, no other
	hmacKey := []byte("0123456789abcdef0123456789abcdef")
	iss.extra = []jose.JSONWebKey{{Key: hmacKey, KeyID: "hmac", Algorithm: string(jose.HS256), Use: "sig"}}
	clk := newTestClock()
	ts := startJWTServer(t, jwtTestConfig(iss, clk))
	claims := iss.claims(clk.Now(), jwtAudience, saPayments)
	ts.wantEncrypt(t, "RS256 by rs", "payments-1", iss.sign(t, "rs", claims), 200)

	// alg none: no signature at all.
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"rs","typ":"JWT"}`))
	payload, err := json.Marshal(claims.Claims)
	if err != nil {
		t.Fatal(err)
	}
	none := header + "." + base64.RawURLEncoding.EncodeToString(payload) + "."
	ts.wantEncrypt(t, "alg none", "payments-1", none, 401)

	// HS256 with the RSA public key, in the forms a verifier might hold
	// it, as the HMAC secret.
	der, err := x509.MarshalPKIXPublicKey(rs.private.Public())
	if err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string][]byte{
		"pem": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		"der": der,
		"jwk": iss.jwks(t),
	} {
		tok := signJWT(t, jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: secret, KeyID: "rs"}}, claims)
		ts.wantEncrypt(t, "HS256 with the RSA public key ("+name+")", "payments-1", tok, 401)
	}
	// HS256 with the HMAC key the JWKS lists: the key is never held.
	ts.wantEncrypt(t, "HS256 with the JWKS's HMAC key", "payments-1", signJWT(t, jose.SigningKey{Algorithm: jose.HS256, Key: jose.JSONWebKey{Key: hmacKey, KeyID: "hmac"}}, claims), 401)

	// A real signature under an alg that is not the key's.
	sign := func(alg jose.SignatureAlgorithm, by *testKey, kid string) string {
		return signJWT(t, jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: by.private, KeyID: kid}}, claims)
	}
	es384 := iss.addKey(t, "p384", jose.ES384, false)
	ts.wantEncrypt(t, "PS256 by rs, whose JWK says RS256", "payments-1", sign(jose.PS256, rs, "rs"), 401)
	ts.wantEncrypt(t, "RS256 by rs, naming the EC key", "payments-1", sign(jose.RS256, rs, "es"), 401)
	ts.wantEncrypt(t, "ES384 naming the P-256 key", "payments-1", sign(jose.ES384, es384, "es"), 401)
	ts.wantEncrypt(t, "RS256 by rs, naming the HMAC key", "payments-1", sign(jose.RS256, rs, "hmac"), 401)
	ts.wantEncrypt(t, "RS256 by bare (no alg in its JWK)", "payments-1", sign(jose.RS256, bare, "bare"), 200)
	ts.wantEncrypt(t, "PS256 by bare (no alg in its JWK)", "payments-1", sign(jose.PS256, bare, "bare"), 200)

	failures, _, _ := ts.jwtMetrics(t, iss.URL)
	if failures["algorithm"] != 5 || failures["unknown_key"] != 4 {
		t.Errorf("failures %v: want 5 algorithm, 4 unknown_key", failures)
	}
}

// TestJWTUnknownKid: a token naming a key not held makes cipherd fetch
// the issuer's keys again, at most once per 10 seconds, and the requests
// that miss meanwhile share the one fetch.
func TestJWTUnknownKid(t *testing.T) {
	iss := newTestIssuer(t)
	iss.addKey(t, "k1", jose.RS256, true)
	clk := newTestClock()
	ts := startJWTServer(t, jwtTestConfig(iss, clk))
	claims := iss.claims(clk.Now(), jwtAudience, saPayments)
	ts.wantEncrypt(t, "k1", "payments-1", iss.sign(t, "k1", claims), 200)
	hits := func(want int64) {
		t.Helper()
		if got := iss.jwksHits.Load(); got != want {
			t.Errorf("JWKS fetched %d times, want %d", got, want)
		}
	}
	hits(1)

	iss.addKey(t, "k2", jose.ES256, true)
	ts.wantEncrypt(t, "k2, added after the fetch", "payments-1", iss.sign(t, "k2", claims), 200)
	hits(2)
	iss.addKey(t, "k3", jose.EdDSA, false)
	k3 := iss.sign(t, "k3", claims)
	ts.wantEncrypt(t, "k3, unpublished", "payments-1", k3, 401)
	hits(2) // within 10 s of the last fetch for a miss
	clk.Advance(10 * time.Second)
	ts.wantEncrypt(t, "k3, unpublished, 10 s later", "payments-1", k3, 401)
	hits(3)
	for range 5 {
		ts.wantEncrypt(t, "k3 again", "payments-1", k3, 401)
	}
	hits(3)

	// Concurrent misses while the fetch hangs at the issuer: one fetch,
	// every request served once it ends.
	clk.Advance(10 * time.Second)
	iss.addKey(t, "k4", jose.ES384, true)
	k4 := iss.sign(t, "k4", claims)
	release := iss.hold()
	const n = 8
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Go(func() {
			code, _ := ts.encryptAs(t, "payments-1", k4)
			codes <- code
		})
	}
	// Once the fetch is held at the issuer, let the other requests reach
	// it too; with correct sharing the outcome is the same if some arrive
	// only after the release.
	for deadline := time.Now().Add(5 * time.Second); iss.jwksHits.Load() < 4 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	release()
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Errorf("a concurrent request with a new kid: %d", code)
		}
	}
	hits(4)
	failures, _, _ := ts.jwtMetrics(t, iss.URL)
	if failures["unknown_key"] != 7 {
		t.Errorf("failures %v: want 7 unknown_key", failures)
	}
}

// TestJWTRotation: the issuer replaces its key. Tokens of the old key
// keep working until the keys are fetched again (for a token of the new
// key, or on schedule), and are refused from then on.
func TestJWTRotation(t *testing.T) {
	iss := newTestIssuer(t)
	iss.addKey(t, "2026-01", jose.RS256, true)
	clk := newTestClock()
	ts := startJWTServer(t, jwtTestConfig(iss, clk))
	claims := iss.claims(clk.Now(), jwtAudience, saPayments)
	old := iss.sign(t, "2026-01", claims)
	ts.wantEncrypt(t, "old key", "payments-1", old, 200)

	iss.addKey(t, "2026-02", jose.RS256, false)
	iss.publish("2026-02") // the old key removed
	ts.wantEncrypt(t, "old key, before the refresh", "payments-1", old, 200)
	next := iss.sign(t, "2026-02", claims)
	ts.wantEncrypt(t, "new key", "payments-1", next, 200)
	ts.wantEncrypt(t, "old key, after the refresh", "payments-1", old, 401)
	if got := iss.jwksHits.Load(); got != 2 {
		t.Errorf("JWKS fetched %d times, want 2", got)
	}

	// On schedule, with no token of the new key to prompt it.
	iss.addKey(t, "2026-03", jose.ES256, false)
	iss.publish("2026-03")
	ts.refreshJWKSNow()
	ts.wantEncrypt(t, "replaced key, after the scheduled refresh", "payments-1", next, 401)
	ts.wantEncrypt(t, "newest key", "payments-1", iss.sign(t, "2026-03", claims), 200)
	if got := iss.jwksHits.Load(); got != 3 {
		t.Errorf("JWKS fetched %d times, want 3", got)
	}
}

// TestJWTKeySources: keys from a JWKS file (a Kubernetes issuer's, saved
// with kubectl get --raw /openid/v1/jwks), read again on a miss and on
// reload; and from a JWKS URL without discovery.
func TestJWTKeySources(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		const k8s = "https://kubernetes.default.svc.cluster.local"
		iss := newTestIssuer(t)
		iss.addKey(t, "sa-1", jose.RS256, true)
		file := filepath.Join(t.TempDir(), "jwks.json")
		secReplace(t, file, iss.jwks(t))
		clk := newTestClock()
		cfg := jwtTestConfig(iss, clk)
		cfg.JWTIssuers = []JWTIssuerConfig{{Issuer: k8s, Audiences: []string{jwtAudience}, JWKSFile: file}}
		for i := range cfg.Identities {
			cfg.Identities[i].JWT.Issuer = k8s
		}
		ts := startJWTServer(t, cfg)
		claims := iss.claims(clk.Now(), jwtAudience, saPayments)
		claims.Issuer = k8s
		ts.wantEncrypt(t, "key from the file", "payments-1", iss.sign(t, "sa-1", claims), 200)

		iss.addKey(t, "sa-2", jose.ES256, true)
		secReplace(t, file, iss.jwks(t))
		ts.wantEncrypt(t, "key added to the file", "payments-1", iss.sign(t, "sa-2", claims), 200)

		iss.addKey(t, "sa-3", jose.ES256, false)
		iss.publish("sa-3")
		secReplace(t, file, iss.jwks(t))
		if _, err := ts.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		ts.wantEncrypt(t, "key of the file read on reload", "payments-1", iss.sign(t, "sa-3", claims), 200)
		ts.wantEncrypt(t, "key removed from the file", "payments-1", iss.sign(t, "sa-1", claims), 401)

		// A file that no longer parses keeps the keys held.
		secReplace(t, file, []byte("{not json"))
		if _, err := ts.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		ts.wantEncrypt(t, "after a broken file", "payments-1", iss.sign(t, "sa-3", claims), 200)
		if _, failed, keys := ts.jwtMetrics(t, k8s); failed != 1 || keys != 1 {
			t.Errorf("fetch failures %v, keys %v; want 1, 1", failed, keys)
		}
		if n := iss.jwksHits.Load() + iss.discoveryHits.Load(); n != 0 {
			t.Errorf("%d requests to the issuer", n)
		}
	})
	t.Run("url", func(t *testing.T) {
		iss := newTestIssuer(t)
		iss.addKey(t, "k1", jose.EdDSA, true)
		clk := newTestClock()
		cfg := jwtTestConfig(iss, clk)
		cfg.JWTIssuers[0].JWKSURL = iss.URL + "/keys"
		ts := startJWTServer(t, cfg)
		ts.wantEncrypt(t, "key from the JWKS URL", "payments-1", iss.sign(t, "k1", iss.claims(clk.Now(), jwtAudience, saPayments)), 200)
		if d, k := iss.discoveryHits.Load(), iss.jwksHits.Load(); d != 0 || k != 1 {
			t.Errorf("discovery fetched %d times, JWKS %d times; want 0 and 1", d, k)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		iss := newTestIssuer(t)
		iss.addKey(t, "k1", jose.EdDSA, true)
		clk := newTestClock()
		cfg := jwtTestConfig(iss, clk)
		cfg.JWTIssuers[0].CAFile = "" // the system's roots do not know the test CA
		ts := startJWTServer(t, cfg)
		ts.wantEncrypt(t, "key from an issuer of an unknown CA", "payments-1", iss.sign(t, "k1", iss.claims(clk.Now(), jwtAudience, saPayments)), 401)
		if d := iss.discoveryHits.Load(); d != 0 {
			t.Errorf("discovery answered %d times over an unverified connection", d)
		}
	})
}

// TestJWTIssuerDown: an issuer down at start serves no token until it is
// back (and the spacing of fetches allows one); an issuer down later
// leaves the keys held in service.
func TestJWTIssuerDown(t *testing.T) {
	iss := newTestIssuer(t)
	iss.addKey(t, "k1", jose.ES256, true)
	iss.down.Store(true)
	clk := newTestClock()
	ts := startJWTServer(t, jwtTestConfig(iss, clk))
	claims := iss.claims(clk.Now(), jwtAudience, saPayments)
	tok := iss.sign(t, "k1", claims)
	ts.wantEncrypt(t, "issuer down at start", "payments-1", tok, 401)
	if _, failed, keys := ts.jwtMetrics(t, iss.URL); failed < 1 || keys != 0 {
		t.Errorf("fetch failures %v, keys %v; want at least 1, and 0", failed, keys)
	}

	iss.down.Store(false)
	clk.Advance(10 * time.Second)
	ts.wantEncrypt(t, "issuer back", "payments-1", tok, 200)

	iss.down.Store(true)
	ts.refreshJWKSNow()
	_, failedBefore, _ := ts.jwtMetrics(t, iss.URL)
	claims.ID = "a token not seen before (not cached)"
	ts.wantEncrypt(t, "issuer down on schedule: keys held", "payments-1", iss.sign(t, "k1", claims), 200)
	clk.Advance(10 * time.Second)
	iss.addKey(t, "k2", jose.ES256, true)
	ts.wantEncrypt(t, "issuer down on a miss", "payments-1", iss.sign(t, "k2", claims), 401)
	claims.ID = "another"
	ts.wantEncrypt(t, "after the failed miss: keys held", "payments-1", iss.sign(t, "k1", claims), 200)
	if _, failed, keys := ts.jwtMetrics(t, iss.URL); failed != failedBefore+1 || keys != 1 {
		t.Errorf("fetch failures %v (%v before the miss), keys %v; want one more, and 1", failed, failedBefore, keys)
	}
	if ts.Logs.FilterMessage("loading the keys of a JWT issuer failed; the keys held stay in use").Len() == 0 {
		t.Error("no log of the failed fetches")
	}
}

// TestJWTReload: identities and issuers reload with the other
// credentials; an issuer that stays keeps its keys, with no fetch; cached
// tokens get the identities and policies of the new set.
func TestJWTReload(t *testing.T) {
	iss := newTestIssuer(t)
	iss.addKey(t, "k1", jose.RS256, true)
	clk := newTestClock()
	cfg := jwtTestConfig(iss, clk)
	ts := startJWTServer(t, cfg)
	tok := iss.sign(t, "k1", iss.claims(clk.Now(), jwtAudience, saPayments))
	ts.wantEncrypt(t, "payments-api", "orders-1", tok, 403)

	iss.down.Store(true) // a fetch would fail: none is needed
	next := cfg
	next.Identities = append([]IdentityConfig(nil), cfg.Identities...)
	next.Identities[0].Policies = []string{"payments", "orders"}
	if _, err := ts.Reload(next); err != nil {
		t.Fatal(err)
	}
	ts.wantEncrypt(t, "payments-api with the orders policy too", "orders-1", tok, 200)
	if got := iss.jwksHits.Load(); got != 1 {
		t.Errorf("JWKS fetched %d times, want 1", got)
	}

	bad := next
	bad.Identities = append([]IdentityConfig{{Name: "x", JWT: &JWTMatchConfig{Issuer: "https://nobody.example", Claims: map[string]string{"sub": "x"}}}}, next.Identities...)
	if _, err := ts.Reload(bad); err == nil {
		t.Fatal("an identity of an unknown issuer reloaded")
	}
	ts.wantEncrypt(t, "after a failed reload", "orders-1", tok, 200)

	none := next
	none.JWTIssuers, none.Identities = nil, nil
	if _, err := ts.Reload(none); err != nil {
		t.Fatal(err)
	}
	ts.wantEncrypt(t, "issuer removed", "payments-1", tok, 401)
	iss.down.Store(false)
	if _, err := ts.Reload(next); err != nil {
		t.Fatal(err)
	}
	ts.wantEncrypt(t, "issuer back", "payments-1", tok, 200)
	if got := iss.jwksHits.Load(); got != 2 {
		t.Errorf("JWKS fetched %d times, want 2", got)
	}
}

// TestJWTConfigErrors: settings of issuers and identities that do not
// load.
func TestJWTConfigErrors(t *testing.T) {
	const issuer = "https://issuer.example"
	good := func() Config {
		return Config{
			AdminToken: "admin-secret-0123456789abcdef",
			JWTIssuers: []JWTIssuerConfig{{Issuer: issuer, Audiences: []string{"cipherd"}}},
			Policies:   []PolicyConfig{{Name: "p", Allow: []RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"*"}}}}},
			Identities: []IdentityConfig{{Name: "a", JWT: &JWTMatchConfig{Issuer: issuer, Claims: map[string]string{"sub": "a"}}, Policies: []string{"p"}}},
		}
	}
	invalid := map[string]func(*Config){
		"no issuer":              func(c *Config) { c.JWTIssuers[0].Issuer = "" },
		"issuer twice":           func(c *Config) { c.JWTIssuers = append(c.JWTIssuers, c.JWTIssuers[0]) },
		"no audience":            func(c *Config) { c.JWTIssuers[0].Audiences = nil },
		"empty audience":         func(c *Config) { c.JWTIssuers[0].Audiences = []string{""} },
		"http issuer":            func(c *Config) { c.JWTIssuers[0].Issuer = "http://issuer.example" },
		"http jwks_url":          func(c *Config) { c.JWTIssuers[0].JWKSURL = "http://issuer.example/keys" },
		"url and file":           func(c *Config) { c.JWTIssuers[0].JWKSURL, c.JWTIssuers[0].JWKSFile = issuer+"/keys", "jwks.json" },
		"ca_file with file":      func(c *Config) { c.JWTIssuers[0].JWKSFile, c.JWTIssuers[0].CAFile = "jwks.json", "ca.pem" },
		"skew over 5m":           func(c *Config) { c.JWTClockSkew = 6 * time.Minute },
		"refresh under a minute": func(c *Config) { c.JWTRefreshInterval = 10 * time.Second },
		"refresh over a day":     func(c *Config) { c.JWTRefreshInterval = 25 * time.Hour },
	}
	for name, f := range invalid {
		cfg := good()
		f(&cfg)
		cfg = cfg.Defaults()
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
	bad := map[string]func(*Config){
		"unknown issuer": func(c *Config) { c.Identities[0].JWT.Issuer = "https://other.example" },
		"no claims":      func(c *Config) { c.Identities[0].JWT.Claims = nil },
		"claim exp":      func(c *Config) { c.Identities[0].JWT.Claims["exp"] = "1" },
		"claim iss":      func(c *Config) { c.Identities[0].JWT.Claims["iss"] = issuer },
		"same claims twice": func(c *Config) {
			c.Identities = append(c.Identities, IdentityConfig{Name: "b", JWT: c.Identities[0].JWT})
		},
		"no issuers":         func(c *Config) { c.JWTIssuers = nil },
		"missing ca_file":    func(c *Config) { c.JWTIssuers[0].CAFile = filepath.Join(t.TempDir(), "missing.pem") },
		"ca_file with no CA": func(c *Config) { c.JWTIssuers[0].CAFile = writeTemp(t, "not a certificate") },
	}
	for name, f := range bad {
		cfg := good()
		f(&cfg)
		cfg = cfg.Defaults()
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: invalid already: %v", name, err)
			continue
		}
		cfg.DataDir = t.TempDir()
		if _, err := newAuth(&cfg, zap.NewNop()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg := good().Defaults()
	cfg.DataDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := newAuth(&cfg, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestLooksLikeJWT: the shape that sends a bearer token to the JWT path.
func TestLooksLikeJWT(t *testing.T) {
	for tok, want := range map[string]bool{
		"a.b.c":                         true,
		"eyJhbGciOiJub25lIn0.e30.":      true, // alg none: refused as a JWT, counted
		"a-_0.b.c":                      true,
		"a.b":                           false,
		"a.b.c.d":                       false,
		".b.c":                          false,
		"a..c":                          false,
		"a.b+.c":                        false,
		"a.b.c=":                        false,
		"cdadm_Zm9vYmFyYmF6cXV4cXV1eA":  false,
		"tok-orders-app-0123456789abcd": false,
	} {
		if got := looksLikeJWT(tok); got != want {
			t.Errorf("looksLikeJWT(%q) = %v", tok, got)
		}
	}
}
