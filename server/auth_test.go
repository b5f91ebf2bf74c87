package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

func tokenSHA256(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

var plainClient = &http.Client{Timeout: 10 * time.Second}

// errCode returns the code of an error response.
func errCode(t testing.TB, r secReply) api.Code {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	return e.Code
}

// Tokens of the policy tests. Long enough not to trip the short-token warning.
const (
	tokOrders = "tok-orders-app-0123456789abcdef"
	tokOps    = "tok-ops-0123456789abcdef"
	tokSplit  = "tok-split-0123456789abcdef"
)

func policyTestConfig() Config {
	return Config{
		SkipBenchmark: true,
		Policies: []PolicyConfig{
			{
				Name:  "orders",
				Allow: []RuleConfig{{Ops: []string{"encrypt", "decrypt"}, Keys: []string{"orders-*"}}},
				Deny:  []RuleConfig{{Ops: []string{"decrypt"}, Keys: []string{"orders-secret*"}}},
			},
			{
				Name:  "all-but-billing",
				Allow: []RuleConfig{{Ops: []string{"*"}, Keys: []string{"*"}}},
				Deny:  []RuleConfig{{Ops: []string{"*"}, Keys: []string{"billing"}}},
			},
			{Name: "decrypt-all", Allow: []RuleConfig{{Ops: []string{"decrypt"}, Keys: []string{"*"}}}},
		},
		Identities: []IdentityConfig{
			{Name: "orders-app", TokenSHA256: tokenSHA256(tokOrders), Policies: []string{"orders"}},
			{Name: "ops", TokenSHA256: strings.ToUpper(tokenSHA256(tokOps)), Policies: []string{"all-but-billing"}},
			// Allowed to decrypt everything by one policy, denied
			// orders-secret* by another: deny wins.
			{Name: "split", TokenSHA256: tokenSHA256(tokSplit), Policies: []string{"decrypt-all", "orders"}},
		},
	}
}

func TestAuthTokensAndPolicies(t *testing.T) {
	ts := startTestServer(t, policyTestConfig())
	for _, k := range []string{"orders-1", "orders-secret-1", "billing", "orders"} {
		if _, err := ts.Service().CreateKey(context.Background(), k, cryptosvc.KeyConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	sealed := map[string][]byte{}
	for _, k := range []string{"orders-1", "orders-secret-1", "billing"} {
		var res api.EncryptResult
		if code := ts.postJSON(t, "/v1/encrypt/"+k, api.EncryptRequest{EncryptItem: api.EncryptItem{Plaintext: []byte("x")}}, &res); code != 200 {
			t.Fatalf("admin encrypt %s: %d", k, code)
		}
		sealed[k], _ = json.Marshal(api.DecryptRequest{DecryptItem: api.DecryptItem{Ciphertext: res.Ciphertext}})
	}

	// Who may do what: the same request under different credentials.
	cases := []struct {
		name, method, path, token string
		body                      []byte
		want                      int
	}{
		{"no token", "POST", "/v1/encrypt/orders-1", "", secEncryptBody, 401},
		{"unknown token", "POST", "/v1/encrypt/orders-1", "not-a-token", secEncryptBody, 401},
		{"admin", "POST", "/v1/encrypt/billing", ts.Token, secEncryptBody, 200},
		{"admin reads keys", "GET", "/v1/keys/billing", ts.Token, nil, 200},

		{"pattern matches", "POST", "/v1/encrypt/orders-1", tokOrders, secEncryptBody, 200},
		{"pattern, missing key", "POST", "/v1/encrypt/orders-none", tokOrders, secEncryptBody, 404},
		{"pattern needs the dash", "POST", "/v1/encrypt/orders", tokOrders, secEncryptBody, 403},
		{"pattern is anchored", "POST", "/v1/encrypt/xorders-1", tokOrders, secEncryptBody, 403},
		{"other key", "POST", "/v1/encrypt/billing", tokOrders, secEncryptBody, 403},
		{"other key, missing", "POST", "/v1/encrypt/nothing", tokOrders, secEncryptBody, 403},
		{"other op", "GET", "/v1/keys/orders-1", tokOrders, nil, 403},
		{"allowed decrypt", "POST", "/v1/decrypt/orders-1", tokOrders, sealed["orders-1"], 200},
		{"deny wins in a policy", "POST", "/v1/decrypt/orders-secret-1", tokOrders, sealed["orders-secret-1"], 403},
		{"encrypt not denied", "POST", "/v1/encrypt/orders-secret-1", tokOrders, secEncryptBody, 200},

		{"star allows", "GET", "/v1/keys/orders-1", tokOps, nil, 200},
		{"star allows encrypt", "POST", "/v1/encrypt/orders-1", tokOps, secEncryptBody, 200},
		{"deny star wins over allow star", "POST", "/v1/encrypt/billing", tokOps, secEncryptBody, 403},
		{"deny star, decrypt", "POST", "/v1/decrypt/billing", tokOps, sealed["billing"], 403},

		{"across policies: allowed", "POST", "/v1/decrypt/billing", tokSplit, sealed["billing"], 200},
		{"across policies: deny wins", "POST", "/v1/decrypt/orders-secret-1", tokSplit, sealed["orders-secret-1"], 403},
	}
	for _, tc := range cases {
		r := secMustSend(t, plainClient, tc.method, ts.URL+tc.path, tc.token, tc.body)
		if r.code != tc.want {
			t.Errorf("%s: %s %s: %d %s, want %d", tc.name, tc.method, tc.path, r.code, r.body, tc.want)
			continue
		}
		switch r.code {
		case 401:
			if errCode(t, r) != api.CodeUnauthenticated || r.hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 with code %s, WWW-Authenticate %q", tc.name, errCode(t, r), r.hdr.Get("WWW-Authenticate"))
			}
		case 403:
			if errCode(t, r) != api.CodeForbidden {
				t.Errorf("%s: 403 with code %s", tc.name, errCode(t, r))
			}
		}
	}

	// The Authorization header: the scheme is case-insensitive; other
	// schemes and empty tokens are refused.
	for hdr, want := range map[string]int{
		"bearer " + tokOrders:        200,
		"BEARER  " + tokOrders + " ": 200,
		"Basic " + tokOrders:         401,
		"Bearer":                     401,
		"Bearer ":                    401,
		tokOrders:                    401,
	} {
		r := secMustSend(t, plainClient, "POST", ts.URL+"/v1/encrypt/orders-1", "", secEncryptBody, "Authorization", hdr)
		if r.code != want {
			t.Errorf("Authorization %q: %d %s, want %d", hdr, r.code, r.body, want)
		}
	}
	// Two Authorization lines are refused whatever they hold, in either
	// order: none of them is chosen.
	for _, pair := range [][2]string{
		{"Bearer " + tokOrders, "Bearer " + tokOrders},
		{"Bearer " + tokOrders, "Bearer wrong"},
		{"Bearer wrong", "Bearer " + tokOrders},
		{"Bearer " + tokOrders, ""},
	} {
		r := secMustSend(t, plainClient, "POST", ts.URL+"/v1/encrypt/orders-1", "", secEncryptBody, "Authorization", pair[0], "Authorization", pair[1])
		if r.code != 400 || !strings.Contains(string(r.body), `"`+string(api.CodeAmbiguousAuth)+`"`) {
			t.Errorf("Authorization %q then %q: %d %s, want 400 %s", pair[0], pair[1], r.code, r.body, api.CodeAmbiguousAuth)
		}
	}
}

func TestAuthProbesUnauthenticated(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, RateLimit: 1, RateBurst: 1})
	for _, p := range []string{api.RouteHealthz, api.RouteReadyz, api.RouteSpeed, api.RouteSpeedFleet, api.RouteVersion, api.RouteMetrics, api.RouteAPI, api.RouteOpenAPI} {
		for _, tok := range []string{"", "not-a-token"} {
			// Repeated: probes are not rate-limited either.
			for range 3 {
				if r := secMustSend(t, plainClient, "GET", ts.URL+p, tok, nil); r.code != 200 {
					t.Errorf("GET %s with token %q: %d %s", p, tok, r.code, r.body)
				}
			}
		}
	}
	if r := secMustSend(t, plainClient, "GET", ts.URL+"/v1/keys", "", nil); r.code != 401 {
		t.Errorf("GET /v1/keys without a token: %d", r.code)
	}
}

