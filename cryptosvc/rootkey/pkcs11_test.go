//go:build cgo

package rootkey

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pkcs11"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/softhsmtest"
)

// TestWatchPKCS11: Open names a key in a SoftHSM2 token by its URI, and
// Watch rotates a running file keystore from a static root key to it; the
// store then opens with the token's key and not with the static one.
func TestWatchPKCS11(t *testing.T) {
	ctx := context.Background()
	tok := softhsmtest.New(t, "cipherd", "watch-pin")
	uri := tok.URI("cipherd", "cipherd-root")
	g, err := pkcs11.Generate(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	p, err := Open(ctx, Config{URI: uri, File: filepath.Join(t.TempDir(), "missing")})
	if err != nil {
		t.Fatal(err)
	}
	if name := p.String(); !strings.HasPrefix(name, "pkcs11:") || strings.Contains(name, "pin") {
		t.Fatalf("provider name %q: want the URI without its PIN source", name)
	}
	Close(p)

	dir := t.TempDir()
	staticFile := writeRoot(t, dir, "static.key", 7)
	keys := filepath.Join(dir, "keys")
	static, err := Open(ctx, Config{File: staticFile})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := cryptosvc.OpenFileStore(keys, cryptosvc.FileStoreConfig{RootKeyProvider: static})
	if err != nil {
		t.Fatal(err)
	}
	k := keystoretest.Key(t, "orders", 2)
	if err := fs.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan cryptosvc.RootKeyProvider)
	go func() { done <- Watch(wctx, fs, keys, static, nil) }()
	if name, gen, err := RequestRotation(ctx, keys, uri, 10*time.Second); err != nil || !strings.HasPrefix(name, "pkcs11:") || gen != 2 {
		t.Fatalf("rotation to the token: %s, %d, %v", name, gen, err)
	}
	stop()
	Close(<-done)
	fs.Close()

	static, _ = Open(ctx, Config{File: staticFile})
	if _, err := cryptosvc.OpenFileStore(keys, cryptosvc.FileStoreConfig{RootKeyProvider: static}); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("the static root key after the rotation: %v", err)
	}
	p, err = OpenURI(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(p)
	fs, err = cryptosvc.OpenFileStore(keys, cryptosvc.FileStoreConfig{RootKeyProvider: p})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	keystoretest.AssertKey(t, keystoretest.MustGet(t, fs, "orders"), k)
}
