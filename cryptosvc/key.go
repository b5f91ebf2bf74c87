package cryptosvc

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cipherd/cipherd/kernels"
)

// SecretSize is the length of every key version's secret.
const SecretSize = 32

// MaxKeyNameLen is the longest key name.
const MaxKeyNameLen = 128

// Secret is one key version's material. It never prints: String, GoString and
// every fmt verb show "Secret(REDACTED)", and JSON or text marshalling fails,
// so material cannot reach a log or an API response by accident.
type Secret struct{ b [SecretSize]byte }

// NewSecret copies b, which must be SecretSize bytes, into a Secret.
func NewSecret(b []byte) (Secret, error) {
	var s Secret
	if len(b) != SecretSize {
		return s, fmt.Errorf("%w: key material must be %d bytes", ErrInvalidConfig, SecretSize)
	}
	copy(s.b[:], b)
	return s, nil
}

// GenerateSecret reads a new Secret from r (crypto/rand.Reader in production).
func GenerateSecret(r io.Reader) (Secret, error) {
	var s Secret
	if _, err := io.ReadFull(r, s.b[:]); err != nil {
		return s, fmt.Errorf("cryptosvc: generating key material: %w", err)
	}
	return s, nil
}

// Expose returns the material. Only keystores (to persist it) and the sealed
// format (to derive keys from it) call it.
func (s *Secret) Expose() []byte { return s.b[:] }

// Equal reports whether two secrets are the same, in constant time.
func (s *Secret) Equal(o *Secret) bool { return subtle.ConstantTimeCompare(s.b[:], o.b[:]) == 1 }

const redacted = "Secret(REDACTED)"

func (Secret) String() string                      { return redacted }
func (Secret) GoString() string                    { return redacted }
func (Secret) Format(f fmt.State, _ rune)          { io.WriteString(f, redacted) }
func (Secret) MarshalJSON() ([]byte, error)        { return nil, errMarshalSecret }
func (Secret) MarshalText() ([]byte, error)        { return nil, errMarshalSecret }
func (*Secret) UnmarshalJSON(_ []byte) error       { return errMarshalSecret }
func (*Secret) UnmarshalText(_ []byte) error       { return errMarshalSecret }
func (Secret) MarshalBinary() ([]byte, error)      { return nil, errMarshalSecret }
func (*Secret) UnmarshalBinary(_ []byte) error     { return errMarshalSecret }
func (Secret) AppendText(b []byte) ([]byte, error) { return b, errMarshalSecret }

var errMarshalSecret = errors.New("cryptosvc: key material is never marshalled")

// Duration is a time.Duration that reads and writes JSON as "720h0m0s".
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%w: duration must be a string such as \"720h\"", ErrInvalidConfig)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%w: a duration must be non-negative, in Go's form such as \"720h\"", ErrInvalidConfig)
	}
	*d = Duration(v)
	return nil
}

// KeyConfig is the part of a key's metadata its owner may change.
type KeyConfig struct {
	// MinDecryptionVersion retires older versions: ciphertexts under a lower
	// version no longer open (ErrVersionRetired). 0 means every version opens.
	MinDecryptionVersion uint32 `json:"min_decryption_version"`
	// AllowedAEADs restricts the AEADs that seal new data under this key
	// (names such as "aes-256-gcm"). Empty means any AEAD the service offers.
	// Decryption is never restricted: old data stays readable.
	AllowedAEADs []string `json:"allowed_aeads,omitempty"`
	// AEAD pins the AEAD for new data under this key, whatever the host
	// prefers. Empty means the service's choice (within AllowedAEADs).
	AEAD string `json:"aead,omitempty"`
	// DeletionAllowed must be set before the key can be deleted.
	DeletionAllowed bool `json:"deletion_allowed"`
	// RotationPeriod, when non-zero, is the age after which the latest version
	// is replaced by a new one (Service.RotateDue).
	RotationPeriod Duration `json:"rotation_period,omitempty"`
	// Exportable lets the key be backed up with its material
	// (Service.BackupKey). It can be set only when the key is created:
	// a key made without it has never left the service, and a later
	// change cannot make that promise untrue. Clearing it is allowed,
	// for good. false (the default, and the value of records older than
	// the field) keeps the material in the service.
	Exportable bool `json:"exportable,omitempty"`
}

// SealAEADs are the AEADs of the sealed format, in the order of their IDs.
var SealAEADs = []kernels.Cipher{kernels.AES128GCM, kernels.AES256GCM, kernels.ChaCha20Poly1305}

