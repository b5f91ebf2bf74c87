package keystore

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/rootkey"
)

// TestOpenStore: without a root key the file keystore in data_dir/keys
// keeps a development root key, loudly, and opens again with it; with one
// it needs it; a PostgreSQL keystore refuses the development key.
func TestOpenStore(t *testing.T) {
	ctx := context.Background()
	t.Setenv(cryptosvc.EnvRootKey, "")
	data := filepath.Join(t.TempDir(), "data")
	core, logs := observer.New(zap.WarnLevel)
	cfg := Config{DataDir: data, Logger: zap.New(core)}
	store, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if store.FileStore() == nil || store.root != nil {
		t.Fatalf("no root key: %T, %v; want the file keystore with the development key", store.Keystore, store.root)
	}
	if logs.FilterMessageSnippet("development root key").Len() != 1 {
		t.Errorf("no warning about the development root key: %v", logs.All())
	}
	if _, err := os.Stat(filepath.Join(data, "keys", "root.key")); err != nil {
		t.Fatal(err)
	}
	if err := store.Keystore.Create(ctx, &cryptosvc.StoredKey{Name: "orders", Created: time.Now().UTC().Truncate(time.Second),
		Versions: []cryptosvc.StoredVersion{{KeyVersion: cryptosvc.KeyVersion{Version: 1, Created: time.Now().UTC().Truncate(time.Second)}, Secret: mustSecret(t)}}}); err != nil {
		t.Fatal(err)
	}
	store.WatchRotation(nil)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store, err = Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Keystore.Get(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	store.Close()

	// Another root key does not open the store the development key sealed.
	rootFile := filepath.Join(t.TempDir(), "root.key")
	os.WriteFile(rootFile, []byte(strings.Repeat("cd", 32)+"\n"), 0o600)
	if _, err := Open(ctx, Config{DataDir: data, RootKey: rootkey.Config{File: rootFile}}); !errors.Is(err, cryptosvc.ErrRootKey) {
		t.Fatalf("another root key: %v, want ErrRootKey", err)
	}

	if _, err := Open(ctx, Config{DataDir: data, Postgres: "postgres://127.0.0.1:1/keys"}); !errors.Is(err, cryptosvc.ErrRootKey) || !strings.Contains(err.Error(), "needs a root key") {
		t.Fatalf("PostgreSQL without a root key: %v", err)
	}
}

func mustSecret(t *testing.T) cryptosvc.Secret {
	t.Helper()
	s, err := cryptosvc.GenerateSecret(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
