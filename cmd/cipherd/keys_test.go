package main

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
	"github.com/cipherd/cipherd/internal/proctest"
)

// cipherd keys migrate moves a file keystore and a keyring into
// PostgreSQL, verifies every version, and is idempotent.
func TestKeysMigrate(t *testing.T) {
	srv := pgtest.Start(t)
	dsn := srv.Database(t)
	ctx := context.Background()
	dir := t.TempDir()
	root := keystoretest.Secret(t)
	rootFile := filepath.Join(dir, "root.key")
	os.WriteFile(rootFile, []byte(base64.StdEncoding.EncodeToString(root.Expose())+"\n"), 0o600)

	storeDir := filepath.Join(dir, "keys")
	fs, err := cryptosvc.OpenFileStore(storeDir, cryptosvc.FileStoreConfig{RootKey: &root})
	if err != nil {
		t.Fatal(err)
	}
	orders, billing := keystoretest.Key(t, "orders", 3), keystoretest.Key(t, "billing", 1)
	orders.Config.MinDecryptionVersion = 2
	for _, k := range []*cryptosvc.StoredKey{orders, billing} {
		if err := fs.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	fs.Close()

	migrate := func(args ...string) (string, string, int) {
		return cipherd(t, nil, append([]string{"keys", "migrate", "-to", dsn, "-root-key-file", rootFile}, args...)...)
	}
	out, errOut, code := migrate("-from-dir", storeDir)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"orders: created with 3 versions", "billing: created with 1 versions", "verified: 2 keys, 4 versions"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	assertNoSecrets(t, out+errOut, orders, billing)

	// Again: nothing to do, still verified.
	out, errOut, code = migrate("-from-dir", storeDir)
	if code != 0 || !strings.Contains(out, "orders: already there") || !strings.Contains(out, "verified: 2 keys") {
		t.Fatalf("second run: exit %d\n%s%s", code, out, errOut)
	}

	// A keyring with one more version of orders, and a new key.
	orders4 := orders.Clone()
	keystoretest.AddVersion(t, orders4, keystoretest.Secret(t))
	extra := keystoretest.Key(t, "extra", 2)
	kr := filepath.Join(dir, "keyring.json")
	f, _ := os.Create(kr)
	if err := cryptosvc.WriteKeyring(f, []*cryptosvc.StoredKey{orders4, extra}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, errOut, code = migrate("-from-keyring", kr)
	if code != 0 || !strings.Contains(out, "orders: 1 versions added") || !strings.Contains(out, "extra: created") {
		t.Fatalf("keyring run: exit %d\n%s%s", code, out, errOut)
	}

	// A key of the same name with other material is reported, not touched.
	clash := keystoretest.Key(t, "billing", 2)
	f, _ = os.Create(kr)
	cryptosvc.WriteKeyring(f, []*cryptosvc.StoredKey{clash})
	f.Close()
	out, errOut, code = migrate("-from-keyring", kr)
	if code != 1 || !strings.Contains(errOut, "billing: the destination holds a key of this name with other versions") {
		t.Fatalf("clash: exit %d\n%s%s", code, out, errOut)
	}

	// A source trimmed of versions the database holds: copying it would
	// destroy them there, where they are retired too, so it is reported,
	// not touched.
	st, err := pgstore.Open(ctx, pgstore.Config{DSN: dsn, RootKey: &root})
	if err != nil {
		t.Fatal(err)
	}
	retired := keystoretest.MustGet(t, st, "orders").Clone()
	retired.Config.MinDecryptionVersion = 3
	if err := st.Update(ctx, retired); err != nil {
		t.Fatal(err)
	}
	st.Close()
	orders4.Config.MinDecryptionVersion = 3
	trimmed := orders4.Clone()
	trimmed.Versions, trimmed.MinAvailable, trimmed.Config.MinDecryptionVersion = trimmed.Versions[2:], 3, 3
	f, _ = os.Create(kr)
	if err := cryptosvc.WriteKeyring(f, []*cryptosvc.StoredKey{trimmed}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, errOut, code = migrate("-from-keyring", kr)
	if code != 1 || !strings.Contains(errOut, "orders: the source was trimmed of versions the destination holds") {
		t.Fatalf("trimmed source: exit %d\n%s%s", code, out, errOut)
	}

	// What the database holds, read as a replica would.
	st, err = pgstore.Open(ctx, pgstore.Config{DSN: dsn, RootKey: &root})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keystoretest.AssertKey(t, keystoretest.MustGet(t, st, "orders"), orders4)
	keystoretest.AssertKey(t, keystoretest.MustGet(t, st, "billing"), billing)
	keystoretest.AssertKey(t, keystoretest.MustGet(t, st, "extra"), extra)

	if _, _, code := cipherd(t, nil, "keys", "migrate", "-to", dsn); code != 2 {
		t.Errorf("no source: exit %d, want 2", code)
	}
}

func assertNoSecrets(t *testing.T, text string, keys ...*cryptosvc.StoredKey) {
	t.Helper()
	for _, k := range keys {
		for _, v := range k.Versions {
			b := v.Secret.Expose()
			if strings.Contains(text, base64.StdEncoding.EncodeToString(b)[:40]) || strings.Contains(text, string(b)) {
				t.Fatalf("output reveals %s version %d", k.Name, v.Version)
			}
		}
	}
}

// A replica that cannot reach its PostgreSQL keystore at start exits with
// status 1 and says the keystore is unavailable, as docs/OPERATIONS.md
// states, and names no password.
func TestServePostgresUnreachable(t *testing.T) {
	addr := proctest.FreeAddr(t) // nothing listens there now
	root := filepath.Join(t.TempDir(), "root.key")
	os.WriteFile(root, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	_, errOut, code := cipherd(t, []string{
		"CIPHERD_KEYSTORE=postgres://cipherd:hunter2-db-password@" + addr + "/keys?sslmode=disable",
		"CIPHERD_ROOT_KEY_FILE=" + root, "CIPHERD_ADMIN_TOKEN=t",
	}, "serve", "-addr", "127.0.0.1:0", "-data-dir", t.TempDir(), "-skip-benchmark")
	if code != 1 || !strings.Contains(errOut, "keystore unavailable") {
		t.Fatalf("exit %d, want 1 with \"keystore unavailable\":\n%s", code, errOut)
	}
	if strings.Contains(errOut, "hunter2-db-password") {
		t.Error("the start-up error shows the database password")
	}
}
