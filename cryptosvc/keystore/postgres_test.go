package keystore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/rootkey"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// TestOpenPostgres: a PostgreSQL URL opens the PostgreSQL keystore with the
// named root key; the store handed out is the database's own, so that its
// optional interfaces (cryptosvc.HealthReporter, which /readyz reads) reach
// whoever is handed it; it has no rotation watcher; and it opens again
// after Close with the keys it was given.
func TestOpenPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Start(t).Database(t)
	t.Setenv(cryptosvc.EnvRootKey, "")
	rootFile := filepath.Join(t.TempDir(), "root.key")
	os.WriteFile(rootFile, []byte(strings.Repeat("5a", 32)+"\n"), 0o600)
	cfg := Config{DataDir: t.TempDir(), Postgres: dsn, RootKey: rootkey.Config{URI: "file:" + rootFile}}
	st, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := st.Keystore.(cryptosvc.HealthReporter)
	if !ok || h.Health() != nil {
		t.Fatalf("the PostgreSQL keystore %T reports no health, or ill health", st.Keystore)
	}
	if st.FileStore() != nil {
		t.Fatal("a PostgreSQL keystore has a file keystore")
	}
	st.WatchRotation(nil) // nothing to watch
	k := keystoretest.Key(t, "orders", 2)
	if err := st.Keystore.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg.FileStoreDir()); !os.IsNotExist(err) {
		t.Fatalf("a file keystore was made beside the database: %v", err)
	}

	st, err = Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keystoretest.AssertKey(t, keystoretest.MustGet(t, st.Keystore, "orders"), k)
}
