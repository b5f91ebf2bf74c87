package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/selftest"
	"github.com/cipherd/cipherd/server/speedview"
)

// promSample is one line of the exposition.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// promFamily is a metric family with its HELP, TYPE and samples.
type promFamily struct {
	name, help, typ string
	samples         []promSample
}

var (
	promNameRE   = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	promSampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	promLabelRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseProm parses the Prometheus text format line by line and checks its
// rules: HELP and TYPE once per family and before its samples, samples
// grouped under their family, valid names and labels, no duplicate series,
// counters ending in _total and never negative, histograms cumulative with
// +Inf equal to _count.
func parseProm(t *testing.T, text string) map[string]*promFamily {
	t.Helper()
	fams := map[string]*promFamily{}
	var cur *promFamily
	seen := map[string]bool{}
	if !strings.HasSuffix(text, "\n") {
		t.Errorf("exposition does not end with a newline")
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Errorf("line %d %q: %s", i+1, line, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.HasPrefix(line, "# HELP "), strings.HasPrefix(line, "# TYPE "):
			f := strings.SplitN(line[len("# HELP "):], " ", 2)
			if len(f) != 2 || !promNameRE.MatchString(f[0]) {
				fail("malformed")
				continue
			}
			fam := fams[f[0]]
			if fam == nil {
				fam = &promFamily{name: f[0]}
				fams[f[0]] = fam
			} else if len(fam.samples) > 0 {
				fail("HELP or TYPE after the family's samples")
			}
			cur = fam
			if line[2] == 'H' {
				if fam.help != "" {
					fail("second HELP")
				}
				fam.help = f[1]
			} else {
				if fam.typ != "" {
					fail("second TYPE")
				}
				if !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, f[1]) {
					fail("unknown type")
				}
				fam.typ = f[1]
			}
		case strings.HasPrefix(line, "#"), line == "":
			fail("unexpected comment or blank line")
		default:
			m := promSampleRE.FindStringSubmatch(line)
			if m == nil {
				fail("not a sample")
				continue
			}
			s := promSample{name: m[1], labels: parsePromLabels(t, m[2])}
			v, err := strconv.ParseFloat(m[3], 64)
			if err != nil {
				fail("bad value")
			}
			s.value = v
			base := s.name
			if cur != nil && cur.typ == "histogram" {
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					base = strings.TrimSuffix(base, suf)
					if base != s.name {
						break
					}
				}
			}
			if cur == nil || cur.name != base || cur.typ == "" {
				fail("sample outside its family (no TYPE line before it)")
				continue
			}
			key := s.name + "{" + m[2] + "}"
			if seen[key] {
				fail("duplicate series")
			}
			seen[key] = true
			if cur.typ == "counter" && (!strings.HasSuffix(s.name, "_total") || v < 0 || math.IsNaN(v)) {
				fail("counter not named _total or negative")
			}
			cur.samples = append(cur.samples, s)
		}
	}
	for _, f := range fams {
		if f.help == "" || f.typ == "" {
			t.Errorf("family %s lacks HELP or TYPE", f.name)
		}
		if f.typ == "histogram" {
			checkHistogram(t, f)
		}
	}
	return fams
}

func parsePromLabels(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for s != "" {
		eq := strings.Index(s, `="`)
		if eq < 0 || !promLabelRE.MatchString(s[:eq]) {
			t.Errorf("bad labels %q", s)
			return out
		}
		name := s[:eq]
		s = s[eq+2:]
		var v strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					v.WriteByte('\n')
				case '\\', '"':
					v.WriteByte(s[i])
				default:
					t.Errorf("bad escape in %q", s)
				}
				continue
			}
			v.WriteByte(s[i])
		}
		if i == len(s) {
			t.Errorf("unterminated label value")
			return out
		}
		if _, dup := out[name]; dup {
			t.Errorf("label %s twice", name)
		}
		out[name] = v.String()
		s = s[i+1:]
		if strings.HasPrefix(s, ",") {
			s = s[1:]
		} else if s != "" {
			t.Errorf("junk after a label: %q", s)
			return out
		}
	}
	return out
}

