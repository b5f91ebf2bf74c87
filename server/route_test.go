package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/api"
)

// The route table is walked row by row, so that a new route is covered by
// these tests without being named in them.

// rowPath is a request path for a row: its :key is key.
func rowPath(r *route, key string) string {
	return strings.ReplaceAll(r.path, ":key", key)
}

// serveRows serves rows through s's middleware and wrapper on a loopback
// port until the test ends, and returns its base URL. s then describes rows
// in GET /v1/api.
func serveRows(t *testing.T, s *Server, rows []route) string {
	t.Helper()
	app := s.buildApp(rows)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The server's own connections: a refused upload is read before
		// its connection closes, as cipherd serve does, so that Go's
		// client reads the refusal rather than a reset.
		app.Listener(s.guardListener(ln, true))
	}()
	t.Cleanup(func() {
		app.ShutdownWithTimeout(5 * time.Second)
		<-done
	})
	return "http://" + ln.Addr().String()
}

// rowRequest sends the request of a row: method and path (with the key
// "default"), the JSON content type and body when the row takes a body,
// token unless it is empty.
func rowRequest(t *testing.T, cl *http.Client, base string, r *route, query, token string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(r.method, base+rowPath(r, "default")+query, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.maxBody > 0 {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", r.method, r.path, err)
	}
	return resp.StatusCode, b
}

func codeOf(b []byte) api.Code {
	var e api.Error
	json.Unmarshal(b, &e)
	return e.Code
}

const (
	tokNobody    = "tok-nobody-0123456789abcdef"
	tokElsewhere = "tok-elsewhere-0123456789abcdef"
)

// noPolicyConfig has an identity with no policy, and one that may do
// everything on keys named other-* only.
func noPolicyConfig() Config {
	return Config{
		SkipBenchmark: true,
		Policies:      []PolicyConfig{{Name: "other", Allow: []RuleConfig{{Ops: []string{"*"}, Keys: []string{"other-*"}}}}},
		Identities: []IdentityConfig{
			{Name: "nobody", TokenSHA256: tokenSHA256(tokNobody)},
			{Name: "elsewhere", TokenSHA256: tokenSHA256(tokElsewhere), Policies: []string{"other"}},
		},
	}
}

// TestRouteTableForbidden walks every route of the real server with an
// authenticated identity that has no policy: every route with an operation
// answers 403, every other route neither 401 nor 403. An identity allowed
// everything on other keys gets 403 too, except on listings, which show it
// only what it may read.
func TestRouteTableForbidden(t *testing.T) {
	ts := startTestServer(t, noPolicyConfig())
	if len(ts.tab.rows) < 15 {
		t.Fatalf("the route table has %d rows", len(ts.tab.rows))
	}
	for i := range ts.tab.rows {
		r := &ts.tab.rows[i]
		code, body := rowRequest(t, plainClient, ts.URL, r, "", tokNobody, nil)
		if code >= 400 && bytes.Contains(body, []byte(`"default"`)) {
			t.Errorf("%s %s: the answer repeats the key name: %s", r.method, r.path, body)
		}
		switch {
		case r.op != "" && (code != 403 || codeOf(body) != api.CodeForbidden):
			t.Errorf("%s %s as an identity with no policy: %d %s, want 403 forbidden", r.method, r.path, code, body)
		case r.op == "" && (code == 401 || code == 403):
			t.Errorf("%s %s (no operation): %d %s", r.method, r.path, code, body)
		}
		if r.op == "" {
			continue
		}
		code, body = rowRequest(t, plainClient, ts.URL, r, "", tokElsewhere, nil)
		if want := 403; r.lists {
			var list api.KeyList
			if code != 200 || json.Unmarshal(body, &list) != nil || len(list.Keys) != 0 {
				t.Errorf("%s %s as an identity of other keys: %d %s, want 200 and no key", r.method, r.path, code, body)
			}
		} else if code != want {
			t.Errorf("%s %s as an identity of other keys: %d %s, want 403", r.method, r.path, code, body)
		}
	}
	// Nothing was done: the default key is still at version 1.
	k, err := ts.svc.DescribeKey(context.Background(), "default")
	if err != nil || k.Latest() != 1 {
		t.Fatalf("default key after the walk: %+v, %v", k, err)
	}
}

// TestRouteTableChecksBeforeHandler: the checks are the wrapper's, not the
// handlers'. Every handler is replaced by one that does no check at all;
// the identity with no policy still never reaches one, and the admin reaches
// every one.
func TestRouteTableChecksBeforeHandler(t *testing.T) {
	ts := startTestServer(t, noPolicyConfig())
	rows := ts.routes()
	var ran atomic.Int64
	for i := range rows {
		rows[i].handler = func(c *fiber.Ctx, _ *call) error {
			ran.Add(1)
			return c.SendStatus(299)
		}
	}
	base := serveRows(t, ts.Server, rows)
	for i := range rows {
		r := &rows[i]
		before := ran.Load()
		code, body := rowRequest(t, plainClient, base, r, "", tokNobody, nil)
		if r.op != "" && (code != 403 || ran.Load() != before) {
			t.Errorf("%s %s as an identity with no policy: %d %s; the handler ran: %v", r.method, r.path, code, body, ran.Load() != before)
		}
		if r.op != "" {
			if code, _ = rowRequest(t, plainClient, base, r, "", "", nil); code != 401 {
				t.Errorf("%s %s without a credential: %d, want 401", r.method, r.path, code)
			}
		}
		if code, body = rowRequest(t, plainClient, base, r, "", ts.Token, nil); code != 299 {
			t.Errorf("%s %s as the admin: %d %s, want the handler's 299", r.method, r.path, code, body)
		}
	}
}

// TestRouteTableTimeouts: every row's timeout is the deadline of its
// handler's context, and it fires. Each row gets a short timeout and a
// handler that waits on its context; the answer is 408 after that timeout,
// and GET /v1/api of the same rows advertises it.
func TestRouteTableTimeouts(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	const timeout = 150 * time.Millisecond
	rows := ts.routes()
	for i := range rows {
		if rows[i].path == api.RouteAPI {
			continue // it answers the question below
		}
		rows[i].timeout = timeout
		rows[i].handler = func(c *fiber.Ctx, _ *call) error {
			ctx := c.UserContext()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Second):
				return c.Status(200).SendString("not cut")
			}
		}
	}
	base := serveRows(t, ts.Server, rows)
	var desc api.APIDescription
	apiRow := &route{method: "GET", path: api.RouteAPI}
	if code, body := rowRequest(t, plainClient, base, apiRow, "", "", nil); code != 200 || json.Unmarshal(body, &desc) != nil {
		t.Fatalf("GET /v1/api: %d %s", code, body)
	}
	advertised := map[string]string{}
	for _, ar := range desc.Routes {
		advertised[ar.Method+" "+ar.Path] = ar.Timeout
	}
	for i := range rows {
		r := &rows[i]
		if r.path == api.RouteAPI {
			continue
		}
		if got := advertised[r.method+" "+r.path]; got != timeout.String() {
			t.Errorf("%s %s: /v1/api advertises timeout %q, the row has %s", r.method, r.path, got, timeout)
		}
		start := time.Now()
		code, body := rowRequest(t, plainClient, base, r, "", ts.Token, nil)
		took := time.Since(start)
		if code != 408 || codeOf(body) != api.CodeTimeout || took < timeout || took > timeout+3*time.Second {
			t.Errorf("%s %s with a %s timeout: %d %s after %s, want 408 timeout", r.method, r.path, timeout, code, body, took.Round(time.Millisecond))
		}
	}
}

