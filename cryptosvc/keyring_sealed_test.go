package cryptosvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSealedKeyring(t *testing.T) {
	ctx := context.Background()
	p := ksTestStatic(t)
	keys := []*StoredKey{ksTestKey(t, "payments", 2), ksTestKey(t, "orders", 1)}
	var buf bytes.Buffer
	if err := WriteSealedKeyring(ctx, &buf, keys, p); err != nil {
		t.Fatal(err)
	}
	var secrets []*Secret
	for _, k := range keys {
		for i := range k.Versions {
			secrets = append(secrets, &k.Versions[i].Secret)
		}
	}
	ksAssertNoMaterial(t, "sealed keyring", buf.Bytes(), append(secrets, &p.root)...)

	path := filepath.Join(t.TempDir(), "keyring.json")
	os.WriteFile(path, buf.Bytes(), 0o600)
	r, err := OpenKeyring(path, KeyringConfig{PollInterval: -1, RootKeyProvider: p})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		got, err := r.Get(ctx, k.Name)
		if err != nil {
			t.Fatal(err)
		}
		ksAssertKey(t, got, k)
	}
	r.Close()
	got, err := ReadSealedKeyring(ctx, bytes.NewReader(buf.Bytes()), p)
	if err != nil || len(got) != 2 || got[0].Name != "orders" {
		t.Fatalf("ReadSealedKeyring: %v", err)
	}

	// Without the root key, or with another, it does not load.
	if _, err := OpenKeyring(path, KeyringConfig{PollInterval: -1}); !errors.Is(err, ErrRootKey) {
		t.Fatalf("no provider: %v", err)
	}
	if _, err := OpenKeyring(path, KeyringConfig{PollInterval: -1, RootKeyProvider: ksTestStatic(t)}); !errors.Is(err, ErrRootKey) {
		t.Fatalf("another root key: %v", err)
	}
	// A sealed record moved to another name does not open.
	var f krSealedFile
	json.Unmarshal(buf.Bytes(), &f)
	f.Keys[0].Sealed, f.Keys[1].Sealed = f.Keys[1].Sealed, f.Keys[0].Sealed
	swapped, _ := json.Marshal(&f)
	if _, err := ReadSealedKeyring(ctx, bytes.NewReader(swapped), p); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("swapped records: %v", err)
	}
	// Unknown fields are rejected, as in version 1.
	bad := bytes.Replace(buf.Bytes(), []byte(`"cipherd_keyring": 2,`), []byte(`"cipherd_keyring": 2, "x": 1,`), 1)
	if _, err := ReadSealedKeyring(ctx, bytes.NewReader(bad), p); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("unknown field: %v", err)
	}
	// The clear-text reader refuses a sealed file rather than misreading it.
	if _, err := ReadKeyring(bytes.NewReader(buf.Bytes())); !errors.Is(err, ErrRootKey) {
		t.Fatalf("ReadKeyring on a sealed keyring: %v", err)
	}
}
