package cryptosvc

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"
)

// A key backup is one exportable key, every version it holds with its
// material, its configuration and its lifecycle's state, sealed so that
// another keystore, or another fleet, can restore it (docs/FORMAT.md, Key
// backups):
//
//	magic        "CDKB"
//	version      0x01
//	sealing      0x01 the backup key, 0x02 the root key
//	salt         32 random bytes
//	name length  1 byte, 1 to 128
//	name         the key's name
//	wrap length  2 bytes, big-endian: 0 under the backup key, 1 to 1024 under the root key
//	wrapped      the data key as the root-key provider wrapped it
//	nonce        12 random bytes
//	ciphertext   AES-256-GCM of the key record (docs/STORAGE.md), tag last
//
// The AEAD key is HKDF-SHA-256(secret = the backup key, or the data key,
// salt, info = "cipherd key backup v1", 32 bytes), and its additional data
// is every byte before the ciphertext, the name included. Under the root
// key the data key is 32 random bytes that the provider wraps with the
// additional data "cipherd key backup v1" || 0x00 || salt, so a PKCS#11
// root key seals backups without leaving its token.

const (
	bkMagic      = "CDKB"
	bkVersion    = 1
	bkInfo       = "cipherd key backup v1"
	bkSaltSize   = 32
	bkNonceSize  = 12
	bkMaxWrapped = 1024
	// bkMinSize is the shortest blob: a one-byte name, nothing wrapped,
	// an empty ciphertext's tag.
	bkMinSize = len(bkMagic) + 2 + bkSaltSize + 1 + 1 + 2 + bkNonceSize + 16
)

// BackupSealing says what seals a key backup.
type BackupSealing byte

const (
	// SealedUnderBackupKey: the operator's backup key (Config.BackupKey),
	// which any fleet given the same key restores from, whatever its root
	// key.
	SealedUnderBackupKey BackupSealing = 1
	// SealedUnderRoot: the root key of the keystore's root-key provider,
	// which only keystores under the same root key restore from.
	SealedUnderRoot BackupSealing = 2
)

// String returns "backup_key" or "root", as the API names them.
func (b BackupSealing) String() string {
	switch b {
	case SealedUnderBackupKey:
		return "backup_key"
	case SealedUnderRoot:
		return "root"
	}
	return "unknown"
}

var (
	_ RootKeyHolder = (*FileStore)(nil)
	_ RootKeyHolder = (*Keyring)(nil)
)

// A RootKeyHolder is a Keystore sealed at rest under a root-key provider
// that it lends, so that a backup can be sealed under the same root of
// trust. The file keystore and the PostgreSQL keystore are; a keyring is
// when it is sealed.
type RootKeyHolder interface {
	// RootKeyProvider returns the provider that wraps the store's storage
	// key now, or nil when there is none.
	RootKeyProvider() RootKeyProvider
}

// HasBackupKey reports whether the service has a backup key
// (Config.BackupKey).
func (s *Service) HasBackupKey() bool { return s.backupKey != nil }

// BackupKey returns the backup of the key named name, sealed under the
// backup key or the root key. Only a key created exportable is backed up
// (else ErrNotExportable); one whose deletion is scheduled is refused
// (*PendingDeletionError) as every other operation on it is. Without a
// backup key, SealedUnderBackupKey fails with ErrBackupKeyNotConfigured;
// with a keystore that lends no root key, SealedUnderRoot fails with
// ErrUnsupported.
//
// It returns the backup and the key as it holds it.
func (s *Service) BackupKey(ctx context.Context, name string, under BackupSealing) ([]byte, Key, error) {
	k, err := s.key(ctx, name)
	if err != nil {
		return nil, Key{}, err
	}
	if err := k.pending(); err != nil {
		return nil, Key{}, err
	}
	if !k.Config.Exportable {
		return nil, Key{}, fmt.Errorf("%w: %s", ErrNotExportable, name)
	}
	pt, err := json.Marshal(ksRecordOf(k))
	defer clear(pt)
	if err != nil {
		return nil, Key{}, err
	}
	blob, err := s.sealBackup(ctx, k.Name, under, pt)
	if err != nil {
		return nil, Key{}, err
	}
	s.log.Info("key backed up", zap.String("key", name), zap.Int("versions", len(k.Versions)), zap.Stringer("sealed_under", under))
	return blob, k.Describe(), nil
}