// TestProtectInfoRoutes: with protect_info_routes, the routes that describe
// the service want a credential allowed info-read ("*" grants it); the
// probes stay open.
func TestProtectInfoRoutes(t *testing.T) {
	const tokReader, tokOther = "tok-info-reader-0123456789abcdef", "tok-info-other-0123456789abcdef"
	ts := startTestServer(t, Config{
		SkipBenchmark:     true,
		ProtectInfoRoutes: true,
		Identities: []IdentityConfig{
			{Name: "reader", TokenSHA256: tokenSHA256(tokReader), Policies: []string{"all"}},
			{Name: "other", TokenSHA256: tokenSHA256(tokOther), Policies: []string{"crypto"}},
		},
		Policies: []PolicyConfig{
			{Name: "all", Allow: []RuleConfig{{Ops: []string{"*"}, Keys: []string{"*"}}}},
			{Name: "crypto", Allow: []RuleConfig{{Ops: []string{"encrypt", "decrypt"}, Keys: []string{"*"}}}},
		},
	})
	for _, p := range []string{api.RouteMetrics, api.RouteVersion, api.RouteSpeed, api.RouteSpeedFleet, api.RouteAPI, api.RouteOpenAPI} {
		for _, c := range []struct {
			tok  string
			want int
		}{{"", 401}, {"not-a-token", 401}, {tokOther, 403}, {tokReader, 200}, {ts.Token, 200}} {
			got := secMustSend(t, plainClient, "GET", ts.URL+p, c.tok, nil).code
			if p == api.RouteSpeed && c.want == 200 && got == 503 {
				got = 200 // no table without the benchmark: past the credential, which is what counts here
			}
			if got != c.want {
				t.Errorf("GET %s with token %q: %d, want %d", p, c.tok, got, c.want)
			}
		}
	}
	for _, p := range []string{api.RouteHealthz, api.RouteReadyz} {
		if r := secMustSend(t, plainClient, "GET", ts.URL+p, "", nil); r.code != 200 {
			t.Errorf("GET %s without a token: %d, want 200", p, r.code)
		}
	}
}