// TestRouteTableDeadlines: under the default configuration each handler's
// context ends when its row says, which is what /v1/api advertises (5m0s
// for POST /speed/run, request_timeout elsewhere), and a stream's context
// has no deadline: its reads and writes have the idle timeout instead.
func TestRouteTableDeadlines(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	rows := ts.routes()
	type seen struct {
		left time.Duration
		ok   bool
	}
	got := make([]atomic.Pointer[seen], len(rows))
	for i := range rows {
		if rows[i].path == api.RouteAPI {
			continue
		}
		rows[i].handler = func(c *fiber.Ctx, _ *call) error {
			d, ok := c.UserContext().Deadline()
			got[i].Store(&seen{time.Until(d), ok})
			return c.SendStatus(299)
		}
	}
	base := serveRows(t, ts.Server, rows)
	var desc api.APIDescription
	code, body, _ := ts.do(t, "GET", api.RouteAPI, "", nil, "-")
	if code != 200 || json.Unmarshal(body, &desc) != nil {
		t.Fatalf("GET /v1/api: %d %s", code, body)
	}
	advertised := map[string]string{}
	for _, ar := range desc.Routes {
		advertised[ar.Method+" "+ar.Path] = ar.Timeout
	}
	if got := advertised["POST "+api.RouteSpeedRun]; got != "5m0s" {
		t.Errorf("POST /speed/run advertises %q, want 5m0s", got)
	}
	for i := range rows {
		r := &rows[i]
		if r.path == api.RouteAPI {
			continue
		}
		want, err := time.ParseDuration(advertised[r.method+" "+r.path])
		if err != nil {
			t.Errorf("%s %s: advertised timeout %q", r.method, r.path, advertised[r.method+" "+r.path])
			continue
		}
		if code, body := rowRequest(t, plainClient, base, r, "", ts.Token, nil); code != 299 {
			t.Fatalf("%s %s: %d %s", r.method, r.path, code, body)
		}
		s := got[i].Load()
		if s == nil || !s.ok || s.left > want || s.left < want-2*time.Second {
			t.Errorf("%s %s: the handler's deadline is %+v away, /v1/api advertises %s", r.method, r.path, s, want)
		}
		if !r.stream {
			continue
		}
		got[i].Store(nil)
		req, _ := http.NewRequest(r.method, base+rowPath(r, "default"), strings.NewReader("stream"))
		req.Header.Set("Content-Type", api.ContentTypeStream)
		req.Header.Set("Authorization", "Bearer "+ts.Token)
		resp, err := plainClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s := got[i].Load(); resp.StatusCode != 299 || s == nil || s.ok {
			t.Errorf("%s %s streamed: %d, deadline %+v; a stream has no total deadline", r.method, r.path, resp.StatusCode, s)
		}
	}
}