// Validate checks the configuration against the key's latest version.
func (c KeyConfig) Validate(latest uint32) error {
	if c.MinDecryptionVersion > latest {
		return fmt.Errorf("%w: min_decryption_version %d is above the latest version %d", ErrInvalidConfig, c.MinDecryptionVersion, latest)
	}
	for _, name := range c.AllowedAEADs {
		if _, err := ParseAEAD(name); err != nil {
			return err
		}
	}
	if c.AEAD != "" {
		pin, err := ParseAEAD(c.AEAD)
		if err != nil {
			return err
		}
		if len(c.AllowedAEADs) > 0 && !c.allows(pin) {
			return fmt.Errorf("%w: pinned aead %s is not among allowed_aeads", ErrInvalidConfig, pin)
		}
	}
	return nil
}

// allows reports whether AllowedAEADs names aead, in whatever case each
// name is written (a record stored as a client spelt it still compares).
func (c KeyConfig) allows(aead kernels.Cipher) bool {
	return slices.ContainsFunc(c.AllowedAEADs, func(name string) bool {
		p, err := ParseAEAD(name)
		return err == nil && p == aead
	})
}

// Canonical returns c with its AEAD names in ParseAEAD's canonical form
// (lower case, "aes-256-gcm") and repeated names dropped, so that what is
// stored and described reads the same however a client or a hand-written
// file spelt it. Names that do not parse are kept for Validate to refuse.
func (c KeyConfig) Canonical() KeyConfig {
	if c.AEAD != "" {
		c.AEAD = CanonicalAEAD(c.AEAD)
	}
	c.AllowedAEADs = CanonicalAEADs(c.AllowedAEADs)
	return c
}

// CanonicalAEAD returns the canonical name of the AEAD name names
// (ParseAEAD's, lower case: "aes-256-gcm"), or name itself if it names
// none, for the caller's validation to refuse.
func CanonicalAEAD(name string) string {
	if a, err := ParseAEAD(name); err == nil {
		return a.String()
	}
	return name
}

// CanonicalAEADs returns a new list of the canonical names of names
// (CanonicalAEAD), each once, in their first order; nil for nil.
func CanonicalAEADs(names []string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, 0, len(names))
	for _, name := range names {
		if name = CanonicalAEAD(name); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// ParseAEAD returns the sealed-format AEAD named name.
func ParseAEAD(name string) (kernels.Cipher, error) {
	c, err := kernels.ParseCipher(name)
	if err != nil || !slices.Contains(SealAEADs, c) {
		// The name is not repeated: it may come from a request.
		return 0, fmt.Errorf("%w: not an AEAD of the sealed format (aes-128-gcm, aes-256-gcm, chacha20-poly1305)", ErrInvalidConfig)
	}
	return c, nil
}

// KeyVersion is one version's public metadata.
type KeyVersion struct {
	Version uint32    `json:"version"`
	Created time.Time `json:"created"`
}

// Key describes a key without its material: what Describe and List return.
type Key struct {
	Name     string       `json:"name"`
	Created  time.Time    `json:"created"`
	Versions []KeyVersion `json:"versions"` // ascending
	KeyConfig
	// MinAvailableVersion is the lowest version whose material the key
	// holds (1 until a trim destroys the versions below it).
	MinAvailableVersion uint32 `json:"min_available_version"`
	// DisabledVersions are the versions that neither seal nor open,
	// ascending.
	DisabledVersions []uint32 `json:"disabled_versions,omitempty"`
	// Deletion is the key's scheduled deletion; nil when none is.
	Deletion *KeyDeletion `json:"deletion,omitempty"`
}

// Latest returns the newest version number.
func (k Key) Latest() uint32 {
	if len(k.Versions) == 0 {
		return 0
	}
	return k.Versions[len(k.Versions)-1].Version
}

// KeyDeletion is a key's scheduled deletion.
type KeyDeletion struct {
	// Scheduled is when the deletion was asked for.
	Scheduled time.Time `json:"scheduled"`
	// DeleteAt is when the key goes: the first DeleteDue at or after it
	// deletes the key.
	DeleteAt time.Time `json:"delete_at"`
}

// sameDeletion reports whether a and b schedule the same deletion, or
// none.
func sameDeletion(a, b *KeyDeletion) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Scheduled.Equal(b.Scheduled) && a.DeleteAt.Equal(b.DeleteAt)
}

// StoredVersion is one version with its material.
type StoredVersion struct {
	KeyVersion
	Secret Secret
}

