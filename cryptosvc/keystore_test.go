package cryptosvc

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The ks* helpers mirror internal/keystoretest's: that package imports
// cryptosvc, so these in-package tests, which use unexported names, cannot
// import it.

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