// TestRouteSpeedRunDeadline: the speed run's own handler honours its row's
// deadline: with a short timeout, a run of several seconds is cut and
// answered 408 at once.
func TestRouteSpeedRunDeadline(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	rows := ts.routes()
	var run *route
	for i := range rows {
		if rows[i].path == api.RouteSpeedRun {
			rows[i].timeout = 200 * time.Millisecond
			run = &rows[i]
		}
	}
	base := serveRows(t, ts.Server, rows)
	start := time.Now()
	cl := &http.Client{Timeout: 20 * time.Second}
	code, body := rowRequest(t, cl, base, run, "", ts.Token, []byte(`{"seconds":3,"ciphers":["aes-128-gcm"],"sizes":[16,1024]}`))
	took := time.Since(start)
	if code != 408 || codeOf(body) != api.CodeTimeout || took > 2*time.Second {
		t.Fatalf("a 6 s speed run under a 200ms timeout: %d %s after %s, want 408 timeout at once", code, body, took.Round(time.Millisecond))
	}
}

// TestRouteQueryParameters: every route refuses a query parameter it does
// not take, a value it does not list, and a parameter given twice, with 400
// invalid_parameter, before anything else (authentication included); the
// values it lists pass.
func TestRouteQueryParameters(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	for i := range ts.tab.rows {
		r := &ts.tab.rows[i]
		bad := []string{"?bogus=1", "?bogus", "?verify=full&format=json&bogus=1"}
		for _, q := range r.query {
			good := q.example
			if q.valid == nil {
				good = q.values[0]
				bad = append(bad, "?"+q.name+"="+strings.ToUpper(good))
			}
			bad = append(bad, "?"+q.name+"=nope", "?"+q.name, "?"+q.name+"=", "?"+q.name+"="+good+"&"+q.name+"="+good)
		}
		if r.path == api.RouteDecrypt {
			bad = append(bad, "?range=5", "?range=-5", "?range=9-5", "?range=+1-5", "?range=1-+5", "?range=0x1-", "?range=1-2-3", "?range=%201-2", "?range=99999999999999999999-")
		}
		for _, query := range bad {
			for _, tok := range []string{ts.Token, ""} {
				code, body := rowRequest(t, plainClient, ts.URL, r, query, tok, nil)
				if code != 400 || codeOf(body) != api.CodeInvalidParameter {
					t.Errorf("%s %s%s (token %v): %d %s, want 400 invalid_parameter", r.method, r.path, query, tok != "", code, body)
				}
				if bytes.Contains(body, []byte("bogus")) || bytes.Contains(body, []byte("nope")) {
					t.Errorf("%s %s%s: the error repeats the request: %s", r.method, r.path, query, body)
				}
			}
		}
		for _, q := range r.query {
			for _, v := range append(q.values, q.example) {
				if v == "" {
					continue
				}
				if code, body := rowRequest(t, plainClient, ts.URL, r, "?"+q.name+"="+v, ts.Token, nil); code == 400 && codeOf(body) == api.CodeInvalidParameter {
					t.Errorf("%s %s?%s=%s: %d %s; the row lists it", r.method, r.path, q.name, v, code, body)
				}
			}
		}
	}
}

