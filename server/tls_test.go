package server

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
)

// secCert is a certificate with its key, as PEM files would hold them.
type secCert struct {
	certPEM, keyPEM []byte
	leaf            *x509.Certificate
	key             *ecdsa.PrivateKey
	tls             tls.Certificate
}

// spki is what an identity's cert_sha256 holds for this certificate.
func (c *secCert) spki() string {
	h := sha256.Sum256(c.leaf.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(h[:])
}

// secIssue makes a P-256 certificate for cn signed by ca, or self-signed
// when ca is nil. A CA certificate when isCA; else a server certificate for
// 127.0.0.1 when server, or a client certificate.
func secIssue(t testing.TB, ca *secCert, cn string, serial int64, isCA, server bool) *secCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"cipherd tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	switch {
	case isCA:
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	case server:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	default:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.leaf, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c := &secCert{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		leaf:    leaf,
		key:     key,
	}
	c.tls = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	return c
}

// secPKI is a CA, a server certificate signed by it, and their files.
type secPKI struct {
	ca, server                *secCert
	dir                       string
	caFile, certFile, keyFile string
}

func newSecPKI(t testing.TB) *secPKI {
	t.Helper()
	p := &secPKI{dir: t.TempDir()}
	p.ca = secIssue(t, nil, "cipherd test CA", 1, true, false)
	p.server = secIssue(t, p.ca, "cipherd", 100, false, true)
	p.caFile = filepath.Join(p.dir, "ca.pem")
	p.certFile = filepath.Join(p.dir, "tls.crt")
	p.keyFile = filepath.Join(p.dir, "tls.key")
	secReplace(t, p.caFile, p.ca.certPEM)
	secReplace(t, p.certFile, p.server.certPEM)
	secReplace(t, p.keyFile, p.server.keyPEM)
	return p
}

// start starts a TLS server on p's files (and p's CA for client
// certificates when clientCA).
func (p *secPKI) start(t testing.TB, cfg Config, clientCA bool) *testServer {
	t.Helper()
	cfg.SkipBenchmark = true
	cfg.TLSCert, cfg.TLSKey = p.certFile, p.keyFile
	if clientCA {
		cfg.TLSClientCA = p.caFile
	}
	return startTestServer(t, cfg)
}

// client returns a net/http client that trusts p's CA, presents cert when
// not nil, speaks TLS versions lo to hi (0: Go's defaults), and opens a new
// connection for every request.
func (p *secPKI) client(cert *secCert, lo, hi uint16, suites ...uint16) *http.Client {
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.leaf)
	tc := &tls.Config{RootCAs: roots, MinVersion: lo, MaxVersion: hi, CipherSuites: suites}
	if cert != nil {
		// Always present it when asked, even when the server's list of
		// acceptable CAs does not name its issuer (Go's default would
		// then send nothing).
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert.tls, nil }
	}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true, ForceAttemptHTTP2: false},
	}
}

