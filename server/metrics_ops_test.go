package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// scrapeWith reads and parses url's /metrics with cl.
func scrapeWith(t *testing.T, cl *http.Client, url string) map[string]*promFamily {
	t.Helper()
	resp, err := cl.Get(url + api.RouteMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return parseProm(t, string(b))
}

// metric returns the value of the sample name with labels (name=value
// pairs) in fams, failing the test when the family is missing.
func metric(t *testing.T, fams map[string]*promFamily, family, name string, labels ...string) float64 {
	t.Helper()
	f := fams[family]
	if f == nil {
		t.Fatalf("no metric family %s", family)
	}
	var want map[string]string
	if len(labels) > 0 {
		want = map[string]string{}
		for i := 0; i+1 < len(labels); i += 2 {
			want[labels[i]] = labels[i+1]
		}
	}
	return f.value(name, want)
}

// TestOpsMetrics: a throttled client shows in cipherd_rate_limited_total
// under its identity, every authenticated request in
// cipherd_requests_by_identity_total, reloads by result, audit writes in
// their histogram, and the file keystore as up and in sync.
func TestOpsMetrics(t *testing.T) {
	const tok = "ops-metrics-token-0123456789"
	cfg := reloadIdentityConfig("app-a", tok)
	cfg.SkipBenchmark = true
	cfg.RateLimit, cfg.RateBurst = 0.001, 2 // two requests, then refused for a long time
	ts := startTestServer(t, cfg)
	codes := []int{encryptAs(t, ts.URL, tok, "default"), encryptAs(t, ts.URL, tok, "default"), encryptAs(t, ts.URL, tok, "default")}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Fatalf("three encrypts in a burst of two: %v", codes)
	}
	if code := encryptAs(t, ts.URL, "unknown-token", "default"); code != 401 {
		t.Fatalf("unknown token: %d", code)
	}

	// Reloads: one applied, one refused by the server, one that failed
	// before it (cipherd serve counts those).
	next := cfg
	if _, err := ts.Reload(next); err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.Identities = append(bad.Identities, IdentityConfig{Name: "x", TokenSHA256: "00", Policies: []string{"enc"}})
	if _, err := ts.Reload(bad); err == nil {
		t.Fatal("a reload with a bad hash applied")
	}
	ts.CountReloadFailure()

	fams := scrapeWith(t, http.DefaultClient, ts.URL)
	for _, c := range []struct {
		family, name string
		labels       []string
		want         float64
	}{
		{"cipherd_rate_limited_total", "cipherd_rate_limited_total", []string{"identity", "app-a"}, 1},
		{"cipherd_requests_by_identity_total", "cipherd_requests_by_identity_total", []string{"identity", "app-a"}, 3},
		{"cipherd_config_reloads_total", "cipherd_config_reloads_total", []string{"result", "success"}, 1},
		{"cipherd_config_reloads_total", "cipherd_config_reloads_total", []string{"result", "failure"}, 2},
		{"cipherd_keystore_up", "cipherd_keystore_up", nil, 1},
		{"cipherd_keystore_last_sync_age_seconds", "cipherd_keystore_last_sync_age_seconds", nil, 0},
		{"cipherd_key_usage_flush_failures_total", "cipherd_key_usage_flush_failures_total", nil, 0},
	} {
		if got := metric(t, fams, c.family, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n := len(fams["cipherd_rate_limited_total"].samples); n != 1 {
		t.Errorf("%d identities throttled, want 1", n)
	}
	// The two encrypts were audited: at least one group written and synced.
	if n := metric(t, fams, "cipherd_audit_write_seconds", "cipherd_audit_write_seconds_count"); n < 1 || n > 2 {
		t.Errorf("%v audit writes observed for two audited requests", n)
	} else if sum := metric(t, fams, "cipherd_audit_write_seconds", "cipherd_audit_write_seconds_sum"); !(sum > 0) {
		t.Errorf("audit write time %v", sum)
	}
	if fams["cipherd_tls_cert_expiry_seconds"] != nil {
		t.Error("a TLS expiry without TLS")
	}
	for _, name := range []string{"cipherd_jwt_failures_total", "cipherd_jwks_keys", "cipherd_jwks_fetch_failures_total"} {
		if fams[name] != nil {
			t.Errorf("%s without JWT issuers", name)
		}
	}
}

// TestIdentityLabelsBounded: past maxIdentityLabels identities, the rest
// are counted together as "other".
func TestIdentityLabelsBounded(t *testing.T) {
	var c identityCounters
	for i := range maxIdentityLabels + 50 {
		c.inc(fmt.Sprintf("token:%016x", i))
	}
	c.inc("token:0000000000000000") // known: still its own
	var w expo
	c.write(&w, "x_total")
	lines := strings.Split(strings.TrimSpace(w.b.String()), "\n")
	if len(lines) != maxIdentityLabels+1 {
		t.Fatalf("%d series, want %d", len(lines), maxIdentityLabels+1)
	}
	for _, want := range []string{`x_total{identity="other"} 50`, `x_total{identity="token:0000000000000000"} 2`} {
		if !strings.Contains(w.b.String(), want+"\n") {
			t.Errorf("no line %q", want)
		}
	}
}

// reissueUntil makes a server certificate like p's, valid until notAfter,
// and writes it to new files in p's directory.
func (p *secPKI) reissueUntil(t *testing.T, serial int64, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	tmpl := *p.server.leaf
	tmpl.SerialNumber, tmpl.NotAfter = big.NewInt(serial), notAfter
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, p.ca.leaf, &p.server.key.PublicKey, p.ca.key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, fmt.Sprintf("tls-%d.crt", serial)), filepath.Join(p.dir, fmt.Sprintf("tls-%d.key", serial))
	secReplace(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	secReplace(t, keyFile, p.server.keyPEM)
	return certFile, keyFile
}

// TestTLSExpiryMetric: cipherd_tls_cert_expiry_seconds is the serving
// certificate's time left, and follows a reload to another certificate.
func TestTLSExpiryMetric(t *testing.T) {
	p := newSecPKI(t)
	ts := p.start(t, Config{}, false)
	cl := p.client(nil, 0, 0)
	near := func(got float64, until time.Time) bool { return math.Abs(got-time.Until(until).Seconds()) < 60 }
	got := metric(t, scrapeWith(t, cl, ts.URL), "cipherd_tls_cert_expiry_seconds", "cipherd_tls_cert_expiry_seconds")
	if !near(got, p.server.leaf.NotAfter) {
		t.Fatalf("expiry %vs, want about %v", got, time.Until(p.server.leaf.NotAfter))
	}
	until := time.Now().Add(72 * time.Hour).Truncate(time.Second)
	certFile, keyFile := p.reissueUntil(t, 500, until)
	if _, err := ts.Reload(Config{SkipBenchmark: true, TLSCert: certFile, TLSKey: keyFile}); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, scrapeWith(t, cl, ts.URL), "cipherd_tls_cert_expiry_seconds", "cipherd_tls_cert_expiry_seconds"); !near(got, until) {
		t.Fatalf("expiry %vs after the reload, want about %v", got, time.Until(until))
	}
}

// TestKeystoreMetricsPostgres: with the database stopped, the replica
// reports its keystore down and memory growing stale, keeps describing
// keys without usage, and keeps the usage it could not flush; with the
// database back, it is up again and every count arrives.
func TestKeystoreMetricsPostgres(t *testing.T) {
	db := pgtest.Start(t) // its own: the test kills it
	root := keystoretest.Secret(t)
	st, err := pgstore.Open(context.Background(), pgstore.Config{DSN: db.Database(t), RootKey: &root, ReconnectMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the server's Shutdown
	ts := startTestServer(t, Config{Keystore: st, SkipBenchmark: true, UsageFlushInterval: 100 * time.Millisecond})
	scrape := func() map[string]*promFamily { return scrapeWith(t, http.DefaultClient, ts.URL) }
	value := func(name string) float64 { return metric(t, scrape(), name, name) }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s after 20s", what)
			}
		}
	}
	if up, age := value("cipherd_keystore_up"), value("cipherd_keystore_last_sync_age_seconds"); up != 1 || age > 15 {
		t.Fatalf("with the database up: cipherd_keystore_up %v, last sync %vs ago", up, age)
	}
	encrypt := func(n int) {
		for range n {
			if code := encryptAs(t, ts.URL, ts.Token, "default"); code != 200 {
				t.Fatalf("encrypt: %d", code)
			}
		}
	}
	encrypt(3)

	db.Kill(t)
	waitFor("cipherd_keystore_up 0", func() bool { return value("cipherd_keystore_up") == 0 })
	encrypt(2) // data goes on from memory; its counts wait for the database
	waitFor("failed usage flush", func() bool { return value("cipherd_key_usage_flush_failures_total") > 0 })
	waitFor("a growing sync age", func() bool { return value("cipherd_keystore_last_sync_age_seconds") >= 1 })
	if u := describeUsage(t, ts.URL, ts.Token, "default"); u != nil {
		t.Fatalf("usage during the outage: %+v", u)
	}

	db.Restart(t)
	waitFor("cipherd_keystore_up 1", func() bool { return value("cipherd_keystore_up") == 1 })
	if age := value("cipherd_keystore_last_sync_age_seconds"); age > 15 {
		t.Errorf("last sync %vs ago once caught up", age)
	}
	want := api.KeyVersionUsage{Version: 1, Sealed: 5}
	waitFor("every count in the database", func() bool { return sameCounts(describeUsage(t, ts.URL, ts.Token, "default"), want) })
}