// TestRouteQueryMessages: the 400 says which parameter is wrong and how:
// unknown, given twice, or a value it does not take.
func TestRouteQueryMessages(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	for _, tc := range []struct{ path, query, want string }{
		{"/v1/decrypt/default", "?bogus=1", "unknown query parameter; this route takes verify=full, range=A-B|A-"},
		{"/v1/decrypt/default", "?range=1-2&range=3-4", "query parameter range given twice; this route takes verify=full, range=A-B|A-"},
		{"/v1/decrypt/default", "?range=9-5", "query parameter range takes A-B|A-, for example range=1048576-2097151"},
		{"/v1/decrypt/default", "?verify=half", "query parameter verify takes full"},
		{"/v1/encrypt/default", "?verify=full", "this route takes no query parameters"},
	} {
		code, body, _ := ts.do(t, "POST", tc.path+tc.query, api.ContentTypeStream, strings.NewReader("x"), "")
		var e api.Error
		if err := json.Unmarshal(body, &e); err != nil || code != 400 || e.Code != api.CodeInvalidParameter || e.Message != tc.want {
			t.Errorf("%s%s: %d %s, want 400 invalid_parameter %q", tc.path, tc.query, code, body, tc.want)
		}
	}
}

// TestRouteVerifyMisspelled: a streamed decrypt with ?verify=ful is refused
// before a byte of plaintext is released, not streamed as if the parameter
// were absent.
func TestRouteVerifyMisspelled(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	plain := bytes.Repeat([]byte("secret plaintext "), 4096) // several chunks
	code, sealed, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, bytes.NewReader(plain), "")
	if code != 200 {
		t.Fatalf("encrypt: %d %s", code, sealed)
	}
	sealed[len(sealed)-20] ^= 1 // the last chunk fails; the first ones authenticate
	for _, q := range []string{"?verify=ful", "?verify=FULL", "?Verify=full", "?verify=full&verify=full"} {
		code, body, _ := ts.do(t, "POST", "/v1/decrypt/default"+q, api.ContentTypeStream, bytes.NewReader(sealed), "")
		if code != 400 || codeOf(body) != api.CodeInvalidParameter || bytes.Contains(body, []byte("secret")) {
			t.Errorf("streamed decrypt%s of a tampered stream: %d, %d bytes (%.40q), want 400 invalid_parameter and no plaintext", q, code, len(body), body)
		}
	}
	code, body, _ := ts.do(t, "POST", "/v1/decrypt/default?verify=full", api.ContentTypeStream, bytes.NewReader(sealed), "")
	if code != 400 || codeOf(body) != api.CodeDecryptFailed {
		t.Errorf("?verify=full of a tampered stream: %d %.60q, want 400 decryption_failed", code, body)
	}
}

