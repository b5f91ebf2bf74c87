package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/server"
)

const adminToken = "t"

// startServer runs a real cipherd on a loopback port until the test ends and
// returns its URL.
func startServer(t testing.TB) (string, *server.Server) {
	t.Helper()
	return startServerConfig(t, server.Config{})
}

// startServerConfig is startServer with cfg's settings besides the test's
// data directory, token and logger; with cfg.TLSCert the URL is https.
func startServerConfig(t testing.TB, cfg server.Config) (string, *server.Server) {
	t.Helper()
	cfg.DataDir, cfg.AdminToken, cfg.SkipBenchmark, cfg.Logger = t.TempDir(), adminToken, true, zap.NewNop()
	cfg.Keystore = cryptosvc.NewMemStore()
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	scheme := "http://"
	if cfg.TLSCert != "" {
		scheme = "https://"
	}
	return scheme + ln.Addr().String(), srv
}

func newClient(t testing.TB, url string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(url, append([]client.Option{client.WithToken(adminToken)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientJSON(t *testing.T) {
	url, _ := startServer(t)
	c := newClient(t, url)
	ctx := context.Background()

	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	for _, pt := range [][]byte{nil, {}, []byte("hello"), bytes.Repeat([]byte{7}, 100_000)} {
		res, err := c.Encrypt(ctx, "default", pt, []byte("ctx"))
		if err != nil || res.KeyVersion != 1 || res.AEAD == "" || len(res.Ciphertext) == 0 {
			t.Fatalf("Encrypt(%d bytes): %+v, %v", len(pt), res, err)
		}
		got, err := c.Decrypt(ctx, "default", res.Ciphertext, []byte("ctx"))
		if err != nil || !bytes.Equal(got, pt) || got == nil {
			t.Fatalf("Decrypt(%d bytes): %d bytes, %v", len(pt), len(got), err)
		}
	}

	// Key administration, and rewrap to a new version.
	k, err := c.CreateKey(ctx, "orders", api.CreateKeyRequest{})
	if err != nil || k.Name != "orders" || k.LatestVersion != 1 {
		t.Fatalf("CreateKey: %+v, %v", k, err)
	}
	if _, err := c.CreateKey(ctx, "orders", api.CreateKeyRequest{}); !errors.Is(err, client.ErrKeyExists) {
		t.Fatalf("CreateKey twice: %v", err)
	}
	res, err := c.Encrypt(ctx, "orders", []byte("order 42"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, err = c.RotateKey(ctx, "orders"); err != nil || k.LatestVersion != 2 {
		t.Fatalf("RotateKey: %+v, %v", k, err)
	}
	rw, err := c.Rewrap(ctx, "orders", res.Ciphertext, nil)
	if err != nil || rw.KeyVersion != 2 {
		t.Fatalf("Rewrap: %+v, %v", rw, err)
	}
	if pt, err := c.Decrypt(ctx, "orders", rw.Ciphertext, nil); err != nil || string(pt) != "order 42" {
		t.Fatalf("Decrypt rewrapped: %q, %v", pt, err)
	}
	dk, err := c.DataKey(ctx, "orders", api.DataKeyRequest{Bytes: 32})
	if err != nil || len(dk.Plaintext) != 32 || len(dk.Wrapped) == 0 {
		t.Fatalf("DataKey: %+v, %v", dk, err)
	}
	if k, err = c.DescribeKey(ctx, "orders"); err != nil || len(k.Versions) != 2 {
		t.Fatalf("DescribeKey: %+v, %v", k, err)
	}
	keys, err := c.ListKeys(ctx)
	if err != nil || len(keys) != 2 {
		t.Fatalf("ListKeys: %+v, %v", keys, err)
	}
	if err := c.DeleteKey(ctx, "orders"); !client.IsCode(err, api.CodeDeletionNotAllowed) {
		t.Fatalf("DeleteKey without permission: %v", err)
	}
	// A patch changes the fields it sets; ConfigureKey replaces them all.
	if k, err = c.UpdateKeyConfig(ctx, "orders", api.KeyConfigPatch{RotationPeriod: api.Some("720h"), AllowedAEADs: api.Some([]string{"aes-256-gcm"})}); err != nil ||
		k.RotationPeriod != "720h0m0s" || len(k.AllowedAEADs) != 1 {
		t.Fatalf("UpdateKeyConfig: %+v, %v", k, err)
	}
	if k, err = c.UpdateKeyConfig(ctx, "orders", api.KeyConfigPatch{MinDecryptionVersion: api.Some[uint32](2), AllowedAEADs: api.Null[[]string]()}); err != nil ||
		k.RotationPeriod != "720h0m0s" || k.MinDecryptionVersion != 2 || k.AllowedAEADs != nil {
		t.Fatalf("UpdateKeyConfig keeping rotation_period: %+v, %v", k, err)
	}
	if k, err = c.ConfigureKey(ctx, "orders", api.KeyConfig{DeletionAllowed: true}); err != nil ||
		!k.DeletionAllowed || k.RotationPeriod != "" || k.MinDecryptionVersion != 0 {
		t.Fatalf("ConfigureKey replacing the configuration: %+v, %v", k, err)
	}
	// DeleteKey schedules the deletion: the key is refused meanwhile.
	if err := c.DeleteKey(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if k, err = c.DescribeKey(ctx, "orders"); err != nil || k.Deletion == nil || !k.Deletion.DeleteAt.After(k.Deletion.Scheduled) {
		t.Fatalf("DescribeKey after DeleteKey: %+v, %v", k, err)
	}
	_, err = c.Encrypt(ctx, "orders", []byte("x"), nil)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 409 || ce.Code() != api.CodeKeyPendingDeletion || ce.API.RequestID == "" {
		t.Fatalf("Encrypt under a key pending deletion: %#v", err)
	}
	_, err = c.DescribeKey(ctx, "orders-never-made")
	if !errors.As(err, &ce) || ce.Status != 404 || ce.Code() != api.CodeKeyNotFound || ce.API.RequestID == "" || !errors.Is(err, client.ErrKeyNotFound) {
		t.Fatalf("DescribeKey of a missing key: %#v", err)
	}

	// Names that could change the path never leave the client.
	for _, bad := range []string{"", ".", "..", "a/b", "-x", strings.Repeat("k", 129)} {
		if _, err := c.Encrypt(ctx, bad, []byte("x"), nil); !client.IsCode(err, api.CodeInvalidKeyName) {
			t.Errorf("key %q: %v", bad, err)
		}
	}
}

func TestClientBatch(t *testing.T) {
	url, _ := startServer(t)
	c := newClient(t, url)
	ctx := context.Background()

	enc, err := c.EncryptBatch(ctx, "default", []api.EncryptItem{
		{Plaintext: []byte("a"), Reference: "1"},
		{Plaintext: []byte("b"), Context: []byte("c2"), Reference: "2"},
		{Plaintext: nil, Reference: "3"}, // an empty message
	})
	if err != nil || len(enc) != 3 {
		t.Fatalf("EncryptBatch: %+v, %v", enc, err)
	}
	for i, r := range enc {
		if r.Error != nil || r.Reference != string(rune('1'+i)) {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
	// One bad item: 207 with per-item errors, in order.
	dec, err := c.DecryptBatch(ctx, "default", []api.DecryptItem{
		{Ciphertext: enc[0].Ciphertext, Reference: "1"},
		{Ciphertext: enc[1].Ciphertext, Context: []byte("wrong"), Reference: "2"},
		{Ciphertext: enc[2].Ciphertext, Reference: "3"},
	})
	if err != nil || len(dec) != 3 {
		t.Fatalf("DecryptBatch: %+v, %v", dec, err)
	}
	if string(dec[0].Plaintext) != "a" || dec[0].Error != nil || dec[2].Error != nil || len(dec[2].Plaintext) != 0 {
		t.Errorf("good items: %+v %+v", dec[0], dec[2])
	}
	if dec[1].Error == nil || dec[1].Error.Code != api.CodeDecryptFailed || dec[1].Reference != "2" || !client.IsCode(dec[1].Error, api.CodeDecryptFailed) {
		t.Errorf("bad item: %+v", dec[1])
	}
	// Every item failing is still a batch answer, not a request error.
	dec, err = c.DecryptBatch(ctx, "default", []api.DecryptItem{{Ciphertext: []byte("junk")}})
	if err != nil || len(dec) != 1 || dec[0].Error == nil {
		t.Fatalf("all-failed batch: %+v, %v", dec, err)
	}
	rw, err := c.RewrapBatch(ctx, "default", []api.DecryptItem{{Ciphertext: enc[0].Ciphertext}})
	if err != nil || len(rw) != 1 || rw[0].Error != nil {
		t.Fatalf("RewrapBatch: %+v, %v", rw, err)
	}
	// A request-level failure is an error.
	if _, err := newClient(t, url, client.WithToken("nope")).EncryptBatch(ctx, "default", []api.EncryptItem{{Plaintext: []byte("a")}}); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("batch with a bad token: %v", err)
	}
}

// onlyReader hides bytes.Reader's length and WriterTo, so the request body
// is sent chunked, as from a pipe.
type onlyReader struct{ io.Reader }

func TestClientStreams(t *testing.T) {
	url, _ := startServer(t)
	c := newClient(t, url)
	ctx := context.Background()
	for _, n := range []int{0, 1, 16384, 16385, 5 << 20} {
		pt := make([]byte, n)
		rand.Read(pt)
		var ct, got bytes.Buffer
		info, err := c.EncryptStream(ctx, "default", &ct, onlyReader{bytes.NewReader(pt)}, []byte("stream ctx"))
		if err != nil || info.KeyVersion != 1 || info.AEAD == "" || info.Written != int64(ct.Len()) {
			t.Fatalf("%d bytes: EncryptStream: %+v, %v", n, info, err)
		}
		if ct.Len() <= n {
			t.Fatalf("%d bytes: ciphertext of %d bytes", n, ct.Len())
		}
		sealed := bytes.Clone(ct.Bytes())
		info, err = c.DecryptStream(ctx, "default", &got, onlyReader{&ct}, []byte("stream ctx"))
		if err != nil || !bytes.Equal(got.Bytes(), pt) || info.Written != int64(n) {
			t.Fatalf("%d bytes: DecryptStream: %+v, %v, equal=%v", n, info, err, bytes.Equal(got.Bytes(), pt))
		}
		// The JSON route opens what the streaming route sealed.
		if n <= 16385 {
			if back, err := c.Decrypt(ctx, "default", sealed, []byte("stream ctx")); err != nil || !bytes.Equal(back, pt) {
				t.Fatalf("%d bytes: JSON decrypt of a stream: %v", n, err)
			}
		}
	}
}

func TestClientStreamTamper(t *testing.T) {
	url, _ := startServer(t)
	c := newClient(t, url)
	ctx := context.Background()
	pt := make([]byte, 200_000)
	rand.Read(pt)
	var ct bytes.Buffer
	if _, err := c.EncryptStream(ctx, "default", &ct, bytes.NewReader(pt), nil); err != nil {
		t.Fatal(err)
	}
	sealed := ct.Bytes()
	cases := map[string][]byte{
		"flipped bit mid-stream": func() []byte { b := bytes.Clone(sealed); b[len(b)/2] ^= 1; return b }(),
		"flipped last byte":      func() []byte { b := bytes.Clone(sealed); b[len(b)-1] ^= 0x80; return b }(),
		"truncated":              sealed[:len(sealed)-20_000],
		"trailing data":          append(bytes.Clone(sealed), 0),
	}
	for name, b := range cases {
		var out bytes.Buffer
		_, err := c.DecryptStream(ctx, "default", &out, bytes.NewReader(b), nil)
		if err == nil {
			t.Errorf("%s: DecryptStream succeeded (%d bytes out)", name, out.Len())
			continue
		}
		var ce *client.Error
		if !errors.Is(err, client.ErrIncompleteStream) && !errors.As(err, &ce) {
			t.Errorf("%s: unexpected error type: %v", name, err)
		}
		t.Logf("%s: %v (%d bytes out before the error)", name, err, out.Len())
	}
	// A bad header is refused before any output: a plain *Error.
	_, err := c.DecryptStream(ctx, "default", io.Discard, strings.NewReader("not a ciphertext at all"), nil)
	if !client.IsCode(err, api.CodeMalformed) && !client.IsCode(err, api.CodeTruncated) {
		t.Errorf("garbage: %v", err)
	}
}

// A response that ends cleanly but without the success trailer (a proxy that
// buffered and re-sent the body, or a cut the framing hid) is an error.
func TestClientStreamWithoutTrailer(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", api.ContentTypeStream)
		w.Write([]byte("plaintext that never proved complete"))
	}))
	defer hs.Close()
	c := newClient(t, hs.URL)
	var out bytes.Buffer
	// An upload of unknown length: the answer must end with the trailer.
	_, err := c.DecryptStream(context.Background(), "default", &out, io.MultiReader(strings.NewReader("x")), nil)
	if !errors.Is(err, client.ErrIncompleteStream) {
		t.Fatalf("DecryptStream without the trailer: %v", err)
	}
	// Encrypt has no trailer to check; the same answer is accepted.
	if _, err := c.EncryptStream(context.Background(), "default", io.Discard, strings.NewReader("x"), nil); err != nil {
		t.Fatalf("EncryptStream: %v", err)
	}
}

func TestClientErrors(t *testing.T) {
	url, _ := startServer(t)
	ctx := context.Background()

	bad := newClient(t, url, client.WithToken("wrong"))
	_, err := bad.Encrypt(ctx, "default", []byte("x"), nil)
	var ce *client.Error
	var ae *api.Error
	if !client.IsCode(err, api.CodeUnauthenticated) || !errors.Is(err, client.ErrUnauthenticated) ||
		!errors.As(err, &ce) || ce.Status != 401 || !errors.As(err, &ae) || ae.Code != api.CodeUnauthenticated {
		t.Fatalf("wrong token: %#v", err)
	}
	if _, err := bad.EncryptStream(ctx, "default", io.Discard, strings.NewReader("x"), nil); !errors.Is(err, client.ErrUnauthenticated) {
		t.Fatalf("wrong token, stream: %v", err)
	}
	if err := bad.Ready(ctx); err != nil {
		t.Fatalf("Ready needs no token: %v", err)
	}

	c := newClient(t, url)
	res, err := c.Encrypt(ctx, "default", []byte("secret"), []byte("tenant a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Decrypt(ctx, "default", res.Ciphertext, []byte("tenant b")); !client.IsCode(err, api.CodeDecryptFailed) || !errors.Is(err, client.ErrDecryptFailed) {
		t.Fatalf("context mismatch: %v", err)
	}
	var ct bytes.Buffer
	if _, err := c.EncryptStream(ctx, "default", &ct, strings.NewReader("secret stream"), []byte("tenant a")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err = c.DecryptStream(ctx, "default", &out, &ct, []byte("tenant b"))
	if err == nil || out.Len() != 0 {
		t.Fatalf("stream context mismatch: %v, %d bytes out", err, out.Len())
	}
	if !client.IsCode(err, api.CodeDecryptFailed) && !errors.Is(err, client.ErrIncompleteStream) {
		t.Fatalf("stream context mismatch: %v", err)
	}
	if _, err := c.Encrypt(ctx, "missing", []byte("x"), nil); !errors.Is(err, client.ErrKeyNotFound) {
		t.Fatalf("missing key: %v", err)
	}

	// A failing source aborts the upload and is reported as such.
	srcErr := errors.New("disk on fire")
	_, err = c.EncryptStream(ctx, "default", io.Discard, io.MultiReader(strings.NewReader("some bytes"), errReader{srcErr}), nil)
	if !errors.Is(err, srcErr) {
		t.Fatalf("failing source: %v", err)
	}
	// A dead server is a transport error, not an *Error.
	dead := newClient(t, "http://127.0.0.1:1")
	if err := dead.Ready(ctx); err == nil || errors.As(err, &ce) {
		t.Fatalf("dead server: %v", err)
	}
	for _, u := range []string{"", "ftp://x", "http://", "http://h/?q=1", "://"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// The service's app mounted under a prefix of a host fiber app, reached with
// a base URL that carries the prefix. A mounted app runs under the host's
// configuration.
func TestClientMounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  fiber.Config
	}{
		{"streaming host", fiber.Config{DisableStartupMessage: true, StreamRequestBody: true}},
		{"default host", fiber.Config{DisableStartupMessage: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := startServer(t)
			host := fiber.New(tc.cfg)
			host.Get("/", func(c *fiber.Ctx) error { return c.SendString("host") })
			host.Mount("/crypto", srv.App())
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go host.Listener(ln)
			defer host.Shutdown()

			base := "http://" + ln.Addr().String() + "/crypto"
			c := newClient(t, base+"/")
			ctx := context.Background()
			if err := c.Ready(ctx); err != nil {
				t.Fatalf("Ready: %v", err)
			}
			// Without StreamRequestBody the body is in c.Body(), not a stream:
			// the server must read it from there (or it reads an empty body).
			res, err := c.Encrypt(ctx, "default", []byte("mounted"), nil)
			if err != nil {
				t.Fatalf("Encrypt: %v (is the request body read from c.Body() when RequestBodyStream() is nil?)", err)
			}
			if pt, err := c.Decrypt(ctx, "default", res.Ciphertext, nil); err != nil || string(pt) != "mounted" {
				t.Fatalf("Decrypt: %q, %v", pt, err)
			}
			pt := bytes.Repeat([]byte("stream "), 10000)
			var ct, back bytes.Buffer
			if _, err := c.EncryptStream(ctx, "default", &ct, bytes.NewReader(pt), nil); err != nil {
				t.Fatal(err)
			}
			if ct.Len() < len(pt) {
				t.Fatalf("EncryptStream of %d bytes gave %d bytes: the body was lost", len(pt), ct.Len())
			}
			if _, err := c.DecryptStream(ctx, "default", &back, &ct, nil); err != nil || !bytes.Equal(back.Bytes(), pt) {
				t.Fatalf("stream round trip: %v, %d of %d bytes", err, back.Len(), len(pt))
			}
			if _, err := newClient(t, base, client.WithToken("x")).Encrypt(ctx, "default", nil, nil); !errors.Is(err, client.ErrUnauthenticated) {
				t.Fatalf("mounted, wrong token: %v", err)
			}
		})
	}
}
