package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
)

func TestOpenRootKeyURI(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "root.key")
	key := make([]byte, 32)
	key[0] = 1
	os.WriteFile(file, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600)
	for _, uri := range []string{"file:" + file, "file://" + file} {
		p, err := OpenRootKeyURI(ctx, uri)
		if err != nil || p.String() != "static" {
			t.Fatalf("%s: %v", uri, err)
		}
	}
	for _, tc := range []struct{ uri, says string }{
		{"file:" + filepath.Join(dir, "missing"), "no such file"},
		{"vault:secret/root", "pkcs11:… or file:<path>"},
		{"pkcs11:token=x", "names no key"},
	} {
		_, err := OpenRootKeyURI(ctx, tc.uri)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error saying %q", tc.uri, err, tc.says)
		}
	}
	// The configuration: the URI wins; none at all is the development key.
	cfg := Config{RootKeyURI: "file:" + file, RootKeyFile: filepath.Join(dir, "missing")}
	if p, err := OpenRootKey(ctx, &cfg); err != nil || p == nil {
		t.Fatalf("root_key_uri: %v", err)
	}
	t.Setenv(cryptosvc.EnvRootKey, "")
	if p, err := OpenRootKey(ctx, &Config{}); err != nil || p != nil {
		t.Fatalf("no root key: %v, %v; want the development key (nil)", p, err)
	}
}

func TestRequestRootKeyRotationNoServer(t *testing.T) {
	dir := t.TempDir()
	_, _, err := RequestRootKeyRotation(context.Background(), dir, "file:/x", 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, rotationRequest)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unanswered request was left behind: %v", err)
	}
}

// TestRotationRequest: a running server answers a rotation request, keeps
// its keys, and the store then opens with the new root key only.
func TestRotationRequest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name string, b byte) string {
		key := make([]byte, 32)
		key[0] = b
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)), 0o600)
		return path
	}
	oldFile, newFile := write("old.key", 1), write("new.key", 2)
	data := filepath.Join(dir, "data")
	s, err := New(ctx, Config{DataDir: data, RootKeyFile: oldFile, AdminToken: "t", SkipBenchmark: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(data, "keys")
	name, gen, err := RequestRootKeyRotation(ctx, keys, "file:"+newFile, 10*time.Second)
	if err != nil || name != "static" || gen != 2 {
		t.Fatalf("rotation: %s, %d, %v", name, gen, err)
	}
	// A request for a root key that does not open is answered with why.
	if _, _, err := RequestRootKeyRotation(ctx, keys, "file:"+filepath.Join(dir, "missing"), 10*time.Second); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("bad rotation: %v", err)
	}
	if _, err := s.Service().DescribeKey(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	s.Shutdown(ctx)
	if _, err := New(ctx, Config{DataDir: data, RootKeyFile: oldFile, AdminToken: "t", SkipBenchmark: true, Logger: zap.NewNop()}); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("old root key after the rotation: %v", err)
	}
	s, err = New(ctx, Config{DataDir: data, RootKeyURI: "file:" + newFile, AdminToken: "t", SkipBenchmark: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service().DescribeKey(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	s.Shutdown(ctx)
}

// TestSealedKeyringServes: a server opens a sealed keyring with its root
// key and serves its keys.
func TestSealedKeyringServes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := make([]byte, 32)
	key[5] = 9
	rootFile := filepath.Join(dir, "root.key")
	os.WriteFile(rootFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600)
	root, _ := cryptosvc.LoadRootKey(rootFile, "")
	p, _ := cryptosvc.NewStaticRootKey(&root, nil)
	sec, _ := cryptosvc.GenerateSecret(rand.Reader)
	k := &cryptosvc.StoredKey{Name: "orders", Created: time.Now().UTC().Truncate(time.Second),
		Versions: []cryptosvc.StoredVersion{{KeyVersion: cryptosvc.KeyVersion{Version: 1, Created: time.Now().UTC().Truncate(time.Second)}, Secret: sec}}}
	path := filepath.Join(dir, "keyring.json")
	f, _ := os.Create(path)
	if err := cryptosvc.WriteSealedKeyring(ctx, f, []*cryptosvc.StoredKey{k}, p); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := New(ctx, Config{DataDir: filepath.Join(dir, "data"), Keyring: path, RootKeyURI: "file:" + rootFile, AdminToken: "t", SkipBenchmark: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	ct, _, err := s.Service().Seal(ctx, "orders", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if pt, _, err := s.Service().Open(ctx, "orders", ct, nil); err != nil || string(pt) != "x" {
		t.Fatalf("Open: %q, %v", pt, err)
	}
}
