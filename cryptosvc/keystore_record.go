package cryptosvc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// ksRecord is one key as the keyring file holds it, and as the file store
// seals it. ksRecordOf's records share material with the key they come
// from; decoded records own theirs and are cleared after use.
type ksRecord struct {
	Name     string            `json:"name"`
	Created  time.Time         `json:"created"`
	Config   KeyConfig         `json:"config"`
	Versions []ksRecordVersion `json:"versions"`
	// The lifecycle's state, absent from records of keys that never had
	// one (and from every record older than it).
	MinAvailable uint32       `json:"min_available_version,omitempty"`
	Disabled     []uint32     `json:"disabled_versions,omitempty"`
	Deletion     *KeyDeletion `json:"deletion,omitempty"`
}

type ksRecordVersion struct {
	Version uint32    `json:"version"`
	Created time.Time `json:"created"`
	Secret  []byte    `json:"secret"` // encoding/json: standard base64
}

func ksRecordOf(k *StoredKey) ksRecord {
	rec := ksRecord{Name: k.Name, Created: k.Created, Config: k.Config, MinAvailable: k.MinAvailable, Disabled: k.Disabled, Deletion: k.Deletion}
	rec.Versions = make([]ksRecordVersion, len(k.Versions))
	for i := range k.Versions {
		v := &k.Versions[i]
		rec.Versions[i] = ksRecordVersion{Version: v.Version, Created: v.Created, Secret: v.Secret.Expose()}
	}
	return rec
}

// storedKey converts and validates a decoded record.
func (rec *ksRecord) storedKey() (*StoredKey, error) {
	k := &StoredKey{Name: rec.Name, Created: rec.Created, Config: rec.Config.Canonical(),
		MinAvailable: rec.MinAvailable, Disabled: rec.Disabled, Deletion: rec.Deletion}
	k.Versions = make([]StoredVersion, len(rec.Versions))
	for i, v := range rec.Versions {
		sec, err := NewSecret(v.Secret)
		if err != nil {
			name := rec.Name
			if ValidateKeyName(name) != nil {
				name = "(invalid name)"
			}
			return nil, fmt.Errorf("%w: key %s version %d: the secret must be %d bytes", ErrInvalidConfig, name, v.Version, SecretSize)
		}
		k.Versions[i] = StoredVersion{KeyVersion: KeyVersion{Version: v.Version, Created: v.Created}, Secret: sec}
	}
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return k, nil
}

func (rec *ksRecord) clearSecrets() {
	for i := range rec.Versions {
		clear(rec.Versions[i].Secret)
	}
}

// ksUnmarshalStrict decodes exactly one JSON value into v, rejecting
// unknown fields and trailing bytes; its errors wrap kind. They never quote
// the input: a syntax error reports an offset, not the offending character,
// which might be part of a secret.
func ksUnmarshalStrict(data []byte, v any, kind error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return ksJSONError(err, kind)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the JSON object", kind)
	}
	return nil
}

func ksJSONError(err, kind error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Errorf("%w: invalid JSON at byte %d", kind, se.Offset)
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if te.Field == "" {
			return fmt.Errorf("%w: the document is not a JSON object", kind)
		}
		return fmt.Errorf("%w: field %q has the wrong JSON type", kind, te.Field)
	}
	if be, ok := errors.AsType[base64.CorruptInputError](err); ok {
		return fmt.Errorf("%w: a secret is not valid base64 (at byte %d of the string)", kind, int64(be))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: JSON ends early", kind)
	}
	if errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrUnsupported) {
		return err // from KeyConfig's own decoders: they quote durations and AEAD names only
	}
	// What remains are encoding/json's messages about the document's shape,
	// such as `json: unknown field "x"`, or a time that does not parse.
	return fmt.Errorf("%w: %v", kind, err)
}
