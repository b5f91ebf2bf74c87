package cryptosvc

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"

	"golang.org/x/crypto/chacha20poly1305"
)

// Records at rest (the file store's files, the PostgreSQL store's rows) are
// sealed envelopes, the JSON object
//
//	{"v":1,"nonce":"<standard base64, 24 bytes>","ct":"<standard base64>"}
//
// where ct is XChaCha20-Poly1305 under the storage key
//
//	HKDF-SHA-256(secret = root key, salt = none, info = "cipherd keystore v1", 32 bytes)
//
// with a fresh random nonce for every seal and additional data that names
// what the record is (RecordAD), so that a record moved to another key's
// place does not open. docs/STORAGE.md specifies every record.

const (
	ksFormat     = "cipherd keystore v1" // HKDF info and AD prefix
	ksCheckPlain = "cipherd keystore root key check v1"
)

// RecordSealer seals and opens keystore records under the storage key
// derived from a root key. It is safe for concurrent use.
type RecordSealer struct {
	aead cipher.AEAD
	rand io.Reader
}

// ksEnvelope is a sealed record.
type ksEnvelope struct {
	V     int    `json:"v"`
	Nonce []byte `json:"nonce"`
	CT    []byte `json:"ct"`
}

// NewRecordSealer derives the storage key from root. r supplies nonces;
// nil means crypto/rand.Reader.
func NewRecordSealer(root *Secret, r io.Reader) (*RecordSealer, error) {
	if root == nil {
		return nil, fmt.Errorf("%w: no root key", ErrRootKey)
	}
	if r == nil {
		r = rand.Reader
	}
	key, err := hkdf.Key(sha256.New, root.Expose(), nil, ksFormat, chacha20poly1305.KeySize)
	defer clear(key)
	if err != nil {
		return nil, fmt.Errorf("cryptosvc: keystore: deriving the storage key: %w", err)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	return &RecordSealer{aead: aead, rand: r}, nil
}

// RecordAD is the additional data of a record: "cipherd keystore v1", then
// kind and each field, each preceded by a zero byte. Kinds and fields hold
// no zero byte (key names cannot).
func RecordAD(kind string, fields ...string) []byte {
	ad := []byte(ksFormat + "\x00" + kind)
	for _, f := range fields {
		ad = append(append(ad, 0), f...)
	}
	return ad
}

// Seal returns the envelope of pt under ad.
func (s *RecordSealer) Seal(pt, ad []byte) ([]byte, error) {
	env := ksEnvelope{V: 1, Nonce: make([]byte, chacha20poly1305.NonceSizeX)}
	if _, err := io.ReadFull(s.rand, env.Nonce); err != nil {
		return nil, fmt.Errorf("reading a nonce: %w", err)
	}
	env.CT = s.aead.Seal(nil, env.Nonce, pt, ad)
	return json.Marshal(&env)
}

// Open returns the plaintext of an envelope sealed under ad; the caller
// clears it. Every authentication failure is ErrAuthFailed; unknown
// envelope versions, unknown fields and trailing bytes are rejected.
func (s *RecordSealer) Open(data, ad []byte) ([]byte, error) {
	var env ksEnvelope
	if err := ksUnmarshalStrict(data, &env, ErrMalformed); err != nil {
		return nil, err
	}
	if env.V != 1 {
		return nil, fmt.Errorf("%w: sealed record version %d", ErrUnsupported, env.V)
	}
	if len(env.Nonce) != chacha20poly1305.NonceSizeX || len(env.CT) < s.aead.Overhead() {
		return nil, fmt.Errorf("%w: bad nonce or ciphertext length", ErrMalformed)
	}
	pt, err := s.aead.Open(nil, env.Nonce, env.CT, ad)
	if err != nil {
		return nil, ErrAuthFailed
	}
	return pt, nil
}

// SealCheck returns the root-key check record: a fixed plaintext sealed
// under RecordAD("check"), which tells a wrong root key from a damaged
// record before any key is read.
func (s *RecordSealer) SealCheck() ([]byte, error) {
	return s.Seal([]byte(ksCheckPlain), RecordAD("check"))
}

// VerifyCheck opens a check record: ErrRootKey if it was sealed under
// another root key (or is damaged), ErrMalformed if it holds something
// else.
func (s *RecordSealer) VerifyCheck(data []byte) error {
	pt, err := s.Open(data, RecordAD("check"))
	defer clear(pt)
	switch {
	case err == ErrAuthFailed:
		return fmt.Errorf("%w: the root key check does not open (another root key sealed this keystore, or the record is damaged)", ErrRootKey)
	case err != nil:
		return err
	case !bytes.Equal(pt, []byte(ksCheckPlain)):
		return fmt.Errorf("%w: unexpected content in the root key check", ErrMalformed)
	}
	return nil
}
