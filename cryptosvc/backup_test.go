package cryptosvc

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

var updateBackupVector = flag.Bool("update-backup-vector", false, "rewrite testdata/backup/*.json from the code")

// bkService returns a service over a new file keystore under root in a
// directory of its own, with backup key bk (nil: none).
func bkService(t *testing.T, root, bk *Secret) *Service {
	t.Helper()
	st := ksOpenFile(t, t.TempDir(), root)
	s, err := New(Config{Keystore: st, BackupKey: bk, MinRotationPeriod: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// bkSource makes the key "k" on s: versions 1 to 4, each with a message
// sealed under it, version 1 retired and trimmed, version 3 disabled.
// It returns the messages by version.
func bkSource(t *testing.T, s *Service) map[uint32][]byte {
	t.Helper()
	ctx := context.Background()
	if _, err := s.CreateKey(ctx, "k", KeyConfig{Exportable: true, AllowedAEADs: []string{"aes-256-gcm", "chacha20-poly1305"}}); err != nil {
		t.Fatal(err)
	}
	msgs := map[uint32][]byte{}
	for v := uint32(1); v <= 4; v++ {
		if v > 1 {
			if _, err := s.RotateKey(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
		ct, info, err := s.Seal(ctx, "k", []byte("message of version "+string(rune('0'+v))), []byte("ctx"))
		if err != nil || info.Version != v {
			t.Fatalf("Seal: %v, %+v", err, info)
		}
		msgs[v] = ct
	}
	if _, err := s.UpdateKeyConfig(ctx, "k", func(c *KeyConfig) error { c.MinDecryptionVersion = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TrimKey(ctx, "k", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DisableKeyVersion(ctx, "k", 3); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// bkCheckRestored checks that dst holds the key src holds, under name,
// and that its versions open what they sealed before the backup, or are
// refused as the source refuses them.
func bkCheckRestored(t *testing.T, src, dst *Service, name string, msgs map[uint32][]byte) {
	t.Helper()
	ctx := context.Background()
	want, err := src.store.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got, err := dst.store.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	w := want.Clone()
	w.Name, w.Revision = name, got.Revision
	ksAssertKey(t, got, w)
	if name != "k" {
		return // the messages name "k"
	}
	for v, ct := range msgs {
		pt, info, err := dst.Open(ctx, "k", ct, []byte("ctx"))
		switch v {
		case 1:
			if !errors.Is(err, ErrVersionDestroyed) && !errors.Is(err, ErrVersionRetired) {
				t.Errorf("version 1 (trimmed): %v", err)
			}
		case 3:
			if !errors.Is(err, ErrVersionDisabled) {
				t.Errorf("version 3 (disabled): %v", err)
			}
		default:
			if err != nil || info.Version != v || !bytes.HasSuffix(pt, []byte{byte('0' + v)}) {
				t.Errorf("version %d: %q, %+v, %v", v, pt, info, err)
			}
		}
	}
}

func TestBackupRestoreBackupKey(t *testing.T) {
	ctx := context.Background()
	bk, rootA, rootB := ksTestSecret(t), ksTestSecret(t), ksTestSecret(t)
	src := bkService(t, &rootA, &bk)
	msgs := bkSource(t, src)
	blob, _, err := src.BackupKey(ctx, "k", SealedUnderBackupKey)
	if err != nil {
		t.Fatal(err)
	}
	if name, err := BackupKeyName(blob); err != nil || name != "k" {
		t.Fatalf("BackupKeyName: %q, %v", name, err)
	}

	// Another fleet: another root key, the same backup key.
	dst := bkService(t, &rootB, &bk)
	if _, err := dst.RestoreKey(ctx, blob, ""); err != nil {
		t.Fatal(err)
	}
	bkCheckRestored(t, src, dst, "k", msgs)
	if _, err := dst.RestoreKey(ctx, blob, ""); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("restored twice: %v", err)
	}
	k, err := dst.RestoreKey(ctx, blob, "k2")
	if err != nil || k.Name != "k2" {
		t.Fatalf("restore under another name: %+v, %v", k, err)
	}
	bkCheckRestored(t, src, dst, "k2", msgs)
	if _, err := dst.RestoreKey(ctx, blob, ".bad"); !errors.Is(err, ErrInvalidKeyName) {
		t.Fatalf("restore under an invalid name: %v", err)
	}

	// Without the backup key, or with another.
	if _, err := bkService(t, &rootB, nil).RestoreKey(ctx, blob, ""); !errors.Is(err, ErrBackupKeyNotConfigured) {
		t.Fatalf("no backup key: %v", err)
	}
	other := ksTestSecret(t)
	if _, err := bkService(t, &rootA, &other).RestoreKey(ctx, blob, ""); !errors.Is(err, ErrInvalidBackup) {
		t.Fatalf("another backup key: %v", err)
	}
	if _, _, err := bkService(t, &rootA, nil).BackupKey(ctx, "default", SealedUnderBackupKey); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("no such key: %v", err)
	}
	if _, _, err := dst.BackupKey(ctx, "k", SealedUnderBackupKey); err != nil {
		t.Fatalf("a restored key backs up again: %v", err)
	}
}

func TestBackupRestoreRoot(t *testing.T) {
	ctx := context.Background()
	rootA, rootB := ksTestSecret(t), ksTestSecret(t)
	src := bkService(t, &rootA, nil)
	msgs := bkSource(t, src)
	if _, _, err := src.BackupKey(ctx, "k", SealedUnderBackupKey); !errors.Is(err, ErrBackupKeyNotConfigured) {
		t.Fatalf("under a backup key without one: %v", err)
	}
	blob, _, err := src.BackupKey(ctx, "k", SealedUnderRoot)
	if err != nil {
		t.Fatal(err)
	}
	// Another keystore under the same root key.
	dst := bkService(t, &rootA, nil)
	if _, err := dst.RestoreKey(ctx, blob, ""); err != nil {
		t.Fatal(err)
	}
	bkCheckRestored(t, src, dst, "k", msgs)
	// Another root key does not open it; nor does a keystore without one.
	if _, err := bkService(t, &rootB, nil).RestoreKey(ctx, blob, ""); !errors.Is(err, ErrInvalidBackup) {
		t.Fatalf("another root key: %v", err)
	}
	mem, err := New(Config{Keystore: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.RestoreKey(ctx, blob, ""); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("a keystore without a root key: %v", err)
	}
}

func TestBackupRefused(t *testing.T) {
	ctx := context.Background()
	root, bk := ksTestSecret(t), ksTestSecret(t)
	s := bkService(t, &root, &bk)
	if _, err := s.CreateKey(ctx, "plain", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, under := range []BackupSealing{SealedUnderBackupKey, SealedUnderRoot} {
		if _, _, err := s.BackupKey(ctx, "plain", under); !errors.Is(err, ErrNotExportable) {
			t.Fatalf("not exportable, under %s: %v", under, err)
		}
	}
	if _, err := s.CreateKey(ctx, "going", KeyConfig{Exportable: true, DeletionAllowed: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ScheduleKeyDeletion(ctx, "going", 7*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.BackupKey(ctx, "going", SealedUnderBackupKey); !errors.Is(err, ErrKeyPendingDeletion) {
		t.Fatalf("pending deletion: %v", err)
	}
	// Cleared exportable is refused too.
	if _, err := s.CreateKey(ctx, "was", KeyConfig{Exportable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateKeyConfig(ctx, "was", func(c *KeyConfig) error { c.Exportable = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.BackupKey(ctx, "was", SealedUnderRoot); !errors.Is(err, ErrNotExportable) {
		t.Fatalf("exportable cleared: %v", err)
	}
}

// TestBackupTampered checks that every modified bit and every truncation
// of a backup, under either key, fails with ErrInvalidBackup alone.
func TestBackupTampered(t *testing.T) {
	ctx := context.Background()
	root, bk := ksTestSecret(t), ksTestSecret(t)
	src := bkService(t, &root, &bk)
	if _, err := src.CreateKey(ctx, "k", KeyConfig{Exportable: true}); err != nil {
		t.Fatal(err)
	}
	dst := bkService(t, &root, &bk)
	for _, under := range []BackupSealing{SealedUnderBackupKey, SealedUnderRoot} {
		blob, _, err := src.BackupKey(ctx, "k", under)
		if err != nil {
			t.Fatal(err)
		}
		for i := range blob {
			for bit := range 8 {
				b := bytes.Clone(blob)
				b[i] ^= 1 << bit
				if _, err := dst.RestoreKey(ctx, b, ""); err != ErrInvalidBackup {
					t.Fatalf("%s: bit %d of byte %d flipped: %v", under, bit, i, err)
				}
			}
		}
		for n := range len(blob) {
			if _, err := dst.RestoreKey(ctx, blob[:n], ""); err != ErrInvalidBackup {
				t.Fatalf("%s: truncated to %d bytes: %v", under, n, err)
			}
		}
		if _, err := dst.RestoreKey(ctx, append(bytes.Clone(blob), 0), ""); err != ErrInvalidBackup {
			t.Fatalf("%s: a byte appended: %v", under, err)
		}
	}
	if _, err := dst.store.Get(ctx, "k"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("a tampered backup was restored: %v", err)
	}
}

// bkVector is testdata/backup/*.json: a backup under a backup key, with
// the random bytes that sealed it, so that an independent implementation
// can check its decoder, and this one its encoder.
type bkVector struct {
	Description  string `json:"description"`
	BackupKeyHex string `json:"backup_key_hex"`
	SaltHex      string `json:"salt_hex"`
	NonceHex     string `json:"nonce_hex"`
	Plaintext    string `json:"plaintext"` // the key record, exactly as sealed
	BackupHex    string `json:"backup_hex"`
}

// TestBackupVector checks the backup of a fixed key under a fixed backup
// key against testdata/backup/backup_key.json, byte for byte, and that
// it restores.
func TestBackupVector(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join("testdata", "backup", "backup_key.json")
	bkRaw := bytes.Repeat([]byte{0x42}, SecretSize)
	bk, _ := NewSecret(bkRaw)
	salt := bytes.Repeat([]byte{0x5a}, bkSaltSize)
	nonce := bytes.Repeat([]byte{0x4e}, bkNonceSize)
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	k := &StoredKey{Name: "orders", Created: created, Config: KeyConfig{Exportable: true, AEAD: "aes-256-gcm", MinDecryptionVersion: 2},
		MinAvailable: 2, Disabled: []uint32{3}}
	for v := uint32(2); v <= 3; v++ {
		sec, _ := NewSecret(bytes.Repeat([]byte{byte(v)}, SecretSize))
		k.Versions = append(k.Versions, StoredVersion{KeyVersion: KeyVersion{Version: v, Created: created.Add(time.Duration(v) * time.Hour)}, Secret: sec})
	}
	st := NewMemStore()
	if err := st.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Keystore: st, BackupKey: &bk, Rand: bytes.NewReader(append(bytes.Clone(salt), nonce...))})
	if err != nil {
		t.Fatal(err)
	}
	blob, _, err := s.BackupKey(ctx, "orders", SealedUnderBackupKey)
	if err != nil {
		t.Fatal(err)
	}
	record, err := json.Marshal(ksRecordOf(k))
	if err != nil {
		t.Fatal(err)
	}
	if *updateBackupVector {
		v := bkVector{
			Description:  "the key orders, versions 2 and 3 (1 trimmed, 3 disabled), backed up under a backup key of 32 bytes 0x42",
			BackupKeyHex: hex.EncodeToString(bkRaw), SaltHex: hex.EncodeToString(salt), NonceHex: hex.EncodeToString(nonce),
			Plaintext: string(record), BackupHex: hex.EncodeToString(blob),
		}
		b, err := json.MarshalIndent(&v, "", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v bkVector
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(blob); got != v.BackupHex {
		t.Fatalf("backup\n got %s\nwant %s", got, v.BackupHex)
	}
	if v.BackupKeyHex != hex.EncodeToString(bkRaw) || v.SaltHex != hex.EncodeToString(salt) || v.NonceHex != hex.EncodeToString(nonce) || v.Plaintext != string(record) {
		t.Fatal("the vector's inputs differ from the test's")
	}
	want, _ := hex.DecodeString(v.BackupHex)
	dst, err := New(Config{Keystore: NewMemStore(), BackupKey: &bk})
	if err != nil {
		t.Fatal(err)
	}
	got, err := dst.RestoreKey(ctx, want, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := k.Describe(); !reflect.DeepEqual(got, d) {
		t.Fatalf("restored %+v, want %+v", got, d)
	}
}

func TestLoadBackupKey(t *testing.T) {
	dir := t.TempDir()
	raw := ksTestSecret(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, b := range map[string][]byte{
		"raw":    raw.Expose(),
		"base64": []byte(base64.StdEncoding.EncodeToString(raw.Expose()) + "\n"),
		"hex":    []byte(hex.EncodeToString(raw.Expose())),
	} {
		got, err := LoadBackupKey(write(name, b))
		if err != nil || !got.Equal(&raw) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"short": raw.Expose()[:31],
		"zeros": make([]byte, SecretSize),
		"text":  []byte("this is not a key, just 32 bytes"),
	} {
		if _, err := LoadBackupKey(write(name, b)); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := LoadBackupKey(filepath.Join(dir, "missing")); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("missing: %v", err)
	}
}
