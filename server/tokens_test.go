package server

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// tokenClock is the clock tokens expire by in these tests: it moves only
// when told, so that expiry is tested without waiting for it.
type tokenClock struct{ ns atomic.Int64 }

func newTokenClock() *tokenClock {
	c := &tokenClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *tokenClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *tokenClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// tokenTestConfig is policyTestConfig with an identity that may issue
// tokens (tokens-admin) holding its own policy "orders", and the clock.
func tokenTestConfig(clock *tokenClock) Config {
	cfg := policyTestConfig()
	cfg.Policies = append(cfg.Policies, PolicyConfig{Name: "issuer", Allow: []RuleConfig{{Ops: []string{"tokens-admin"}, Keys: []string{"*"}}}})
	cfg.Identities = append(cfg.Identities, IdentityConfig{Name: "issuer", TokenSHA256: tokenSHA256(tokIssuer), Policies: []string{"issuer", "orders"}})
	cfg.now = clock.Now
	return cfg
}

const tokIssuer = "tok-issuer-0123456789abcdef"

// issueToken issues a token as caller and returns it, failing the test
// unless the answer is 201.
func issueToken(t *testing.T, url, caller string, req api.CreateTokenRequest) api.CreatedToken {
	t.Helper()
	b, _ := json.Marshal(req)
	r := secMustSend(t, plainClient, "POST", url+api.RouteTokens, caller, b)
	if r.code != 201 {
		t.Fatalf("issue %+v: %d %s", req, r.code, r.body)
	}
	var out api.CreatedToken
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// encryptAs encrypts under key as token and returns the status.
func encryptAs(t *testing.T, url, token, key string) int {
	t.Helper()
	return secMustSend(t, plainClient, "POST", url+"/v1/encrypt/"+key, token, secEncryptBody).code
}

func listTokens(t *testing.T, url, caller string) (api.TokenList, []byte) {
	t.Helper()
	r := secMustSend(t, plainClient, "GET", url+api.RouteTokens, caller, nil)
	if r.code != 200 {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	var out api.TokenList
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	return out, r.body
}

func tokenIDs(l api.TokenList) []string {
	var ids []string
	for _, tk := range l.Tokens {
		ids = append(ids, tk.ID)
	}
	return ids
}

// TestTokensFileStore: a token issued through the API works at once with
// its policies, is listed without its secret, is refused from the moment
// it is revoked or expires, and the file keystore keeps tokens and
// revocations over a restart.
func TestTokensFileStore(t *testing.T) {
	dir := t.TempDir()
	clock := newTokenClock()
	start := func() (*testServer, func()) {
		store := openTestStore(t, dir, zap.NewNop())
		cfg := tokenTestConfig(clock)
		cfg.DataDir, cfg.Keystore = dir, store
		ts := startTestServer(t, cfg)
		return ts, func() { ts.Shutdown(context.Background()); store.Close() }
	}
	ts, stop := start()
	ctx := context.Background()
	for _, k := range []string{"orders-1", "billing"} {
		if _, err := ts.Service().CreateKey(ctx, k, cryptosvc.KeyConfig{}); err != nil {
			t.Fatal(err)
		}
	}

	ci := issueToken(t, ts.URL, ts.Token, api.CreateTokenRequest{Name: "ci", Policies: []string{"orders"}, TTL: "1h"})
	if id, secret, ok := parseServiceToken(ci.Secret); !ok || id != ci.ID || len(secret) != tokenSecretLen {
		t.Fatalf("token %q for id %s does not parse", ci.Secret, ci.ID)
	}
	if ci.Name != "ci" || len(ci.Policies) != 1 || ci.ExpiresAt.Sub(ci.CreatedAt) != time.Hour {
		t.Fatalf("issued %+v", ci.Token)
	}
	if code := encryptAs(t, ts.URL, ci.Secret, "orders-1"); code != 200 {
		t.Fatalf("encrypt with the token: %d", code)
	}
	if code := encryptAs(t, ts.URL, ci.Secret, "billing"); code != 403 {
		t.Fatalf("encrypt outside the token's policy: %d, want 403", code)
	}
	if r := secMustSend(t, plainClient, "GET", ts.URL+api.RouteTokens, ci.Secret, nil); r.code != 403 {
		t.Fatalf("a token without tokens-admin lists tokens: %d", r.code)
	}

	clock.Advance(time.Second) // the list is by creation time, in seconds
	def := issueToken(t, ts.URL, ts.Token, api.CreateTokenRequest{Name: "default-ttl", Policies: []string{"orders"}})
	if d := def.ExpiresAt.Sub(def.CreatedAt); d != defaultTokenTTL {
		t.Fatalf("a token without ttl lives %v, want %v", d, defaultTokenTTL)
	}

	list, body := listTokens(t, ts.URL, ts.Token)
	if ids := tokenIDs(list); len(ids) != 2 || ids[0] != ci.ID || ids[1] != def.ID {
		t.Fatalf("list %v, want [%s %s]", ids, ci.ID, def.ID)
	}
	rec := ts.tokens.Token(ci.ID)
	for _, leak := range []string{ci.Secret, ci.Secret[len(ci.Secret)-tokenSecretLen:], hex.EncodeToString(rec.Hash[:]), `"token"`, "hash", "sha256"} {
		if strings.Contains(string(body), leak) {
			t.Fatalf("the list shows %q: %s", leak, body)
		}
	}

	// Revoked: refused at once, on the next request.
	if r := secMustSend(t, plainClient, "DELETE", ts.URL+"/v1/tokens/"+ci.ID, ts.Token, nil); r.code != 204 {
		t.Fatalf("revoke: %d %s", r.code, r.body)
	}
	r := secMustSend(t, plainClient, "POST", ts.URL+"/v1/encrypt/orders-1", ci.Secret, secEncryptBody)
	if r.code != 401 || errCode(t, r) != api.CodeUnauthenticated {
		t.Fatalf("revoked token: %d %s", r.code, r.body)
	}
	if r := secMustSend(t, plainClient, "DELETE", ts.URL+"/v1/tokens/"+ci.ID, ts.Token, nil); r.code != 404 || errCode(t, r) != api.CodeTokenNotFound {
		t.Fatalf("second revoke: %d %s", r.code, r.body)
	}

	// Expiry, by the clock: good until the last nanosecond, refused from
	// its expiry on, and gone from the list.
	short := issueToken(t, ts.URL, ts.Token, api.CreateTokenRequest{Name: "short", Policies: []string{"orders"}, TTL: "10m"})
	clock.Advance(10*time.Minute - time.Nanosecond - clock.Now().Sub(short.CreatedAt))
	if code := encryptAs(t, ts.URL, short.Secret, "orders-1"); code != 200 {
		t.Fatalf("a token just before its expiry: %d", code)
	}
	clock.Advance(time.Nanosecond)
	if code := encryptAs(t, ts.URL, short.Secret, "orders-1"); code != 401 {
		t.Fatalf("an expired token: %d, want 401", code)
	}
	if list, _ := listTokens(t, ts.URL, ts.Token); len(list.Tokens) != 1 || list.Tokens[0].ID != def.ID {
		t.Fatalf("list after expiry: %v", tokenIDs(list))
	}

	// The audit trail has the issue and the revocation, never a secret.
	audit, err := os.ReadFile(filepath.Join(dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(audit), `"op":"tokens-admin","key":"`+ci.ID+`"`); n != 3 ||
		!strings.Contains(string(audit), `"code":"token_not_found"`) {
		t.Fatalf("%d audit records of token %s, want 3 (issue, revoke, the second revoke that failed):\n%s", n, ci.ID, audit)
	}

	// A restart keeps the live token and the revocation; the expired one
	// leaves the file when expired tokens are removed.
	stop()
	ts, stop = start()
	defer stop()
	if code := encryptAs(t, ts.URL, def.Secret, "orders-1"); code != 200 {
		t.Fatalf("live token after a restart: %d", code)
	}
	for _, tk := range []api.CreatedToken{ci, short} {
		if code := encryptAs(t, ts.URL, tk.Secret, "orders-1"); code != 401 {
			t.Fatalf("token %s (revoked or expired) after a restart: %d", tk.Name, code)
		}
	}
	ts.expireTokens(ctx)
	file, err := os.ReadFile(filepath.Join(dir, "keys", "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(file), short.ID) || strings.Contains(string(file), ci.ID) || !strings.Contains(string(file), def.ID) {
		t.Fatalf("tokens.json after expiry: %s", file)
	}
	secrets := []string{def.Secret, ci.Secret, short.Secret}
	for _, s := range secrets[:3] {
		secrets = append(secrets, s[len(s)-tokenSecretLen:])
	}
	if found := secretsIn(t, dir, ts.Logs, secrets...); len(found) > 0 {
		t.Fatalf("token secrets stored or logged: %v", found)
	}
}

// TestTokensDelegation: tokens-admin must be named ("*" does not grant
// it); a caller other than the admin issues tokens with its own policies
// only, and a service token none that outlives it.
func TestTokensDelegation(t *testing.T) {
	clock := newTokenClock()
	cfg := tokenTestConfig(clock)
	ts := startTestServer(t, cfg)
	if _, err := ts.Service().CreateKey(context.Background(), "orders-1", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	req := func(caller string, v api.CreateTokenRequest) secReply {
		b, _ := json.Marshal(v)
		return secMustSend(t, plainClient, "POST", ts.URL+api.RouteTokens, caller, b)
	}
	// ops holds "*" on every key.
	if r := req(tokOps, api.CreateTokenRequest{Name: "x", Policies: []string{"orders"}}); r.code != 403 {
		t.Fatalf("an identity with \"*\" issued a token: %d %s", r.code, r.body)
	}
	if r := req(tokIssuer, api.CreateTokenRequest{Name: "x", Policies: []string{"decrypt-all"}}); r.code != 403 || errCode(t, r) != api.CodeForbidden {
		t.Fatalf("issuer gave a policy it lacks: %d %s", r.code, r.body)
	}
	child := issueToken(t, ts.URL, tokIssuer, api.CreateTokenRequest{Name: "child", Policies: []string{"orders"}})
	if code := encryptAs(t, ts.URL, child.Secret, "orders-1"); code != 200 {
		t.Fatalf("the issuer's token: %d", code)
	}

	// A service token that may issue: not beyond its own expiry.
	sub := issueToken(t, ts.URL, ts.Token, api.CreateTokenRequest{Name: "sub-issuer", Policies: []string{"issuer", "orders"}, TTL: "2h"})
	if r := req(sub.Secret, api.CreateTokenRequest{Name: "y", Policies: []string{"orders"}, TTL: "3h"}); r.code != 400 || errCode(t, r) != api.CodeInvalidToken {
		t.Fatalf("a token issued one that outlives it: %d %s", r.code, r.body)
	}
	grand := issueToken(t, ts.URL, sub.Secret, api.CreateTokenRequest{Name: "grandchild", Policies: []string{"orders"}, TTL: "1h"})
	if code := encryptAs(t, ts.URL, grand.Secret, "orders-1"); code != 200 {
		t.Fatalf("a token's token: %d", code)
	}
	// Revoking the issuer leaves what it issued, which expires before it.
	if r := secMustSend(t, plainClient, "DELETE", ts.URL+"/v1/tokens/"+sub.ID, tokIssuer, nil); r.code != 204 {
		t.Fatalf("issuer revokes: %d %s", r.code, r.body)
	}
	if code := encryptAs(t, ts.URL, grand.Secret, "orders-1"); code != 200 {
		t.Fatalf("a token whose issuer is revoked: %d", code)
	}
}

// TestTokensPolicyReload: a token's rights follow its policies through a
// reload, and a policy dropped from the configuration drops its rights.
func TestTokensPolicyReload(t *testing.T) {
	clock := newTokenClock()
	cfg := tokenTestConfig(clock)
	ts := startTestServer(t, cfg)
	if _, err := ts.Service().CreateKey(context.Background(), "orders-1", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	tk := issueToken(t, ts.URL, ts.Token, api.CreateTokenRequest{Name: "app", Policies: []string{"orders"}})
	if code := encryptAs(t, ts.URL, tk.Secret, "orders-1"); code != 200 {
		t.Fatalf("before the reload: %d", code)
	}
	next := tokenTestConfig(clock)
	next.DataDir = ts.cfg.DataDir
	next.Policies = next.Policies[1:] // drop "orders"
	next.Identities = nil
	if _, err := ts.Reload(next); err != nil {
		t.Fatal(err)
	}
	if code := encryptAs(t, ts.URL, tk.Secret, "orders-1"); code != 403 {
		t.Fatalf("after its policy was dropped: %d, want 403", code)
	}
}

// TestTokensRateLimited: each token has a bucket of its own. The tokens
// share one keep-alive connection, whose buffer holds each request's
// header in turn: a token's identity must not be filed under bytes that
// the next request overwrites.
func TestTokensRateLimited(t *testing.T) {
	clock := newTokenClock()
	cfg := tokenTestConfig(clock)
	cfg.RateLimit, cfg.RateBurst = 0.001, 1
	ts := startTestServer(t, cfg)
	if _, err := ts.Service().CreateKey(context.Background(), "orders-1", cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	// Issued through the store: through the API, the admin's own bucket
	// (of one) would allow one issue.
	var toks []api.CreatedToken
	for range 32 {
		id, tok, sum := newServiceToken()
		now := clock.Now()
		if err := ts.tokens.CreateToken(context.Background(), &cryptosvc.ServiceToken{ID: id, Hash: sum, Name: "t", Policies: []string{"orders"}, Created: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, api.CreatedToken{Secret: tok})
	}
	for round, want := range []int{200, 429} {
		for i, tk := range toks {
			if r := secMustSend(t, plainClient, "POST", ts.URL+"/v1/encrypt/orders-1", tk.Secret, secEncryptBody); r.code != want {
				t.Fatalf("token %d, request %d: %d %s, want %d", i, round, r.code, r.body, want)
			}
		}
	}
}

// TestTokensUnsupported: a keystore without token storage answers 409
// tokens_unsupported on every token route, and service tokens are unknown.
func TestTokensUnsupported(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, Keystore: struct{ cryptosvc.Keystore }{cryptosvc.NewMemStore()}})
	for _, rq := range [][2]string{{"POST", api.RouteTokens}, {"GET", api.RouteTokens}, {"DELETE", "/v1/tokens/0123456789abcdef"}} {
		var body []byte
		if rq[0] == "POST" {
			body = []byte(`{"name":"x","policies":["p"]}`)
		}
		r := secMustSend(t, plainClient, rq[0], ts.URL+rq[1], ts.Token, body)
		if r.code != 409 || errCode(t, r) != api.CodeTokensUnsupported {
			t.Fatalf("%s %s: %d %s", rq[0], rq[1], r.code, r.body)
		}
	}
	if code := encryptAs(t, ts.URL, "cdt_0123456789abcdef_"+strings.Repeat("A", tokenSecretLen), "default"); code != 401 {
		t.Fatalf("a service token on a store without tokens: %d", code)
	}
}

// TestTokensHostileInput: bad requests get 400 (or 413) with stable codes,
// and credentials of every malformed shape 401 unauthenticated; never a
// 500.
func TestTokensHostileInput(t *testing.T) {
	clock := newTokenClock()
	ts := startTestServer(t, tokenTestConfig(clock))
	good := issueToken(t, ts.URL, ts.Token, api.CreateTokenRequest{Name: "good", Policies: []string{"orders"}})

	many := make([]string, 65)
	for i := range many {
		many[i] = "orders"
	}
	bodies := map[string]api.Code{
		`{"name":"x","policies":["orders"],"ttl":"0"}`:                       api.CodeInvalidToken,
		`{"name":"x","policies":["orders"],"ttl":"-1h"}`:                     api.CodeInvalidToken,
		`{"name":"x","policies":["orders"],"ttl":"59s"}`:                     api.CodeInvalidToken,
		`{"name":"x","policies":["orders"],"ttl":"2161h"}`:                   api.CodeInvalidToken,
		`{"name":"x","policies":["orders"],"ttl":"9999999999999h"}`:          api.CodeInvalidToken,
		`{"name":"x","policies":["orders"],"ttl":"1d"}`:                      api.CodeInvalidToken,
		`{"name":"x","policies":["orders"],"ttl":"NaN"}`:                     api.CodeInvalidToken,
		`{"name":"x","policies":["orders"],"ttl":24}`:                        api.CodeBadRequest,
		`{"name":"x","policies":["nope"]}`:                                   api.CodeInvalidToken,
		`{"name":"x","policies":["orders","orders"]}`:                        api.CodeInvalidToken,
		`{"name":"x","policies":[]}`:                                         api.CodeInvalidToken,
		`{"name":"x"}`:                                                       api.CodeInvalidToken,
		`{"name":"x","policies":[""]}`:                                       api.CodeInvalidToken,
		`{"name":"x","policies":"orders"}`:                                   api.CodeBadRequest,
		`{"name":"","policies":["orders"]}`:                                  api.CodeInvalidToken,
		`{"name":"a b","policies":["orders"]}`:                               api.CodeInvalidToken,
		`{"name":"é","policies":["orders"]}`:                                 api.CodeInvalidToken,
		`{"name":"a\u0000","policies":["orders"]}`:                           api.CodeInvalidToken,
		`{"name":"` + strings.Repeat("n", 65) + `","policies":["orders"]}`:   api.CodeInvalidToken,
		`{"name":"` + strings.Repeat("n", 4000) + `","policies":["orders"]}`: api.CodeInvalidToken,
		`{"name":"x","policies":["orders"],"admin":true}`:                    api.CodeBadRequest,
		`{"name":"x","policies":["orders"]} {}`:                              api.CodeBadRequest,
		`[]`:                                                                 api.CodeBadRequest,
		`{`:                                                                  api.CodeBadRequest,
		`{"name":"` + strings.Repeat("n", 70<<10) + `"}`:                     api.CodeTooLarge,
	}
	b, _ := json.Marshal(api.CreateTokenRequest{Name: "x", Policies: many})
	bodies[string(b)] = api.CodeInvalidToken
	for body, want := range bodies {
		r := secMustSend(t, plainClient, "POST", ts.URL+api.RouteTokens, ts.Token, []byte(body))
		if r.code != want.Status() || errCode(t, r) != want {
			t.Errorf("body %.80q: %d %s, want %s", body, r.code, r.body, want)
		}
		if strings.Contains(string(r.body), "nnnnnnnn") || strings.Contains(string(r.body), "nope") {
			t.Errorf("body %.80q: the answer repeats the request: %s", body, r.body)
		}
	}

	id, secret, _ := parseServiceToken(good.Secret)
	flip := []byte(secret)
	flip[0] ^= 1
	otherID := "0123456789abcdef"
	if otherID == id {
		otherID = "fedcba9876543210"
	}
	creds := []string{
		"cdt_", "cdt__", "cdt_" + id, "cdt_" + id + "_",
		"cdt_" + id + "_" + string(flip),
		"cdt_" + otherID + "_" + secret,
		"cdt_" + strings.ToUpper(id) + "_" + secret,
		"CDT_" + id + "_" + secret,
		"cdt_" + id + "_" + secret + "x",
		"cdt_" + id + "_" + secret[:tokenSecretLen-1],
		"cdt_" + id + "-" + secret,
		"cdt_" + id[:15] + "g_" + secret,
		"cdt_" + id + "_" + secret[:20] + "\u00e9" + secret[22:],
		"xcdt_" + id + "_" + secret[1:],
		"cdt_" + id + "_" + secret + "_" + secret,
		id + "_" + secret,
		secret,
		strings.Repeat("cdt_", 2000),
		"cdt_" + id + "_" + strings.Repeat("=", tokenSecretLen),
	}
	for _, cred := range creds {
		r := secMustSend(t, plainClient, "POST", ts.URL+"/v1/encrypt/orders-1", cred, secEncryptBody)
		if r.code != 401 || errCode(t, r) != api.CodeUnauthenticated {
			t.Errorf("credential %.60q: %d %s, want 401 unauthenticated", cred, r.code, r.body)
		}
	}
	// Shapes of the Authorization header itself.
	for _, h := range []string{"cdt_" + id + "_" + secret, "Basic " + good.Secret, "Bearer", "Bearer " + good.Secret + " x", "Token " + good.Secret} {
		r := secMustSend(t, plainClient, "POST", ts.URL+"/v1/encrypt/orders-1", "", secEncryptBody, "Authorization", h)
		if r.code != 401 || errCode(t, r) != api.CodeUnauthenticated {
			t.Errorf("Authorization %.60q: %d %s, want 401", h, r.code, r.body)
		}
	}
	r := secMustSend(t, plainClient, "POST", ts.URL+"/v1/encrypt/orders-1", "", secEncryptBody, "Authorization", "bearer  "+good.Secret+" ")
	if r.code == 401 || r.code >= 500 {
		t.Errorf("a token with spaces around it and a lower-case scheme: %d %s", r.code, r.body)
	}

	for _, p := range []string{"x", "0123456789ABCDEF", "0123456789abcdef0", "0123456789abcde", "%00", "..", "0123456789abcdeg"} {
		r := secMustSend(t, plainClient, "DELETE", ts.URL+"/v1/tokens/"+p, ts.Token, nil)
		if r.code >= 500 || r.code != 404 && r.code != 400 {
			t.Errorf("DELETE /v1/tokens/%s: %d %s", p, r.code, r.body)
		}
	}
	if code := encryptAs(t, ts.URL, good.Secret, "orders-1"); code != 404 {
		// orders-1 does not exist here: the token authenticated and was
		// allowed, the key was not found.
		t.Fatalf("the good token after the hostile ones: %d", code)
	}
}

// TestTokensLostAdminToken follows docs/OPERATIONS.md, "Lost admin
// token": removing the stored hash makes the next start generate a new
// admin token, and CIPHERD_ADMIN_TOKEN overrides the stored one; either
// way the old admin token is refused and the service tokens issued before
// keep working.
func TestTokensLostAdminToken(t *testing.T) {
	dir := t.TempDir()
	start := func(adminToken string) *testServer {
		store := openTestStore(t, dir, zap.NewNop())
		t.Cleanup(func() { store.Close() })
		srv, err := New(context.Background(), Config{DataDir: dir, Keystore: store, AdminToken: adminToken, SkipBenchmark: true, Logger: zap.NewNop(),
			Policies: []PolicyConfig{{Name: "all", Allow: []RuleConfig{{Ops: []string{"*"}, Keys: []string{"*"}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ts := &testServer{Server: srv, URL: "http://" + ln.Addr().String()}
		done := make(chan struct{})
		go func() { defer close(done); srv.Serve(ln) }()
		t.Cleanup(func() { srv.Shutdown(context.Background()); <-done })
		return ts
	}
	stop := func(ts *testServer) {
		ts.Shutdown(context.Background())
		ts.store.Close()
	}
	ts := start("")
	first := ts.AdminTokenGenerated
	if first == "" {
		t.Fatal("no admin token generated")
	}
	app := issueToken(t, ts.URL, first, api.CreateTokenRequest{Name: "app", Policies: []string{"all"}})
	stop(ts)

	// Recovery 1: remove the stored hash; the next start makes a new token.
	if err := os.Remove(filepath.Join(dir, adminTokenFile)); err != nil {
		t.Fatal(err)
	}
	ts = start("")
	second := ts.AdminTokenGenerated
	if second == "" || second == first {
		t.Fatalf("after removing %s: generated %q", adminTokenFile, second)
	}
	if r := secMustSend(t, plainClient, "GET", ts.URL+api.RouteTokens, first, nil); r.code != 401 {
		t.Fatalf("the lost admin token: %d", r.code)
	}
	if l, _ := listTokens(t, ts.URL, second); len(l.Tokens) != 1 || l.Tokens[0].ID != app.ID {
		t.Fatalf("tokens after the recovery: %v", tokenIDs(l))
	}
	stop(ts)

	// Recovery 2: CIPHERD_ADMIN_TOKEN wins over the stored hash.
	ts = start("recovered-admin-token-0123456789")
	if ts.AdminTokenGenerated != "" {
		t.Fatal("a token was generated although one is configured")
	}
	if r := secMustSend(t, plainClient, "GET", ts.URL+api.RouteTokens, second, nil); r.code != 401 {
		t.Fatalf("the stored admin token with CIPHERD_ADMIN_TOKEN set: %d", r.code)
	}
	if r := secMustSend(t, plainClient, "DELETE", ts.URL+"/v1/tokens/"+app.ID, "recovered-admin-token-0123456789", nil); r.code != 204 {
		t.Fatalf("revoke with the configured admin token: %d %s", r.code, r.body)
	}
}

// A token's policies that the configuration lacks are named by their place
// in the request, never by the name sent, and a configuration with no
// policies at all says so.
func TestTokenPolicyMessages(t *testing.T) {
	ts := startTestServer(t, tokenTestConfig(newTokenClock()))
	for body, want := range map[string]string{
		`{"name":"x","policies":["orders","nope"]}`:   "policies[1] is not a policy of the configuration",
		`{"name":"x","policies":["orders","orders"]}`: "policies[1] repeats an earlier one",
	} {
		r := secMustSend(t, plainClient, "POST", ts.URL+api.RouteTokens, ts.Token, []byte(body))
		var e api.Error
		json.Unmarshal(r.body, &e)
		if r.code != 400 || e.Message != want {
			t.Errorf("%s: %d %q, want 400 %q", body, r.code, e.Message, want)
		}
	}
	bare := startTestServer(t, Config{})
	r := secMustSend(t, plainClient, "POST", bare.URL+api.RouteTokens, bare.Token, []byte(`{"name":"x","policies":["orders"]}`))
	var e api.Error
	json.Unmarshal(r.body, &e)
	if r.code != 400 || !strings.Contains(e.Message, "defines no policies") {
		t.Errorf("no policies configured: %d %q", r.code, e.Message)
	}
}
