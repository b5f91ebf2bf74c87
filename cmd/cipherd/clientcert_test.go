package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/internal/pkitest"
)

// mtlsServer is cipherd serve over TLS with a client CA, and an identity
// known by its client certificate.
type mtlsServer struct {
	url      string
	ca       *pkitest.CA
	app      *pkitest.Cert // the identity "app": every key operation, tokens-admin
	stranger *pkitest.Cert // signed by the CA, but no identity's
	self     *pkitest.Cert // signed by no CA the server trusts
	env      []string      // the server and its CA, and no token
}

// startMTLS starts cipherd serve with TLS, a client CA and the identity
// "app" known by a certificate.
func startMTLS(t *testing.T) *mtlsServer {
	t.Helper()
	ca := pkitest.New(t)
	srv := ca.Server(t)
	m := &mtlsServer{ca: ca, app: ca.Client(t, "app"), stranger: ca.Client(t, "stranger"), self: ca.SelfSigned(t, "app")}
	cfg := filepath.Join(t.TempDir(), "cipherd.yaml")
	yaml := fmt.Sprintf(`tls_cert: %s
tls_key: %s
tls_client_ca: %s
identities:
  - name: app
    cert_sha256: %s
    policies: [app]
policies:
  - name: app
    allow:
      - ops: [encrypt, decrypt, encrypt-local, decrypt-local, keys-read, keys-admin, tokens-admin]
        keys: ["*"]
`, srv.CertFile, srv.KeyFile, ca.CertFile, m.app.SPKI())
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Leaf)
	probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
	status := func(url string) int {
		resp, err := probe.Get(url)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	m.url = startServeScheme(t, "https", status, "-config", cfg)
	// CIPHERD_TOKEN and CIPHERD_TOKEN_FILE emptied: the certificate alone
	// identifies the caller, whatever the test's own environment holds.
	m.env = []string{"CIPHERD_URL=" + m.url, "CIPHERD_CA=" + ca.CertFile, "CIPHERD_TOKEN=", "CIPHERD_TOKEN_FILE=",
		"CIPHERD_CLIENT_CERT=", "CIPHERD_CLIENT_KEY="}
	return m
}

// certArgs are the flags that present c.
func certArgs(c *pkitest.Cert) []string {
	return []string{"--cert", c.CertFile, "--key-file", c.KeyFile}
}

