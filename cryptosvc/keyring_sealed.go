package cryptosvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// A sealed keyring (version 2 of the keyring file format) holds the same
// keys as version 1, each sealed under a storage key that a root-key
// provider wraps, so that the file (a Kubernetes Secret, say) is no longer
// the keys in the clear:
//
//	{
//	  "cipherd_keyring": 2,
//	  "storage_key": {"generation":1,"root_key":"…","wrapped":"<base64>"},
//	  "keys": [
//	    {"name":"orders","sealed":{"v":2,"g":1,"nonce":"…","ct":"…"}}
//	  ]
//	}
//
// "storage_key" is a WrappedStorageKey; each "sealed" is a sealed record
// (rootkey_seal.go) of kind "keyring" and the key's name, whose plaintext is
// the key's version-1 record. A reader MUST reject, besides what version 1
// rejects, a record that does not open or whose plaintext names another key.
// Rotating the root key means writing the file again (WriteSealedKeyring):
// a keyring is replaced whole.

const krSealedKind = "keyring"

type krSealedFile struct {
	Version    int                `json:"cipherd_keyring"`
	StorageKey *WrappedStorageKey `json:"storage_key"`
	Keys       []krSealedKey      `json:"keys"`
}

type krSealedKey struct {
	Name   string          `json:"name"`
	Sealed json.RawMessage `json:"sealed"`
}

// WriteSealedKeyring writes keys, sorted by name, as a sealed keyring under
// a new storage key wrapped by p.
func WriteSealedKeyring(ctx context.Context, w io.Writer, keys []*StoredKey, p RootKeyProvider) error {
	var plain bytes.Buffer
	if err := WriteKeyring(&plain, keys); err != nil { // validates and sorts
		return err
	}
	defer clear(plain.Bytes())
	sorted, err := krParse(plain.Bytes(), nil)
	if err != nil {
		return err
	}
	seal, wrapped, err := NewStorageKey(ctx, p, 1, nil)
	if err != nil {
		return fmt.Errorf("cryptosvc: sealed keyring: %w", err)
	}
	f := krSealedFile{Version: 2, StorageKey: wrapped}
	for _, name := range sorted.names {
		rec := ksRecordOf(sorted.keys[name])
		pt, err := json.Marshal(&rec)
		if err != nil {
			return err
		}
		sealed, err := seal.Seal(krSealedKind, name, pt)
		clear(pt)
		if err != nil {
			return err
		}
		f.Keys = append(f.Keys, krSealedKey{Name: name, Sealed: sealed})
	}
	b, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadSealedKeyring reads a keyring file of either version, opening a
// sealed one with p (which may be nil for version 1), and returns its keys
// sorted by name.
func ReadSealedKeyring(ctx context.Context, r io.Reader, p RootKeyProvider) ([]*StoredKey, error) {
	data, err := io.ReadAll(io.LimitReader(r, krMaxFileSize+1))
	defer clear(data)
	if err != nil {
		return nil, err
	}
	if len(data) > krMaxFileSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalidConfig, krMaxFileSize)
	}
	set, err := krParse(data, krOpener(ctx, p))
	if err != nil {
		return nil, err
	}
	keys := make([]*StoredKey, len(set.names))
	for i, name := range set.names {
		keys[i] = set.keys[name]
	}
	return keys, nil
}

// krOpener returns what krParse calls for a version-2 file; nil without a
// provider.
func krOpener(ctx context.Context, p RootKeyProvider) func([]byte) ([]ksRecord, error) {
	if p == nil {
		return nil
	}
	return func(data []byte) ([]ksRecord, error) { return krOpenSealed(ctx, data, p) }
}

// krOpenSealed opens a sealed keyring into version-1 records.
func krOpenSealed(ctx context.Context, data []byte, p RootKeyProvider) ([]ksRecord, error) {
	var f krSealedFile
	if err := ksUnmarshalStrict(data, &f, ErrInvalidConfig); err != nil {
		return nil, err
	}
	if f.StorageKey == nil {
		return nil, fmt.Errorf("%w: sealed keyring without \"storage_key\"", ErrInvalidConfig)
	}
	seal, err := OpenStorageKey(ctx, p, f.StorageKey, nil)
	if err != nil {
		return nil, fmt.Errorf("sealed keyring: %w", err)
	}
	recs := make([]ksRecord, 0, len(f.Keys))
	for i, k := range f.Keys {
		if err := ValidateKeyName(k.Name); err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		pt, err := seal.Open(krSealedKind, k.Name, k.Sealed)
		if err != nil {
			for j := range recs {
				recs[j].clearSecrets()
			}
			return nil, fmt.Errorf("keys[%d] (%s): %w", i, k.Name, err)
		}
		var rec ksRecord
		err = ksUnmarshalStrict(pt, &rec, ErrInvalidConfig)
		clear(pt)
		if err == nil && rec.Name != k.Name {
			err = fmt.Errorf("%w: the sealed record holds another key", ErrInvalidConfig)
		}
		if err != nil {
			rec.clearSecrets()
			for j := range recs {
				recs[j].clearSecrets()
			}
			return nil, fmt.Errorf("keys[%d] (%s): %w", i, k.Name, err)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}