// secretsIn returns the secrets found in any file under dir or in any log
// entry (message or field).
func secretsIn(t *testing.T, dir string, logs *observer.ObservedLogs, secrets ...string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				found = append(found, fmt.Sprintf("%q in %s", s, p))
			}
		}
		return nil
	})
	for _, e := range logs.All() {
		text := e.Message + " " + fmt.Sprint(e.ContextMap())
		for _, s := range secrets {
			if strings.Contains(text, s) {
				found = append(found, fmt.Sprintf("%q in log %q", s, e.Message))
			}
		}
	}
	return found
}

func TestAuthAdminTokenStoredHashed(t *testing.T) {
	dir := t.TempDir()
	core, logs := observer.New(zap.DebugLevel)
	serve := func() (*Server, string) {
		srv, err := New(context.Background(), Config{DataDir: dir, Keystore: cryptosvc.NewMemStore(), SkipBenchmark: true, Logger: zap.New(core)})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { defer close(done); srv.Serve(ln) }()
		t.Cleanup(func() { srv.Shutdown(context.Background()); <-done })
		return srv, "http://" + ln.Addr().String()
	}

	srv, base := serve()
	tok := srv.AdminTokenGenerated
	if !strings.HasPrefix(tok, "cdadm_") || len(tok) < 40 {
		t.Fatalf("generated token %q", tok)
	}
	b, err := os.ReadFile(filepath.Join(dir, adminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != tokenSHA256(tok)+"\n" {
		t.Fatalf("%s holds %q, want the token's SHA-256", adminTokenFile, b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, adminTokenFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v", adminTokenFile, fi.Mode().Perm())
	}
	if r := secMustSend(t, plainClient, "GET", base+"/v1/keys", tok, nil); r.code != 200 {
		t.Fatalf("generated token: %d %s", r.code, r.body)
	}
	srv.Shutdown(context.Background())

	// A restart keeps the stored hash and generates nothing.
	srv2, base2 := serve()
	if srv2.AdminTokenGenerated != "" {
		t.Fatal("a second token was generated")
	}
	if r := secMustSend(t, plainClient, "GET", base2+"/v1/keys", tok, nil); r.code != 200 {
		t.Fatalf("token after restart: %d %s", r.code, r.body)
	}
	secMustSend(t, plainClient, "GET", base2+"/v1/keys", tok[:len(tok)-1], nil)

	secret := strings.TrimPrefix(tok, "cdadm_")
	if found := secretsIn(t, dir, logs, tok, secret, secret[:20]); len(found) > 0 {
		t.Fatalf("the admin token leaked: %v", found)
	}

	// A damaged hash file stops the start.
	os.WriteFile(filepath.Join(dir, adminTokenFile), []byte("nothex\n"), 0o600)
	if _, err := New(context.Background(), Config{DataDir: dir, Keystore: cryptosvc.NewMemStore(), SkipBenchmark: true, Logger: zap.NewNop()}); err == nil {
		t.Fatal("started with a damaged admin token file")
	}
}

func TestAuthSecretsNeverLogged(t *testing.T) {
	cfg := policyTestConfig()
	ts := startTestServer(t, cfg)
	for _, tok := range []string{ts.Token, tokOrders, "wrong-token-0123456789", ts.Token + "x"} {
		for _, p := range []string{"/v1/encrypt/orders-1", "/v1/encrypt/billing", "/v1/keys"} {
			secMustSend(t, plainClient, "POST", ts.URL+p, tok, secEncryptBody)
			r := secMustSend(t, plainClient, "GET", ts.URL+p, tok, nil)
			if strings.Contains(string(r.body), tok) {
				t.Fatalf("%s: the response names the token: %s", p, r.body)
			}
		}
	}
	if ts.Logs.FilterMessage("authentication failed").Len() == 0 {
		t.Fatal("no debug log of failed authentication")
	}
	if found := secretsIn(t, ts.cfg.DataDir, ts.Logs, ts.Token, tokOrders, "wrong-token-0123456789"); len(found) > 0 {
		t.Fatalf("tokens leaked: %v", found)
	}
}

func TestAuthConfigErrors(t *testing.T) {
	const adminTok = "admin-secret-0123456789abcdef"
	pol := []PolicyConfig{{Name: "p", Allow: []RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"a-*"}}}}}
	tok := tokenSHA256("some-token-0123456789")
	id := func(name string) IdentityConfig {
		return IdentityConfig{Name: name, TokenSHA256: tokenSHA256("token-of-" + name), Policies: []string{"p"}}
	}
	bad := map[string]Config{
		"unknown op":          {Policies: []PolicyConfig{{Name: "p", Allow: []RuleConfig{{Ops: []string{"launch"}, Keys: []string{"*"}}}}}},
		"bad pattern":         {Policies: []PolicyConfig{{Name: "p", Deny: []RuleConfig{{Ops: []string{"*"}, Keys: []string{"a["}}}}}},
		"rule without keys":   {Policies: []PolicyConfig{{Name: "p", Allow: []RuleConfig{{Ops: []string{"*"}}}}}},
		"rule without ops":    {Policies: []PolicyConfig{{Name: "p", Allow: []RuleConfig{{Keys: []string{"*"}}}}}},
		"policy twice":        {Policies: append(pol, pol...)},
		"missing policy":      {Policies: pol, Identities: []IdentityConfig{{Name: "x", TokenSHA256: tok, Policies: []string{"q"}}}},
		"short hash":          {Policies: pol, Identities: []IdentityConfig{{Name: "x", TokenSHA256: tok[:62]}}},
		"non-hex hash":        {Policies: pol, Identities: []IdentityConfig{{Name: "x", CertSHA256: "zz" + tok[2:]}}},
		"no credential":       {Policies: pol, Identities: []IdentityConfig{{Name: "x", Policies: []string{"p"}}}},
		"name twice":          {Policies: pol, Identities: []IdentityConfig{id("x"), id("x")}},
		"name admin":          {Policies: pol, Identities: []IdentityConfig{id("admin")}},
		"empty name":          {Policies: pol, Identities: []IdentityConfig{id("")}},
		"token twice":         {Policies: pol, Identities: []IdentityConfig{{Name: "x", TokenSHA256: tok}, {Name: "y", TokenSHA256: tok}}},
		"admin's token":       {Policies: pol, Identities: []IdentityConfig{{Name: "x", TokenSHA256: tokenSHA256(adminTok)}}},
		"cert twice":          {Policies: pol, Identities: []IdentityConfig{{Name: "x", CertSHA256: tok}, {Name: "y", CertSHA256: tok}}},
		"trusted proxy CIDR":  {TrustedProxies: []string{"10.0.0.1"}},
		"trusted proxy words": {TrustedProxies: []string{"proxy.internal/8"}},
	}
	for name, cfg := range bad {
		cfg.AdminToken = adminTok
		cfg.DataDir = t.TempDir()
		_, err := newAuth(&cfg, zap.NewNop())
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), adminTok) {
			t.Errorf("%s: the error names the admin token: %v", name, err)
		}
	}
	good := Config{AdminToken: adminTok, Policies: pol, Identities: []IdentityConfig{id("x"), {Name: "c", CertSHA256: tok}}, TrustedProxies: []string{"10.0.0.0/8", "::1/128"}}
	a, err := newAuth(&good, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	identify := func(tok string) *identity { return a.identifyHash(sha256.Sum256([]byte(tok))) }
	if identify(adminTok) != adminIdentity || identify("token-of-x").name != "x" || identify("") != nil || identify("token-of-y") != nil {
		t.Fatal("identify")
	}
	for ip, want := range map[string]bool{"10.1.2.3": true, "::ffff:10.1.2.3": true, "::1": true, "11.0.0.1": false, "127.0.0.1": false} {
		if got := a.trustedProxy(net.ParseIP(ip)); got != want {
			t.Errorf("trustedProxy(%s) = %v", ip, got)
		}
	}
}

