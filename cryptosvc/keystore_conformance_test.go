package cryptosvc_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/keystoretest"
)

// TestStoreConformance runs the keystore conformance suite against every
// Keystore in this package: MemStore, FileStore and Keyring (read path
// only; its writes must fail with ErrReadOnly). cryptosvc/pgstore runs it
// against PostgreSQL.
func TestStoreConformance(t *testing.T) {
	kinds := []keystoretest.Kind{
		{Name: "mem", Open: func(t *testing.T, initial []*cryptosvc.StoredKey) cryptosvc.Keystore {
			return keystoretest.Fill(t, cryptosvc.NewMemStore(), initial)
		}},
		{Name: "file", Open: func(t *testing.T, initial []*cryptosvc.StoredKey) cryptosvc.Keystore {
			root := keystoretest.Secret(t)
			s, err := cryptosvc.OpenFileStore(t.TempDir(), cryptosvc.FileStoreConfig{RootKey: &root})
			if err != nil {
				t.Fatal(err)
			}
			return keystoretest.Fill(t, s, initial)
		}},
		{Name: "keyring", ReadOnly: true, Open: func(t *testing.T, initial []*cryptosvc.StoredKey) cryptosvc.Keystore {
			var buf bytes.Buffer
			if err := cryptosvc.WriteKeyring(&buf, initial); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "keyring.json")
			if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := cryptosvc.OpenKeyring(path, cryptosvc.KeyringConfig{PollInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.Name, func(t *testing.T) { keystoretest.Run(t, kind) })
	}
}