func labelKey(labels map[string]string, skip string) string {
	var parts []string
	for k, v := range labels {
		if k != skip {
			parts = append(parts, k+"="+v)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// checkHistogram checks each series: buckets in increasing le, cumulative,
// +Inf last and equal to _count, a _sum.
func checkHistogram(t *testing.T, f *promFamily) {
	t.Helper()
	type series struct {
		les, counts []float64
		count, sum  float64
		hasCount    bool
		hasSum      bool
	}
	all := map[string]*series{}
	get := func(k string) *series {
		if all[k] == nil {
			all[k] = &series{}
		}
		return all[k]
	}
	for _, s := range f.samples {
		switch s.name {
		case f.name + "_bucket":
			le, err := strconv.ParseFloat(s.labels["le"], 64)
			if err != nil {
				t.Errorf("%s: bad le %q", f.name, s.labels["le"])
			}
			sr := get(labelKey(s.labels, "le"))
			sr.les, sr.counts = append(sr.les, le), append(sr.counts, s.value)
		case f.name + "_count":
			sr := get(labelKey(s.labels, ""))
			sr.count, sr.hasCount = s.value, true
		case f.name + "_sum":
			sr := get(labelKey(s.labels, ""))
			sr.sum, sr.hasSum = s.value, true
		default:
			t.Errorf("%s: unexpected sample %s", f.name, s.name)
		}
	}
	for k, sr := range all {
		if len(sr.les) == 0 || !math.IsInf(sr.les[len(sr.les)-1], 1) || !sr.hasCount || !sr.hasSum {
			t.Errorf("%s{%s}: incomplete (buckets %v, count %v, sum %v)", f.name, k, sr.les, sr.hasCount, sr.hasSum)
			continue
		}
		for i := 1; i < len(sr.les); i++ {
			if sr.les[i] <= sr.les[i-1] || sr.counts[i] < sr.counts[i-1] {
				t.Errorf("%s{%s}: buckets not increasing and cumulative: %v %v", f.name, k, sr.les, sr.counts)
				break
			}
		}
		if sr.counts[len(sr.counts)-1] != sr.count {
			t.Errorf("%s{%s}: +Inf bucket %v != count %v", f.name, k, sr.counts[len(sr.counts)-1], sr.count)
		}
		if sr.sum < 0 {
			t.Errorf("%s{%s}: negative sum", f.name, k)
		}
	}
}

// value returns the sample of name with exactly labels (nil: none), or -1.
func (f *promFamily) value(name string, labels map[string]string) float64 {
	if f == nil {
		return -1
	}
	for _, s := range f.samples {
		if s.name == name && labelKey(s.labels, "") == labelKey(labels, "") {
			return s.value
		}
	}
	return -1
}

func (ts *testServer) scrape(t *testing.T) (map[string]*promFamily, string) {
	t.Helper()
	resp, err := http.Get(ts.URL + api.RouteMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	return parseProm(t, string(b)), string(b)
}

// metricsKey's name must never appear in a label.
const metricsKey = "acme-payroll-7f3a"

func TestMetricsExposition(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	if code := ts.postJSON(t, "/v1/keys/"+metricsKey, struct{}{}, nil); code != 201 {
		t.Fatalf("create key: %d", code)
	}
	enc := func() api.EncryptResult {
		var r api.EncryptResult
		if code := ts.postJSON(t, "/v1/encrypt/"+metricsKey, api.EncryptRequest{EncryptItem: api.EncryptItem{Plaintext: []byte("pay me"), Context: []byte("c")}}, &r); code != 200 {
			t.Fatalf("encrypt: %d", code)
		}
		return r
	}
	r := enc()
	enc()
	enc()
	if code := ts.postJSON(t, "/v1/decrypt/"+metricsKey, api.DecryptRequest{DecryptItem: api.DecryptItem{Ciphertext: r.Ciphertext, Context: []byte("c")}}, nil); code != 200 {
		t.Fatalf("decrypt: %d", code)
	}
	if code := ts.postJSON(t, "/v1/decrypt/"+metricsKey, api.DecryptRequest{DecryptItem: api.DecryptItem{Ciphertext: r.Ciphertext, Context: []byte("wrong")}}, nil); code != 400 {
		t.Fatalf("decrypt with the wrong context: %d", code)
	}
	for _, tok := range []string{"nope", "nope2", "-"} {
		if code, _, _ := ts.do(t, "POST", "/v1/encrypt/"+metricsKey, "application/json", strings.NewReader(`{"plaintext":""}`), tok); code != 401 {
			t.Fatalf("token %q: %d", tok, code)
		}
	}
	pt := bytes.Repeat([]byte("s"), 100_000)
	code, ct, _ := ts.do(t, "POST", "/v1/encrypt/"+metricsKey, api.ContentTypeStream, bytes.NewReader(pt), "")
	if code != 200 {
		t.Fatalf("stream encrypt: %d", code)
	}
	if code, got, _ := ts.do(t, "POST", "/v1/decrypt/"+metricsKey, api.ContentTypeStream, bytes.NewReader(ct), ""); code != 200 || !bytes.Equal(got, pt) {
		t.Fatalf("stream decrypt: %d", code)
	}
	if code, _, _ := ts.do(t, "GET", "/v1/nope/"+metricsKey, "", nil, ""); code != 404 {
		t.Fatalf("unmatched: %d", code)
	}
	// A speed table, as the start-up run or an admin would store it.
	ts.speed.table.Store(&speedview.Table{Source: "test", Result: &selftest.SpeedResult{Rows: []selftest.SpeedRow{
		{Name: "AES-128-GCM", Impl: "generic", Cells: []selftest.SpeedCell{{Size: 16, Ops: 1000, Elapsed: time.Millisecond}}},
	}}})

	// Streams end when the response is written, just after the client has
	// read it: wait for the gauge.
	var fams map[string]*promFamily
	var text string
	for deadline := time.Now().Add(5 * time.Second); ; {
		fams, text = ts.scrape(t)
		if fams["cipherd_active_streams"].value("cipherd_active_streams", nil) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := fams["cipherd_active_streams"].value("cipherd_active_streams", nil); v != 0 {
		t.Errorf("active streams %v after every stream ended", v)
	}
	req := func(route, method, code string) float64 {
		return fams["cipherd_http_requests_total"].value("cipherd_http_requests_total", map[string]string{"route": route, "method": method, "code": code})
	}
	for _, c := range []struct {
		route, method, code string
		want                float64
	}{
		{api.RouteEncrypt, "POST", "200", 4},
		{api.RouteEncrypt, "POST", "401", 3},
		{api.RouteDecrypt, "POST", "200", 2},
		{api.RouteDecrypt, "POST", "400", 1},
		{api.RouteKey, "POST", "201", 1},
		{routeUnmatched, "GET", "404", 1},
	} {
		if got := req(c.route, c.method, c.code); got != c.want {
			t.Errorf("requests{route=%s,method=%s,code=%s} = %v, want %v", c.route, c.method, c.code, got, c.want)
		}
	}
	hist := fams["cipherd_http_request_duration_seconds"]
	if v := hist.value("cipherd_http_request_duration_seconds_count", map[string]string{"route": api.RouteEncrypt, "method": "POST", "code": "200"}); v != 4 {
		t.Errorf("histogram count %v, want 4", v)
	}
	if v := hist.value("cipherd_http_request_duration_seconds_bucket", map[string]string{"route": api.RouteEncrypt, "method": "POST", "code": "200", "le": "2.5e-05"}); v < 0 {
		t.Errorf("no 25µs bucket")
	}
	for name, want := range map[string]float64{"cipherd_auth_failures_total": 3, "cipherd_decrypt_failures_total": 1} {
		if v := fams[name].value(name, nil); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	aead := ts.sel.AEADName
	if v := fams["cipherd_bytes_total"].value("cipherd_bytes_total", map[string]string{"op": "encrypt", "aead": aead}); v < 3*6+100_000 {
		t.Errorf("cipherd_bytes_total{encrypt,%s} = %v", aead, v)
	}
	if v := fams["cipherd_speed_bytes_per_second"].value("cipherd_speed_bytes_per_second", map[string]string{"source": "table", "op": "encrypt", "cipher": "aes-128-gcm", "impl": "generic", "size": "16"}); v != 16e6 {
		t.Errorf("speed gauge %v, want 1.6e7", v)
	}
	if v := fams["cipherd_aead_info"].value("cipherd_aead_info", map[string]string{"aead": aead}); v != 1 {
		t.Errorf("cipherd_aead_info{aead=%s} = %v", aead, v)
	}
	for _, name := range []string{"cipherd_build_info", "cipherd_uptime_seconds", "process_start_time_seconds", "cipherd_ready", "go_goroutines", "go_gc_heap_live_bytes"} {
		if f := fams[name]; f == nil || len(f.samples) != 1 || f.samples[0].value <= 0 {
			t.Errorf("%s missing or not positive", name)
		}
	}
	if strings.Contains(text, metricsKey) {
		t.Errorf("a key name appears in /metrics")
	}
	for _, f := range fams {
		for _, s := range f.samples {
			for k, v := range s.labels {
				if strings.Contains(v, metricsKey) || strings.Contains(v, "nope") {
					t.Errorf("%s: label %s=%q carries request data", s.name, k, v)
				}
			}
		}
	}

	// Counters only grow; the requests counted again.
	enc()
	enc()
	fams2, _ := ts.scrape(t)
	for _, name := range []string{"cipherd_http_requests_total", "cipherd_bytes_total", "cipherd_auth_failures_total"} {
		for _, s := range fams[name].samples {
			if v := fams2[name].value(s.name, s.labels); v < s.value {
				t.Errorf("%s%v went from %v to %v", s.name, s.labels, s.value, v)
			}
		}
	}
	if v := fams2["cipherd_http_requests_total"].value("cipherd_http_requests_total", map[string]string{"route": api.RouteEncrypt, "method": "POST", "code": "200"}); v != 6 {
		t.Errorf("after two more encryptions: %v, want 6", v)
	}
	if v := fams2["cipherd_http_requests_total"].value("cipherd_http_requests_total", map[string]string{"route": api.RouteMetrics, "method": "GET", "code": "200"}); v < 1 {
		t.Errorf("scrapes not counted: %v", v)
	}
}

// TestAccessLog: one access line per request with who, what route, the
// outcome, sizes and time; no line of any kind with the plaintext, the
// context, the token or query data.
func TestAccessLog(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	const (
		plain   = "PLAINTEXT-d41d8cd98f00"
		context = "CONTEXT-9e107d9d372b"
		queryV  = "QUERY-e4d909c290d0"
	)
	secrets := []string{plain, context, queryV, ts.Token, "nope-token",
		base64.StdEncoding.EncodeToString([]byte(plain)), base64.StdEncoding.EncodeToString([]byte(context))}

	ts.Logs.TakeAll() // whatever the harness sent to see the server up

	type sent struct {
		method, route, id, identity string
		status, bytesIn, bytesOut   int
		stream                      bool
	}
	var reqs []sent
	send := func(method, path, route, ctype string, body []byte, token string, hdr map[string]string) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequest(method, ts.URL+path, rd)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		identity := ""
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
			if token == ts.Token {
				identity = "admin"
			}
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		stream := resp.Header.Get("Content-Type") == api.ContentTypeStream
		out := len(b)
		if stream {
			out = -1
		}
		reqs = append(reqs, sent{method, route, resp.Header.Get(api.HeaderRequestID), identity, resp.StatusCode, len(body), out, stream})
		return b
	}
	jsonBody := []byte(fmt.Sprintf(`{"plaintext":%q,"context":%q}`, base64.StdEncoding.EncodeToString([]byte(plain)), base64.StdEncoding.EncodeToString([]byte(context))))
	send("POST", "/v1/encrypt/default", api.RouteEncrypt, api.ContentTypeJSON, jsonBody, ts.Token, nil)
	send("POST", "/v1/encrypt/default", api.RouteEncrypt, api.ContentTypeJSON, jsonBody, "nope-token", nil)
	ct := send("POST", "/v1/encrypt/default", api.RouteEncrypt, api.ContentTypeStream, bytes.Repeat([]byte(plain), 2000), ts.Token,
		map[string]string{api.HeaderContext: base64.StdEncoding.EncodeToString([]byte(context))})
	send("POST", "/v1/decrypt/default", api.RouteDecrypt, api.ContentTypeStream, ct, ts.Token,
		map[string]string{api.HeaderContext: base64.StdEncoding.EncodeToString([]byte(context))})
	send("POST", "/v1/decrypt/default?verify=full", api.RouteDecrypt, api.ContentTypeStream, ct, ts.Token,
		map[string]string{api.HeaderContext: base64.StdEncoding.EncodeToString([]byte("wrong " + context))})
	send("GET", "/speed?format=json&q="+queryV, api.RouteSpeed, "", nil, "", nil)
	send("GET", "/healthz", api.RouteHealthz, "", nil, "", nil)
	send("GET", "/v1/keys/default", api.RouteKey, "", nil, ts.Token, nil)
	send("DELETE", "/v1/no/such/"+queryV, routeUnmatched, "", nil, "", nil)

	// One line per request: "access", or "audit" with the access fields when
	// the request did one cryptographic operation (then at the audit's level).
	var access []observer.LoggedEntry
	for _, e := range ts.Logs.All() {
		if _, ok := e.ContextMap()["route"]; ok && (e.Message == "access" || e.Message == "audit") {
			access = append(access, e)
		}
	}
	if len(access) != len(reqs) {
		for _, e := range access {
			t.Logf("%s %v", e.Message, e.ContextMap())
		}
		t.Fatalf("%d access lines for %d requests", len(access), len(reqs))
	}
	byID := map[string]map[string]any{}
	for _, e := range access {
		m := e.ContextMap()
		byID[fmt.Sprint(m["request_id"])] = m
		_, audited := m["op"]
		if audited != (e.Message == "audit") {
			t.Errorf("%s line with op %v", e.Message, m["op"])
		}
		wantLevel := zapcore.InfoLevel
		if audited && m["outcome"] != "ok" {
			wantLevel = zapcore.WarnLevel
		}
		if e.Level != wantLevel {
			t.Errorf("%s line %v at %v, want %v", e.Message, m, e.Level, wantLevel)
		}
	}
	for _, r := range reqs {
		m := byID[r.id]
		if m == nil {
			t.Errorf("%s %s: no access line with request_id %q", r.method, r.route, r.id)
			continue
		}
		want := map[string]any{"identity": r.identity, "method": r.method, "route": r.route, "status": int64(r.status), "remote_ip": "127.0.0.1",
			"bytes_in": int64(r.bytesIn), "bytes_out": int64(r.bytesOut)}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("%s %s: %s = %#v, want %#v", r.method, r.route, k, m[k], v)
			}
		}
		if lat, ok := m["latency_us"].(int64); !ok || lat < 0 {
			t.Errorf("%s %s: latency_us %#v", r.method, r.route, m["latency_us"])
		}
		if st, _ := m["stream"].(bool); st != r.stream {
			t.Errorf("%s %s: stream = %v, want %v", r.method, r.route, st, r.stream)
		}
		_, audited := m["op"]
		if wantAudit := !r.stream && (r.route == api.RouteEncrypt && r.status == 200 || r.route == api.RouteDecrypt && r.status != 200); audited != wantAudit {
			t.Errorf("%s %s (%d): audit fields %v, want %v: %v", r.method, r.route, r.status, audited, wantAudit, m)
		}
		if audited && (m["key"] != "default" || m["op"] == "") {
			t.Errorf("%s %s: audit fields without the key or op: %v", r.method, r.route, m)
		}
		if !audited && r.route != routeUnmatched && strings.Contains(fmt.Sprint(m), "default") {
			t.Errorf("%s %s: the key name is in the access line: %v", r.method, r.route, m)
		}
	}
	// Streams finish after their access line; give the audit lines a moment.
	time.Sleep(50 * time.Millisecond)
	for _, e := range ts.Logs.All() {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("log line %q contains %q", line, s)
			}
		}
	}
}

// benchApp is the app of buildApp around one row whose handler answers a
// 64-byte body; without observe, a bare fiber app with that handler.
func benchApp(s *Server, observe bool) fasthttp.RequestHandler {
	body := bytes.Repeat([]byte{'x'}, 64)
	if observe {
		return s.buildApp([]route{{method: "POST", path: api.RouteEncrypt, handler: func(c *fiber.Ctx, _ *call) error { return c.Send(body) }}}).Handler()
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ErrorHandler: s.errorHandler})
	app.Post(api.RouteEncrypt, func(c *fiber.Ctx) error { return c.Send(body) })
	return app.Handler()
}

