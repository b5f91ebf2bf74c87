package server

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/internal/proctest"
)

// The front tests speak raw HTTP/1.1 over TCP to a real listening server:
// keep-alive and pipelining, limits answered from the headers, what a
// request fasthttp cannot parse gets back, and header names.

// frontConn is a raw connection to ts with a reader for its responses.
type frontConn struct {
	net.Conn
	br *bufio.Reader
}

func frontDial(t *testing.T, ts *testServer) *frontConn {
	t.Helper()
	addr := strings.TrimPrefix(ts.URL, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return &frontConn{Conn: c, br: bufio.NewReader(c)}
}

// read reads one response and its body.
func (c *frontConn) read(t *testing.T) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading a response body: %v", err)
	}
	return resp, b
}

// closed reports whether the server closed the connection (within d) with
// nothing more to read.
func (c *frontConn) closed(d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	n, err := c.br.Read(make([]byte, 1))
	return n == 0 && err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestKeepAlivePipelinedGETs pipelines 1000 GETs on one connection: all
// 1000 are answered, none with Connection: close.
func TestKeepAlivePipelinedGETs(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	c := frontDial(t, ts)
	const n = 1000
	paths := []string{api.RouteHealthz, api.RouteVersion, api.RouteReadyz, api.RouteKeys}
	go func() {
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", paths[i%len(paths)], ts.Token)
		}
		c.Write(b.Bytes())
	}()
	for i := range n {
		resp, body := c.read(t)
		if resp.StatusCode != 200 {
			t.Fatalf("response %d: %d %.200s", i, resp.StatusCode, body)
		}
		if resp.Close {
			t.Fatalf("response %d of %d says Connection: close", i+1, n)
		}
	}
}

// TestKeepAliveBodylessPOSTs: POSTs without a body, with Content-Length: 0
// or with no framing header at all, keep the connection, as do small
// bodies that are refused.
func TestKeepAliveBodylessPOSTs(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	c := frontDial(t, ts)
	auth := "Authorization: Bearer " + ts.Token + "\r\n"
	reqs := []struct {
		raw    string
		status int
	}{
		{"POST /v1/datakey/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 0\r\n\r\n", 200},
		{"POST /v1/datakey/default HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", 200},
		{"POST /v1/keys/default/rotate HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", 200},
		{"POST /v1/keys/default/rotate HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 0\r\n\r\n", 200},
		{"POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 401},
		{"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200},
	}
	var all strings.Builder
	for _, r := range reqs {
		all.WriteString(r.raw)
	}
	go io.WriteString(c, all.String())
	for i, r := range reqs {
		resp, body := c.read(t)
		if resp.StatusCode != r.status {
			t.Errorf("request %d: %d %.200s; want %d", i, resp.StatusCode, body, r.status)
		}
		if resp.Close {
			t.Fatalf("request %d (%.60q) closed the connection", i, r.raw)
		}
	}
}

// TestKeepAliveTLS: over TLS, a client's GETs share one connection (one
// handshake).
func TestKeepAliveTLS(t *testing.T) {
	p := newSecPKI(t)
	ts := p.start(t, Config{}, false)
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.leaf)
	handshakes := 0
	tc := &tls.Config{RootCAs: roots, VerifyConnection: func(tls.ConnectionState) error { handshakes++; return nil }}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, MaxConnsPerHost: 1}}
	defer cl.CloseIdleConnections()
	reused := 0
	const n = 50
	for i := range n {
		req, _ := http.NewRequest("GET", ts.URL+api.RouteHealthz, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(ci httptrace.GotConnInfo) {
				if ci.Reused {
					reused++
				}
			},
		}))
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("GET %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %d: %d", i, resp.StatusCode)
		}
	}
	if handshakes != 1 || reused != n-1 {
		t.Errorf("%d GETs over TLS: %d handshakes, %d on a reused connection; want 1 and %d", n, handshakes, reused, n-1)
	}
}

// frontError decodes the error shape and checks that it carries the
// response's request ID.
func frontError(t *testing.T, resp *http.Response, body []byte) api.Error {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(body, &e); err != nil || e.Code == "" {
		t.Fatalf("%d: not the error shape: %.300q", resp.StatusCode, body)
	}
	id := resp.Header.Get(api.HeaderRequestID)
	if id == "" || e.RequestID != id {
		t.Errorf("%d %s: X-Request-Id %q, request_id %q; want both, equal", resp.StatusCode, e.Code, id, e.RequestID)
	}
	return e
}