// TestPromtool: promtool (Debian: prometheus) accepts the exposition,
// with every family of the operators' metrics present.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: apt-get install prometheus)")
	}
	p := newSecPKI(t)
	ts := p.start(t, reloadIdentityConfig("app-a", "promtool-token-0123456789"), false)
	cl := p.client(nil, 0, 0)
	if code := secMustSend(t, cl, "POST", ts.URL+"/v1/encrypt/default", "promtool-token-0123456789", secEncryptBody).code; code != 200 {
		t.Fatalf("encrypt: %d", code)
	}
	resp, err := cl.Get(ts.URL + api.RouteMetrics)
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cipherd_keystore_up", "cipherd_keystore_last_sync_age_seconds", "cipherd_rate_limited_total",
		"cipherd_requests_by_identity_total", "cipherd_config_reloads_total", "cipherd_tls_cert_expiry_seconds",
		"cipherd_audit_write_seconds", "cipherd_audit_failures_total"} {
		if !strings.Contains(string(text), "# TYPE "+name+" ") {
			t.Errorf("no family %s", name)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		t.Logf("promtool: %s", out) // lint remarks, if any
	}
}

// TestAlertRules: the example alert rules that docs/OPERATIONS.md shows
// are deploy/prometheus's, which promtool accepts and whose unit tests
// (the alerts firing on the series of a stopped database, a throttled
// client, …) pass.
func TestAlertRules(t *testing.T) {
	const dir = "../deploy/prometheus"
	rules, err := os.ReadFile(filepath.Join(dir, "cipherd-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, append([]byte("```yaml\n"), rules...)) {
		t.Error("docs/OPERATIONS.md does not show deploy/prometheus/cipherd-alerts.yml as it is")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: apt-get install prometheus)")
	}
	for _, args := range [][]string{{"check", "rules", "cipherd-alerts.yml"}, {"test", "rules", "cipherd-alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
