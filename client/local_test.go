package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/server"
)

// countingTransport counts the requests of each path.
type countingTransport struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n[strings.SplitN(strings.TrimPrefix(r.URL.Path, "/v1/"), "/", 2)[0]]++
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(route string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[route]
}

func countingClient(t *testing.T, base string, opts ...client.Option) (*client.Client, *countingTransport) {
	ct := &countingTransport{n: map[string]int{}}
	return newClient(t, base, append([]client.Option{client.WithHTTPClient(&http.Client{Transport: ct})}, opts...)...), ct
}

// Locally sealed messages open through the service, JSON and stream, and
// the service's open locally, whole, streamed and by range.
func TestLocalSealAndOpen(t *testing.T) {
	base, _ := startServer(t)
	c := newClient(t, base)
	ctx := context.Background()
	l, err := c.NewLocalSealer("default", client.LocalLimits{})
	if err != nil {
		t.Fatal(err)
	}
	aad := []byte("tenant 7")
	msg := []byte("sealed where the data lives")
	ct, err := l.Seal(ctx, msg, aad)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := c.Decrypt(ctx, "default", ct, aad); err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("a local seal through the service: %v", err)
	}
	if pt, err := c.OpenLocal(ctx, "default", ct, aad); err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("a local seal opened locally: %v", err)
	}
	appended, err := l.AppendSeal(ctx, []byte("prefix"), msg, aad)
	if err != nil || !bytes.HasPrefix(appended, []byte("prefix")) {
		t.Fatalf("AppendSeal: %v", err)
	}
	if pt, err := c.Decrypt(ctx, "default", appended[len("prefix"):], aad); err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("AppendSeal's message through the service: %v", err)
	}
	enc, err := c.Encrypt(ctx, "default", msg, aad)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := c.OpenLocal(ctx, "default", enc.Ciphertext, aad); err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("the service's seal opened locally: %v", err)
	}
	if _, err := c.OpenLocal(ctx, "default", ct, []byte("other")); !errors.Is(err, client.ErrDecryptFailed) {
		t.Fatalf("another context: %v, want ErrDecryptFailed", err)
	}

	big := make([]byte, 3<<20+11)
	rand.Read(big)
	var local, remote bytes.Buffer
	if _, err := l.EncryptStream(ctx, &local, bytes.NewReader(big), aad); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EncryptStream(ctx, "default", &remote, bytes.NewReader(big), aad); err != nil {
		t.Fatal(err)
	}
	for name, sealed := range map[string][]byte{"local": local.Bytes(), "service": remote.Bytes()} {
		var out bytes.Buffer
		if _, err := c.DecryptStream(ctx, "default", &out, bytes.NewReader(sealed), aad); err != nil || !bytes.Equal(out.Bytes(), big) {
			t.Fatalf("%s stream through the service: %v", name, err)
		}
		out.Reset()
		if _, err := c.DecryptStreamLocal(ctx, "default", &out, bytes.NewReader(sealed), aad); err != nil || !bytes.Equal(out.Bytes(), big) {
			t.Fatalf("%s stream opened locally: %v", name, err)
		}
		out.Reset()
		if _, err := c.DecryptRangeLocal(ctx, "default", &out, bytes.NewReader(sealed), int64(len(sealed)), 1<<20, 100000, aad); err != nil || !bytes.Equal(out.Bytes(), big[1<<20:1<<20+100000]) {
			t.Fatalf("%s range opened locally: %v", name, err)
		}
		// A flipped byte: never a complete stream.
		bad := bytes.Clone(sealed)
		bad[len(bad)-5] ^= 1
		out.Reset()
		if _, err := c.DecryptStreamLocal(ctx, "default", &out, bytes.NewReader(bad), aad); !errors.Is(err, client.ErrIncompleteStream) {
			t.Fatalf("%s stream, tampered, opened locally: %v", name, err)
		}
	}
}

// EncryptFile seals a file from its offset to its end, mapped or read, and
// the message opens through the service.
func TestLocalEncryptFile(t *testing.T) {
	base, _ := startServer(t)
	c := newClient(t, base)
	ctx := context.Background()
	l, err := c.NewLocalSealer("default", client.LocalLimits{})
	if err != nil {
		t.Fatal(err)
	}
	aad := []byte("tenant 7")
	data := make([]byte, 2<<20+4099)
	rand.Read(data)
	path := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// From the start, from an offset within a page, and at the end (an
	// empty rest, which is not mapped).
	for _, off := range []int64{0, 5000, int64(len(data))} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		var sealed bytes.Buffer
		info, err := l.EncryptFile(ctx, &sealed, f, aad)
		if err != nil || info.Written != int64(sealed.Len()) {
			t.Fatalf("offset %d: %v, %d written of %d", off, err, info.Written, sealed.Len())
		}
		if pos, _ := f.Seek(0, io.SeekCurrent); pos != int64(len(data)) {
			t.Errorf("offset %d: the file's offset is %d after EncryptFile, want its end", off, pos)
		}
		f.Close()
		var out bytes.Buffer
		if _, err := c.DecryptStream(ctx, "default", &out, &sealed, aad); err != nil || !bytes.Equal(out.Bytes(), data[off:]) {
			t.Fatalf("offset %d: the sealed file through the service: %v", off, err)
		}
	}
}

