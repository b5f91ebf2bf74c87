package cryptosvc

import (
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
)

// An AuditKeySource is a Keystore that gives the audit trail a key of its
// own: the audit records carry HMACs under it of each message's salt and
// context, so that a record can be matched to a ciphertext without
// revealing the context (docs/OPERATIONS.md, The audit trail). The key is
// derived from the store's storage key, which the root key wraps, so every
// replica that shares a store derives the same key, and a new storage key
// (a root-key rotation) makes a new generation of it.
type AuditKeySource interface {
	// AuditKey returns the audit key and the generation of the storage
	// key it is derived from.
	AuditKey() (key []byte, generation uint32, err error)
}

// auditKeyInfo is the HKDF info of the audit key.
const auditKeyInfo = "cipherd audit hmac v1"

// AuditKey derives the audit key from the sealer's current storage key,
// for the stores that implement AuditKeySource.
func (s *Sealer) AuditKey() ([]byte, uint32, error) {
	k := s.keys[s.gen]
	key, err := hkdf.Key(sha256.New, k.secret.Expose(), nil, auditKeyInfo, 32)
	if err != nil {
		return nil, 0, fmt.Errorf("cryptosvc: deriving the audit key: %w", err)
	}
	return key, s.gen, nil
}

// AuditKey returns the audit key derived from the store's storage key.
func (s *FileStore) AuditKey() ([]byte, uint32, error) {
	s.wmu.Lock()
	seal := s.seal
	s.wmu.Unlock()
	if seal == nil {
		return nil, 0, ErrClosed
	}
	return seal.AuditKey()
}

// MessageSalt returns the salt of the sealed message that begins msg (its
// header and the start of its body), or nil when msg does not begin with
// one. The slice is msg's.
func MessageSalt(msg []byte) []byte {
	_, n, err := ParseHeader(msg)
	if err != nil || len(msg)-n < saltSize {
		return nil
	}
	return msg[n : n+saltSize : n+saltSize]
}
