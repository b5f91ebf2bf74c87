package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/internal/proctest"
)

// The reload tests change the configuration of a running server: the
// built binary on SIGHUP and on a change of its file, and the Reload
// method for what the binary test does not cover.

// reloadIdentity is the YAML of one identity with a token, allowed to
// encrypt with any key, and the policy it needs.
func reloadIdentity(name, token string) string {
	sum := sha256.Sum256([]byte(token))
	return fmt.Sprintf("identities:\n  - name: %s\n    token_sha256: %s\n    policies: [enc]\n"+
		"policies:\n  - name: enc\n    allow:\n      - ops: [encrypt]\n        keys: [\"*\"]\n", name, hex.EncodeToString(sum[:]))
}

// configFile is the process's configuration file (startCipherd writes it
// next to the data directory).
func (p *cipherdProcess) configFile() string {
	return filepath.Join(filepath.Dir(p.dataDir), "cipherd.yaml")
}

// rewrite replaces what follows the fixed part of the configuration that
// startCipherd wrote, the way a ConfigMap update does: whole, by rename.
func (p *cipherdProcess) rewrite(t *testing.T, extra string) {
	t.Helper()
	b, err := os.ReadFile(p.configFile())
	if err != nil {
		t.Fatal(err)
	}
	const fixedEnd = "skip_benchmark: true\n"
	i := bytes.Index(b, []byte(fixedEnd))
	if i < 0 {
		t.Fatalf("unexpected configuration file:\n%s", b)
	}
	secReplace(t, p.configFile(), append(b[:i+len(fixedEnd):i+len(fixedEnd)], extra...))
}

// encrypt sends a small JSON encrypt with token on a new connection and
// returns the status; 0 when the request fails.
func (p *cipherdProcess) encrypt(token string) int {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest("POST", p.url+"/v1/encrypt/default", strings.NewReader(`{"plaintext":"aGVsbG8="}`))
	req.Header.Set("Content-Type", api.ContentTypeJSON)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (p *cipherdProcess) alive(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("cipherd exited: %v", p.err)
	default:
	}
}

// logged reports whether the process's log holds s.
func (p *cipherdProcess) logged(s string) bool {
	b, _ := os.ReadFile(p.logs)
	return bytes.Contains(b, []byte(s))
}

// TestReloadSIGHUP runs the binary, changes its identities and log level
// and sends SIGHUP: the new token works and the old one is refused, with
// no restart. A broken configuration then keeps the previous set in
// service, and a change of the file alone is picked up too.
func TestReloadSIGHUP(t *testing.T) {
	bin := buildCipherd(t)
	const tokA, tokB = "reload-token-a-0123456789", "reload-token-b-0123456789"
	p := startCipherd(t, bin, reloadIdentity("app-a", tokA))
	if a, b := p.encrypt(tokA), p.encrypt(tokB); a != 200 || b != 401 {
		t.Fatalf("before the reload: token a %d, token b %d; want 200, 401", a, b)
	}
	if p.logged(`"authentication failed"`) {
		t.Fatal("a debug line at the default level info")
	}
	pid := p.cmd.Process.Pid

	p.rewrite(t, reloadIdentity("app-b", tokB)+"log_level: debug\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !proctest.Poll(5*time.Second, func() bool { return p.encrypt(tokB) == 200 }) {
		p.alive(t)
		t.Fatalf("token b not accepted after SIGHUP: %d", p.encrypt(tokB))
	}
	if a := p.encrypt(tokA); a != 401 {
		t.Errorf("token a after the reload: %d, want 401", a)
	}
	p.alive(t)
	if p.cmd.Process.Pid != pid {
		t.Fatal("the process changed")
	}
	// The new log level is in force: the refused token left a debug line.
	if !proctest.Poll(3*time.Second, func() bool { return p.logged(`"authentication failed"`) }) {
		t.Error("no debug line after the reload to log_level: debug")
	}

	// A broken configuration changes nothing and says why.
	for i, broken := range []string{
		"identities: [\n", // not YAML
		"identities:\n  - name: app-c\n    token_sha256: 00\n    policies: [enc]\n", // a bad hash
		reloadIdentity("app-c", "reload-token-c-0123456789") + "  - name: app-d\n    token_sha256: " + strings.Repeat("ab", 32) + "\n    policies: [missing]\n",
		"no_such_setting: 1\n",
	} {
		p.rewrite(t, broken)
		p.cmd.Process.Signal(syscall.SIGHUP)
		want := i + 1
		if !proctest.Poll(5*time.Second, func() bool {
			b, _ := os.ReadFile(p.logs)
			return bytes.Count(b, []byte("configuration reload failed")) >= want
		}) {
			t.Fatalf("broken configuration %d: no reload failure logged", i)
		}
		p.alive(t)
		if b, ready := p.encrypt(tokB), p.status("/readyz"); b != 200 || ready != 200 {
			t.Fatalf("after broken configuration %d: token b %d, /readyz %d; want 200, 200", i, b, ready)
		}
	}

	// A change of the file alone, without a signal, is picked up too.
	p.rewrite(t, reloadIdentity("app-a", tokA))
	if !proctest.Poll(15*time.Second, func() bool { return p.encrypt(tokA) == 200 }) {
		t.Fatal("token a not accepted after the file changed back")
	}
	if b := p.encrypt(tokB); b != 401 {
		t.Errorf("token b after the file changed: %d, want 401", b)
	}
	p.alive(t)

	// cipherd_config_reloads_total says what the log says: two reloads
	// applied, four failed (two before the server saw them, two that it
	// refused), or more if a poll of the file raced a signal.
	var ok, bad, okLogged, badLogged float64
	if !proctest.Poll(5*time.Second, func() bool {
		fams := scrapeWith(t, http.DefaultClient, p.url)
		ok = metric(t, fams, "cipherd_config_reloads_total", "cipherd_config_reloads_total", "result", "success")
		bad = metric(t, fams, "cipherd_config_reloads_total", "cipherd_config_reloads_total", "result", "failure")
		b, _ := os.ReadFile(p.logs)
		okLogged = float64(bytes.Count(b, []byte(`"configuration reloaded"`)))
		badLogged = float64(bytes.Count(b, []byte("configuration reload failed")))
		return ok == okLogged && bad == badLogged
	}) || ok < 2 || bad < 4 {
		t.Errorf("cipherd_config_reloads_total: %v succeeded, %v failed; the log: %v, %v", ok, bad, okLogged, badLogged)
	}
}

