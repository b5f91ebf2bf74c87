package pgstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
)

// The sealed records of a key's rows (docs/STORAGE.md): cipherd_keys.meta
// seals metaRecord under RecordAD("pg-key", name); each
// cipherd_key_versions.sealed seals versionRecord under
// RecordAD("pg-version", name, decimal version). They are the file
// store's record split into rows.

type metaRecord struct {
	Name    string              `json:"name"`
	Created time.Time           `json:"created"`
	Config  cryptosvc.KeyConfig `json:"config"`
}

type versionRecord struct {
	Version uint32    `json:"version"`
	Created time.Time `json:"created"`
	Secret  []byte    `json:"secret"` // standard base64
}

func metaAD(name string) []byte { return cryptosvc.RecordAD("pg-key", name) }

func versionAD(name string, v uint32) []byte {
	return cryptosvc.RecordAD("pg-version", name, strconv.FormatUint(uint64(v), 10))
}

func (s *Store) sealMeta(k *cryptosvc.StoredKey) ([]byte, error) {
	pt, err := json.Marshal(&metaRecord{Name: k.Name, Created: k.Created, Config: k.Config})
	if err != nil {
		return nil, err
	}
	return s.sealer.Seal(pt, metaAD(k.Name))
}

func (s *Store) sealVersion(name string, v *cryptosvc.StoredVersion) ([]byte, error) {
	rec := versionRecord{Version: v.Version, Created: v.Created, Secret: v.Secret.Expose()}
	pt, err := json.Marshal(&rec)
	defer clear(pt)
	if err != nil {
		return nil, err
	}
	return s.sealer.Seal(pt, versionAD(name, v.Version))
}

func (s *Store) openMeta(name string, sealed []byte) (*cryptosvc.StoredKey, error) {
	pt, err := s.sealer.Open(sealed, metaAD(name))
	if err != nil {
		return nil, fmt.Errorf("key %s: metadata: %w", name, err)
	}
	var rec metaRecord
	if err := strictJSON(pt, &rec); err != nil {
		return nil, fmt.Errorf("key %s: metadata: %w", name, err)
	}
	if rec.Name != name {
		return nil, fmt.Errorf("key %s: %w: the metadata names another key", name, cryptosvc.ErrMalformed)
	}
	return &cryptosvc.StoredKey{Name: name, Created: rec.Created, Config: rec.Config}, nil
}

func (s *Store) openVersion(name string, v uint32, sealed []byte) (cryptosvc.StoredVersion, error) {
	pt, err := s.sealer.Open(sealed, versionAD(name, v))
	defer clear(pt)
	if err != nil {
		return cryptosvc.StoredVersion{}, fmt.Errorf("key %s version %d: %w", name, v, err)
	}
	var rec versionRecord
	defer func() { clear(rec.Secret) }()
	if err := strictJSON(pt, &rec); err != nil {
		return cryptosvc.StoredVersion{}, fmt.Errorf("key %s version %d: %w", name, v, err)
	}
	sec, err := cryptosvc.NewSecret(rec.Secret)
	if err != nil || rec.Version != v {
		return cryptosvc.StoredVersion{}, fmt.Errorf("key %s version %d: %w: bad version record", name, v, cryptosvc.ErrMalformed)
	}
	return cryptosvc.StoredVersion{KeyVersion: cryptosvc.KeyVersion{Version: v, Created: rec.Created}, Secret: sec}, nil
}

// strictJSON decodes exactly one object, with no unknown fields. Its
// errors never quote the input, which holds a secret.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: the record does not decode", cryptosvc.ErrMalformed)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the record", cryptosvc.ErrMalformed)
	}
	return nil
}
