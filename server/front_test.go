package server

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
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