// reloadIdentityConfig is reloadIdentity as a Config.
func reloadIdentityConfig(name, token string) Config {
	sum := sha256.Sum256([]byte(token))
	return Config{
		Identities: []IdentityConfig{{Name: name, TokenSHA256: hex.EncodeToString(sum[:]), Policies: []string{"enc"}}},
		Policies:   []PolicyConfig{{Name: "enc", Allow: []RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"*"}}}}},
	}
}

// TestReload changes a TLS server's identities, rate limit, certificate
// files and client CA with Reload: the new set applies whole; one that does
// not load changes nothing; settings that need a restart are named.
func TestReload(t *testing.T) {
	p := newSecPKI(t)
	const tokA, tokB = "reload-token-a-0123456789", "reload-token-b-0123456789"
	start := reloadIdentityConfig("app-a", tokA)
	ts := p.start(t, start, false)
	cl := p.client(nil, 0, 0)
	enc := func(token string) int {
		r, err := secSend(cl, "POST", ts.URL+"/v1/encrypt/default", token, secEncryptBody)
		if err != nil {
			t.Fatalf("encrypt: %v", err)
		}
		return r.code
	}
	if a, b := enc(tokA), enc(tokB); a != 200 || b != 401 {
		t.Fatalf("at start: token a %d, token b %d", a, b)
	}

	// New identities (one of them by client certificate, with a client CA
	// that was not configured), a rate limit, a renewed certificate under
	// other file names, and a setting that needs a restart.
	renewed := secIssue(t, p.ca, "cipherd", 200, false, true)
	certFile, keyFile := filepath.Join(p.dir, "renewed.crt"), filepath.Join(p.dir, "renewed.key")
	secReplace(t, certFile, renewed.certPEM)
	secReplace(t, keyFile, renewed.keyPEM)
	app := secIssue(t, p.ca, "app", 10, false, false)
	next := reloadIdentityConfig("app-b", tokB)
	next.Identities = append(next.Identities, IdentityConfig{Name: "app-c", CertSHA256: app.spki(), Policies: []string{"enc"}})
	next.RateLimit, next.RateBurst = 1, 1
	next.TLSCert, next.TLSKey, next.TLSClientCA = certFile, keyFile, p.caFile
	next.SkipBenchmark, next.Addr, next.DataDir = true, ts.cfg.Addr, ts.cfg.DataDir
	next.RequestTimeout = 7 * time.Second
	restart, err := ts.Reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if len(restart) != 1 || restart[0] != "request_timeout" {
		t.Errorf("settings needing a restart: %v, want [request_timeout]", restart)
	}
	if got := secServedSerial(t, ts, cl); got != "200" {
		t.Errorf("serial %s after the reload, want 200", got)
	}
	if a, b := enc(tokA), enc(tokB); a != 401 || b != 200 {
		t.Errorf("after the reload: token a %d, token b %d; want 401, 200", a, b)
	}
	if b := enc(tokB); b != 429 {
		t.Errorf("token b's second request at rate 1, burst 1: %d, want 429", b)
	}
	// A reload at the same rate and burst keeps token b's empty bucket.
	if _, err := ts.Reload(next); err != nil {
		t.Fatal(err)
	}
	if b := enc(tokB); b != 429 {
		t.Errorf("token b right after a reload at the same rate: %d, want 429 (its bucket kept)", b)
	}
	if r := secMustSend(t, p.client(app, 0, 0), "POST", ts.URL+"/v1/encrypt/default", "", secEncryptBody); r.code != 200 {
		t.Errorf("the client certificate under the new client CA: %d %s", r.code, r.body)
	}

	// Configurations that do not load change nothing.
	bad := []func(*Config){
		func(c *Config) { c.TLSKey = filepath.Join(p.dir, "missing.key") },
		func(c *Config) { c.TLSKey = p.keyFile }, // the old key: not the pair of the renewed certificate
		func(c *Config) { c.Identities[0].Policies = []string{"missing"} },
		func(c *Config) { c.Identities[1].CertSHA256 = "00" },
		func(c *Config) { c.RateLimit = -1 },
		func(c *Config) { c.LogLevel = "loud" },
	}
	for i, f := range bad {
		cfg := next
		cfg.Identities = append([]IdentityConfig{{Name: "app-a2", TokenSHA256: start.Identities[0].TokenSHA256, Policies: []string{"enc"}}}, next.Identities...)
		f(&cfg)
		if _, err := ts.Reload(cfg); err == nil {
			t.Fatalf("broken configuration %d reloaded", i)
		}
		if a := enc(tokA); a != 401 {
			t.Fatalf("broken configuration %d: its identity for token a answers %d, want 401", i, a)
		}
		if got := secServedSerial(t, ts, cl); got != "200" {
			t.Fatalf("broken configuration %d: serial %s, want 200 kept", i, got)
		}
	}

	// Back to no rate limit and no client CA.
	next.RateLimit, next.RateBurst, next.TLSClientCA = 0, 0, ""
	if _, err := ts.Reload(next); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if b := enc(tokB); b != 200 {
			t.Fatalf("without a rate limit: %d", b)
		}
	}
	if r := secMustSend(t, p.client(app, 0, 0), "POST", ts.URL+"/v1/encrypt/default", "", secEncryptBody); r.code != 401 {
		t.Errorf("a client certificate without a client CA: %d, want 401", r.code)
	}
}