// TestRouteBodyLimits: a JSON body announced over its row's limit is
// refused with 413 before the handler runs.
func TestRouteBodyLimits(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, MaxJSONBody: 1 << 10})
	rows := ts.routes()
	for i := range rows {
		rows[i].handler = func(c *fiber.Ctx, _ *call) error { return c.SendStatus(299) }
	}
	base := serveRows(t, ts.Server, rows)
	n := 0
	for i := range rows {
		r := &rows[i]
		if r.maxBody == 0 {
			continue
		}
		n++
		body := bytes.Repeat([]byte(" "), int(r.maxBody)+1)
		code, reply := rowRequest(t, plainClient, base, r, "", ts.Token, body)
		if code != 413 || codeOf(reply) != api.CodeTooLarge {
			t.Errorf("%s %s with %d bytes (limit %d): %d %s, want 413 too_large", r.method, r.path, len(body), r.maxBody, code, reply)
		}
		if code, reply := rowRequest(t, plainClient, base, r, "", ts.Token, body[1:]); code != 299 {
			t.Errorf("%s %s with %d bytes (limit %d): %d %s, want the handler's 299", r.method, r.path, len(body)-1, r.maxBody, code, reply)
		}
	}
	if n < 5 {
		t.Fatalf("%d routes with a body", n)
	}
	// The configured limit is the data routes'.
	in := fmt.Sprintf(`{"plaintext":%q}`, base64.StdEncoding.EncodeToString(make([]byte, 600)))
	if code, body, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeJSON, strings.NewReader(in), ""); code != 200 {
		t.Fatalf("encrypt within the limit: %d %s", code, body)
	}
	in = fmt.Sprintf(`{"plaintext":%q}`, base64.StdEncoding.EncodeToString(make([]byte, 800)))
	if code, body, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeJSON, strings.NewReader(in), ""); code != 413 {
		t.Fatalf("encrypt over the limit: %d %s", code, body)
	}
}

// TestRouteRateCost: a request takes its row's cost from its caller's
// bucket, and /v1/api says what each costs and what the limit is.
func TestRouteRateCost(t *testing.T) {
	// The buckets' clock stands still, so that no token comes back while
	// the rotations run, however long the machine takes over them.
	ts := startTestServer(t, Config{SkipBenchmark: true, RateLimit: 1, RateBurst: 10, now: newTestClock().Now})
	var desc api.APIDescription
	code, body, _ := ts.do(t, "GET", api.RouteAPI, "", nil, "-")
	if code != 200 || json.Unmarshal(body, &desc) != nil {
		t.Fatalf("GET /v1/api: %d %s", code, body)
	}
	if desc.RateLimit == nil || desc.RateLimit.PerSecond != 1 || desc.RateLimit.Burst != 10 {
		t.Fatalf("/v1/api rate_limit %+v, want 1/s, burst 10", desc.RateLimit)
	}
	cost := map[string]int{}
	for _, ar := range desc.Routes {
		cost[ar.Method+" "+ar.Path] = ar.RateCost
	}
	rotate := cost["POST "+api.RouteKeyRotate]
	if rotate < 2 || rotate > 5 {
		t.Fatalf("a rotation costs %d; this test wants 2 to 5 (of a burst of 10)", rotate)
	}
	n := 10 / rotate
	for i := range n {
		if code, body, _ := ts.do(t, "POST", "/v1/keys/default/rotate", "", nil, ""); code != 200 {
			t.Fatalf("rotation %d of %d: %d %s", i+1, n, code, body)
		}
	}
	code, body, hdr := ts.do(t, "POST", "/v1/keys/default/rotate", "", nil, "")
	left := 10 - n*rotate
	if code != 429 || codeOf(body) != api.CodeRateLimited || hdr.Get("Retry-After") != fmt.Sprint(rotate-left) {
		t.Fatalf("rotation %d: %d %s, Retry-After %q; want 429 and %d", n+1, code, body, hdr.Get("Retry-After"), rotate-left)
	}
	if cost["GET "+api.RouteKey] != 1 || cost["GET "+api.RouteHealthz] != 0 {
		t.Fatalf("costs: describe %d, healthz %d; want 1 and none", cost["GET "+api.RouteKey], cost["GET "+api.RouteHealthz])
	}
}

