package cryptosvc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The keystore conformance suite runs every test against every Keystore in
// this package: MemStore, FileStore and Keyring (read path only; its
// writes must fail with ErrReadOnly).

// ksKind opens one kind of store holding initial.
type ksKind struct {
	name     string
	readOnly bool
	open     func(t *testing.T, initial []*StoredKey) Keystore
}

func ksKinds() []ksKind {
	return []ksKind{
		{name: "mem", open: func(t *testing.T, initial []*StoredKey) Keystore {
			return ksFill(t, NewMemStore(), initial)
		}},
		{name: "file", open: func(t *testing.T, initial []*StoredKey) Keystore {
			root := ksTestSecret(t)
			s, err := OpenFileStore(t.TempDir(), FileStoreConfig{RootKey: &root})
			if err != nil {
				t.Fatal(err)
			}
			return ksFill(t, s, initial)
		}},
		{name: "keyring", readOnly: true, open: func(t *testing.T, initial []*StoredKey) Keystore {
			path := ksWriteKeyringFile(t, filepath.Join(t.TempDir(), "keyring.json"), initial)
			r, err := OpenKeyring(path, KeyringConfig{PollInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r
		}},
	}
}

func ksFill(t *testing.T, s Keystore, initial []*StoredKey) Keystore {
	t.Helper()
	t.Cleanup(func() { s.Close() })
	for _, k := range initial {
		if err := s.Create(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func ksWriteKeyringFile(t *testing.T, path string, keys []*StoredKey) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteKeyring(&buf, keys); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func ksTestSecret(t testing.TB) Secret {
	t.Helper()
	s, err := GenerateSecret(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ksTestKey returns a valid key with n random versions.
func ksTestKey(t testing.TB, name string, n int) *StoredKey {
	t.Helper()
	created := time.Date(2025, 1, 2, 3, 4, 5, 600, time.UTC)
	k := &StoredKey{Name: name, Created: created, Config: KeyConfig{
		AllowedAEADs:    []string{"aes-256-gcm", "chacha20-poly1305"},
		DeletionAllowed: true,
		RotationPeriod:  Duration(720 * time.Hour),
	}}
	for i := 1; i <= n; i++ {
		ksAddVersion(t, k, ksTestSecret(t))
	}
	return k
}

func ksAddVersion(t testing.TB, k *StoredKey, s Secret) {
	t.Helper()
	v := uint32(len(k.Versions) + 1)
	k.Versions = append(k.Versions, StoredVersion{
		KeyVersion: KeyVersion{Version: v, Created: k.Created.Add(time.Duration(v) * time.Hour)},
		Secret:     s,
	})
}

// ksAssertKey fails unless got is want: same metadata (times by Equal) and
// the same material (Secret.Equal).
func ksAssertKey(t testing.TB, got, want *StoredKey) {
	t.Helper()
	if err := ksDiffKey(got, want); err != nil {
		t.Fatal(err)
	}
}

func ksDiffKey(got, want *StoredKey) error {
	switch {
	case got == nil:
		return fmt.Errorf("key %s: got nil", want.Name)
	case got.Name != want.Name:
		return fmt.Errorf("name %q, want %q", got.Name, want.Name)
	case !got.Created.Equal(want.Created):
		return fmt.Errorf("key %s: created %v, want %v", want.Name, got.Created, want.Created)
	case !reflect.DeepEqual(got.Config, want.Config):
		return fmt.Errorf("key %s: config %+v, want %+v", want.Name, got.Config, want.Config)
	case len(got.Versions) != len(want.Versions):
		return fmt.Errorf("key %s: %d versions, want %d", want.Name, len(got.Versions), len(want.Versions))
	}
	for i := range want.Versions {
		g, w := &got.Versions[i], &want.Versions[i]
		if g.Version != w.Version || !g.Created.Equal(w.Created) {
			return fmt.Errorf("key %s: version %+v, want %+v", want.Name, g.KeyVersion, w.KeyVersion)
		}
		if !g.Secret.Equal(&w.Secret) {
			return fmt.Errorf("key %s: version %d: material differs", want.Name, w.Version)
		}
	}
	return nil
}

// ksInvalidKeys are keys every store must refuse, with the error they
// must wrap.
func ksInvalidKeys(t *testing.T) []struct {
	name string
	key  *StoredKey
	want error
} {
	good := func(mod func(k *StoredKey)) *StoredKey {
		k := ksTestKey(t, "valid", 2)
		mod(k)
		return k
	}
	return []struct {
		name string
		key  *StoredKey
		want error
	}{
		{"nil", nil, ErrInvalidConfig},
		{"empty name", good(func(k *StoredKey) { k.Name = "" }), ErrInvalidKeyName},
		{"dot name", good(func(k *StoredKey) { k.Name = ".hidden" }), ErrInvalidKeyName},
		{"dash name", good(func(k *StoredKey) { k.Name = "-x" }), ErrInvalidKeyName},
		{"slash name", good(func(k *StoredKey) { k.Name = "a/b" }), ErrInvalidKeyName},
		{"dotdot name", good(func(k *StoredKey) { k.Name = "../../etc/passwd" }), ErrInvalidKeyName},
		{"long name", good(func(k *StoredKey) { k.Name = strings.Repeat("x", MaxKeyNameLen+1) }), ErrInvalidKeyName},
		{"no versions", good(func(k *StoredKey) { k.Versions = nil }), ErrInvalidConfig},
		{"version gap", good(func(k *StoredKey) { k.Versions[1].Version = 3 }), ErrInvalidConfig},
		{"version zero", good(func(k *StoredKey) { k.Versions[0].Version = 0 }), ErrInvalidConfig},
		{"min above latest", good(func(k *StoredKey) { k.Config.MinDecryptionVersion = 3 }), ErrInvalidConfig},
		{"unknown aead", good(func(k *StoredKey) { k.Config.AllowedAEADs = []string{"rot13"} }), ErrInvalidConfig},
		{"pinned not allowed", good(func(k *StoredKey) { k.Config.AEAD = "aes-128-gcm" }), ErrInvalidConfig},
	}
}

func TestStoreConformance(t *testing.T) {
	for _, kind := range ksKinds() {
		t.Run(kind.name, func(t *testing.T) {
			t.Run("Read", func(t *testing.T) { ksTestRead(t, kind) })
			t.Run("Create", func(t *testing.T) { ksTestCreate(t, kind) })
			t.Run("Update", func(t *testing.T) { ksTestUpdate(t, kind) })
			t.Run("Delete", func(t *testing.T) { ksTestDelete(t, kind) })
			t.Run("Invalid", func(t *testing.T) { ksTestInvalid(t, kind) })
			t.Run("Isolation", func(t *testing.T) { ksTestIsolation(t, kind) })
			t.Run("Concurrent", func(t *testing.T) { ksTestConcurrent(t, kind) })
			t.Run("Close", func(t *testing.T) { ksTestClose(t, kind) })
		})
	}
}

func ksTestRead(t *testing.T, kind ksKind) {
	ctx := context.Background()
	keys := []*StoredKey{ksTestKey(t, "beta", 3), ksTestKey(t, "alpha", 1), ksTestKey(t, "Zeta_9.x-y", 2), ksTestKey(t, "0", 1)}
	keys[1].Config = KeyConfig{} // the zero configuration round-trips too
	keys[2].Config.MinDecryptionVersion = 2
	keys[2].Config.AEAD = "chacha20-poly1305"
	s := kind.open(t, keys)

	names, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0", "Zeta_9.x-y", "alpha", "beta"}; !slices.Equal(names, want) {
		t.Fatalf("List = %q, want %q", names, want)
	}
	names[0] = "mutated"
	if again, _ := s.List(ctx); again[0] != "0" {
		t.Fatal("List shares its slice with the store")
	}
	for _, want := range keys {
		got, err := s.Get(ctx, want.Name)
		if err != nil {
			t.Fatal(err)
		}
		ksAssertKey(t, got, want)
	}
	for _, name := range []string{"gamma", "", "ALPHA", "../alpha", "alpha.key", strings.Repeat("a", 1000)} {
		if _, err := s.Get(ctx, name); !errors.Is(err, ErrKeyNotFound) {
			t.Errorf("Get(%q) = %v, want ErrKeyNotFound", name, err)
		}
	}

	if kind.readOnly {
		k := ksTestKey(t, "gamma", 1)
		if err := s.Create(ctx, k); !errors.Is(err, ErrReadOnly) {
			t.Errorf("Create = %v, want ErrReadOnly", err)
		}
		if err := s.Update(ctx, keys[0]); !errors.Is(err, ErrReadOnly) {
			t.Errorf("Update = %v, want ErrReadOnly", err)
		}
		if err := s.Delete(ctx, "alpha"); !errors.Is(err, ErrReadOnly) {
			t.Errorf("Delete = %v, want ErrReadOnly", err)
		}
		if names, _ := s.List(ctx); len(names) != len(keys) {
			t.Errorf("a refused write changed the store: %q", names)
		}
	}
}

func ksTestCreate(t *testing.T, kind ksKind) {
	if kind.readOnly {
		t.Skip("read-only: covered by Read")
	}
	ctx := context.Background()
	s := kind.open(t, nil)
	if names, err := s.List(ctx); err != nil || len(names) != 0 {
		t.Fatalf("empty store lists %q, %v", names, err)
	}
	a := ksTestKey(t, "a", 2)
	if err := s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	ksAssertKey(t, got, a)

	dup := ksTestKey(t, "a", 1)
	if err := s.Create(ctx, dup); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("second Create = %v, want ErrKeyExists", err)
	}
	got, _ = s.Get(ctx, "a")
	ksAssertKey(t, got, a) // the refused Create changed nothing
}

func ksTestUpdate(t *testing.T, kind ksKind) {
	if kind.readOnly {
		t.Skip("read-only: covered by Read")
	}
	ctx := context.Background()
	a := ksTestKey(t, "a", 1)
	s := kind.open(t, []*StoredKey{a})

	// A rotation.
	b := a.Clone()
	ksAddVersion(t, b, ksTestSecret(t))
	if err := s.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, "a")
	ksAssertKey(t, got, b)

	// A new configuration.
	c := b.Clone()
	c.Config = KeyConfig{MinDecryptionVersion: 2, AEAD: "aes-128-gcm"}
	if err := s.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Get(ctx, "a")
	ksAssertKey(t, got, c)

	if err := s.Update(ctx, ksTestKey(t, "missing", 1)); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("Update of a missing key = %v, want ErrKeyNotFound", err)
	}
	if _, err := s.Get(ctx, "missing"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatal("Update of a missing key created it")
	}
}

func ksTestDelete(t *testing.T, kind ksKind) {
	if kind.readOnly {
		t.Skip("read-only: covered by Read")
	}
	ctx := context.Background()
	s := kind.open(t, []*StoredKey{ksTestKey(t, "a", 1), ksTestKey(t, "b", 1)})
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}
	if names, _ := s.List(ctx); !slices.Equal(names, []string{"b"}) {
		t.Fatalf("List after Delete = %q", names)
	}
	if err := s.Delete(ctx, "a"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("second Delete = %v, want ErrKeyNotFound", err)
	}
	if err := s.Delete(ctx, "../b"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("Delete(../b) = %v, want ErrKeyNotFound", err)
	}
	// The name is free again.
	a2 := ksTestKey(t, "a", 3)
	if err := s.Create(ctx, a2); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, "a")
	ksAssertKey(t, got, a2)
}

func ksTestInvalid(t *testing.T, kind ksKind) {
	ctx := context.Background()
	existing := ksTestKey(t, "valid", 2)
	s := kind.open(t, []*StoredKey{existing})
	for _, tc := range ksInvalidKeys(t) {
		want := tc.want
		if kind.readOnly {
			want = ErrReadOnly
		}
		if err := s.Create(ctx, tc.key); !errors.Is(err, want) {
			t.Errorf("%s: Create = %v, want %v", tc.name, err, want)
		}
		if err := s.Update(ctx, tc.key); !errors.Is(err, want) {
			t.Errorf("%s: Update = %v, want %v", tc.name, err, want)
		}
	}
	if names, _ := s.List(ctx); !slices.Equal(names, []string{"valid"}) {
		t.Fatalf("invalid keys reached the store: %q", names)
	}
	got, _ := s.Get(ctx, "valid")
	ksAssertKey(t, got, existing)
}

func ksTestIsolation(t *testing.T, kind ksKind) {
	ctx := context.Background()
	a := ksTestKey(t, "a", 2)
	want := a.Clone()
	s := kind.open(t, []*StoredKey{a})

	// Mutating what was stored (for the keyring: what was written) does
	// not reach the store.
	ksScramble(t, a)
	got, _ := s.Get(ctx, "a")
	ksAssertKey(t, got, want)

	if kind.readOnly {
		return
	}
	u := want.Clone()
	ksAddVersion(t, u, ksTestSecret(t))
	uWant := u.Clone()
	if err := s.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	ksScramble(t, u)
	got, _ = s.Get(ctx, "a")
	ksAssertKey(t, got, uWant)
}

// ksScramble modifies k in every place a shallow copy would share.
func ksScramble(t *testing.T, k *StoredKey) {
	k.Versions[0].Secret = ksTestSecret(t)
	k.Versions[0].Created = time.Unix(0, 0)
	k.Config.AllowedAEADs[0] = "aes-128-gcm"
	k.Config.MinDecryptionVersion = 1
	ksAddVersion(t, k, ksTestSecret(t))
}

func ksTestConcurrent(t *testing.T, kind ksKind) {
	ctx := context.Background()
	const writers, rounds = 4, 12
	var initial []*StoredKey
	for w := range writers {
		initial = append(initial, ksTestKey(t, fmt.Sprintf("w%d", w), 1))
	}
	s := kind.open(t, initial)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 64)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for range 4 { // readers
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				names, err := s.List(ctx)
				if err != nil {
					report(err)
					return
				}
				for _, n := range names {
					k, err := s.Get(ctx, n)
					if errors.Is(err, ErrKeyNotFound) && strings.HasPrefix(n, "tmp") {
						continue // deleted since List
					}
					if err != nil {
						report(err)
						return
					}
					if err := k.Validate(); err != nil {
						report(fmt.Errorf("reader saw an invalid key: %w", err))
						return
					}
					_ = k.Latest().Secret.Expose()[0]
				}
			}
		})
	}
	var wwg sync.WaitGroup
	if !kind.readOnly {
		for w := range writers {
			wwg.Go(func() {
				k := initial[w].Clone()
				tmp := fmt.Sprintf("tmp%d", w)
				for range rounds {
					ksAddVersion(t, k, ksTestSecret(t))
					if err := s.Update(ctx, k); err != nil {
						report(err)
						return
					}
					if err := s.Create(ctx, ksTestKey(t, tmp, 1)); err != nil {
						report(err)
						return
					}
					if err := s.Delete(ctx, tmp); err != nil {
						report(err)
						return
					}
				}
			})
		}
	} else {
		time.Sleep(50 * time.Millisecond)
	}
	wwg.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if kind.readOnly {
		return
	}
	for w := range writers {
		k, err := s.Get(ctx, fmt.Sprintf("w%d", w))
		if err != nil {
			t.Fatal(err)
		}
		if len(k.Versions) != rounds+1 {
			t.Errorf("w%d: %d versions, want %d", w, len(k.Versions), rounds+1)
		}
	}
	if names, _ := s.List(ctx); len(names) != writers {
		t.Errorf("List = %q", names)
	}
}