// TestReloadUnderLoad reloads again and again while requests run: an
// identity in every set is never refused, and (under -race) nothing races.
func TestReloadUnderLoad(t *testing.T) {
	const tok = "reload-token-a-0123456789"
	cfg := reloadIdentityConfig("app-a", tok)
	cfg.SkipBenchmark = true
	ts := startTestServer(t, cfg)
	cfg.Addr, cfg.DataDir = ts.cfg.Addr, ts.cfg.DataDir
	stop := make(chan struct{})
	errs := make(chan string, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- ""
					return
				default:
				}
				req, _ := http.NewRequest("POST", ts.URL+"/v1/encrypt/default", strings.NewReader(`{"plaintext":"aGVsbG8="}`))
				req.Header.Set("Content-Type", api.ContentTypeJSON)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Sprintf("status %d during reloads", resp.StatusCode)
					return
				}
			}
		}()
	}
	for i := range 30 {
		next := cfg
		next.TrustedProxies = []string{fmt.Sprintf("10.%d.0.0/16", i)}
		next.Identities = append([]IdentityConfig{{Name: fmt.Sprintf("other-%d", i), TokenSHA256: strings.Repeat("ab", 32), Policies: []string{"enc"}}}, cfg.Identities...)
		if i%2 == 1 {
			next.RateLimit = 1e6
		}
		if _, err := ts.Reload(next); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	for range 4 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