// The sealer keeps its sealing key within the service's and its own
// limits, and asks again at each limit; cached message keys need no call.
func TestLocalSealerLimits(t *testing.T) {
	base, _ := startServerConfig(t, server.Config{LocalSealMaxMessages: 100})
	c, calls := countingClient(t, base)
	ctx := context.Background()
	l, _ := c.NewLocalSealer("default", client.LocalLimits{})
	for range 1000 {
		if _, err := l.Seal(ctx, []byte("m"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.count("sealkey"); n != 10 {
		t.Errorf("1000 messages at the service's 100 per key: %d sealing keys, want 10", n)
	}
	l2, _ := c.NewLocalSealer("default", client.LocalLimits{MaxMessages: 1 << 40, MaxBytes: 1000})
	for range 30 {
		l2.Seal(ctx, make([]byte, 100), nil)
	}
	if n := calls.count("sealkey") - 10; n != 3 {
		t.Errorf("30 messages of 100 bytes at 1000 bytes per key: %d sealing keys, want 3", n)
	}
	l3, _ := c.NewLocalSealer("default", client.LocalLimits{MaxAge: time.Millisecond})
	l3.Seal(ctx, nil, nil)
	time.Sleep(5 * time.Millisecond)
	l3.Seal(ctx, nil, nil)
	if n := calls.count("sealkey") - 13; n != 2 {
		t.Errorf("two messages 5 ms apart at 1 ms per key: %d sealing keys, want 2", n)
	}

	ct, _ := l.Seal(ctx, []byte("again"), nil)
	for range 3 {
		if _, err := c.OpenLocal(ctx, "default", ct, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.count("messagekey"); n != 1 {
		t.Errorf("one message opened 3 times: %d message keys asked, want 1", n)
	}
	c2, calls2 := countingClient(t, base, client.WithMessageKeyCache(0, 0))
	for range 3 {
		c2.OpenLocal(ctx, "default", ct, nil)
	}
	if n := calls2.count("messagekey"); n != 3 {
		t.Errorf("without a cache: %d message keys asked, want 3", n)
	}
}

// Local sealing and opening are operations of their own: decrypt on the
// service does not allow local opening, and local sealing does not allow
// local opening.
func TestLocalPolicies(t *testing.T) {
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	base, _ := startServerConfig(t, server.Config{
		Policies: []server.PolicyConfig{
			{Name: "service-only", Allow: []server.RuleConfig{{Ops: []string{"encrypt", "decrypt"}, Keys: []string{"*"}}}},
			{Name: "seal-only", Allow: []server.RuleConfig{{Ops: []string{"encrypt-local", "decrypt"}, Keys: []string{"*"}}}},
		},
		Identities: []server.IdentityConfig{
			{Name: "svc", TokenSHA256: sum("svc-token"), Policies: []string{"service-only"}},
			{Name: "sealer", TokenSHA256: sum("sealer-token"), Policies: []string{"seal-only"}},
		},
	})
	ctx := context.Background()
	admin := newClient(t, base)
	enc, err := admin.Encrypt(ctx, "default", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := newClient(t, base, client.WithToken("svc-token"))
	if _, err := svc.Decrypt(ctx, "default", enc.Ciphertext, nil); err != nil {
		t.Fatalf("decrypt through the service: %v", err)
	}
	if _, err := svc.OpenLocal(ctx, "default", enc.Ciphertext, nil); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("decrypt allowed, local opening: %v, want ErrForbidden", err)
	}
	l, _ := svc.NewLocalSealer("default", client.LocalLimits{})
	if _, err := l.Seal(ctx, []byte("x"), nil); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("encrypt allowed, local sealing: %v, want ErrForbidden", err)
	}
	sealer := newClient(t, base, client.WithToken("sealer-token"))
	ls, _ := sealer.NewLocalSealer("default", client.LocalLimits{})
	ct, err := ls.Seal(ctx, []byte("y"), nil)
	if err != nil {
		t.Fatalf("local sealing allowed: %v", err)
	}
	if _, err := sealer.OpenLocal(ctx, "default", ct, nil); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("local sealing allowed, local opening: %v, want ErrForbidden", err)
	}
	if pt, err := sealer.Decrypt(ctx, "default", ct, nil); err != nil || string(pt) != "y" {
		t.Errorf("its local seal through the service: %v", err)
	}
}