// BenchmarkObserve measures the middleware's cost per request (run the
// three and subtract "none"): counting only, and counting with the access
// line encoded as JSON.
func BenchmarkObserve(b *testing.B) {
	// As zap's production configuration builds it (without sampling).
	jsonLog := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel), zap.AddCaller())
	for _, bc := range []struct {
		name    string
		observe bool
		log     *zap.Logger
	}{
		{"none", false, zap.NewNop()},
		{"metrics", true, zap.NewNop()},
		{"metrics+access-log", true, jsonLog},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := &Server{cfg: Config{}.Defaults(), log: bc.log, met: newMetrics(), started: time.Now()}
			h := benchApp(s, bc.observe)
			var req fasthttp.Request
			req.Header.SetMethod("POST")
			req.SetRequestURI("/v1/encrypt/default")
			req.Header.SetContentType(api.ContentTypeJSON)
			req.SetBody(bytes.Repeat([]byte{'p'}, 64))
			var ctx fasthttp.RequestCtx
			ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}, nil)
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				h(&ctx)
			}
			if ctx.Response.StatusCode() != 200 {
				b.Fatalf("status %d", ctx.Response.StatusCode())
			}
		})
	}
}

// BenchmarkObserveParallel is BenchmarkObserve on every core at once, where
// shared counters would contend.
func BenchmarkObserveParallel(b *testing.B) {
	for _, observe := range []bool{false, true} {
		b.Run(fmt.Sprintf("observe=%v", observe), func(b *testing.B) {
			s := &Server{cfg: Config{}.Defaults(), log: zap.NewNop(), met: newMetrics(), started: time.Now()}
			h := benchApp(s, observe)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var req fasthttp.Request
				req.Header.SetMethod("POST")
				req.SetRequestURI("/v1/encrypt/default")
				req.SetBody(bytes.Repeat([]byte{'p'}, 64))
				var ctx fasthttp.RequestCtx
				ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242}, nil)
				for pb.Next() {
					ctx.Response.Reset()
					h(&ctx)
				}
			})
		})
	}
}

