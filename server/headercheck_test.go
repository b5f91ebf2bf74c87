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
	s.tab = compileTable(s.routes())
	return s
}

// TestMatchRoute: the table finds a request's row (literal segments in any
// case, a trailing slash ignored, the target in origin or absolute form),
// and nothing for a path no row has.
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
		{"POST", "/v1/encrypt/default?verify=full", "/v1/encrypt/:key"},
		{"POST", "http://host:8080/v1/encrypt/default", "/v1/encrypt/:key"},
		{"POST", "HTTPS://host/v1/encrypt/default?x=1", "/v1/encrypt/:key"},
		{"GET", "http://host", ""},
		{"GET", "http://host?x", ""},
		{"POST", "ftp://host/v1/encrypt/default", ""},
		{"POST", "host:443", ""},
		{"OPTIONS", "*", ""},
	} {
		got := ""
		if r, _, _ := s.tab.match([]byte(tc.method), requestPath([]byte(tc.path))); r != nil {
			got = r.path
		}
		if got != tc.want {
			t.Errorf("%s %s: matched %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
	// The key is the segment as sent; another method on a known path is
	// told from an unknown path.
	if r, args, _ := s.tab.match([]byte("POST"), requestPath([]byte("http://h/V1/encrypt/MyKey/"))); r == nil || string(args.key) != "MyKey" {
		t.Errorf("key %q of %v, want MyKey", args.key, r)
	}
	if r, _, known := s.tab.match([]byte("GET"), []byte("/v1/encrypt/k")); r != nil || !known {
		t.Errorf("GET on the encrypt route: row %v, path known %v; want none, true", r, known)
	}
	if _, _, known := s.tab.match([]byte("GET"), []byte("/v1/nothing")); known {
		t.Error("an unknown path is known")
	}
}

func TestScanHeaderNames(t *testing.T) {
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
		if got, _ := scanHeaderNames([]byte(raw)); got != want {
			t.Errorf("%q: %v, want %v", raw, got, want)
		}
	}
	for raw, want := range map[string]int{
		"Host: x\r\n\r\n": 0,
		"Host: x\r\nContent-Type: application/json\r\n\r\n":                       1,
		"Content-type: a\r\nX-Content-Type: b\r\ncontent-type: c\r\n\r\n":         2,
		"Host: x\r\nContent-Types: a\r\nContent-Type-X: b\r\nContent-Type: c\r\n": 1,
	} {
		if _, got := scanHeaderNames([]byte(raw)); got != want {
			t.Errorf("%q: %d Content-Type lines, want %d", raw, got, want)
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
				s.checkHeaders(&h, s.tab)
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