func ksTestClose(t *testing.T, kind ksKind) {
	ctx := context.Background()
	s := kind.open(t, []*StoredKey{ksTestKey(t, "a", 1)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v", err)
	}
	if _, err := s.List(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close = %v", err)
	}
	want := ErrClosed
	if kind.readOnly {
		want = ErrReadOnly
	}
	if err := s.Create(ctx, ksTestKey(t, "b", 1)); !errors.Is(err, want) {
		t.Errorf("Create after Close = %v, want %v", err, want)
	}
	if err := s.Update(ctx, ksTestKey(t, "a", 2)); !errors.Is(err, want) {
		t.Errorf("Update after Close = %v, want %v", err, want)
	}
	if err := s.Delete(ctx, "a"); !errors.Is(err, want) {
		t.Errorf("Delete after Close = %v, want %v", err, want)
	}
}

// ksMaterialForms returns every text form in which s's material could
// leak: raw, base64 in four alphabets, hex in two cases.
func ksMaterialForms(s *Secret) [][]byte {
	b := s.Expose()
	forms := [][]byte{bytes.Clone(b)}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		// A prefix long enough to be unique, short enough to ignore how the
		// encoding ends.
		forms = append(forms, []byte(enc.EncodeToString(b)[:40]))
	}
	h := hex.EncodeToString(b)
	return append(forms, []byte(h), []byte(strings.ToUpper(h)))
}

