package cryptosvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// rkCopyDir copies a keystore fixture into a fresh 0700 directory.
func rkCopyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "store")
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// testdata/keystore-layout1 was written by the file store of layout 1 under
// the root key 00 01 02 … 1f, with the keys "orders" (material 32 × 0x40)
// and "payments" (32 × 0x41).
const rkLayout1Root = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

func TestFileStoreLayout1Opens(t *testing.T) {
	ctx := context.Background()
	dir := rkCopyDir(t, filepath.Join("testdata", "keystore-layout1"))
	root, err := ParseRootKey(rkLayout1Root)
	if err != nil {
		t.Fatal(err)
	}
	s := ksOpenFile(t, dir, &root)
	for i, name := range []string{"orders", "payments"} {
		k, err := s.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.Repeat([]byte{byte(0x40 + i)}, 32); !bytes.Equal(k.Versions[0].Secret.Expose(), want) {
			t.Fatalf("%s: wrong material", name)
		}
	}
	// Writes keep the layout: a new key is sealed under generation 0.
	if err := s.Create(ctx, ksTestKey(t, "new", 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, ksStorageKey)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a layout-1 store gained %s: %v", ksStorageKey, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "keys", "new.key"))
	if err != nil {
		t.Fatal(err)
	}
	if g, err := RecordGeneration(raw); err != nil || g != 0 {
		t.Fatalf("new record generation %d, %v; want 0", g, err)
	}
	s = ksOpenFile(t, dir, &root)
	if names, _ := s.List(ctx); !slices.Equal(names, []string{"new", "orders", "payments"}) {
		t.Fatalf("List = %q", names)
	}
	s.Close()

	other := ksTestSecret(t)
	if _, err := OpenFileStore(dir, FileStoreConfig{RootKey: &other}); !errors.Is(err, ErrRootKey) {
		t.Fatalf("wrong root key: %v, want ErrRootKey", err)
	}
	// A provider other than the static key cannot open layout 1.
	p := rkOpaqueProvider{ksTestStatic(t)}
	if _, err := OpenFileStore(dir, FileStoreConfig{RootKeyProvider: p}); !errors.Is(err, ErrRootKey) {
		t.Fatalf("non-static provider on layout 1: %v, want ErrRootKey", err)
	}
}

// rkOpaqueProvider hides a provider's type, as a PKCS#11 provider would.
type rkOpaqueProvider struct{ RootKeyProvider }

func (rkOpaqueProvider) String() string { return "opaque" }

func ksTestStatic(t *testing.T) *StaticRootKey {
	t.Helper()
	root := ksTestSecret(t)
	p, err := NewStaticRootKey(&root, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFileStoreLayout2Provider(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := rkOpaqueProvider{ksTestStatic(t)}
	s, err := OpenFileStore(dir, FileStoreConfig{RootKeyProvider: p})
	if err != nil {
		t.Fatal(err)
	}
	k := ksTestKey(t, "a", 2)
	if err := s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var f ksStorageKeyFile
	raw, err := os.ReadFile(filepath.Join(dir, ksStorageKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &f); err != nil || f.V != 2 || f.Generation != 1 || f.RootKey != "opaque" {
		t.Fatalf("%s = %s (%v)", ksStorageKey, raw, err)
	}
	s, err = OpenFileStore(dir, FileStoreConfig{RootKeyProvider: p})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	ksAssertKey(t, got, k)
	s.Close()
	// Another root key does not unwrap the storage key.
	if _, err := OpenFileStore(dir, FileStoreConfig{RootKeyProvider: ksTestStatic(t)}); !errors.Is(err, ErrRootKey) {
		t.Fatalf("wrong provider: %v, want ErrRootKey", err)
	}
}

func TestSealerRecords(t *testing.T) {
	ctx := context.Background()
	p := ksTestStatic(t)
	s1, w1, err := NewStorageKey(ctx, p, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s1.Seal("key", "orders", []byte("record"))
	if err != nil {
		t.Fatal(err)
	}
	// The wrapped form reopens to the same key.
	again, err := OpenStorageKey(ctx, p, w1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := again.Open("key", "orders", rec); err != nil || string(pt) != "record" {
		t.Fatalf("Open = %q, %v", pt, err)
	}
	// Kind and name are bound.
	for _, kn := range [][2]string{{"key", "Orders"}, {"check", "orders"}, {"key", ""}} {
		if _, err := s1.Open(kn[0], kn[1], rec); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("Open(%q, %q) = %v, want ErrAuthFailed", kn[0], kn[1], err)
		}
	}
	// The generation is bound to the wrapped key.
	w1b := *w1
	w1b.Generation = 2
	if _, err := OpenStorageKey(ctx, p, &w1b, nil); !errors.Is(err, ErrRootKey) {
		t.Fatalf("generation changed: %v, want ErrRootKey", err)
	}
	// A new generation opens the old records only when it includes them.
	s2, _, err := NewStorageKey(ctx, p, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Open("key", "orders", rec); !errors.Is(err, ErrRootKey) {
		t.Fatalf("old record under a new key alone: %v, want ErrRootKey", err)
	}
	both := s2.Including(s1)
	if pt, err := both.Open("key", "orders", rec); err != nil || string(pt) != "record" {
		t.Fatalf("Including: %q, %v", pt, err)
	}
	rec2, _ := both.Seal("key", "orders", []byte("record"))
	if g, _ := RecordGeneration(rec2); g != 2 {
		t.Fatalf("Including seals under generation %d, want 2", g)
	}
	if _, err := s1.Open("key", "orders", rec2); !errors.Is(err, ErrRootKey) {
		t.Fatalf("new record under the old key: %v", err)
	}
	// Rejected envelopes.
	var env ssEnvelope
	json.Unmarshal(rec, &env)
	for _, tc := range []struct {
		name string
		v    int
		g    uint32
		want error
	}{
		{"v2 without generation", 2, 0, ErrMalformed},
		{"v1 with generation", 1, 1, ErrMalformed},
		{"v3", 3, 1, ErrUnsupported},
	} {
		e := env
		e.V, e.G = tc.v, tc.g
		b, _ := json.Marshal(&e)
		if _, err := s1.Open("key", "orders", b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestStaticRootKeyWrap(t *testing.T) {
	ctx := context.Background()
	p := ksTestStatic(t)
	k := ksTestSecret(t)
	w, err := p.WrapKey(ctx, &k, []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 72 || bytes.Contains(w, k.Expose()) {
		t.Fatalf("wrapped length %d or material in the clear", len(w))
	}
	got, err := p.UnwrapKey(ctx, w, []byte("ad"))
	if err != nil || !got.Equal(&k) {
		t.Fatalf("UnwrapKey: %v", err)
	}
	if _, err := p.UnwrapKey(ctx, w, []byte("other")); !errors.Is(err, ErrRootKey) {
		t.Fatalf("other ad: %v", err)
	}
	if _, err := ksTestStatic(t).UnwrapKey(ctx, w, []byte("ad")); !errors.Is(err, ErrRootKey) {
		t.Fatalf("other root: %v", err)
	}
	if _, err := p.UnwrapKey(ctx, w[:71], []byte("ad")); !errors.Is(err, ErrRootKey) {
		t.Fatalf("short: %v", err)
	}
	var zero Secret
	if _, err := NewStaticRootKey(&zero, nil); !errors.Is(err, ErrRootKey) {
		t.Fatalf("zero root: %v", err)
	}
}