// frontAccessLine returns the fields of the access line of request id.
func frontAccessLine(t *testing.T, ts *testServer, id string) map[string]any {
	t.Helper()
	var line map[string]any
	if !proctest.Poll(2*time.Second, func() bool {
		for _, l := range ts.Logs.All() {
			if l.Message == "access" && l.ContextMap()["request_id"] == id {
				line = l.ContextMap()
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no access line with request_id %s", id)
	}
	return line
}

// TestTooLargeFromHeaders: a Content-Length over the route's limit is
// answered 413 (415 for a type the route does not take) from the headers,
// before a byte of the body arrives (the client here sends none), and the
// connection is closed; with Expect: 100-continue, no 100 Continue is sent
// first.
func TestTooLargeFromHeaders(t *testing.T) {
	const limit = 4 << 10
	// A long request timeout: an answer that waited for it would fail
	// the test by the connection's deadline.
	ts := startTestServer(t, Config{SkipBenchmark: true, MaxJSONBody: limit, MaxVerifyFull: 1 << 20, RequestTimeout: time.Minute})
	auth := "Authorization: Bearer " + ts.Token + "\r\n"
	big := 100 << 20
	cases := []struct {
		name, head string
		code       api.Code
	}{
		{"JSON encrypt", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\n" + fmt.Sprintf("Content-Length: %d\r\n", limit+1), api.CodeTooLarge},
		{"JSON decrypt", "POST /v1/decrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\n" + fmt.Sprintf("Content-Length: %d\r\n", big), api.CodeTooLarge},
		{"data key", "POST /v1/datakey/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\n" + fmt.Sprintf("Content-Length: %d\r\n", 64<<10+1), api.CodeTooLarge},
		{"key config", "PUT /v1/keys/default/config HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\n" + fmt.Sprintf("Content-Length: %d\r\n", big), api.CodeTooLarge},
		{"unauthenticated", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + fmt.Sprintf("Content-Length: %d\r\n", big), api.CodeTooLarge},
		{"Expect: 100-continue", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nExpect: 100-continue\r\n" + fmt.Sprintf("Content-Length: %d\r\n", big), api.CodeTooLarge},
		{"no body taken", "DELETE /v1/keys/default HTTP/1.1\r\nHost: x\r\n" + auth + fmt.Sprintf("Content-Length: %d\r\n", big), api.CodeTooLarge},
		{"a type the route does not take", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: text/plain\r\n" + fmt.Sprintf("Content-Length: %d\r\n", big), api.CodeUnsupportedMedia},
		{"?verify=full over its limit", "POST /v1/decrypt/default?verify=full HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/octet-stream\r\n" + fmt.Sprintf("Content-Length: %d\r\n", big), api.CodeTooLarge},
		{"?verify=full over its limit, with Expect", "POST /v1/decrypt/default?verify=full HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/octet-stream\r\nExpect: 100-continue\r\n" + fmt.Sprintf("Content-Length: %d\r\n", big), api.CodeTooLarge},
		{"?verify=full escaped", "POST /v1/decrypt/default?verify=%66ull HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/octet-stream\r\nExpect: 100-continue\r\n" + fmt.Sprintf("Content-Length: %d\r\n", big), api.CodeTooLarge},
	}
	// Every case again in the absolute form, which forward proxies send:
	// the same row, the same checks.
	for _, tc := range slices.Clone(cases) {
		method, rest, _ := strings.Cut(tc.head, " ")
		tc.name += ", absolute form"
		tc.head = method + " http://x" + rest
		cases = append(cases, tc)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := frontDial(t, ts)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, tc.head+"\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, body := c.read(t)
			if resp.StatusCode == 100 {
				t.Fatal("100 Continue for a body over the limit")
			}
			if resp.StatusCode != tc.code.Status() && !(resp.StatusCode == 417 && strings.Contains(tc.head, "Expect")) {
				t.Fatalf("%d %.200s; want %d", resp.StatusCode, body, tc.code.Status())
			}
			e := frontError(t, resp, body)
			if e.Code != tc.code {
				t.Errorf("code %s, want %s", e.Code, tc.code)
			}
			route := string(requestPath([]byte(strings.Fields(tc.head)[1])))
			if line := frontAccessLine(t, ts, e.RequestID); line["status"] != int64(resp.StatusCode) || line["route"] == routeUnmatched || !strings.HasPrefix(route, strings.Split(line["route"].(string), ":")[0]) {
				t.Errorf("access line %v; want status %d, the pattern of %s", line, resp.StatusCode, route)
			}
			if !resp.Close || !c.closed(2*time.Second) {
				t.Error("the connection with the unread body stays open")
			}
		})
	}

	// Within the limit, Expect: 100-continue gets its 100 and then the
	// answer.
	c := frontDial(t, ts)
	body := `{"plaintext":"aGVsbG8="}`
	io.WriteString(c, "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/json\r\nExpect: 100-continue\r\n"+fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)))
	if resp, _ := c.read(t); resp.StatusCode != 100 {
		t.Fatalf("within the limit: %d, want 100 Continue", resp.StatusCode)
	}
	io.WriteString(c, body)
	if resp, b := c.read(t); resp.StatusCode != 200 {
		t.Fatalf("within the limit: %d %.200s", resp.StatusCode, b)
	}
	// A stream has no limit: its large Content-Length is read.
	if code, _, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, bytes.NewReader(make([]byte, 2*limit)), ""); code != 200 {
		t.Fatalf("a stream over the JSON limit: %d", code)
	}
}

// TestSlowStartStream: a stream whose first bytes trickle in for longer
// than request_timeout is not cut while it moves: the stream idle timeout
// governs a stream from its first body byte on.
func TestSlowStartStream(t *testing.T) {
	const reqTimeout, idle = 300 * time.Millisecond, 3 * time.Second
	ts := startTestServer(t, Config{SkipBenchmark: true, RequestTimeout: reqTimeout, StreamIdleTimeout: idle})
	pt := make([]byte, 20000)
	rand.Read(pt)
	for _, tc := range []struct{ framing, target string }{
		{"length", "/v1/encrypt/default"},
		{"chunked", "/v1/encrypt/default"},
		// The absolute form, which forward proxies send, is the same
		// route with the same checks.
		{"length", "http://x/v1/encrypt/default"},
		{"chunked", "http://x/v1/encrypt/default"},
	} {
		framing := tc.framing
		t.Run(framing+" "+tc.target, func(t *testing.T) {
			c := frontDial(t, ts)
			head := "POST " + tc.target + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ts.Token + "\r\nContent-Type: application/octet-stream\r\n"
			if framing == "length" {
				head += fmt.Sprintf("Content-Length: %d\r\n\r\n", len(pt))
			} else {
				head += "Transfer-Encoding: chunked\r\n\r\n"
			}
			errc := make(chan error, 1)
			go func() {
				write := func(b []byte) error {
					if framing == "chunked" {
						b = fmt.Appendf(nil, "%x\r\n%s\r\n", len(b), b)
					}
					_, err := c.Write(b)
					return err
				}
				if _, err := io.WriteString(c, head); err != nil {
					errc <- err
					return
				}
				// 100 bytes every 100 ms for a second: more than three
				// request timeouts, far less than fasthttp's 8 KiB
				// read-ahead.
				rest := pt
				for range 10 {
					time.Sleep(100 * time.Millisecond)
					if err := write(rest[:100]); err != nil {
						errc <- err
						return
					}
					rest = rest[100:]
				}
				err := write(rest)
				if err == nil && framing == "chunked" {
					_, err = io.WriteString(c, "0\r\n\r\n")
				}
				errc <- err
			}()
			resp, ct := c.read(t)
			if err := <-errc; err != nil {
				t.Fatalf("sending: %v", err)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("%d %.200q", resp.StatusCode, ct)
			}
			code, got, _ := ts.do(t, "POST", "/v1/decrypt/default", api.ContentTypeStream, bytes.NewReader(ct), "")
			if code != 200 || !bytes.Equal(got, pt) {
				t.Fatalf("decrypting the slow stream's ciphertext: %d, %d bytes, equal %v", code, len(got), bytes.Equal(got, pt))
			}
		})
	}
}

// TestParseErrorsIdentified: a request fasthttp cannot parse, or whose
// headers time out, gets the error shape with a request ID, also in
// X-Request-Id, and an access line with that ID.
func TestParseErrorsIdentified(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, RequestTimeout: 300 * time.Millisecond})
	cases := []struct {
		name, raw string
		status    int
	}{
		{"bad Content-Length", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nContent-Length: twelve\r\n\r\n", 400},
		{"two Content-Lengths", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"no request line", "\x00\x01\x02 nonsense\r\n\r\n", 400},
		{"unknown method", "BREW /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"unknown method, unknown route", "BREW /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404},
		{"half the headers", "GET /healthz HTTP/1.1\r\nHost: x\r\n", 408},
		{"nothing at all", "", 408},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts.Logs.TakeAll()
			c := frontDial(t, ts)
			c.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(c, tc.raw)
			resp, body := c.read(t)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %.200q; want %d", resp.StatusCode, body, tc.status)
			}
			e := frontError(t, resp, body)
			if e.RequestID == "" {
				return
			}
			line := frontAccessLine(t, ts, e.RequestID)
			if line["status"] != int64(tc.status) || line["route"] != routeUnmatched {
				t.Errorf("access line %v; want status %d, route %s", line, tc.status, routeUnmatched)
			}
		})
	}
}

