package cryptosvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func ksOpenFile(t *testing.T, dir string, root *Secret) *FileStore {
	t.Helper()
	s, err := OpenFileStore(dir, FileStoreConfig{RootKey: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ksFiles returns every file under dir, relative, sorted.
func ksFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestFileStorePersistence(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := ksTestSecret(t)
	s := ksOpenFile(t, dir, &root)
	a, b, c := ksTestKey(t, "a", 1), ksTestKey(t, "b.key", 2), ksTestKey(t, "c", 1)
	b.Config = KeyConfig{MinDecryptionVersion: 2, AEAD: "aes-256-gcm", AllowedAEADs: []string{"aes-256-gcm"}, Exportable: true}
	for _, k := range []*StoredKey{a, b, c} {
		if err := s.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	a.Revision = ksRevision(t, s, "a")
	ksAddVersion(t, a, ksTestSecret(t))
	if err := s.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "c", ksRevision(t, s, "c")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for round := range 2 { // reopen twice: opening must not change anything
		s = ksOpenFile(t, dir, &root)
		names, _ := s.List(ctx)
		if !slices.Equal(names, []string{"a", "b.key"}) {
			t.Fatalf("round %d: List = %q", round, names)
		}
		for _, want := range []*StoredKey{a, b} {
			got, err := s.Get(ctx, want.Name)
			if err != nil {
				t.Fatal(err)
			}
			ksAssertKey(t, got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFileStoreRootKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root, other := ksTestSecret(t), ksTestSecret(t)
	s := ksOpenFile(t, dir, &root)
	if err := s.Create(ctx, ksTestKey(t, "a", 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	_, err := OpenFileStore(dir, FileStoreConfig{RootKey: &other})
	if !errors.Is(err, ErrRootKey) {
		t.Fatalf("wrong root key: %v, want ErrRootKey", err)
	}
	ksAssertNoMaterial(t, "wrong root key error", []byte(err.Error()), &root, &other)
	if _, err := OpenFileStore(dir, FileStoreConfig{}); !errors.Is(err, ErrRootKey) {
		t.Fatalf("no root key: %v, want ErrRootKey", err)
	}
	if _, err := OpenFileStore(t.TempDir(), FileStoreConfig{}); !errors.Is(err, ErrRootKey) {
		t.Fatalf("no root key, new dir: %v, want ErrRootKey", err)
	}
	// Asked for a development root key, a keystore made under another
	// root key is refused, and no development key is left behind for the
	// next start to take for the keystore's own.
	_, err = OpenFileStore(dir, FileStoreConfig{DevRootKey: true})
	if !errors.Is(err, ErrRootKey) || !strings.Contains(err.Error(), "was not given") {
		t.Fatalf("a development root key for a keystore made under another: %v, want ErrRootKey", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "root.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused open left a development root key: %v", err)
	}
	// The failed opens released the lock, and the right key still works.
	ksOpenFile(t, dir, &root)
}

func TestFileStoreDevRootKey(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	core, logs := observer.New(zapcore.WarnLevel)
	cfg := FileStoreConfig{DevRootKey: true, Logger: zap.New(core)}
	s, err := OpenFileStore(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := ksTestKey(t, "a", 2)
	if err := s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	s.Close()

	rootPath := filepath.Join(dir, "root.key")
	fi, err := os.Stat(rootPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("root.key mode %v, want 0600", fi.Mode().Perm())
	}
	devRoot, err := LoadRootKey(rootPath, "") // an ordinary root key file
	if err != nil {
		t.Fatal(err)
	}

	s, err = OpenFileStore(dir, cfg) // reuses root.key
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	ksAssertKey(t, got, a)
	s.Close()
	// The same store opens with the key given explicitly, without a warning.
	before := logs.Len()
	s = ksOpenFile(t, dir, &devRoot)
	s.Close()

	warns := logs.FilterMessageSnippet("development root key").All()
	if len(warns) != 2 || logs.Len() != before {
		t.Fatalf("%d development root key warnings (want one per dev open, 2); %d logs", len(warns), logs.Len())
	}
	for _, w := range warns {
		if w.Level != zapcore.WarnLevel || !strings.Contains(w.Message, "not for production") {
			t.Errorf("warning %q at %v", w.Message, w.Level)
		}
		b, _ := json.Marshal(w.ContextMap())
		ksAssertNoMaterial(t, "warning", b, &devRoot, &a.Versions[0].Secret)
	}

	// A damaged root.key is refused, not replaced.
	if err := os.WriteFile(rootPath, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileStore(dir, cfg); !errors.Is(err, ErrRootKey) {
		t.Fatalf("damaged root.key: %v, want ErrRootKey", err)
	}
	// A fresh root.key cannot open the existing keystore.
	os.Remove(rootPath)
	if _, err := OpenFileStore(dir, cfg); !errors.Is(err, ErrRootKey) {
		t.Fatalf("new root.key: %v, want ErrRootKey", err)
	}
}

func TestFileStoreModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX modes")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "a", "store") // parents created too
	s, err := OpenFileStore(dir, FileStoreConfig{DevRootKey: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"k1", "k2"} {
		if err := s.Create(ctx, ksTestKey(t, name, 1)); err != nil {
			t.Fatal(err)
		}
	}
	k1, _ := s.Get(ctx, "k1")
	k1 = k1.Clone()
	ksAddVersion(t, k1, ksTestSecret(t))
	if err := s.Update(ctx, k1); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "keys")} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
	files := ksFiles(t, dir)
	want := []string{".lock", filepath.Join("keys", "k1.key"), filepath.Join("keys", "k2.key"), "root.check", "root.key", "storagekey.json"}
	if !slices.Equal(files, want) {
		t.Fatalf("files %q, want %q", files, want)
	}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
}

func TestFileStoreNoMaterialOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := ksTestSecret(t)
	s := ksOpenFile(t, dir, &root)
	// The storage key, in the clear, is on no disk either.
	secrets := []*Secret{&root, &s.seal.keys[s.seal.Generation()].secret}
	var keys []*StoredKey
	for _, name := range []string{"a", "b", "c"} {
		k := ksTestKey(t, name, 3)
		if err := s.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	keys[0].Revision = ksRevision(t, s, keys[0].Name)
	ksAddVersion(t, keys[0], ksTestSecret(t))
	if err := s.Update(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		for i := range k.Versions {
			secrets = append(secrets, &k.Versions[i].Secret)
		}
	}
	files := ksFiles(t, dir)
	if len(files) != 6 {
		t.Fatalf("files %q", files)
	}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		ksAssertNoMaterial(t, f, raw, secrets...)
	}
	// The scan itself works: a keyring file holds the material.
	var buf bytes.Buffer
	WriteKeyring(&buf, keys[:1])
	if !bytes.Contains(buf.Bytes(), ksMaterialForms(&keys[0].Versions[0].Secret)[1]) {
		t.Fatal("the material scan does not find base64 material")
	}
}

func TestFileStoreRenamedKeyFile(t *testing.T) {
	ctx := context.Background()
	root := ksTestSecret(t)
	for _, tc := range []struct {
		name      string
		createDst bool
		src, dst  string
	}{
		{name: "copy to a new name", src: "a.key", dst: "b.key"},
		{name: "copy over another key", createDst: true, src: "a.key", dst: "b.key"},
		{name: "rename case", src: "a.key", dst: "A.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := ksOpenFile(t, dir, &root)
			s.Create(ctx, ksTestKey(t, "a", 1))
			if tc.createDst {
				s.Create(ctx, ksTestKey(t, "b", 1))
			}
			s.Close()
			keys := filepath.Join(dir, "keys")
			raw, err := os.ReadFile(filepath.Join(keys, tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(keys, tc.dst), raw, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = OpenFileStore(dir, FileStoreConfig{RootKey: &root})
			if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), tc.dst) {
				t.Fatalf("open = %v, want ErrAuthFailed naming %s", err, tc.dst)
			}
		})
	}
}

func TestFileStoreCorruptKeyFile(t *testing.T) {
	ctx := context.Background()
	root := ksTestSecret(t)
	flip := func(b []byte) []byte {
		var env ssEnvelope
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		env.CT[len(env.CT)/2] ^= 0x20
		out, _ := json.Marshal(env)
		return out
	}
	setV := func(v int) func([]byte) []byte {
		return func(b []byte) []byte {
			var env ssEnvelope
			json.Unmarshal(b, &env)
			env.V = v
			out, _ := json.Marshal(env)
			return out
		}
	}
	for _, tc := range []struct {
		name   string
		mangle func([]byte) []byte
		want   error
	}{
		{"flipped ciphertext bit", flip, ErrAuthFailed},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, ErrMalformed},
		{"empty", func([]byte) []byte { return nil }, ErrMalformed},
		{"garbage", func([]byte) []byte { return []byte("\x00\x01garbage") }, ErrMalformed},
		{"trailing data", func(b []byte) []byte { return append(b, "{}"...) }, ErrMalformed},
		{"unknown field", func(b []byte) []byte { return append([]byte(`{"x":1,`), b[1:]...) }, ErrMalformed},
		{"version 3", setV(3), ErrUnsupported},
		{"version 0", setV(0), ErrUnsupported},
		{"short nonce", func(b []byte) []byte {
			var env ssEnvelope
			json.Unmarshal(b, &env)
			env.Nonce = env.Nonce[:12]
			out, _ := json.Marshal(env)
			return out
		}, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := ksOpenFile(t, dir, &root)
			k := ksTestKey(t, "victim", 2)
			s.Create(ctx, k)
			s.Create(ctx, ksTestKey(t, "bystander", 1))
			s.Close()
			path := filepath.Join(dir, "keys", "victim.key")
			raw, _ := os.ReadFile(path)
			if err := os.WriteFile(path, tc.mangle(raw), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := OpenFileStore(dir, FileStoreConfig{RootKey: &root})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("open = %v, want %v naming %s", err, tc.want, path)
			}
			ksAssertNoMaterial(t, "error", []byte(err.Error()), &root, &k.Versions[0].Secret, &k.Versions[1].Secret)
			// The failed open released the lock: repairing the file is enough.
			os.Remove(path)
			ksOpenFile(t, dir, &root)
		})
	}

	t.Run("corrupt root.check", func(t *testing.T) {
		dir := t.TempDir()
		ksOpenFile(t, dir, &root).Close()
		path := filepath.Join(dir, "root.check")
		raw, _ := os.ReadFile(path)
		os.WriteFile(path, flip(raw), 0o600)
		if _, err := OpenFileStore(dir, FileStoreConfig{RootKey: &root}); !errors.Is(err, ErrRootKey) {
			t.Fatalf("open = %v, want ErrRootKey", err)
		}
	})
	t.Run("stray files", func(t *testing.T) {
		dir := t.TempDir()
		s := ksOpenFile(t, dir, &root)
		s.Create(ctx, ksTestKey(t, "a", 1))
		s.Close()
		os.WriteFile(filepath.Join(dir, "keys", "README"), []byte("notes"), 0o600) // ignored
		s = ksOpenFile(t, dir, &root)
		if names, _ := s.List(ctx); !slices.Equal(names, []string{"a"}) {
			t.Fatalf("List = %q", names)
		}
		s.Close()
		bad := filepath.Join(dir, "keys", "-bad.key") // a .key file must be a key
		os.WriteFile(bad, []byte("{}"), 0o600)
		if _, err := OpenFileStore(dir, FileStoreConfig{RootKey: &root}); !errors.Is(err, ErrInvalidKeyName) || !strings.Contains(err.Error(), bad) {
			t.Fatalf("open = %v, want ErrInvalidKeyName naming %s", err, bad)
		}
	})
}

func TestFileStoreLocked(t *testing.T) {
	dir := t.TempDir()
	root := ksTestSecret(t)
	s, err := OpenFileStore(dir, FileStoreConfig{RootKey: &root})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := OpenFileStore(dir, FileStoreConfig{RootKey: &root}); !errors.Is(err, ErrLocked) {
			t.Fatalf("second open = %v, want ErrLocked", err)
		}
	}
	// A wrong root key or a dev key does not get past the lock either.
	if _, err := OpenFileStore(dir, FileStoreConfig{DevRootKey: true}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open = %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenFileStore(dir, FileStoreConfig{RootKey: &root})
	if err != nil {
		t.Fatalf("open after Close: %v", err)
	}
	s2.Close()
}

func TestFileStoreRemovesTempFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := ksTestSecret(t)
	s := ksOpenFile(t, dir, &root)
	a := ksTestKey(t, "a", 1)
	s.Create(ctx, a)
	s.Close()
	for _, f := range []string{".tmp-123", filepath.Join("keys", ".tmp-456"), filepath.Join("keys", ".tmp-a.key")} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s = ksOpenFile(t, dir, &root)
	for _, f := range ksFiles(t, dir) {
		if strings.HasPrefix(filepath.Base(f), ksTempPrefix) {
			t.Errorf("%s survived open", f)
		}
	}
	got, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	ksAssertKey(t, got, a)
}

func TestFileStoreCaseFold(t *testing.T) {
	ctx := context.Background()
	root := ksTestSecret(t)
	s := ksOpenFile(t, t.TempDir(), &root)
	if err := s.Create(ctx, ksTestKey(t, "Orders", 1)); err != nil {
		t.Fatal(err)
	}
	err := s.Create(ctx, ksTestKey(t, "orders", 1))
	if !errors.Is(err, ErrKeyExists) {
		t.Fatalf("Create(orders) next to Orders = %v, want ErrKeyExists", err)
	}
	if names, _ := s.List(ctx); !slices.Equal(names, []string{"Orders"}) {
		t.Fatalf("List = %q", names)
	}
}

// ksRevision returns the current revision of the key named name.
func ksRevision(t *testing.T, s Keystore, name string) uint64 {
	t.Helper()
	k, err := s.Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return k.Revision
}
