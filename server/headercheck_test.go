package server

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// headerCheckServer is a Server with just enough for checkHeaders.
func headerCheckServer() *Server {
	s := &Server{cfg: Config{}.Defaults()}
	s.headerRoutes = newHeaderRoutes(s.routes())
	s.minJSONBody = minJSONBody(s.headerRoutes)
	return s
}

// TestMatchRoute: checkHeaders finds the row fiber routes to, matching as
// fiber does (case-insensitive, a trailing slash ignored), and nothing for
// what fiber would not route.
func TestMatchRoute(t *testing.T) {
	s := headerCheckServer()
	for _, tc := range []struct{ method, path, want string }{
		{"POST", "/v1/encrypt/default", "/v1/encrypt/:key"},
		{"POST", "/V1/Encrypt/default/", "/v1/encrypt/:key"},
		{"GET", "/v1/keys", "/v1/keys"},
		{"GET", "/v1/keys/k1", "/v1/keys/:key"},
		{"POST", "/v1/keys/k1/rotate", "/v1/keys/:key/rotate"},
		{"PUT", "/v1/keys/k1/config", "/v1/keys/:key/config"},
		{"GET", "/healthz", "/healthz"},
		{"POST", "/v1/encrypt/", ""},
		{"POST", "/v1/encrypt", ""},
		{"POST", "/v1/encrypt/a/b", ""},
		{"GET", "/v1/encrypt/default", ""},
		{"POST", "v1/encrypt/default", ""},
		{"POST", "", ""},
		{"POST", "/", ""},
		{"GET", "/v1/keys/k1/rotate/x", ""},
	} {
		got := ""
		if i := matchRoute(s.headerRoutes, []byte(tc.method), []byte(tc.path)); i >= 0 {
			got = s.headerRoutes[i].path
		}
		if got != tc.want {
			t.Errorf("%s %s: matched %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestValidHeaderNames(t *testing.T) {
	for raw, want := range map[string]bool{
		"Host: x\r\nX-A: b\r\n\r\n":          true,
		"Host: x\r\nX-!#$%&'*+.^_`|~: b\r\n": true,
		"Host: x\r\nX A: b\r\n\r\n":          false,
		"Host: x\r\nX-A: b\r\n c\r\n\r\n":    false, // obsolete line folding
		"Host: x\r\n: b\r\n\r\n":             false,
		"Host: x\r\nX-\x7f: b\r\n\r\n":       false,
		"Host: x\r\nX-\xc3\xa9: b\r\n\r\n":   false,
		"Host: x\r\nno colon\r\n\r\n":        false,
		"":                                   true,
	} {
		if got := validHeaderNames([]byte(raw)); got != want {
			t.Errorf("%q: %v, want %v", raw, got, want)
		}
	}
}

// BenchmarkCheckHeaders is the cost checkHeaders adds to a request: a GET,
// a stream, whose route it looks up, and a small JSON POST, which needs no
// lookup.
func BenchmarkCheckHeaders(b *testing.B) {
	s := headerCheckServer()
	for _, tc := range []struct{ name, raw string }{
		{"GET", "GET /healthz HTTP/1.1\r\nHost: cipherd:8080\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n"},
		{"POST-stream", "POST /v1/encrypt/default HTTP/1.1\r\nHost: cipherd:8080\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 1048576\r\nAuthorization: Bearer 0123456789abcdef0123456789abcdef\r\nContent-Type: application/octet-stream\r\nAccept-Encoding: gzip\r\n\r\n"},
		{"POST-JSON", "POST /v1/encrypt/default HTTP/1.1\r\nHost: cipherd:8080\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 25\r\nAuthorization: Bearer 0123456789abcdef0123456789abcdef\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n"},
	} {
		var h fasthttp.RequestHeader
		if err := h.Read(bufio.NewReader(strings.NewReader(tc.raw))); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			cpu := processCPU()
			for range b.N {
				s.checkHeaders(&h)
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
