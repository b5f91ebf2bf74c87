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
// is the record of kind "pg-key" and the key's name, holding metaRecord;
// each cipherd_key_versions.sealed is the record of kind "pg-version" and
// the name "<key name> NUL <decimal version>", holding versionRecord. They
// are the file store's record split into rows.

type metaRecord struct {
	Name    string              `json:"name"`
	Created time.Time           `json:"created"`
	Config  cryptosvc.KeyConfig `json:"config"`
	// The lifecycle's state, absent from the records of keys that never
	// had one (and from every record older than it).
	MinAvailable uint32                 `json:"min_available_version,omitempty"`
	Disabled     []uint32               `json:"disabled_versions,omitempty"`
	Deletion     *cryptosvc.KeyDeletion `json:"deletion,omitempty"`
}

type versionRecord struct {
	Version uint32    `json:"version"`
	Created time.Time `json:"created"`
	Secret  []byte    `json:"secret"` // standard base64
}

const (
	kindMeta    = "pg-key"
	kindVersion = "pg-version"
)

// versionName is the record name of a version; key names hold no NUL.
func versionName(name string, v uint32) string {
	return name + "\x00" + strconv.FormatUint(uint64(v), 10)
}

func (s *Store) sealMeta(k *cryptosvc.StoredKey) ([]byte, error) {
	pt, err := json.Marshal(&metaRecord{Name: k.Name, Created: k.Created, Config: k.Config,
		MinAvailable: k.MinAvailable, Disabled: k.Disabled, Deletion: k.Deletion})
	if err != nil {
		return nil, err
	}
	return s.sealer.Seal(kindMeta, k.Name, pt)
}

func (s *Store) sealVersion(name string, v *cryptosvc.StoredVersion) ([]byte, error) {
	rec := versionRecord{Version: v.Version, Created: v.Created, Secret: v.Secret.Expose()}
	pt, err := json.Marshal(&rec)
	defer clear(pt)
	if err != nil {
		return nil, err
	}
	return s.sealer.Seal(kindVersion, versionName(name, v.Version), pt)
}

func (s *Store) openMeta(name string, sealed []byte) (*cryptosvc.StoredKey, error) {
	pt, err := s.sealer.Open(kindMeta, name, sealed)
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
	return &cryptosvc.StoredKey{Name: name, Created: rec.Created, Config: rec.Config.Canonical(),
		MinAvailable: rec.MinAvailable, Disabled: rec.Disabled, Deletion: rec.Deletion}, nil
}

func (s *Store) openVersion(name string, v uint32, sealed []byte) (cryptosvc.StoredVersion, error) {
	pt, err := s.sealer.Open(kindVersion, versionName(name, v), sealed)
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