// secReplace writes a file the way a Secret update does: whole, by rename.
func secReplace(t testing.TB, name string, data []byte) {
	t.Helper()
	tmp := name + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

// secReply is what a request got back.
type secReply struct {
	code int
	body []byte
	hdr  http.Header
	tls  *tls.ConnectionState
}

// send sends a request: with "Authorization: Bearer token" unless token is
// empty, with body as JSON when not nil, and with the extra headers.
func secSend(cl *http.Client, method, url, token string, body []byte, hdr ...string) (secReply, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return secReply{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := cl.Do(req)
	if err != nil {
		return secReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return secReply{code: resp.StatusCode, body: b, hdr: resp.Header, tls: resp.TLS}, err
}

// secMustSend is send that fails the test on a transport error.
func secMustSend(t testing.TB, cl *http.Client, method, url, token string, body []byte, hdr ...string) secReply {
	t.Helper()
	r, err := secSend(cl, method, url, token, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// secEncryptBody is a small JSON encrypt request.
var secEncryptBody = []byte(`{"plaintext":"aGVsbG8="}`)

// secServedSerial returns the serial of the certificate a new connection sees.
func secServedSerial(t testing.TB, ts *testServer, cl *http.Client) string {
	t.Helper()
	r := secMustSend(t, cl, "GET", ts.URL+api.RouteHealthz, "", nil)
	if r.code != 200 || r.tls == nil || len(r.tls.PeerCertificates) == 0 {
		t.Fatalf("healthz over TLS: %d, tls=%v", r.code, r.tls != nil)
	}
	return r.tls.PeerCertificates[0].SerialNumber.String()
}

// secWait polls cond until it holds or the deadline passes.
func secWait(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTLSVersionsAndSuites(t *testing.T) {
	p := newSecPKI(t)
	ts := p.start(t, Config{}, false)
	if !strings.HasPrefix(ts.URL, "https://") {
		t.Fatalf("URL %s is not https", ts.URL)
	}

	// The refusals come from the server ("remote error"), not from the client.
	if _, err := secSend(p.client(nil, tls.VersionTLS10, tls.VersionTLS11), "GET", ts.URL+api.RouteHealthz, "", nil); err == nil || !strings.Contains(err.Error(), "remote error: tls: protocol version") {
		t.Fatalf("TLS 1.1 client: %v, want the server to refuse the version", err)
	}
	cbc := p.client(nil, tls.VersionTLS12, tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA)
	if _, err := secSend(cbc, "GET", ts.URL+api.RouteHealthz, "", nil); err == nil || !strings.Contains(err.Error(), "remote error: tls: handshake failure") {
		t.Fatalf("TLS 1.2 client offering only CBC suites: %v, want the server to refuse", err)
	}

	r := secMustSend(t, p.client(nil, tls.VersionTLS12, tls.VersionTLS12), "POST", ts.URL+"/v1/encrypt/default", ts.Token, secEncryptBody)
	if r.code != 200 || r.tls.Version != tls.VersionTLS12 || !slices.Contains(tls12Suites, r.tls.CipherSuite) {
		t.Fatalf("TLS 1.2: %d %s, version %x, suite %s", r.code, r.body, r.tls.Version, tls.CipherSuiteName(r.tls.CipherSuite))
	}
	r = secMustSend(t, p.client(nil, 0, 0), "POST", ts.URL+"/v1/encrypt/default", ts.Token, secEncryptBody)
	if r.code != 200 || r.tls.Version != tls.VersionTLS13 {
		t.Fatalf("default client: %d %s, version %x (want TLS 1.3)", r.code, r.body, r.tls.Version)
	}
	if r := secMustSend(t, p.client(nil, 0, 0), "POST", ts.URL+"/v1/encrypt/default", "", secEncryptBody); r.code != 401 {
		t.Fatalf("no token over TLS: %d %s", r.code, r.body)
	}
}

func TestTLSHotReload(t *testing.T) {
	p := newSecPKI(t)
	ts := p.start(t, Config{}, false)
	cl := p.client(nil, 0, 0)
	if got := secServedSerial(t, ts, cl); got != "100" {
		t.Fatalf("serial %s at start, want 100", got)
	}
	ts.tls.setPollInterval(20 * time.Millisecond)

	// A renewal with a new key: both files replaced.
	renewed := secIssue(t, p.ca, "cipherd", 200, false, true)
	secReplace(t, p.certFile, renewed.certPEM)
	secReplace(t, p.keyFile, renewed.keyPEM)
	start := time.Now()
	secWait(t, "the renewed certificate", 10*time.Second, func() bool { return secServedSerial(t, ts, cl) == "200" })
	t.Logf("renewed certificate served after %v", time.Since(start).Round(time.Millisecond))
	if ts.Logs.FilterMessage("TLS certificate reloaded").Len() == 0 {
		t.Error("no log of the reload")
	}

	// Broken replacements: a key that does not match, then a garbage
	// certificate. The renewed certificate stays in service.
	broken := func() int { return ts.Logs.FilterMessageSnippet("do not load").Len() }
	n := broken()
	other := secIssue(t, p.ca, "cipherd", 300, false, true)
	secReplace(t, p.keyFile, other.keyPEM)
	secWait(t, "the mismatched key to be noticed", 10*time.Second, func() bool { return broken() > n })
	n = broken()
	secReplace(t, p.keyFile, renewed.keyPEM)
	secReplace(t, p.certFile, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"))
	secWait(t, "the garbage certificate to be noticed", 10*time.Second, func() bool { return broken() > n })
	time.Sleep(100 * time.Millisecond) // several more polls
	for range 3 {
		if got := secServedSerial(t, ts, cl); got != "200" {
			t.Fatalf("serial %s after broken replacements, want 200 kept", got)
		}
	}
	if got := broken(); got != n+1 {
		t.Errorf("%d error logs for one broken version of the files, want 1", got-n)
	}

	// Fixed files are picked up again.
	fixed := secIssue(t, p.ca, "cipherd", 400, false, true)
	secReplace(t, p.keyFile, fixed.keyPEM)
	secReplace(t, p.certFile, fixed.certPEM)
	secWait(t, "the fixed certificate", 10*time.Second, func() bool { return secServedSerial(t, ts, cl) == "400" })
}

func TestTLSClientCAReload(t *testing.T) {
	p := newSecPKI(t)
	ca2 := secIssue(t, nil, "second CA", 2, true, false)
	app := secIssue(t, ca2, "app", 10, false, false)
	ts := p.start(t, Config{
		Identities: []IdentityConfig{{Name: "app", CertSHA256: app.spki(), Policies: []string{"enc"}}},
		Policies:   []PolicyConfig{{Name: "enc", Allow: []RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"default"}}}}},
	}, true)
	cl := p.client(app, 0, 0)
	if _, err := secSend(cl, "POST", ts.URL+"/v1/encrypt/default", "", secEncryptBody); err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Fatalf("a certificate from a CA not yet trusted: %v, want the handshake refused", err)
	}
	ts.tls.setPollInterval(20 * time.Millisecond)
	secReplace(t, p.caFile, append(append([]byte{}, p.ca.certPEM...), ca2.certPEM...))
	secWait(t, "the new client CA", 10*time.Second, func() bool {
		r, err := secSend(cl, "POST", ts.URL+"/v1/encrypt/default", "", secEncryptBody)
		return err == nil && r.code == 200
	})
	if ts.Logs.FilterMessage("TLS client CA reloaded").Len() == 0 {
		t.Error("no log of the CA reload")
	}
}

func TestTLSCloseStopsPoller(t *testing.T) {
	p := newSecPKI(t)
	st, err := newTLSState(&Config{TLSCert: p.certFile, TLSKey: p.keyFile}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	st.setPollInterval(time.Millisecond)
	st.close()
	select {
	case <-st.done:
	default:
		t.Fatal("poller still running after close")
	}
	st.close()                           // idempotent
	st.setPollInterval(time.Millisecond) // does not block after close

	secReplace(t, p.keyFile, []byte("garbage"))
	if _, err := newTLSState(&Config{TLSCert: p.certFile, TLSKey: p.keyFile}, zap.NewNop()); err == nil {
		t.Fatal("a broken pair loaded at start-up")
	}
}

func TestMTLSIdentity(t *testing.T) {
	p := newSecPKI(t)
	app := secIssue(t, p.ca, "app", 10, false, false)
	stranger := secIssue(t, p.ca, "stranger", 11, false, false)
	self := secIssue(t, nil, "self", 12, false, false)
	cfg := Config{
		Identities: []IdentityConfig{
			{Name: "app", CertSHA256: app.spki(), Policies: []string{"enc"}},
			// Configured, but its certificate is not from the client CA.
			{Name: "self", CertSHA256: self.spki(), Policies: []string{"enc"}},
		},
		Policies: []PolicyConfig{{Name: "enc", Allow: []RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"default"}}}}},
	}
	ts := p.start(t, cfg, true)
	enc := ts.URL + "/v1/encrypt/default"

	if r := secMustSend(t, p.client(app, 0, 0), "POST", enc, "", secEncryptBody); r.code != 200 {
		t.Fatalf("app certificate: %d %s", r.code, r.body)
	}
	if r := secMustSend(t, p.client(app, tls.VersionTLS12, tls.VersionTLS12), "POST", enc, "", secEncryptBody); r.code != 200 {
		t.Fatalf("app certificate over TLS 1.2: %d %s", r.code, r.body)
	}
	// The certificate names "app", not the admin: keys-read is not allowed.
	if r := secMustSend(t, p.client(app, 0, 0), "GET", ts.URL+"/v1/keys/default", "", nil); r.code != 403 {
		t.Fatalf("app reading keys: %d %s", r.code, r.body)
	}
	if r := secMustSend(t, p.client(stranger, 0, 0), "POST", enc, "", secEncryptBody); r.code != 401 {
		t.Fatalf("verified but unknown certificate: %d %s", r.code, r.body)
	}
	for _, hi := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		if r, err := secSend(p.client(self, 0, hi), "POST", enc, "", secEncryptBody); err == nil || !strings.Contains(err.Error(), "remote error: tls: unknown certificate authority") {
			t.Fatalf("self-signed certificate (max version %x): %d %s %v, want the handshake refused", hi, r.code, r.body, err)
		}
	}
	// A presented token decides, even next to a good certificate.
	if r := secMustSend(t, p.client(app, 0, 0), "POST", enc, "wrong-token", secEncryptBody); r.code != 401 {
		t.Fatalf("app certificate with a wrong token: %d %s", r.code, r.body)
	}
	// Bearer clients without a certificate still connect.
	if r := secMustSend(t, p.client(nil, 0, 0), "POST", enc, ts.Token, secEncryptBody); r.code != 200 {
		t.Fatalf("admin token without a certificate: %d %s", r.code, r.body)
	}
	if r := secMustSend(t, p.client(nil, 0, 0), "POST", enc, "", secEncryptBody); r.code != 401 {
		t.Fatalf("nothing: %d %s", r.code, r.body)
	}

	// Without a client CA, certificates are neither requested nor verified,
	// so they never identify anyone.
	p2 := newSecPKI(t)
	app2 := secIssue(t, p2.ca, "app", 10, false, false)
	cfg.Identities[0].CertSHA256 = app2.spki()
	ts2 := p2.start(t, cfg, false)
	if r := secMustSend(t, p2.client(app2, 0, 0), "POST", ts2.URL+"/v1/encrypt/default", "", secEncryptBody); r.code != 401 {
		t.Fatalf("certificate without a client CA: %d %s", r.code, r.body)
	}
}
