package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cipherd/cipherd/client"
)

// A source that knows its length (a bytes.Reader, a regular file) is sent
// with it, the answer comes with the exact length, and a decrypt that ends
// short of it is an incomplete stream; a source of unknown length is sent
// chunked. A proxy in front of the service records the framing.
func TestClientStreamKnownLength(t *testing.T) {
	base, _ := startServer(t)
	target, _ := url.Parse(base)
	var mu sync.Mutex
	var sent []int64 // the Content-Length of each upload; -1 chunked
	proxy := httputil.NewSingleHostReverseProxy(target)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.ContentLength)
		mu.Unlock()
		// The service answers while the upload goes on.
		http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	}))
	defer hs.Close()
	c := newClient(t, hs.URL)
	ctx := context.Background()
	pt := make([]byte, 1<<20+7)
	rand.Read(pt)
	file := filepath.Join(t.TempDir(), "pt")
	if err := os.WriteFile(file, pt, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var ct bytes.Buffer
	if _, err := c.EncryptStream(ctx, "default", &ct, f, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := c.DecryptStream(ctx, "default", &out, bytes.NewReader(ct.Bytes()), nil); err != nil || !bytes.Equal(out.Bytes(), pt) {
		t.Fatalf("decrypt of known length: %v, equal %v", err, bytes.Equal(out.Bytes(), pt))
	}
	out.Reset()
	if _, err := c.DecryptStream(ctx, "default", &out, io.MultiReader(bytes.NewReader(ct.Bytes())), nil); err != nil || !bytes.Equal(out.Bytes(), pt) {
		t.Fatalf("decrypt of unknown length: %v", err)
	}
	mu.Lock()
	got := append([]int64(nil), sent...)
	mu.Unlock()
	if want := []int64{int64(len(pt)), int64(ct.Len()), -1}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("uploads framed %v, want %v", got, want)
	}

	// A forged last chunk: the answer of known length ends short.
	forged := bytes.Clone(ct.Bytes())
	forged[len(forged)-2] ^= 1
	out.Reset()
	if _, err := c.DecryptStream(ctx, "default", &out, bytes.NewReader(forged), nil); !errors.Is(err, client.ErrIncompleteStream) || out.Len() >= len(pt) {
		t.Fatalf("forged stream of known length: %v, %d bytes out", err, out.Len())
	}
}