// A handler's panic still counts and logs as a 500, and answers as an
// internal error.
func TestAccessLogPanic(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	s := &Server{cfg: Config{}.Defaults(), log: zap.New(core), met: newMetrics(), started: time.Now()}
	app := s.buildApp([]route{{method: "GET", path: "/boom/:key", handler: func(*fiber.Ctx, *call) error { panic("kaboom") }}})
	resp, err := app.Test(httptest.NewRequest("GET", "/boom/secret-key", nil))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var e api.Error
	if err := json.Unmarshal(body, &e); err != nil || e.Code != api.CodeInternal || e.RequestID == "" || e.RequestID != resp.Header.Get(api.HeaderRequestID) || strings.Contains(string(body), "kaboom") {
		t.Errorf("response %s (%v): want an internal error with the request's ID and not the panic's value", body, err)
	}
	access := logs.FilterMessage("access").All()
	if len(access) != 1 {
		t.Fatalf("%d access lines", len(access))
	}
	m := access[0].ContextMap()
	if m["status"] != int64(500) || m["panic"] != true || m["route"] != "/boom/:key" {
		t.Errorf("access line %v", m)
	}
	var w expo
	s.writeMetrics(&w)
	if !strings.Contains(w.b.String(), `cipherd_http_requests_total{route="/boom/:key",method="GET",code="500"} 1`+"\n") {
		t.Errorf("panic not counted:\n%s", w.b.String())
	}
}

