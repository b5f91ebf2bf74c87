package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/keystore"
	"github.com/cipherd/cipherd/cryptosvc/rootkey"
	"github.com/cipherd/cipherd/server"
)

// TestSealedKeyringServes: the binary opens a sealed keyring with its root
// key, and a server handed that store serves its keys.
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
	data := filepath.Join(dir, "data")
	store, err := keystore.Open(ctx, keystore.Config{DataDir: data, Keyring: path, RootKey: rootkey.Config{URI: "file:" + rootFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := server.New(ctx, server.Config{DataDir: data, Keystore: store.Keystore, AdminToken: "t", SkipBenchmark: true, Logger: zap.NewNop()})
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
	if _, err := s.Service().DescribeKey(ctx, "default"); !errors.Is(err, cryptosvc.ErrKeyNotFound) {
		t.Fatalf("a default key in a read-only keyring: %v", err)
	}
}