// RestoreKey creates the key a backup holds, under the name it was backed
// up with, or under name when name is not empty, with every version, its
// configuration and its lifecycle's state. A backup that does not open,
// whatever the reason (another key, modified or missing bytes, an unknown
// format version), fails with ErrInvalidBackup, and reads the same; one
// sealed under a backup key the service does not have fails with
// ErrBackupKeyNotConfigured. A key of that name fails with ErrKeyExists.
//
// Restoring under another name keeps the material, but what was sealed
// under the old name names it in its header and opens only under it.
func (s *Service) RestoreKey(ctx context.Context, backup []byte, name string) (Key, error) {
	rec, err := s.openBackup(ctx, backup)
	if err != nil {
		return Key{}, err
	}
	defer rec.clearSecrets()
	k, err := rec.storedKey()
	if err != nil {
		return Key{}, ErrInvalidBackup
	}
	if name != "" {
		if err := ValidateKeyName(name); err != nil {
			return Key{}, err
		}
		k.Name = name
	}
	if err := s.store.Create(ctx, k); err != nil {
		return Key{}, err
	}
	s.log.Info("key restored", zap.String("key", k.Name), zap.Int("versions", len(k.Versions)))
	return k.Describe(), nil
}

// BackupKeyName returns the name of the key a backup holds, from its
// header, without opening it: the header is not secret.
func BackupKeyName(backup []byte) (string, error) {
	h, err := bkParse(backup)
	if err != nil {
		return "", err
	}
	return h.name, nil
}

// bkHeader is a parsed backup's header.
type bkHeader struct {
	sealing BackupSealing
	salt    []byte
	name    string
	wrapped []byte
	nonce   []byte
	ad      []byte // every byte before the ciphertext
	ct      []byte
}

// bkParse splits a backup into its parts. Every failure is
// ErrInvalidBackup: which part was wrong is not said.
func bkParse(b []byte) (*bkHeader, error) {
	if len(b) < bkMinSize || string(b[:len(bkMagic)]) != bkMagic || b[len(bkMagic)] != bkVersion {
		return nil, ErrInvalidBackup
	}
	h := &bkHeader{sealing: BackupSealing(b[len(bkMagic)+1])}
	rest := b[len(bkMagic)+2:]
	h.salt, rest = rest[:bkSaltSize], rest[bkSaltSize:]
	n := int(rest[0])
	rest = rest[1:]
	if len(rest) < n+2 {
		return nil, ErrInvalidBackup
	}
	h.name, rest = string(rest[:n]), rest[n:]
	w := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	switch {
	case ValidateKeyName(h.name) != nil,
		h.sealing == SealedUnderBackupKey && w != 0,
		h.sealing == SealedUnderRoot && (w == 0 || w > bkMaxWrapped),
		h.sealing != SealedUnderBackupKey && h.sealing != SealedUnderRoot,
		len(rest) < w+bkNonceSize+16:
		return nil, ErrInvalidBackup
	}
	h.wrapped, rest = rest[:w], rest[w:]
	h.nonce, h.ct = rest[:bkNonceSize], rest[bkNonceSize:]
	h.ad = b[:len(b)-len(h.ct)]
	return h, nil
}