// Proxy tests: a client certificate forwarded in X-Forwarded-Client-Cert.

// proxyForms returns the header forms a proxy may send for c.
func proxyForms(c *secCert) map[string]string {
	escaped := url.PathEscape(string(c.certPEM)) // %20 for spaces, %0A for newlines
	der := base64.StdEncoding.EncodeToString(c.leaf.Raw)
	return map[string]string{
		"xfcc quoted":       `By=spiffe://cluster.local/ns/edge/sa/lb;Hash=` + hex.EncodeToString(c.leaf.Raw[:8]) + `;Cert="` + escaped + `";Subject="CN=app,O=cipherd tests";URI=`,
		"xfcc unquoted":     `Hash=00;Cert=` + escaped + `;DNS=app.local`,
		"xfcc form-encoded": `Cert="` + url.QueryEscape(string(c.certPEM)) + `"`,
		"xfcc base64 der":   `Cert=` + der,
		"escaped pem":       escaped,
		"base64 der":        der,
	}
}

func TestProxyForwardedCert(t *testing.T) {
	ca := secIssue(t, nil, "edge CA", 1, true, false)
	app := secIssue(t, ca, "app", 10, false, false)
	other := secIssue(t, ca, "other", 11, false, false)
	cfg := Config{
		SkipBenchmark:  true,
		TrustedProxies: []string{"127.0.0.0/8"},
		Identities:     []IdentityConfig{{Name: "edge-app", CertSHA256: app.spki(), Policies: []string{"enc"}}},
		Policies:       []PolicyConfig{{Name: "enc", Allow: []RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"default"}}}}},
	}
	ts := startTestServer(t, cfg)
	enc := ts.URL + "/v1/encrypt/default"
	for form, v := range proxyForms(app) {
		if r := secMustSend(t, plainClient, "POST", enc, "", secEncryptBody, headerForwardedCert, v); r.code != 200 {
			t.Errorf("%s: %d %s", form, r.code, r.body)
		}
	}
	used := ts.Logs.FilterMessage("identity from a forwarded client certificate").All()
	if len(used) == 0 {
		t.Fatal("no debug log of the forwarded identity")
	}
	if m := used[0].ContextMap(); m["proxy"] != "127.0.0.1" || m["identity"] != "edge-app" || len(m) != 2 {
		t.Errorf("forwarded identity logged as %v", m)
	}
	// The policy of the forwarded identity applies, not the admin's.
	if r := secMustSend(t, plainClient, "GET", ts.URL+"/v1/keys/default", "", nil, headerForwardedCert, proxyForms(app)["escaped pem"]); r.code != 403 {
		t.Errorf("forwarded identity reading keys: %d", r.code)
	}
	// Refused: unknown certificates, garbage, and headers that several
	// proxies appended to.
	for name, v := range map[string]string{
		"unknown cert": proxyForms(other)["xfcc quoted"],
		"garbage":      "Cert=%%%",
		"not a cert":   "Cert=" + base64.StdEncoding.EncodeToString([]byte("hello")),
		"no cert":      `By=spiffe://x;Hash=00`,
		"two elements": proxyForms(other)["xfcc quoted"] + "," + proxyForms(app)["xfcc quoted"],
	} {
		if r := secMustSend(t, plainClient, "POST", enc, "", secEncryptBody, headerForwardedCert, v); r.code != 401 {
			t.Errorf("%s: %d %s", name, r.code, r.body)
		}
	}
	// Two header lines: a proxy that adds its own after the client's must
	// not let the client's be read. A token beside a forwarded certificate
	// is two credentials as well.
	for name, hdr := range map[string][]string{
		"two header lines": {headerForwardedCert, proxyForms(app)["escaped pem"], headerForwardedCert, proxyForms(other)["escaped pem"]},
		"a token beside":   {headerForwardedCert, proxyForms(app)["escaped pem"], "Authorization", "Bearer " + ts.Token},
	} {
		r := secMustSend(t, plainClient, "POST", enc, "", secEncryptBody, hdr...)
		if r.code != 400 || !strings.Contains(string(r.body), string(api.CodeAmbiguousAuth)) {
			t.Errorf("%s: %d %s, want 400 %s", name, r.code, r.body, api.CodeAmbiguousAuth)
		}
	}
	if found := secretsIn(t, ts.cfg.DataDir, ts.Logs, base64.StdEncoding.EncodeToString(app.leaf.Raw)[:40], url.PathEscape(string(app.certPEM))[:60]); len(found) > 0 {
		t.Errorf("the forwarded certificate was logged: %v", found)
	}
}

