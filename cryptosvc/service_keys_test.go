package cryptosvc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/kernels"
)

func TestKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	store := NewMemStore()
	s, err := New(Config{Keystore: store, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.CreateKey(ctx, "orders", KeyConfig{})
	if err != nil || k.Latest() != 1 || !k.Created.Equal(now) {
		t.Fatalf("create: %+v %v", k, err)
	}
	if _, err := s.CreateKey(ctx, "orders", KeyConfig{}); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	for _, bad := range []string{"", ".hidden", "-x", "a/b", "a b", "é", strings.Repeat("a", 129)} {
		if _, err := s.CreateKey(ctx, bad, KeyConfig{}); !errors.Is(err, ErrInvalidKeyName) {
			t.Errorf("create %q: %v", bad, err)
		}
	}

	v1, _, err := s.Seal(ctx, "orders", []byte("one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if k, err = s.RotateKey(ctx, "orders"); err != nil || k.Latest() != 2 {
		t.Fatalf("rotate: %+v %v", k, err)
	}
	v2, info, err := s.Seal(ctx, "orders", []byte("two"), nil)
	if err != nil || info.Version != 2 {
		t.Fatalf("seal after rotate: %+v %v", info, err)
	}
	for ct, want := range map[*[]byte]string{&v1: "one", &v2: "two"} {
		if pt, _, err := s.Open(ctx, "orders", *ct, nil); err != nil || string(pt) != want {
			t.Fatalf("open %s: %q %v", want, pt, err)
		}
	}

	// Retire version 1: its ciphertexts stop opening, version 2's still do.
	if _, err := s.ConfigureKey(ctx, "orders", KeyConfig{MinDecryptionVersion: 3}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("min version above latest: %v", err)
	}
	if _, err := s.ConfigureKey(ctx, "orders", KeyConfig{MinDecryptionVersion: 2}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx, "orders", v1, nil); !errors.Is(err, ErrVersionRetired) {
		t.Fatalf("retired version: %v", err)
	}
	if _, _, err := s.Open(ctx, "orders", v2, nil); err != nil {
		t.Fatal(err)
	}

	// Deletion needs to be allowed first.
	if err := s.DeleteKey(ctx, "orders"); !errors.Is(err, ErrDeletionNotAllowed) {
		t.Fatalf("delete not allowed: %v", err)
	}
	if _, err := s.ConfigureKey(ctx, "orders", KeyConfig{MinDecryptionVersion: 2, DeletionAllowed: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteKey(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ctx, "orders", v2, nil); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("open after delete: %v", err)
	}
	if _, err := s.DescribeKey(ctx, "orders"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("describe after delete: %v", err)
	}
	if err := s.DeleteKey(ctx, "orders"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestListAndDescribeShowNoMaterial(t *testing.T) {
	ctx := context.Background()
	store := NewMemStore()
	s, _ := New(Config{Keystore: store})
	for _, n := range []string{"b", "a", "c"} {
		if _, err := s.CreateKey(ctx, n, KeyConfig{AllowedAEADs: []string{"aes-256-gcm"}}); err != nil {
			t.Fatal(err)
		}
	}
	s.RotateKey(ctx, "a")
	keys, err := s.ListKeys(ctx)
	if err != nil || len(keys) != 3 || keys[0].Name != "a" || keys[2].Name != "c" || keys[0].Latest() != 2 {
		t.Fatalf("list: %+v %v", keys, err)
	}
	out, _ := json.Marshal(keys)
	for _, n := range []string{"a", "b", "c"} {
		sk, _ := store.Get(ctx, n)
		for _, v := range sk.Versions {
			m := v.Secret.Expose()
			for _, enc := range []string{hex.EncodeToString(m), fmt.Sprintf("%v", m), string(m)} {
				if strings.Contains(string(out), enc) {
					t.Fatalf("listing reveals key material")
				}
			}
			if s := fmt.Sprintf("%v %+v %#v %s", sk, sk, v, v.Secret); strings.Contains(s, hex.EncodeToString(m)) || strings.Contains(s, fmt.Sprint(m[:8])[1:10]) {
				t.Fatalf("formatting reveals key material: %s", s)
			}
		}
	}
}

func TestImportedKeyInteroperates(t *testing.T) {
	ctx := context.Background()
	secret, _ := GenerateSecret(rand.Reader)
	a, _ := New(Config{Keystore: NewMemStore(), AEAD: kernels.AES128GCM})
	b, _ := New(Config{Keystore: NewMemStore(), AEAD: kernels.ChaCha20Poly1305})
	for _, s := range []*Service{a, b} {
		if _, err := s.ImportKey(ctx, "shared", []Secret{secret}, KeyConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	// Each host seals with its own preference; each opens the other's.
	ca, ia, _ := a.Seal(ctx, "shared", []byte("from a"), []byte("c"))
	cb, ib, _ := b.Seal(ctx, "shared", []byte("from b"), []byte("c"))
	if ia.AEAD != kernels.AES128GCM || ib.AEAD != kernels.ChaCha20Poly1305 {
		t.Fatalf("AEADs %s %s", ia.AEAD, ib.AEAD)
	}
	if pt, _, err := b.Open(ctx, "shared", ca, []byte("c")); err != nil || string(pt) != "from a" {
		t.Fatalf("b opens a: %q %v", pt, err)
	}
	if pt, _, err := a.Open(ctx, "", cb, []byte("c")); err != nil || string(pt) != "from b" {
		t.Fatalf("a opens b: %q %v", pt, err)
	}
	if _, _, err := a.Open(ctx, "other", cb, []byte("c")); !errors.Is(err, ErrKeyMismatch) {
		t.Fatalf("expected key mismatch: %v", err)
	}
	if _, err := a.ImportKey(ctx, "empty", nil, KeyConfig{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("import without versions: %v", err)
	}
}

func TestKeyAEADPolicy(t *testing.T) {
	ctx := context.Background()
	s, _ := New(Config{Keystore: NewMemStore(), AEAD: kernels.AES128GCM})
	for name, tc := range map[string]struct {
		cfg  KeyConfig
		want kernels.Cipher
	}{
		"host choice":        {KeyConfig{}, kernels.AES128GCM},
		"pinned":             {KeyConfig{AEAD: "chacha20-poly1305"}, kernels.ChaCha20Poly1305},
		"restricted":         {KeyConfig{AllowedAEADs: []string{"aes-256-gcm"}}, kernels.AES256GCM},
		"host choice within": {KeyConfig{AllowedAEADs: []string{"aes-256-gcm", "aes-128-gcm"}}, kernels.AES128GCM},
	} {
		if _, err := s.CreateKey(ctx, strings.ReplaceAll(name, " ", "_"), tc.cfg); err != nil {
			t.Fatal(err)
		}
		_, info, err := s.Seal(ctx, strings.ReplaceAll(name, " ", "_"), nil, nil)
		if err != nil || info.AEAD != tc.want {
			t.Errorf("%s: sealed with %s (%v), want %s", name, info.AEAD, err, tc.want)
		}
	}
	for name, cfg := range map[string]KeyConfig{
		"unknown aead":        {AllowedAEADs: []string{"rot13"}},
		"speed-only cipher":   {AEAD: "aes-128-cbc"},
		"pin outside allowed": {AEAD: "aes-128-gcm", AllowedAEADs: []string{"aes-256-gcm"}},
		"not an AEAD":         {AEAD: "aes-128-ctr"},
	} {
		if _, err := s.CreateKey(ctx, "bad", cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// AEAD names parse in any case (ParseAEAD); a key stores them in the
// canonical one, so that a pin and an allowed list written differently
// agree, and describing the key shows one spelling.
func TestKeyAEADNamesCanonical(t *testing.T) {
	ctx := context.Background()
	s, _ := New(Config{Keystore: NewMemStore(), AEAD: kernels.AES256GCM})
	k, err := s.CreateKey(ctx, "mixed", KeyConfig{AEAD: "aes-256-gcm", AllowedAEADs: []string{"AES-256-GCM", "ChaCha20-Poly1305", "aes-256-gcm"}})
	if err != nil {
		t.Fatalf("pin and allowed list in different cases: %v", err)
	}
	if k.AEAD != "aes-256-gcm" || !slices.Equal(k.AllowedAEADs, []string{"aes-256-gcm", "chacha20-poly1305"}) {
		t.Errorf("created: aead %q allowed %q, want the canonical names once each", k.AEAD, k.AllowedAEADs)
	}
	if k, err = s.ConfigureKey(ctx, "mixed", KeyConfig{AEAD: "CHACHA20-POLY1305", AllowedAEADs: []string{"chacha20-poly1305"}}); err != nil || k.AEAD != "chacha20-poly1305" {
		t.Fatalf("configure: %q %v", k.AEAD, err)
	}
	if d, _ := s.DescribeKey(ctx, "mixed"); d.AEAD != "chacha20-poly1305" {
		t.Errorf("described aead %q", d.AEAD)
	}
	// The host's choice is within an allowed list written in upper case.
	if _, err := s.CreateKey(ctx, "upper", KeyConfig{AllowedAEADs: []string{"CHACHA20-POLY1305", "AES-256-GCM"}}); err != nil {
		t.Fatal(err)
	}
	if _, info, err := s.Seal(ctx, "upper", nil, nil); err != nil || info.AEAD != kernels.AES256GCM {
		t.Errorf("sealed with %s (%v), want the host's aes-256-gcm", info.AEAD, err)
	}
}

func TestRotateDue(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, _ := New(Config{Keystore: NewMemStore(), Now: func() time.Time { return now }})
	s.CreateKey(ctx, "monthly", KeyConfig{RotationPeriod: Duration(30 * 24 * time.Hour)})
	s.CreateKey(ctx, "never", KeyConfig{})
	now = now.Add(29 * 24 * time.Hour)
	if r, err := s.RotateDue(ctx); err != nil || len(r) != 0 {
		t.Fatalf("early: %v %v", r, err)
	}
	now = now.Add(48 * time.Hour)
	if r, err := s.RotateDue(ctx); err != nil || len(r) != 1 || r[0] != "monthly" {
		t.Fatalf("due: %v %v", r, err)
	}
	if r, _ := s.RotateDue(ctx); len(r) != 0 {
		t.Fatalf("rotated twice: %v", r)
	}
	k, _ := s.DescribeKey(ctx, "monthly")
	if k.Latest() != 2 || !k.Versions[1].Created.Equal(now) {
		t.Fatalf("after rotation: %+v", k)
	}
}

// rotation_period has a floor, one hour unless the service is configured
// lower: every rotation adds a version kept until retired, and a period of
// seconds would add thousands a day.
func TestRotationPeriodFloor(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := NewMemStore()
	s, _ := New(Config{Keystore: store, Now: func() time.Time { return now }})
	for _, p := range []time.Duration{time.Second, 59 * time.Minute} {
		if _, err := s.CreateKey(ctx, "fast", KeyConfig{RotationPeriod: Duration(p)}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("create with rotation_period %v: %v, want ErrInvalidConfig", p, err)
		}
	}
	if _, err := s.CreateKey(ctx, "hourly", KeyConfig{RotationPeriod: Duration(time.Hour)}); err != nil {
		t.Fatalf("create with rotation_period 1h: %v", err)
	}
	if _, err := s.ConfigureKey(ctx, "hourly", KeyConfig{RotationPeriod: Duration(time.Second)}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("configure rotation_period 1s: %v, want ErrInvalidConfig", err)
	}
	if _, err := New(Config{Keystore: store, MinRotationPeriod: -time.Second}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("negative MinRotationPeriod: %v", err)
	}

	// Set lower on purpose, the service takes the shorter period.
	lax, _ := New(Config{Keystore: store, Now: func() time.Time { return now }, MinRotationPeriod: time.Second})
	if _, err := lax.CreateKey(ctx, "fast", KeyConfig{RotationPeriod: Duration(time.Second)}); err != nil {
		t.Fatalf("create with rotation_period 1s and a minimum of 1s: %v", err)
	}
	// A key stored with a period below the minimum can still have its
	// other fields changed, and rotates at the minimum.
	if _, err := s.UpdateKeyConfig(ctx, "fast", func(c *KeyConfig) error { c.DeletionAllowed = true; return nil }); err != nil {
		t.Errorf("configure another field of a key with a short period: %v", err)
	}
	now = now.Add(2 * time.Second)
	if r, err := s.RotateDue(ctx); err != nil || len(r) != 0 {
		t.Errorf("2 s after creation, with a minimum of 1h: rotated %v (%v)", r, err)
	}
	if r, err := lax.RotateDue(ctx); err != nil || !slices.Equal(r, []string{"fast"}) {
		t.Errorf("2 s after creation, with a minimum of 1s: rotated %v (%v), want fast", r, err)
	}
	now = now.Add(time.Hour)
	if r, err := s.RotateDue(ctx); err != nil || !slices.Equal(r, []string{"fast", "hourly"}) {
		t.Errorf("an hour later: rotated %v (%v), want fast and hourly", r, err)
	}
}

func TestDataKeys(t *testing.T) {
	ctx := context.Background()
	s := newTestService(t, kernels.AES256GCM)
	for _, size := range []int{16, 24, 32, 64} {
		dk, err := s.NewDataKey(ctx, "k", size, []byte("bucket/obj"), true)
		if err != nil || len(dk.Plaintext) != size || bytes.Equal(dk.Plaintext, make([]byte, size)) {
			t.Fatalf("size %d: %v", size, err)
		}
		pt, _, err := s.Open(ctx, "k", dk.Wrapped, []byte("bucket/obj"))
		if err != nil || !bytes.Equal(pt, dk.Plaintext) {
			t.Fatalf("unwrap: %v", err)
		}
	}
	dk, err := s.NewDataKey(ctx, "k", 32, nil, false)
	if err != nil || dk.Plaintext != nil || len(dk.Wrapped) == 0 {
		t.Fatalf("wrapped only: %+v %v", dk, err)
	}
	if _, err := s.NewDataKey(ctx, "k", 33, nil, true); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad size: %v", err)
	}
	if _, err := s.NewDataKey(ctx, "missing", 32, nil, true); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("missing key: %v", err)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no keystore":     {},
		"not an AEAD":     {Keystore: NewMemStore(), AEAD: kernels.AES128CTR},
		"wrong impl":      {Keystore: NewMemStore(), Implementation: func(kernels.Cipher) *kernels.Implementation { return kernels.Available(kernels.ChaCha20)[0] }},
		"AEAD turned off": {Keystore: NewMemStore(), AEAD: kernels.AES128GCM, Implementation: func(kernels.Cipher) *kernels.Implementation { return nil }},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// A small message's overhead is at most 100 bytes plus the key reference.
func TestSmallMessageOverhead(t *testing.T) {
	ctx := context.Background()
	for _, c := range SealAEADs {
		s := newTestService(t, c)
		ct, _, err := s.Seal(ctx, "k", []byte("hello"), nil)
		if err != nil {
			t.Fatal(err)
		}
		overhead := len(ct) - len("hello") - len("k")
		if overhead > 100 {
			t.Errorf("%s: overhead %d bytes", c, overhead)
		}
		t.Logf("%s: %d bytes of overhead besides the key name", c, overhead)
	}
}

// TestExportableOneWay checks that exportable is set at creation only: a
// change may clear it, never set it.
func TestExportableOneWay(t *testing.T) {
	ctx := context.Background()
	s, err := New(Config{Keystore: NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	if k, err := s.CreateKey(ctx, "plain", KeyConfig{}); err != nil || k.Exportable {
		t.Fatalf("CreateKey: %+v, %v", k, err)
	}
	if _, err := s.ConfigureKey(ctx, "plain", KeyConfig{Exportable: true}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("exportable set after creation: %v", err)
	}
	k, err := s.CreateKey(ctx, "export", KeyConfig{Exportable: true})
	if err != nil || !k.Exportable {
		t.Fatalf("CreateKey exportable: %+v, %v", k, err)
	}
	// Other changes keep it.
	if k, err = s.UpdateKeyConfig(ctx, "export", func(c *KeyConfig) error { c.DeletionAllowed = true; return nil }); err != nil || !k.Exportable {
		t.Fatalf("another change: %+v, %v", k, err)
	}
	if k, err = s.UpdateKeyConfig(ctx, "export", func(c *KeyConfig) error { c.Exportable = false; return nil }); err != nil || k.Exportable {
		t.Fatalf("clearing exportable: %+v, %v", k, err)
	}
	if _, err := s.UpdateKeyConfig(ctx, "export", func(c *KeyConfig) error { c.Exportable = true; return nil }); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("exportable set again: %v", err)
	}
}