// Every client command presents a client certificate given by --cert and
// --key-file, or CIPHERD_CLIENT_CERT and CIPHERD_CLIENT_KEY, and the server
// takes it for the identity it names; without one, or with one the server
// does not know or trust, the command is refused.
func TestCLIClientCertificate(t *testing.T) {
	m := startMTLS(t)
	msg := []byte("sealed by an mTLS identity\n")

	byFlags := certArgs(m.app)
	out, e1, e2, c1, c2 := pipeline(t, m.env, msg, append([]string{"--key", "default"}, byFlags...), append([]string{"--key", "default"}, byFlags...))
	if c1 != 0 || c2 != 0 || !bytes.Equal(out, msg) {
		t.Fatalf("encrypt | decrypt with --cert and --key-file: exit %d|%d, %q\n%s\n%s", c1, c2, out, e1, e2)
	}
	byEnv := append(m.env[:len(m.env):len(m.env)], "CIPHERD_CLIENT_CERT="+m.app.CertFile, "CIPHERD_CLIENT_KEY="+m.app.KeyFile)
	out, e1, e2, c1, c2 = pipeline(t, byEnv, msg, []string{"--key", "default", "--local"}, []string{"--key", "default", "--local"})
	if c1 != 0 || c2 != 0 || !bytes.Equal(out, msg) {
		t.Fatalf("encrypt | decrypt --local with CIPHERD_CLIENT_CERT and CIPHERD_CLIENT_KEY: exit %d|%d, %q\n%s\n%s", c1, c2, out, e1, e2)
	}
	if out, errOut, code := cipherd(t, byEnv, "tokens", "list"); code != 0 || !strings.HasPrefix(out, "ID ") {
		t.Errorf("tokens list as app: exit %d\n%s%s", code, out, errOut)
	}
	// A key's life as app: create, rotate, list, and data sealed under it
	// opened without --key.
	if out, errOut, code := cipherd(t, m.env, append([]string{"keys", "create", "app-key"}, byFlags...)...); code != 0 || !strings.Contains(out, "app-key") {
		t.Fatalf("keys create as app: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cipherd(t, byEnv, "keys", "rotate", "app-key"); code != 0 {
		t.Fatalf("keys rotate as app: exit %d: %s", code, errOut)
	}
	shown, errOut, code := cipherd(t, byEnv, "keys", "show", "-json", "app-key")
	var k api.Key
	if err := json.Unmarshal([]byte(shown), &k); code != 0 || err != nil || k.LatestVersion != 2 {
		t.Fatalf("keys show -json as app: exit %d, %v\n%s%s", code, err, shown, errOut)
	}
	out, e1, e2, c1, c2 = pipeline(t, byEnv, msg, []string{"--key", "app-key"}, nil)
	if c1 != 0 || c2 != 0 || !bytes.Equal(out, msg) {
		t.Fatalf("encrypt --key app-key | decrypt as app: exit %d|%d, %q\n%s\n%s", c1, c2, out, e1, e2)
	}
	if _, errOut, code := cipherd(t, m.env, "keys", "list"); code != 1 || !strings.Contains(errOut, "401 unauthenticated") {
		t.Errorf("keys list without a certificate: exit %d: %s", code, errOut)
	}
	if out, errOut, code := cipherd(t, m.env, append([]string{"health"}, byFlags...)...); code != 0 || out != "ready\n" {
		t.Errorf("health with a client certificate: exit %d\n%s%s", code, out, errOut)
	}

	// Refused: no certificate, a certificate of no identity, one of a CA
	// the server does not trust. The last is refused in the handshake, so
	// never as unauthenticated, which would mean it was not presented;
	// over TLS 1.3 the client learns of it after its own side of the
	// handshake, as the server's alert or as the connection closed,
	// depending on which reaches it first.
	for _, c := range []struct {
		name      string
		args      []string
		want, not string
	}{
		{"no certificate", nil, "401 unauthenticated", ""},
		{"a certificate of no identity", certArgs(m.stranger), "401 unauthenticated", ""},
		{"a self-signed certificate", certArgs(m.self), "cipherd encrypt: ", "unauthenticated"},
	} {
		_, errOut, code := crypt(t, m.env, bytes.NewReader(msg), append([]string{"encrypt", "--key", "default"}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) || c.not != "" && strings.Contains(errOut, c.not) {
			t.Errorf("encrypt with %s: exit %d, want 1 and %q (and not %q): %s", c.name, code, c.want, c.not, errOut)
		}
	}

	// Usage: half a pair, a pair that does not match, a plain http server.
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"--cert alone", m.env, []string{"--cert", m.app.CertFile}, "--key-file"},
		{"CIPHERD_CLIENT_KEY alone", append(m.env[:len(m.env):len(m.env)], "CIPHERD_CLIENT_KEY="+m.app.KeyFile), nil, "--cert"},
		{"another certificate's key", m.env, []string{"--cert", m.app.CertFile, "--key-file", m.stranger.KeyFile}, "client certificate " + m.app.CertFile},
		{"an http server", m.env, append([]string{"--server", "http://127.0.0.1:1"}, byFlags...), "not an https URL"},
	} {
		_, errOut, code := crypt(t, c.env, bytes.NewReader(msg), append([]string{"encrypt", "--key", "default"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("encrypt with %s: exit %d, want 2 and %q: %s", c.name, code, c.want, errOut)
		}
	}
}