// sealBackup seals the key record pt of the key named name.
func (s *Service) sealBackup(ctx context.Context, name string, under BackupSealing, pt []byte) ([]byte, error) {
	salt := make([]byte, bkSaltSize)
	if _, err := io.ReadFull(s.rand, salt); err != nil {
		return nil, fmt.Errorf("cryptosvc: reading a salt: %w", err)
	}
	var ikm Secret
	defer clear(ikm.b[:])
	var wrapped []byte
	switch under {
	case SealedUnderBackupKey:
		if s.backupKey == nil {
			return nil, ErrBackupKeyNotConfigured
		}
		ikm = *s.backupKey
	case SealedUnderRoot:
		p := s.rootKey()
		if p == nil {
			return nil, fmt.Errorf("%w: the keystore has no root key to seal a backup under", ErrUnsupported)
		}
		var err error
		if ikm, err = GenerateSecret(s.rand); err != nil {
			return nil, err
		}
		if wrapped, err = p.WrapKey(ctx, &ikm, bkWrapAD(salt)); err != nil {
			return nil, fmt.Errorf("cryptosvc: wrapping a backup's data key: %w", err)
		}
		if len(wrapped) == 0 || len(wrapped) > bkMaxWrapped {
			return nil, fmt.Errorf("cryptosvc: the root key wrapped a backup's data key in %d bytes", len(wrapped))
		}
	default:
		return nil, fmt.Errorf("%w: backup sealing %d", ErrInvalidConfig, under)
	}
	out := make([]byte, 0, bkMinSize+len(name)+len(wrapped)+len(pt))
	out = append(out, bkMagic...)
	out = append(out, bkVersion, byte(under))
	out = append(out, salt...)
	out = append(out, byte(len(name)))
	out = append(out, name...)
	out = binary.BigEndian.AppendUint16(out, uint16(len(wrapped)))
	out = append(out, wrapped...)
	nonce := make([]byte, bkNonceSize)
	if _, err := io.ReadFull(s.rand, nonce); err != nil {
		return nil, fmt.Errorf("cryptosvc: reading a nonce: %w", err)
	}
	out = append(out, nonce...)
	aead, err := bkAEAD(&ikm, salt)
	if err != nil {
		return nil, err
	}
	return aead.Seal(out, nonce, pt, out), nil
}

// openBackup opens a backup and decodes its key record, whose secrets the
// caller clears.
func (s *Service) openBackup(ctx context.Context, backup []byte) (*ksRecord, error) {
	h, err := bkParse(backup)
	if err != nil {
		return nil, err
	}
	var ikm Secret
	defer clear(ikm.b[:])
	switch h.sealing {
	case SealedUnderBackupKey:
		if s.backupKey == nil {
			return nil, ErrBackupKeyNotConfigured
		}
		ikm = *s.backupKey
	case SealedUnderRoot:
		p := s.rootKey()
		if p == nil {
			return nil, fmt.Errorf("%w: the keystore has no root key to open a backup with", ErrUnsupported)
		}
		if ikm, err = p.UnwrapKey(ctx, h.wrapped, bkWrapAD(h.salt)); err != nil {
			if errors.Is(err, ErrRootKey) {
				return nil, ErrInvalidBackup // another root key, or modified bytes
			}
			return nil, fmt.Errorf("cryptosvc: unwrapping a backup's data key: %w", err)
		}
	}
	aead, err := bkAEAD(&ikm, h.salt)
	if err != nil {
		return nil, err
	}
	pt, err := aead.Open(nil, h.nonce, h.ct, h.ad)
	defer clear(pt)
	if err != nil {
		return nil, ErrInvalidBackup
	}
	var rec ksRecord
	if err := ksUnmarshalStrict(pt, &rec, ErrInvalidBackup); err != nil || rec.Name != h.name || rec.Deletion != nil {
		// A backup never holds a scheduled deletion: BackupKey refuses
		// such keys.
		rec.clearSecrets()
		return nil, ErrInvalidBackup
	}
	return &rec, nil
}

func bkAEAD(ikm *Secret, salt []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, ikm.Expose(), salt, bkInfo, 32)
	defer clear(key)
	if err != nil {
		return nil, fmt.Errorf("cryptosvc: deriving a backup key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func bkWrapAD(salt []byte) []byte {
	return append([]byte(bkInfo+"\x00"), salt...)
}

// rootKey returns the root-key provider the keystore lends, or nil.
func (s *Service) rootKey() RootKeyProvider {
	if h, ok := s.store.(RootKeyHolder); ok {
		return h.RootKeyProvider()
	}
	return nil
}