func TestProxyUntrustedIgnored(t *testing.T) {
	ca := secIssue(t, nil, "edge CA", 1, true, false)
	app := secIssue(t, ca, "app", 10, false, false)
	for _, trusted := range [][]string{nil, {"10.0.0.0/8", "::1/128"}} {
		ts := startTestServer(t, Config{
			SkipBenchmark:  true,
			TrustedProxies: trusted,
			Identities:     []IdentityConfig{{Name: "edge-app", CertSHA256: app.spki(), Policies: []string{"enc"}}},
			Policies:       []PolicyConfig{{Name: "enc", Allow: []RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"default"}}}}},
		})
		enc := ts.URL + "/v1/encrypt/default"
		for form, v := range proxyForms(app) {
			if r := secMustSend(t, plainClient, "POST", enc, "", secEncryptBody, headerForwardedCert, v); r.code != 401 {
				t.Errorf("trusted %v, %s from 127.0.0.1: %d %s", trusted, form, r.code, r.body)
			}
		}
		if r := secMustSend(t, plainClient, "POST", enc, ts.Token, secEncryptBody, headerForwardedCert, proxyForms(app)["escaped pem"]); r.code != 200 {
			t.Errorf("trusted %v, admin token next to an ignored header: %d", trusted, r.code)
		}
		if n := ts.Logs.FilterMessage("identity from a forwarded client certificate").Len(); n != 0 {
			t.Errorf("trusted %v: %d forwarded identities used", trusted, n)
		}
	}
}

