package cryptosvc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rkStore fills a new store under root with n keys of 2 versions.
func rkStore(t *testing.T, dir string, p RootKeyProvider, names ...string) []*StoredKey {
	t.Helper()
	s, err := OpenFileStore(dir, FileStoreConfig{RootKeyProvider: p})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var keys []*StoredKey
	for _, name := range names {
		k := ksTestKey(t, name, 2)
		if err := s.Create(context.Background(), k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

func rkOpen(t *testing.T, dir string, p RootKeyProvider) (*FileStore, error) {
	t.Helper()
	return OpenFileStore(dir, FileStoreConfig{RootKeyProvider: p})
}

// rkAssertKeys checks that the store opens with p and holds exactly keys.
func rkAssertKeys(t *testing.T, dir string, p RootKeyProvider, keys []*StoredKey) {
	t.Helper()
	s, err := rkOpen(t, dir, p)
	if err != nil {
		t.Fatalf("open with %s: %v", p, err)
	}
	defer s.Close()
	names, _ := s.List(context.Background())
	if len(names) != len(keys) {
		t.Fatalf("List = %q, want %d keys", names, len(keys))
	}
	for _, k := range keys {
		got, err := s.Get(context.Background(), k.Name)
		if err != nil {
			t.Fatal(err)
		}
		ksAssertKey(t, got, k)
	}
}

// rkGenerations returns the generation of every record in dir.
func rkGenerations(t *testing.T, dir string) map[uint32]int {
	t.Helper()
	gens := map[uint32]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "keys", "*.key"))
	for _, f := range append(files, filepath.Join(dir, "root.check")) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := RecordGeneration(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		gens[g]++
	}
	return gens
}

func TestRotateRootKeyStatic(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	oldP, newP := ksTestStatic(t), ksTestStatic(t)
	keys := rkStore(t, dir, oldP, "a", "b", "c")
	oldWrapped, err := os.ReadFile(filepath.Join(dir, ksStorageKey))
	if err != nil {
		t.Fatal(err)
	}

	s, err := rkOpen(t, dir, oldP)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RotateRootKey(ctx, newP); err != nil {
		t.Fatal(err)
	}
	if name, gen, rotating := s.RootKey(); name != "static" || gen != 2 || rotating {
		t.Fatalf("RootKey = %s, %d, %v", name, gen, rotating)
	}
	// The store keeps working under the new key.
	d := ksTestKey(t, "d", 1)
	if err := s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	s.Close()
	keys = append(keys, d)
	if g := rkGenerations(t, dir); g[2] != 5 || len(g) != 1 {
		t.Fatalf("record generations %v, want all 5 at 2", g)
	}
	if _, err := os.Stat(filepath.Join(dir, ksRotationFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left behind: %v", ksRotationFile, err)
	}
	rkAssertKeys(t, dir, newP, keys)
	if _, err := rkOpen(t, dir, oldP); !errors.Is(err, ErrRootKey) {
		t.Fatalf("old root key after rotation: %v, want ErrRootKey", err)
	}
	// The old root key with the old storagekey.json (a backup) does not
	// open the new records.
	os.WriteFile(filepath.Join(dir, ksStorageKey), oldWrapped, 0o600)
	if _, err := rkOpen(t, dir, oldP); !errors.Is(err, ErrRootKey) {
		t.Fatalf("old root key and old storagekey.json: %v, want ErrRootKey", err)
	}
}

func TestRotateRootKeyOffLayout1(t *testing.T) {
	ctx := context.Background()
	dir := rkCopyDir(t, filepath.Join("testdata", "keystore-layout1"))
	root, _ := ParseRootKey(rkLayout1Root)
	oldP, err := NewStaticRootKey(&root, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := rkOpen(t, dir, oldP)
	if err != nil {
		t.Fatal(err)
	}
	want := []*StoredKey{}
	for _, n := range []string{"orders", "payments"} {
		k, _ := s.Get(ctx, n)
		want = append(want, k.Clone())
	}
	newP := rkOpaqueProvider{ksTestStatic(t)}
	if err := s.RotateRootKey(ctx, newP); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if g := rkGenerations(t, dir); g[1] != 3 || len(g) != 1 {
		t.Fatalf("record generations %v, want all 3 at 1", g)
	}
	rkAssertKeys(t, dir, newP, want)
	if _, err := OpenFileStore(dir, FileStoreConfig{RootKey: &root}); !errors.Is(err, ErrRootKey) {
		t.Fatalf("layout-1 root key after rotation: %v", err)
	}
}

func TestRotateRootKeyOffDevKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenFileStore(dir, FileStoreConfig{DevRootKey: true})
	if err != nil {
		t.Fatal(err)
	}
	k := ksTestKey(t, "a", 1)
	s.Create(ctx, k)
	newP := ksTestStatic(t)
	if err := s.RotateRootKey(ctx, newP); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "root.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("root.key survived the rotation off it: %v", err)
	}
	rkAssertKeys(t, dir, newP, []*StoredKey{k})
}

// TestRotateRootKeyHalfDone stops a rotation after each of its durable
// steps (as a crash would, without the process dying: see
// TestRotateRootKeyKilled for that) and checks that the store opens with
// either root key, refuses a third, and that finishing works.
func TestRotateRootKeyHalfDone(t *testing.T) {
	ctx := context.Background()
	const nkeys = 3
	// Steps: 1 rotate.json, 2–4 the keys, 5 root.check, 6 storagekey.json,
	// 7 rotate.json removed.
	for stop := 1; stop <= nkeys+4; stop++ {
		dir := t.TempDir()
		oldP, newP, third := ksTestStatic(t), ksTestStatic(t), ksTestStatic(t)
		keys := rkStore(t, dir, oldP, "a", "b", "c")
		s, _ := rkOpen(t, dir, oldP)
		errStop := errors.New("stop")
		ksRotateHook = func(step int) {
			if step == stop {
				panic(errStop)
			}
		}
		func() {
			defer func() {
				if r := recover(); r != errStop {
					panic(r)
				}
			}()
			s.RotateRootKey(ctx, newP)
		}()
		ksRotateHook = nil
		s.Close()

		journal := stop <= nkeys+3 // rotate.json is still there
		for _, p := range []RootKeyProvider{oldP, newP} {
			wantOpen := p == newP || journal
			s, err := rkOpen(t, dir, p)
			if wantOpen != (err == nil) {
				t.Fatalf("stop %d, open with the %s key: %v (want open: %v)", stop, map[bool]string{true: "old", false: "new"}[p == oldP], err, wantOpen)
			}
			if err == nil {
				s.Close()
				rkAssertKeys(t, dir, p, keys)
			}
		}
		if s, err := rkOpen(t, dir, third); err == nil {
			s.Close()
			t.Fatalf("stop %d: a third root key opened the store", stop)
		}
		// Open with the old key (while it still opens), write, then finish
		// with the new one; a third key cannot finish it.
		opener := oldP
		if !journal {
			opener = newP
		}
		s, err := rkOpen(t, dir, opener)
		if err != nil {
			t.Fatal(err)
		}
		_, _, rotating := s.RootKey()
		if rotating != journal {
			t.Fatalf("stop %d: rotating = %v", stop, rotating)
		}
		k := ksTestKey(t, "written-meanwhile", 1)
		if err := s.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
		if rotating {
			if err := s.RotateRootKey(ctx, third); !errors.Is(err, ErrRootKey) || !strings.Contains(err.Error(), "half done") {
				t.Fatalf("stop %d: finishing with a third key: %v", stop, err)
			}
			if err := s.RotateRootKey(ctx, newP); err != nil {
				t.Fatalf("stop %d: finishing: %v", stop, err)
			}
		}
		s.Close()
		rkAssertKeys(t, dir, newP, append(keys, k))
		if g := rkGenerations(t, dir); len(g) != 1 || g[2] == 0 {
			t.Fatalf("stop %d: generations %v after finishing", stop, g)
		}
	}
}

func TestRotateRootKeyNothingInTheClear(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	oldP, newP := ksTestStatic(t), ksTestStatic(t)
	keys := rkStore(t, dir, oldP, "a", "b")
	s, _ := rkOpen(t, dir, oldP)
	secrets := []*Secret{&oldP.root, &newP.root}
	for _, k := range keys {
		for i := range k.Versions {
			secrets = append(secrets, &k.Versions[i].Secret)
		}
	}
	var scanned int
	ksRotateHook = func(int) {
		// The storage keys of both generations, once they exist.
		all := slices.Clone(secrets)
		for _, kk := range s.seal.keys {
			all = append(all, &kk.secret)
		}
		for _, f := range ksFiles(t, dir) {
			raw, _ := os.ReadFile(filepath.Join(dir, f))
			ksAssertNoMaterial(t, f, raw, all...)
			scanned++
		}
	}
	defer func() { ksRotateHook = nil }()
	if err := s.RotateRootKey(ctx, newP); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if scanned == 0 {
		t.Fatal("no file scanned")
	}
}
