package main

import (
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pgstore"
	"github.com/cipherd/cipherd/internal/keystoretest"
	"github.com/cipherd/cipherd/internal/pgtest"
)

// devStore makes the file keystore a server started without a root key
// makes, as `go run ./cmd/cipherd` does: data_dir/keys with the
// development root key in root.key, holding one key.
func devStore(t *testing.T) (string, *cryptosvc.StoredKey) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cipherd-data", "keys")
	fs, err := cryptosvc.OpenFileStore(dir, cryptosvc.FileStoreConfig{DevRootKey: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	k := keystoretest.Key(t, "default", 2)
	if err := fs.Create(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return dir, k
}

// staticStore makes a file keystore under the static root key root.
func staticStore(t *testing.T, root *cryptosvc.Secret) (string, *cryptosvc.StoredKey) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "keys")
	fs, err := cryptosvc.OpenFileStore(dir, cryptosvc.FileStoreConfig{RootKey: root})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	k := keystoretest.Key(t, "orders", 3)
	if err := fs.Create(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return dir, k
}

// assertMigrated checks that migrate said it verified the key, and that the
// database holds it under the static root key root.
func assertMigrated(t *testing.T, dsn string, root *cryptosvc.Secret, out, errOut string, code int, k *cryptosvc.StoredKey) {
	t.Helper()
	if code != 0 || !strings.Contains(out, "verified: 1 keys") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	assertNoSecrets(t, out+errOut, k)
	if root == nil {
		return
	}
	st, err := pgstore.Open(context.Background(), pgstore.Config{DSN: dsn, RootKey: root})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keystoretest.AssertKey(t, keystoretest.MustGet(t, st, k.Name), k)
}

// TestKeysMigrateRootKeyForms: cipherd keys migrate takes the destination's
// root key in every form serve takes it (a file, CIPHERD_ROOT_KEY_FILE,
// CIPHERD_ROOT_KEY, a file: URI), and the source's root key from the
// development store itself, as the README's store holds it.
func TestKeysMigrateRootKeyForms(t *testing.T) {
	srv := pgtest.Start(t)
	root := keystoretest.Secret(t)
	rootText := hex.EncodeToString(root.Expose())
	rootFile := filepath.Join(t.TempDir(), "root.key")
	if err := os.WriteFile(rootFile, []byte(rootText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clean := []string{"CIPHERD_ROOT_KEY=", "CIPHERD_ROOT_KEY_FILE=", "CIPHERD_ROOT_KEY_URI="}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag file", nil, []string{"-root-key-file", rootFile}},
		{"CIPHERD_ROOT_KEY_FILE", []string{"CIPHERD_ROOT_KEY_FILE=" + rootFile}, nil},
		{"CIPHERD_ROOT_KEY", []string{"CIPHERD_ROOT_KEY=" + rootText}, nil},
		{"flag URI", nil, []string{"-root-key-uri", "file:" + rootFile}},
		{"CIPHERD_ROOT_KEY_URI", []string{"CIPHERD_ROOT_KEY_URI=file:" + rootFile}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(clean[:len(clean):len(clean)], tc.env...)
			// The development store, with no flag saying so.
			dsn := srv.Database(t)
			dir, k := devStore(t)
			out, errOut, code := cipherd(t, env, append([]string{"keys", "migrate", "-to", dsn, "-from-dir", dir}, tc.args...)...)
			assertMigrated(t, dsn, &root, out, errOut, code, k)

			// A store under the destination's root key.
			dsn = srv.Database(t)
			dir, k = staticStore(t, &root)
			out, errOut, code = cipherd(t, env, append([]string{"keys", "migrate", "-to", dsn, "-from-dir", dir}, tc.args...)...)
			assertMigrated(t, dsn, &root, out, errOut, code, k)
		})
	}

	// A store under another root key, named by URI.
	other := keystoretest.Secret(t)
	otherFile := filepath.Join(t.TempDir(), "other.key")
	os.WriteFile(otherFile, []byte(hex.EncodeToString(other.Expose())+"\n"), 0o600)
	dsn := srv.Database(t)
	dir, k := staticStore(t, &other)
	out, errOut, code := cipherd(t, clean, "keys", "migrate", "-to", dsn, "-from-dir", dir, "-root-key-file", rootFile, "-from-root-key-uri", "file:"+otherFile)
	assertMigrated(t, dsn, &root, out, errOut, code, k)

	// No root key for the destination: refused, saying how to give one.
	dir, _ = devStore(t)
	if _, errOut, code := cipherd(t, clean, "keys", "migrate", "-to", srv.Database(t), "-from-dir", dir); code != 1 || !strings.Contains(errOut, "-root-key-uri") {
		t.Fatalf("no root key: exit %d\n%s", code, errOut)
	}
	// -from-dev-root-key on a store without one: refused, no key made.
	dir, _ = staticStore(t, &root)
	if _, errOut, code := cipherd(t, clean, "keys", "migrate", "-to", srv.Database(t), "-from-dir", dir, "-root-key-file", rootFile, "-from-dev-root-key"); code != 1 || !strings.Contains(errOut, "no development root key") {
		t.Fatalf("-from-dev-root-key without one: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "root.key")); err == nil {
		t.Fatal("a development root key was made in the source")
	}
}