func FuzzProxyForwardedCert(f *testing.F) {
	ca := secIssue(f, nil, "edge CA", 1, true, false)
	app := secIssue(f, ca, "app", 10, false, false)
	for _, v := range proxyForms(app) {
		f.Add(v)
	}
	f.Add(`Cert="\"";By=","`)
	f.Add(`-----BEGIN+CERTIFICATE-----`)
	f.Fuzz(func(t *testing.T, v string) {
		c, err := forwardedCert(v)
		if (c == nil) == (err == nil) {
			t.Fatalf("forwardedCert(%q) = %v, %v", v, c, err)
		}
	})
}

// Rate limit tests.

func TestRateLimit(t *testing.T) {
	const tokA, tokB = "tok-rate-a-0123456789abcdef", "tok-rate-b-0123456789abcdef"
	// The buckets refill on a test clock: on the wall clock a slow
	// machine would refill a token between the requests of the burst.
	clk := newTestClock()
	ts := startTestServer(t, Config{
		SkipBenchmark: true,
		now:           clk.Now,
		RateLimit:     2,
		RateBurst:     3,
		Identities: []IdentityConfig{
			{Name: "a", TokenSHA256: tokenSHA256(tokA), Policies: []string{"all"}},
			{Name: "b", TokenSHA256: tokenSHA256(tokB), Policies: []string{"all"}},
		},
		Policies: []PolicyConfig{{Name: "all", Allow: []RuleConfig{{Ops: []string{"*"}, Keys: []string{"*"}}}}},
	})
	get := func(tok string) secReply {
		return secMustSend(t, plainClient, "GET", ts.URL+"/v1/keys/default", tok, nil)
	}
	for i := range 3 {
		if r := get(tokA); r.code != 200 {
			t.Fatalf("request %d of the burst: %d %s", i+1, r.code, r.body)
		}
	}
	limited := get(tokA)
	if limited.code != 429 || errCode(t, limited) != api.CodeRateLimited {
		t.Fatalf("over the burst: %d %s", limited.code, limited.body)
	}
	ra, err := strconv.Atoi(limited.hdr.Get("Retry-After"))
	if err != nil || ra != 1 {
		t.Fatalf("Retry-After %q, want 1 (one token at 2/s)", limited.hdr.Get("Retry-After"))
	}
	// Another identity has its own bucket; unauthenticated requests are
	// answered 401 before any bucket.
	if r := get(tokB); r.code != 200 {
		t.Fatalf("identity b: %d", r.code)
	}
	for range 10 {
		if r := get("not-a-token"); r.code != 401 {
			t.Fatalf("unknown token: %d, want 401", r.code)
		}
	}
	// A token takes 500 ms at 2/s; Retry-After rounds it up to 1 s.
	clk.Advance(499 * time.Millisecond)
	if r := get(tokA); r.code != 429 {
		t.Fatalf("1 ms before the token is back: %d %s", r.code, r.body)
	}
	clk.Advance(time.Duration(ra)*time.Second - 499*time.Millisecond)
	if r := get(tokA); r.code != 200 {
		t.Fatalf("after Retry-After: %d %s", r.code, r.body)
	}
}

