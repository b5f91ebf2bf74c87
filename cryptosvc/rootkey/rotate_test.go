package rootkey

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
)

// writeRoot writes a static root key whose first byte is b into dir/name.
func writeRoot(t *testing.T, dir, name string, b byte) string {
	t.Helper()
	key := make([]byte, 32)
	key[0] = b
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenURI(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := writeRoot(t, dir, "root.key", 1)
	for _, uri := range []string{"file:" + file, "file://" + file} {
		p, err := OpenURI(ctx, uri)
		if err != nil || p.String() != "static" {
			t.Fatalf("%s: %v", uri, err)
		}
	}
	for _, tc := range []struct{ uri, says string }{
		{"file:" + filepath.Join(dir, "missing"), "no such file"},
		{"vault:secret/root", "pkcs11:… or file:<path>"},
		{"pkcs11:token=x", "names no key"},
	} {
		_, err := OpenURI(ctx, tc.uri)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error saying %q", tc.uri, err, tc.says)
		}
	}
}

// TestOpen: the URI wins over the file, the file over the environment, and
// none at all is no provider.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := writeRoot(t, dir, "root.key", 1)
	t.Setenv(cryptosvc.EnvRootKey, "")
	if p, err := Open(ctx, Config{URI: "file:" + file, File: filepath.Join(dir, "missing")}); err != nil || p == nil {
		t.Fatalf("URI: %v", err)
	}
	if p, err := Open(ctx, Config{File: file}); err != nil || p == nil {
		t.Fatalf("file: %v", err)
	}
	if _, err := Open(ctx, Config{File: filepath.Join(dir, "missing")}); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("missing file: %v, want ErrRootKey", err)
	}
	if p, err := Open(ctx, Config{}); err != nil || p != nil {
		t.Fatalf("nothing: %v, %v; want none", p, err)
	}
	t.Setenv(cryptosvc.EnvRootKey, strings.Repeat("ab", 32))
	if p, err := Open(ctx, Config{}); err != nil || p == nil {
		t.Fatalf("environment: %v", err)
	}
}

func TestRequestRotationNoWatcher(t *testing.T) {
	dir := t.TempDir()
	_, _, err := RequestRotation(context.Background(), dir, "file:/x", 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, rotationRequest)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unanswered request was left behind: %v", err)
	}
}

// TestWatch: Watch answers a rotation request on an open store, which keeps
// its keys and then opens with the new root key only; a request for a root
// key that does not open is answered with why.
func TestWatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	oldFile, newFile := writeRoot(t, dir, "old.key", 1), writeRoot(t, dir, "new.key", 2)
	keys := filepath.Join(dir, "keys")
	open := func(file string) (*cryptosvc.FileStore, cryptosvc.RootKeyProvider, error) {
		p, err := Open(ctx, Config{File: file})
		if err != nil {
			t.Fatal(err)
		}
		fs, err := cryptosvc.OpenFileStore(keys, cryptosvc.FileStoreConfig{RootKeyProvider: p})
		return fs, p, err
	}
	fs, p, err := open(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	k := keystoretest.Key(t, "orders", 2)
	if err := fs.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan cryptosvc.RootKeyProvider)
	go func() { done <- Watch(wctx, fs, keys, p, nil) }()

	name, gen, err := RequestRotation(ctx, keys, "file:"+newFile, 10*time.Second)
	if err != nil || name != "static" || gen != 2 {
		t.Fatalf("rotation: %s, %d, %v", name, gen, err)
	}
	if _, _, err := RequestRotation(ctx, keys, "file:"+filepath.Join(dir, "missing"), 10*time.Second); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("bad rotation: %v", err)
	}
	stop()
	if cur := <-done; cur == nil || cur == p {
		t.Fatalf("Watch returned %v, want the new provider", cur)
	}
	fs.Close()

	if _, _, err := open(oldFile); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("old root key after the rotation: %v", err)
	}
	fs, _, err = open(newFile)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	keystoretest.AssertKey(t, keystoretest.MustGet(t, fs, "orders"), k)
}