// TestRouteAllowed: what serve asks of the policies for each kind of row.
func TestRouteAllowed(t *testing.T) {
	pols, err := newPolicies([]PolicyConfig{
		{Name: "orders", Allow: []RuleConfig{{Ops: []string{"keys-read", "datakey"}, Keys: []string{"orders-*"}}}},
		{Name: "no-reads", Deny: []RuleConfig{{Ops: []string{"keys-read"}, Keys: []string{"*"}}}},
		{Name: "no-secret", Deny: []RuleConfig{{Ops: []string{"keys-read"}, Keys: []string{"orders-secret"}}}},
		{Name: "speed", Allow: []RuleConfig{{Ops: []string{"speed-run"}, Keys: []string{"*"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := func(names ...string) *identity {
		x := &identity{name: "x"}
		for _, n := range names {
			x.policies = append(x.policies, pols[n])
		}
		return x
	}
	describe := &route{path: api.RouteKey, op: OpKeysRead}
	list := &route{path: api.RouteKeys, op: OpKeysRead, lists: true}
	datakey := &route{path: api.RouteDataKey, op: OpDataKey, orOp: OpDataKeyPlaintext}
	run := &route{path: api.RouteSpeedRun, op: OpSpeedRun}
	for _, r := range []*route{describe, list, datakey, run} {
		r.prepare()
	}
	for _, tc := range []struct {
		r    *route
		id   *identity
		key  string
		want bool
	}{
		{describe, id("orders"), "orders-1", true},
		{describe, id("orders"), "billing", false},
		{describe, id("orders", "no-secret"), "orders-secret", false},
		{describe, id(), "orders-1", false},
		{describe, adminIdentity, "anything", true},
		{list, id("orders"), "", true},
		{list, id("orders", "no-secret"), "", true}, // it shows the others
		{list, id("orders", "no-reads"), "", false},
		{list, id("speed"), "", false},
		{list, id(), "", false},
		{datakey, id("orders"), "orders-1", true},
		{datakey, id("orders"), "billing", false},
		{run, id("speed"), "", true},
		{run, id("orders"), "", false},
		{run, adminIdentity, "", true},
	} {
		if got := tc.r.allowed(tc.id, tc.key); got != tc.want {
			t.Errorf("%s %q for policies %d: allowed %v, want %v", tc.r.path, tc.key, len(tc.id.policies), got, tc.want)
		}
	}
}

// TestRouteMounted: mounted in a host app, the table matches the paths
// under the mount path, the host keeps its own routes, and the limits of
// the rows apply.
func TestRouteMounted(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	host := fiber.New(fiber.Config{StreamRequestBody: true, DisableStartupMessage: true})
	host.Get("/", func(c *fiber.Ctx) error { return c.SendString("host") })
	host.Mount("/crypto", ts.App())
	send := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://x"+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", api.ContentTypeJSON)
		}
		req.Header.Set("Authorization", "Bearer "+ts.Token)
		resp, err := host.Test(req, 5000)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := send("GET", "/", ""); code != 200 || string(b) != "host" {
		t.Errorf("the host's route: %d %s", code, b)
	}
	if code, b := send("POST", "/crypto/v1/encrypt/default", `{"plaintext":"aGVsbG8="}`); code != 200 || !bytes.Contains(b, []byte(`"ciphertext"`)) {
		t.Errorf("encrypt under the mount path: %d %s", code, b)
	}
	if code, b := send("GET", "/crypto/v1/encrypt/default", ""); code != 405 || codeOf(b) != api.CodeMethodNotAllowed {
		t.Errorf("wrong method under the mount path: %d %s", code, b)
	}
	if code, b := send("GET", "/crypto/v1/nothing", ""); code != 404 || codeOf(b) != api.CodeRouteNotFound {
		t.Errorf("unknown path under the mount path: %d %s", code, b)
	}
	big := `{"items":[` + strings.Repeat(`{},`, 2000) + `{}]}`
	if code, b := send("POST", "/crypto/v1/encrypt/default", big); code != 413 || codeOf(b) != api.CodeTooLarge {
		t.Errorf("a batch over the row's items under the mount path: %d %s", code, b)
	}
}