// ksAssertNoMaterial fails if text contains any form of any secret.
func ksAssertNoMaterial(t testing.TB, what string, text []byte, secrets ...*Secret) {
	t.Helper()
	for i, s := range secrets {
		for _, f := range ksMaterialForms(s) {
			if bytes.Contains(text, f) {
				t.Fatalf("%s reveals secret %d", what, i)
			}
		}
	}
}

func TestSecretRedactedInStoredKey(t *testing.T) {
	k := ksTestKey(t, "fmt", 2)
	secrets := []*Secret{&k.Versions[0].Secret, &k.Versions[1].Secret}
	values := map[string]any{
		"StoredKey": *k, "*StoredKey": k, "StoredVersion": k.Versions[0],
		"[]StoredVersion": k.Versions, "Secret": k.Versions[0].Secret, "*Secret": &k.Versions[0].Secret,
	}
	for name, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q", "%d"} {
			out := fmt.Sprintf(verb, v)
			ksAssertNoMaterial(t, fmt.Sprintf("%s %s", verb, name), []byte(out), secrets...)
		}
		if b, err := json.Marshal(v); err == nil {
			t.Errorf("json.Marshal(%s) succeeded: %s", name, b)
		} else {
			ksAssertNoMaterial(t, "json error for "+name, []byte(err.Error()), secrets...)
		}
	}
	// What may be marshalled: the description.
	b, err := json.Marshal(k.Describe())
	if err != nil {
		t.Fatal(err)
	}
	ksAssertNoMaterial(t, "json.Marshal(Describe())", b, secrets...)

	// zap's reflection encoder, as a careless log line would use it.
	var logBuf bytes.Buffer
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logBuf), zap.DebugLevel))
	log.Info("careless", zap.Any("key", k), zap.Any("secret", k.Versions[0].Secret), zap.Reflect("versions", k.Versions))
	log.Sync()
	if logBuf.Len() == 0 {
		t.Fatal("nothing logged")
	}
	ksAssertNoMaterial(t, "zap.Any", logBuf.Bytes(), secrets...)
}

// StoredKey.Version takes a version from a ciphertext header: any uint32
// must give nil or the version, never a panic (int(v) is negative for large
// v on 32-bit platforms).
func TestStoredKeyVersionBounds(t *testing.T) {
	k := ksTestKey(t, "a", 2)
	for _, v := range []uint32{0, 3, 1 << 31, 1<<32 - 1} {
		if got := k.Version(v); got != nil {
			t.Errorf("Version(%d) = %+v, want nil", v, got.KeyVersion)
		}
	}
	if got := k.Version(2); got == nil || got.Version != 2 {
		t.Errorf("Version(2) = %v", got)
	}
}