// StoredKey is a key with its material, as a Keystore holds it. Versions are
// ascending and contiguous from MinAvailable (from 1 when it is 0 or 1).
type StoredKey struct {
	Name     string
	Created  time.Time
	Config   KeyConfig
	Versions []StoredVersion
	// MinAvailable is the lowest version the key holds: a trim (TrimKey)
	// destroyed the versions below it. 0 means 1: none was destroyed.
	MinAvailable uint32
	// Disabled lists the versions that neither seal nor open, ascending.
	Disabled []uint32
	// Deletion, when set, is the key's scheduled deletion: until it is
	// cancelled the key is refused to every operation but a description.
	Deletion *KeyDeletion
	// Revision is the store's mark of this state of the key: Get sets it,
	// Update and Delete apply only while it is current (see Keystore). It
	// is not part of the key: records and files do not hold it.
	Revision uint64
}

// Describe returns the key's metadata without material.
func (k *StoredKey) Describe() Key {
	d := Key{Name: k.Name, Created: k.Created, KeyConfig: k.Config, MinAvailableVersion: k.firstVersion()}
	d.AllowedAEADs = slices.Clone(k.Config.AllowedAEADs)
	for _, v := range k.Versions {
		d.Versions = append(d.Versions, v.KeyVersion)
	}
	d.DisabledVersions = slices.Clone(k.Disabled)
	if k.Deletion != nil {
		del := *k.Deletion
		d.Deletion = &del
	}
	return d
}

// firstVersion returns the lowest version the key may hold: MinAvailable,
// or 1.
func (k *StoredKey) firstVersion() uint32 { return max(k.MinAvailable, 1) }

// Latest returns the newest version.
func (k *StoredKey) Latest() *StoredVersion {
	if len(k.Versions) == 0 {
		return nil
	}
	return &k.Versions[len(k.Versions)-1]
}

// Version returns version v, or nil: a version the key never had, or one
// a trim destroyed.
func (k *StoredKey) Version(v uint32) *StoredVersion {
	if len(k.Versions) == 0 {
		return nil
	}
	first := k.Versions[0].Version
	if v < first || uint64(v-first) >= uint64(len(k.Versions)) { // int(v) < 0 on 32-bit platforms
		return nil
	}
	return &k.Versions[v-first]
}

// Clone returns a deep copy.
func (k *StoredKey) Clone() *StoredKey {
	c := *k
	c.Config.AllowedAEADs = slices.Clone(k.Config.AllowedAEADs)
	c.Versions = slices.Clone(k.Versions)
	c.Disabled = slices.Clone(k.Disabled)
	if k.Deletion != nil {
		del := *k.Deletion
		c.Deletion = &del
	}
	return &c
}

// Validate checks the name, the versions (contiguous from MinAvailable, or
// from 1), the disabled versions, the scheduled deletion and the
// configuration.
func (k *StoredKey) Validate() error {
	if err := ValidateKeyName(k.Name); err != nil {
		return err
	}
	if len(k.Versions) == 0 {
		return fmt.Errorf("%w: key %s has no version", ErrInvalidConfig, k.Name)
	}
	first := k.firstVersion()
	for i, v := range k.Versions {
		if uint64(v.Version) != uint64(first)+uint64(i) {
			if first > 1 {
				return fmt.Errorf("%w: key %s: versions must run from min_available_version %d, one by one", ErrInvalidConfig, k.Name, first)
			}
			return fmt.Errorf("%w: key %s: versions must run 1, 2, 3…", ErrInvalidConfig, k.Name)
		}
	}
	latest := k.Latest().Version
	for i, v := range k.Disabled {
		if v < first || v > latest || i > 0 && v <= k.Disabled[i-1] {
			return fmt.Errorf("%w: key %s: disabled versions must be versions of the key, ascending, each once", ErrInvalidConfig, k.Name)
		}
	}
	if d := k.Deletion; d != nil && (d.Scheduled.IsZero() || d.DeleteAt.Before(d.Scheduled)) {
		return fmt.Errorf("%w: key %s: a scheduled deletion needs its time and a delete_at no earlier", ErrInvalidConfig, k.Name)
	}
	if first > 1 && k.Config.MinDecryptionVersion < first {
		// The versions below first are destroyed: retiring fewer would
		// promise that their ciphertexts open.
		return fmt.Errorf("%w: min_decryption_version %d is below min_available_version %d, whose versions below were destroyed", ErrInvalidConfig, k.Config.MinDecryptionVersion, first)
	}
	return k.Config.Validate(latest)
}

// ValidateKeyName checks a key name: 1 to MaxKeyNameLen bytes of A-Z a-z 0-9
// . _ -, not starting with . or -, so that a name is safe as a file name, a
// URL path segment and a log field.
func ValidateKeyName(name string) error {
	if len(name) == 0 || len(name) > MaxKeyNameLen || name[0] == '.' || name[0] == '-' {
		return ErrInvalidKeyName
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return ErrInvalidKeyName
		}
	}
	return nil
}