// TestAccessConnectionReuse: a request whose body is left partly unread on
// the connection ends the connection; a handled one keeps it.
func TestAccessConnectionReuse(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	big := fmt.Sprintf(`{"plaintext":%q}`, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("p"), 32<<10)))
	for _, c := range []struct {
		name, token, method, path, ctype, body string
		status                                 int
		close                                  bool
	}{
		{"large JSON handled", ts.Token, "POST", "/v1/encrypt/default", api.ContentTypeJSON, big, 200, false},
		{"large JSON refused", "wrong", "POST", "/v1/encrypt/default", api.ContentTypeJSON, big, 401, true},
		{"large body on a route without one", ts.Token, "DELETE", "/v1/keys/default", api.ContentTypeJSON, big, 413, true},
		{"small body refused", "wrong", "POST", "/v1/encrypt/default", api.ContentTypeJSON, `{"plaintext":""}`, 401, false},
	} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.ctype)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Close != c.close {
			t.Errorf("%s: status %d, close %v; want %d, %v", c.name, resp.StatusCode, resp.Close, c.status, c.close)
		}
	}
}

// TestAuditLines: a request with one cryptographic operation logs one line
// carrying both the access and the audit fields; a batch gets one audit line
// that sums up its items, next to the request's access line; a failed
// operation is logged at warn with its error code.
func TestAuditLines(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	ts.Logs.TakeAll()
	byRequest := func(id string) (lines []observer.LoggedEntry) {
		for _, e := range ts.Logs.All() {
			if e.ContextMap()["request_id"] == id {
				lines = append(lines, e)
			}
		}
		return lines
	}
	post := func(body string) string {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/encrypt/default", strings.NewReader(body))
		req.Header.Set("Content-Type", api.ContentTypeJSON)
		req.Header.Set("Authorization", "Bearer "+ts.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get(api.HeaderRequestID)
	}

	single := byRequest(post(`{"plaintext":"aGVsbG8="}`))
	if len(single) != 1 || single[0].Message != "audit" {
		t.Fatalf("single encrypt: %d lines %v, want one audit line", len(single), single)
	}
	m := single[0].ContextMap()
	for k, want := range map[string]any{"op": "encrypt", "key": "default", "key_version": uint32(1), "bytes": int64(5), "outcome": "ok", "route": api.RouteEncrypt, "status": int64(200), "identity": "admin"} {
		if m[k] != want {
			t.Errorf("single encrypt: %s = %#v, want %#v", k, m[k], want)
		}
	}

	// A batch of three: two encryptions and one item refused before any
	// cryptography (no plaintext). The batch gets one audit line, beside its
	// access line: how many items, how many failed and the first failure's
	// code, at warn since one failed.
	batch := byRequest(post(`{"items":[{"plaintext":"YQ=="},{"context":"Yg=="},{"plaintext":"Yw=="}]}`))
	var audits, access int
	for _, e := range batch {
		m := e.ContextMap()
		switch e.Message {
		case "audit":
			audits++
			if _, ok := m["route"]; ok {
				t.Errorf("batch audit line carries access fields: %v", m)
			}
			for k, want := range map[string]any{"op": "encrypt", "key": "default", "items": int64(3), "failed": int64(1), "bytes": int64(2), "outcome": "bad_request", "identity": "admin"} {
				if m[k] != want {
					t.Errorf("batch audit line: %s = %#v, want %#v", k, m[k], want)
				}
			}
			if v, _ := m["key_versions"].([]any); len(v) != 1 || v[0] != uint32(1) {
				t.Errorf("batch audit line: key_versions %#v, want [1]", m["key_versions"])
			}
			if e.Level != zapcore.WarnLevel {
				t.Errorf("batch audit line at %v, want warn", e.Level)
			}
		case "access":
			access++
			if _, ok := m["op"]; ok {
				t.Errorf("batch access line carries audit fields: %v", m)
			}
		}
	}
	if audits != 1 || access != 1 {
		t.Errorf("batch of 3: %d audit lines and %d access lines, want 1 and 1", audits, access)
	}

	// A failed operation: the one line is at warn, with the error's code.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/decrypt/default", strings.NewReader(`{"ciphertext":"zQEQB2RlZmF1bHQBAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=="}`))
	req.Header.Set("Content-Type", api.ContentTypeJSON)
	req.Header.Set("Authorization", "Bearer "+ts.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	failed := byRequest(resp.Header.Get(api.HeaderRequestID))
	if len(failed) != 1 || failed[0].Message != "audit" || failed[0].Level != zapcore.WarnLevel {
		t.Fatalf("failed decrypt (%d): lines %v, want one audit line at warn", resp.StatusCode, failed)
	}
	if m := failed[0].ContextMap(); m["outcome"] == "ok" || m["op"] != "decrypt" || m["status"] != int64(resp.StatusCode) {
		t.Errorf("failed decrypt line: %v", m)
	}
}

// The front middleware echoes a caller's plain X-Request-Id and makes one
// up, 24 hex digits and new each time, for anything else.
func TestRequestID(t *testing.T) {
	s := &Server{cfg: Config{}.Defaults(), log: zap.NewNop(), met: newMetrics(), started: time.Now()}
	app := s.buildApp([]route{{method: "GET", path: "/id", handler: func(c *fiber.Ctx, _ *call) error { return c.SendString(requestID(c)) }}})
	get := func(sent string) (header, seen string) {
		t.Helper()
		req := httptest.NewRequest("GET", "/id", nil)
		if sent != "" {
			req.Header.Set(api.HeaderRequestID, sent)
		}
		resp, err := app.Test(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get(api.HeaderRequestID), string(b)
	}
	for _, id := range []string{"abc", "A-z_0.9", strings.Repeat("x", 64)} {
		if h, seen := get(id); h != id || seen != id {
			t.Errorf("sent %q: echoed %q, handler saw %q", id, h, seen)
		}
	}
	generated := regexp.MustCompile(`^[0-9a-f]{24}$`)
	ids := map[string]bool{}
	for _, id := range []string{"", "has space", "semi;colon", strings.Repeat("x", 65), "ü"} {
		h, seen := get(id)
		if !generated.MatchString(h) || seen != h || ids[h] {
			t.Errorf("sent %q: got %q (handler saw %q), want a new 24-hex-digit ID", id, h, seen)
		}
		ids[h] = true
	}
}

// A JSON request's scratch space holds its body and decoded data; it is
// wiped before the next request may take it.
func TestScratchWiped(t *testing.T) {
	s := &Server{cfg: Config{}.Defaults(), log: zap.NewNop(), met: newMetrics(), started: time.Now()}
	var sc *reqScratch
	var data []byte
	app := s.buildApp([]route{{method: "POST", path: "/item", maxBody: 64 << 10, handler: func(c *fiber.Ctx, q *call) error {
		b, err := readJSONBody(c, q, false)
		if err != nil {
			return err
		}
		req, derr := decodeDataRequest(b, "plaintext", dataScratch(q.st, b), 1)
		if derr != nil {
			return derr
		}
		sc, data = q.st.scratchSpace(), req.single.data
		return c.SendStatus(204)
	}}})
	secret := bytes.Repeat([]byte("secret!"), 20)
	req := httptest.NewRequest("POST", "/item", strings.NewReader(`{"plaintext":"`+base64.StdEncoding.EncodeToString(secret)+`"}`))
	req.Header.Set("Content-Type", api.ContentTypeJSON)
	resp, err := app.Test(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || sc == nil {
		t.Fatalf("status %d, scratch %p", resp.StatusCode, sc)
	}
	if &data[0] != &sc.data[0] {
		t.Fatal("the data was not decoded into the scratch space")
	}
	if !bytes.Equal(sc.body[:], make([]byte, len(sc.body))) || !bytes.Equal(sc.data[:], make([]byte, len(sc.data))) || sc.bodyUsed != 0 || sc.dataUsed != 0 {
		t.Errorf("scratch space not wiped after the request: used %d and %d", sc.bodyUsed, sc.dataUsed)
	}
}
