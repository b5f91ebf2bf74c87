package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// proxiedSend sends one request with token (none when empty) and the
// extra header lines kv over a new connection to ts, from the address
// local (any when nil), the connection starting with hdr when it is not
// nil, as a proxy speaking the PROXY protocol starts it. It returns the
// status (0 when the connection ended without an answer) and the body.
func proxiedSend(t *testing.T, ts *testServer, local net.IP, hdr *proxyproto.Header, method, path, token string, body []byte, kv ...string) (int, string) {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	conn, err := d.Dial("tcp", ts.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if hdr != nil {
		if _, err := hdr.WriteTo(conn); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, "http://cipherd"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Add(kv[i], kv[i+1])
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// proxyHeader is the PROXY header of a TCP connection from src to the
// server's address, in protocol version v.
func proxyHeader(t *testing.T, ts *testServer, v byte, src string) *proxyproto.Header {
	t.Helper()
	s, err := net.ResolveTCPAddr("tcp", src)
	if err != nil {
		t.Fatal(err)
	}
	dst := ts.ln.Addr()
	if s.IP.To4() == nil {
		// The header names one family; a v6 client reached the proxy
		// over v6.
		dst = &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	}
	return proxyproto.HeaderProxyFromAddrs(v, s, dst)
}

func TestProxyProtocolClientAddress(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, ProxyProtocol: true, TrustedProxies: []string{"127.0.0.1/32"}})
	audit := ts.cfg.DataDir + "/audit.log"
	body := []byte(`{"plaintext":"aGVsbG8="}`)
	lastRemote := func() any {
		recs := auditRecords(t, audit)
		if len(recs) == 0 {
			t.Fatal("no audit record")
		}
		return recs[len(recs)-1]["remote_ip"]
	}
	for _, c := range []struct {
		name string
		hdr  *proxyproto.Header
		want string
	}{
		{"v1", proxyHeader(t, ts, 1, "203.0.113.7:40000"), "203.0.113.7"},
		{"v2", proxyHeader(t, ts, 2, "198.51.100.20:51000"), "198.51.100.20"},
		{"v2 IPv6", proxyHeader(t, ts, 2, "[2001:db8::17]:443"), "2001:db8::17"},
		{"no header from the proxy", nil, "127.0.0.1"},
	} {
		n := len(auditRecords(t, audit))
		if code, b := proxiedSend(t, ts, nil, c.hdr, "POST", "/v1/encrypt/default", ts.Token, body); code != 200 {
			t.Fatalf("%s: %d %s", c.name, code, b)
		}
		if got := len(auditRecords(t, audit)); got != n+1 {
			t.Fatalf("%s: %d audit records after one request, want %d", c.name, got, n+1)
		}
		if got := lastRemote(); got != c.want {
			t.Errorf("%s: audit remote_ip %v, want %s", c.name, got, c.want)
		}
		lines := ts.Logs.FilterMessage("audit").All()
		if got := lines[len(lines)-1].ContextMap()["remote_ip"]; got != c.want {
			t.Errorf("%s: log remote_ip %v, want %s", c.name, got, c.want)
		}
	}

	// Anyone not trusted is not believed: its header reaches the HTTP
	// parser, and nothing is done or recorded.
	n := len(auditRecords(t, audit))
	code, b := proxiedSend(t, ts, net.IPv4(127, 0, 0, 2), proxyHeader(t, ts, 1, "127.0.0.1:40000"), "POST", "/v1/encrypt/default", ts.Token, body)
	if code != 400 {
		t.Errorf("a PROXY header from an untrusted client: %d %s, want 400", code, b)
	}
	code, b = proxiedSend(t, ts, net.IPv4(127, 0, 0, 2), proxyHeader(t, ts, 2, "127.0.0.1:40000"), "POST", "/v1/encrypt/default", ts.Token, body)
	if code == 200 {
		t.Errorf("a v2 PROXY header from an untrusted client: %d %s", code, b)
	}
	if got := len(auditRecords(t, audit)); got != n {
		t.Errorf("%d audit records after refused requests, want %d", got, n)
	}
	// Without a header, an untrusted client is itself.
	if code, b := proxiedSend(t, ts, net.IPv4(127, 0, 0, 2), nil, "POST", "/v1/encrypt/default", ts.Token, body); code != 200 {
		t.Fatalf("a direct client: %d %s", code, b)
	}
	if got := lastRemote(); got != "127.0.0.2" {
		t.Errorf("a direct client's remote_ip %v", got)
	}
	// The server keeps serving the proxy after all that.
	if code, b := proxiedSend(t, ts, nil, proxyHeader(t, ts, 2, "203.0.113.8:1"), "GET", "/v1/keys/default", ts.Token, nil); code != 200 {
		t.Errorf("after the refusals: %d %s", code, b)
	}
}

// A forwarded client certificate is believed for the address of the
// connection's other end, the proxy, never for the address its PROXY
// header names.
func TestProxyProtocolForwardedCert(t *testing.T) {
	ca := secIssue(t, nil, "edge CA", 1, true, false)
	app := secIssue(t, ca, "app", 10, false, false)
	ts := startTestServer(t, Config{
		SkipBenchmark: true, ProxyProtocol: true, TrustedProxies: []string{"127.0.0.1/32"},
		Identities: []IdentityConfig{{Name: "edge-app", CertSHA256: app.spki(), Policies: []string{"enc"}}},
		Policies:   []PolicyConfig{{Name: "enc", Allow: []RuleConfig{{Ops: []string{"encrypt"}, Keys: []string{"default"}}}}},
	})
	body := []byte(`{"plaintext":"aGVsbG8="}`)
	xfcc := proxyForms(app)["escaped pem"]
	// The trusted proxy forwards a client at an address it does not trust.
	if code, b := proxiedSend(t, ts, nil, proxyHeader(t, ts, 2, "198.51.100.9:4000"), "POST", "/v1/encrypt/default", "", body, headerForwardedCert, xfcc); code != 200 {
		t.Errorf("certificate forwarded by the trusted proxy: %d %s", code, b)
	}
	used := ts.Logs.FilterMessage("identity from a forwarded client certificate").All()
	if len(used) == 0 || used[len(used)-1].ContextMap()["proxy"] != "127.0.0.1" {
		t.Errorf("the forwarded identity's proxy logged as %v", used)
	}
	// A client that is not a proxy cannot forward a certificate, whatever
	// it claims.
	code, b := proxiedSend(t, ts, net.IPv4(127, 0, 0, 2), nil, "POST", "/v1/encrypt/default", "", body, headerForwardedCert, xfcc)
	if code != 401 {
		t.Errorf("certificate forwarded by a client: %d %s, want 401", code, b)
	}
}

// Failed authentications are limited per client, not per proxy.
func TestProxyProtocolAuthLimit(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, ProxyProtocol: true, TrustedProxies: []string{"127.0.0.1/32"},
		AuthFailureRate: 0.1, AuthFailureBurst: 3})
	bad := proxyHeader(t, ts, 2, "203.0.113.66:1000")
	limited := false
	for i := 0; i < 10 && !limited; i++ {
		code, _ := proxiedSend(t, ts, nil, bad, "GET", "/v1/keys/default", "wrong-token-0123456789", nil)
		limited = code == 429
	}
	if !limited {
		t.Fatal("failed authentications from one client were never limited")
	}
	if code, b := proxiedSend(t, ts, nil, bad, "GET", "/v1/keys/default", ts.Token, nil); code != 429 {
		t.Errorf("the limited client with a good token: %d %s, want 429", code, b)
	}
	// Another client behind the same proxy is not held back.
	if code, b := proxiedSend(t, ts, nil, proxyHeader(t, ts, 2, "203.0.113.67:1000"), "GET", "/v1/keys/default", ts.Token, nil); code != 200 {
		t.Errorf("another client behind the proxy: %d %s", code, b)
	}
}

