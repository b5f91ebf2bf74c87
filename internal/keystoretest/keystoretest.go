// Package keystoretest is the conformance suite of cryptosvc.Keystore: one
// set of tests that every store (memory, file, keyring, PostgreSQL) runs,
// and the helpers to build and compare keys in them.
package keystoretest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
)

// A Kind opens one kind of store holding initial.
type Kind struct {
	Name     string
	ReadOnly bool
	Open     func(t *testing.T, initial []*cryptosvc.StoredKey) cryptosvc.Keystore
	// Peer, when set, opens a second store over the same data as s (a
	// second replica on the same database): the Shared tests then check
	// that writes, conflicts and notifications cross between them.
	Peer func(t *testing.T, s cryptosvc.Keystore) cryptosvc.Keystore
}

// Secret returns a random secret.
func Secret(t testing.TB) cryptosvc.Secret {
	t.Helper()
	s, err := cryptosvc.GenerateSecret(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Key returns a valid key with n random versions.
func Key(t testing.TB, name string, n int) *cryptosvc.StoredKey {
	t.Helper()
	created := time.Date(2025, 1, 2, 3, 4, 5, 600, time.UTC)
	k := &cryptosvc.StoredKey{Name: name, Created: created, Config: cryptosvc.KeyConfig{
		AllowedAEADs:    []string{"aes-256-gcm", "chacha20-poly1305"},
		DeletionAllowed: true,
		RotationPeriod:  cryptosvc.Duration(720 * time.Hour),
	}}
	for range n {
		AddVersion(t, k, Secret(t))
	}
	return k
}

// AddVersion appends the version after k's latest (1 for none) holding s
// to k.
func AddVersion(t testing.TB, k *cryptosvc.StoredKey, s cryptosvc.Secret) {
	t.Helper()
	v := uint32(1)
	if l := k.Latest(); l != nil {
		v = l.Version + 1
	}
	k.Versions = append(k.Versions, cryptosvc.StoredVersion{
		KeyVersion: cryptosvc.KeyVersion{Version: v, Created: k.Created.Add(time.Duration(v) * time.Hour)},
		Secret:     s,
	})
}

// AssertKey fails unless got is want: same metadata (times by Equal) and
// the same material (Secret.Equal). Revisions are not compared.
func AssertKey(t testing.TB, got, want *cryptosvc.StoredKey) {
	t.Helper()
	if err := DiffKey(got, want); err != nil {
		t.Fatal(err)
	}
}

// DiffKey describes the first difference AssertKey would fail on.
func DiffKey(got, want *cryptosvc.StoredKey) error {
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
	case got.MinAvailable != want.MinAvailable:
		return fmt.Errorf("key %s: min available version %d, want %d", want.Name, got.MinAvailable, want.MinAvailable)
	case !slices.Equal(got.Disabled, want.Disabled):
		return fmt.Errorf("key %s: disabled versions %v, want %v", want.Name, got.Disabled, want.Disabled)
	case (got.Deletion == nil) != (want.Deletion == nil) || got.Deletion != nil &&
		(!got.Deletion.Scheduled.Equal(want.Deletion.Scheduled) || !got.Deletion.DeleteAt.Equal(want.Deletion.DeleteAt)):
		return fmt.Errorf("key %s: deletion %+v, want %+v", want.Name, got.Deletion, want.Deletion)
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

// InvalidKey is a key every store must refuse, with the error it must wrap.
type InvalidKey struct {
	Name string
	Key  *cryptosvc.StoredKey
	Want error
}

// InvalidKeys returns the keys every store must refuse.
func InvalidKeys(t testing.TB) []InvalidKey {
	good := func(mod func(k *cryptosvc.StoredKey)) *cryptosvc.StoredKey {
		k := Key(t, "valid", 2)
		mod(k)
		return k
	}
	return []InvalidKey{
		{"nil", nil, cryptosvc.ErrInvalidConfig},
		{"empty name", good(func(k *cryptosvc.StoredKey) { k.Name = "" }), cryptosvc.ErrInvalidKeyName},
		{"dot name", good(func(k *cryptosvc.StoredKey) { k.Name = ".hidden" }), cryptosvc.ErrInvalidKeyName},
		{"dash name", good(func(k *cryptosvc.StoredKey) { k.Name = "-x" }), cryptosvc.ErrInvalidKeyName},
		{"slash name", good(func(k *cryptosvc.StoredKey) { k.Name = "a/b" }), cryptosvc.ErrInvalidKeyName},
		{"dotdot name", good(func(k *cryptosvc.StoredKey) { k.Name = "../../etc/passwd" }), cryptosvc.ErrInvalidKeyName},
		{"long name", good(func(k *cryptosvc.StoredKey) { k.Name = strings.Repeat("x", cryptosvc.MaxKeyNameLen+1) }), cryptosvc.ErrInvalidKeyName},
		{"no versions", good(func(k *cryptosvc.StoredKey) { k.Versions = nil }), cryptosvc.ErrInvalidConfig},
		{"version gap", good(func(k *cryptosvc.StoredKey) { k.Versions[1].Version = 3 }), cryptosvc.ErrInvalidConfig},
		{"version zero", good(func(k *cryptosvc.StoredKey) { k.Versions[0].Version = 0 }), cryptosvc.ErrInvalidConfig},
		{"min above latest", good(func(k *cryptosvc.StoredKey) { k.Config.MinDecryptionVersion = 3 }), cryptosvc.ErrInvalidConfig},
		{"unknown aead", good(func(k *cryptosvc.StoredKey) { k.Config.AllowedAEADs = []string{"rot13"} }), cryptosvc.ErrInvalidConfig},
		{"pinned not allowed", good(func(k *cryptosvc.StoredKey) { k.Config.AEAD = "aes-128-gcm" }), cryptosvc.ErrInvalidConfig},
		{"versions below min available", good(func(k *cryptosvc.StoredKey) { k.MinAvailable, k.Config.MinDecryptionVersion = 2, 2 }), cryptosvc.ErrInvalidConfig},
		{"min decryption below min available", good(func(k *cryptosvc.StoredKey) { k.MinAvailable, k.Versions = 2, k.Versions[1:] }), cryptosvc.ErrInvalidConfig},
		{"disabled unknown version", good(func(k *cryptosvc.StoredKey) { k.Disabled = []uint32{3} }), cryptosvc.ErrInvalidConfig},
		{"disabled twice", good(func(k *cryptosvc.StoredKey) { k.Disabled = []uint32{1, 1} }), cryptosvc.ErrInvalidConfig},
		{"disabled out of order", good(func(k *cryptosvc.StoredKey) { k.Disabled = []uint32{2, 1} }), cryptosvc.ErrInvalidConfig},
		{"deletion before its scheduling", good(func(k *cryptosvc.StoredKey) {
			k.Deletion = &cryptosvc.KeyDeletion{Scheduled: k.Created, DeleteAt: k.Created.Add(-time.Second)}
		}), cryptosvc.ErrInvalidConfig},
	}
}

// Fill creates initial in s and closes s when the test ends.
func Fill(t *testing.T, s cryptosvc.Keystore, initial []*cryptosvc.StoredKey) cryptosvc.Keystore {
	t.Helper()
	t.Cleanup(func() { s.Close() })
	for _, k := range initial {
		if err := s.Create(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// MustGet returns the key named name, failing the test without it.
func MustGet(t testing.TB, s cryptosvc.Keystore, name string) *cryptosvc.StoredKey {
	t.Helper()
	k, err := s.Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Run runs the whole suite against kind.
func Run(t *testing.T, kind Kind) {
	t.Run("Read", func(t *testing.T) { testRead(t, kind) })
	t.Run("Create", func(t *testing.T) { testCreate(t, kind) })
	t.Run("Update", func(t *testing.T) { testUpdate(t, kind) })
	t.Run("Revision", func(t *testing.T) { testRevision(t, kind) })
	t.Run("AppendOnly", func(t *testing.T) { testAppendOnly(t, kind) })
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, kind) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, kind) })
	t.Run("Invalid", func(t *testing.T) { testInvalid(t, kind) })
	t.Run("Isolation", func(t *testing.T) { testIsolation(t, kind) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, kind) })
	t.Run("ConcurrentRotations", func(t *testing.T) { testConcurrentRotations(t, kind, nil) })
	t.Run("Watch", func(t *testing.T) { testWatch(t, kind) })
	t.Run("Usage", func(t *testing.T) { testUsage(t, kind) })
	if kind.Peer != nil {
		t.Run("Shared", func(t *testing.T) { testShared(t, kind) })
	}
	t.Run("Close", func(t *testing.T) { testClose(t, kind) })
}

func notFound(err error) bool { return errors.Is(err, cryptosvc.ErrKeyNotFound) }