// TestHeaderNameRefused: a header name that is not an RFC 9110 token (a
// space inside, a separator) is refused with 400 before the route runs.
func TestHeaderNameRefused(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	for _, name := range []string{"Foo Bar", "X-A(b)", "X-A@b", "X\"q", "Cipherd Context"} {
		t.Run(name, func(t *testing.T) {
			c := frontDial(t, ts)
			io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n"+name+": v\r\n\r\n")
			resp, body := c.read(t)
			if resp.StatusCode != 400 {
				t.Fatalf("%d %.200q; want 400", resp.StatusCode, body)
			}
			if e := frontError(t, resp, body); e.Code != api.CodeBadRequest || strings.Contains(e.Message, name) {
				t.Errorf("error %+v: want %s, without the header's name", e, api.CodeBadRequest)
			}
		})
	}
	// Every token character is fine.
	c := frontDial(t, ts)
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-!#$%&'*+-.^_`|~09az: v\r\n\r\n")
	if resp, body := c.read(t); resp.StatusCode != 200 {
		t.Fatalf("a name of token characters: %d %.200q", resp.StatusCode, body)
	}
}

// TestMethods: a 405 names the route's methods in Allow (RFC 9110, 15.5.6),
// whatever the method, one fiber routes or not; HEAD is a GET without its
// content, and 404 stays 404 for any method.
func TestMethods(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"DELETE", "/v1/encrypt/default", 405, "POST"},
		{"PROPFIND", "/v1/keys", 405, "GET, HEAD"},
		{"PUT", "/v1/keys/default", 405, "DELETE, GET, HEAD, POST"},
		{"PROPFIND", "/v1/nowhere", 404, ""},
		{"HEAD", "/v1/nowhere", 404, ""},
	}
	send := func(method, path string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+ts.Token)
		resp, err := plainClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	for _, c := range cases {
		resp, b := send(c.method, c.path)
		if resp.StatusCode != c.status || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d, Allow %q, %.200s; want %d, Allow %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), b, c.status, c.allow)
		}
	}
	for _, path := range []string{"/healthz", "/v1/keys/default", "/speed?format=json"} {
		get, body, _ := ts.do(t, "GET", path, "", nil, "")
		resp, b := send("HEAD", path)
		if resp.StatusCode != get || len(b) != 0 || get == 200 && resp.ContentLength != int64(len(body)) {
			t.Errorf("HEAD %s: %d, Content-Length %d, %d bytes of content; GET: %d, %d bytes", path, resp.StatusCode, resp.ContentLength, len(b), get, len(body))
		}
	}
}

// TestTLSOnPlainPort: a TLS client on a plain-HTTP port is answered at
// once, not after the request timeout: Go's client says the server gave an
// HTTP response, and the answer is the error shape. A plain request on the
// same server is unaffected.
func TestTLSOnPlainPort(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, RequestTimeout: 5 * time.Second})
	start := time.Now()
	cl := &http.Client{Timeout: 4 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	_, err := cl.Get(strings.Replace(ts.URL, "http://", "https://", 1) + "/healthz")
	if err == nil || !strings.Contains(err.Error(), "HTTP response to HTTPS client") {
		t.Fatalf("https:// to a plain port: %v; want Go's \"HTTP response to HTTPS client\"", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("answered after %v: the handshake waited for a request line", d)
	}

	c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(4 * time.Second))
	c.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || codeOf(b) != api.CodeBadRequest || !resp.Close {
		t.Errorf("a TLS record on a plain port: %d %s (close %v), want 400 %s and the connection closed", resp.StatusCode, b, resp.Close, api.CodeBadRequest)
	}
	if code, _, _ := ts.do(t, "GET", "/healthz", "", nil, "-"); code != 200 {
		t.Errorf("/healthz after: %d", code)
	}
}