func TestProxyProtocolNeedsTrustedProxies(t *testing.T) {
	cfg := Config{ProxyProtocol: true}.Defaults()
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "proxy_protocol needs trusted_proxies") {
		t.Errorf("proxy_protocol without trusted_proxies: %v", err)
	}
}

// The PROXY header comes before the TLS handshake.
func TestProxyProtocolTLS(t *testing.T) {
	p := newSecPKI(t)
	ts := p.start(t, Config{ProxyProtocol: true, TrustedProxies: []string{"127.0.0.1/32"}}, false)
	cl := p.client(nil, 0, 0)
	tr := cl.Transport.(*http.Transport)
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if _, err := proxyHeader(t, ts, 2, "203.0.113.9:7000").WriteTo(c); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	if r := secMustSend(t, cl, "POST", ts.URL+"/v1/encrypt/default", ts.Token, []byte(`{"plaintext":"aGVsbG8="}`)); r.code != 200 {
		t.Fatalf("encrypt over TLS after a PROXY header: %d %s", r.code, r.body)
	}
	recs := auditRecords(t, ts.cfg.DataDir+"/audit.log")
	if got := recs[len(recs)-1]["remote_ip"]; got != "203.0.113.9" {
		t.Errorf("remote_ip %v, want 203.0.113.9", got)
	}
}