func TestRateLimiterBucket(t *testing.T) {
	if l := newRateLimiter(0, 10, map[string]bool{"a": true}, nil); l != nil {
		t.Fatal("rate 0 made a limiter")
	}
	var off *rateLimiter
	if ok, _ := off.take("a", 1); !ok {
		t.Fatal("no limiter limited")
	}

	now := time.Unix(1_000_000, 0)
	l := newRateLimiter(0.1, 2, map[string]bool{"a": true, "b": true}, nil)
	l.now = func() time.Time { return now }
	step := func(cost int, want bool, wantRA string) {
		t.Helper()
		ok, wait := l.take("a", cost)
		if ok != want || (!ok && retryAfter(wait) != wantRA) {
			t.Fatalf("at %v, cost %d: ok=%v wait=%v (Retry-After %s), want ok=%v Retry-After %s", now.Unix()-1_000_000, cost, ok, wait, retryAfter(wait), want, wantRA)
		}
	}
	step(1, true, "")
	step(1, true, "")
	step(1, false, "10")
	now = now.Add(4 * time.Second)
	step(1, false, "6")
	now = now.Add(5900 * time.Millisecond)
	step(1, false, "1") // 100 ms left rounds up to 1 s
	now = now.Add(100 * time.Millisecond)
	step(1, true, "")
	now = now.Add(time.Hour) // refills to the burst, not beyond
	step(1, true, "")
	step(1, true, "")
	step(1, false, "10")
	if ok, _ := l.take("b", 1); !ok {
		t.Fatal("b shares a's bucket")
	}
	// A cost takes that many tokens, or none: a refused request leaves the
	// bucket as it was. A cost over the burst takes the whole burst.
	now = now.Add(time.Hour)
	step(2, true, "")
	step(1, false, "10")
	now = now.Add(10 * time.Second)
	step(2, false, "10") // one token there, one missing
	step(1, true, "")
	now = now.Add(time.Hour)
	step(50, true, "")
	step(50, false, "20")

	if got := retryAfter(0); got != "1" {
		t.Errorf("retryAfter(0) = %s", got)
	}
	tiny := newRateLimiter(1e-12, 1, map[string]bool{"a": true}, nil)
	tiny.take("a", 1)
	if _, wait := tiny.take("a", 1); wait > maxRetryAfter || wait <= 0 {
		t.Errorf("wait %v at a tiny rate", wait)
	}

	// Concurrent takes from one bucket on a frozen clock: exactly the burst
	// succeeds.
	c := newRateLimiter(1, 50, map[string]bool{"a": true}, nil)
	frozen := time.Now()
	c.now = func() time.Time { return frozen }
	var wg sync.WaitGroup
	var okCount atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if ok, _ := c.take("a", 1); ok {
					okCount.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if okCount.Load() != 50 {
		t.Fatalf("%d takes succeeded, want the burst of 50", okCount.Load())
	}
}
