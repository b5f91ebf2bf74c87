package cryptosvc

import (
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strconv"

	"golang.org/x/crypto/chacha20poly1305"
)

// Records at rest (a file store's key files, a PostgreSQL store's rows) are
// sealed under a storage key: 32 random bytes, generated when the store is
// created and replaced by every root-key rotation, kept only wrapped by the
// root-key provider (WrappedStorageKey). Storage keys are numbered by
// generation, 1, 2, 3…; generation 0 is the storage key of a store of
// layout 1, derived from a static root key rather than wrapped by it:
//
//	HKDF-SHA-256(secret = root key, salt = none, info = "cipherd keystore v1", 32 bytes)
//
// A sealed record is the JSON envelope
//
//	{"v":2,"g":<generation>,"nonce":"<base64, 24 bytes>","ct":"<base64>"}
//
// ("v":1 and no "g" for generation 0), where ct is XChaCha20-Poly1305 under
// the storage key itself, with a fresh random nonce for every record and the
// additional data
//
//	"cipherd keystore v2" || 0x00 || kind || 0x00 || name    (v2)
//	"cipherd keystore v1" || 0x00 || kind || 0x00 || name    (v1)
//
// (the last 0x00 and name absent when name is empty), so a record moved to
// another name or kind does not open. The wrapped storage key binds its
// generation: the provider wraps it with the additional data
//
//	"cipherd storage key v2" || 0x00 || decimal generation

const (
	ssFormatV1 = "cipherd keystore v1"
	ssFormatV2 = "cipherd keystore v2"
	ssWrapAD   = "cipherd storage key v2"
)

// WrappedStorageKey is a storage key as a store keeps it: wrapped by the
// root-key provider. Its JSON form is
//
//	{"generation":1,"root_key":"static","wrapped":"<base64>"}
type WrappedStorageKey struct {
	// Generation numbers the storage key, from 1.
	Generation uint32 `json:"generation"`
	// RootKey names the provider that wrapped it (RootKeyProvider.String):
	// informative, for error messages; it is not checked.
	RootKey string `json:"root_key"`
	// Wrapped is the provider's WrapKey output.
	Wrapped []byte `json:"wrapped"`
}

// Sealer seals records under the current storage key and opens records
// sealed under any storage key it holds (more than one only while a
// root-key rotation re-seals a store). It is immutable and safe for
// concurrent use.
type Sealer struct {
	gen  uint32
	keys map[uint32]*ssKey
	rand io.Reader
}

type ssKey struct {
	secret Secret
	aead   cipher.AEAD
}

// NewStorageKey generates a storage key of generation gen (at least 1),
// wraps it with p, and returns its Sealer and wrapped form. r supplies the
// key and the nonces; nil means crypto/rand.Reader.
func NewStorageKey(ctx context.Context, p RootKeyProvider, gen uint32, r io.Reader) (*Sealer, *WrappedStorageKey, error) {
	if gen == 0 {
		return nil, nil, fmt.Errorf("%w: storage key generation 0", ErrInvalidConfig)
	}
	r = ssRand(r)
	sec, err := GenerateSecret(r)
	if err != nil {
		return nil, nil, err
	}
	s, err := ssNew(gen, &sec, r)
	if err != nil {
		return nil, nil, err
	}
	w, err := s.WrapFor(ctx, p, gen)
	if err != nil {
		return nil, nil, err
	}
	return s, w, nil
}

// OpenStorageKey unwraps w with p and returns its Sealer. It fails with
// ErrRootKey if p is not the root key that wrapped w.
func OpenStorageKey(ctx context.Context, p RootKeyProvider, w *WrappedStorageKey, r io.Reader) (*Sealer, error) {
	if w.Generation == 0 {
		return nil, fmt.Errorf("%w: storage key generation 0", ErrMalformed)
	}
	return ssUnwrap(ctx, p, w, r)
}

// ssUnwrap is OpenStorageKey for any generation, 0 included: a rotation
// off layout 1 wraps generation 0 under the new root key.
func ssUnwrap(ctx context.Context, p RootKeyProvider, w *WrappedStorageKey, r io.Reader) (*Sealer, error) {
	sec, err := p.UnwrapKey(ctx, w.Wrapped, ssWrapADOf(w.Generation))
	if err != nil {
		return nil, fmt.Errorf("storage key generation %d (wrapped by %s): %w", w.Generation, w.RootKey, err)
	}
	return ssNew(w.Generation, &sec, ssRand(r))
}

// ssLegacySealer is the Sealer of a store of layout 1 (generation 0).
func ssLegacySealer(root *Secret, r io.Reader) (*Sealer, error) {
	key, err := hkdf.Key(sha256.New, root.Expose(), nil, ssFormatV1, chacha20poly1305.KeySize)
	defer clear(key)
	if err != nil {
		return nil, fmt.Errorf("cryptosvc: keystore: deriving the storage key: %w", err)
	}
	sec, _ := NewSecret(key)
	return ssNew(0, &sec, ssRand(r))
}

func ssNew(gen uint32, sec *Secret, r io.Reader) (*Sealer, error) {
	aead, err := chacha20poly1305.NewX(sec.Expose())
	if err != nil {
		return nil, err
	}
	return &Sealer{gen: gen, keys: map[uint32]*ssKey{gen: {secret: *sec, aead: aead}}, rand: r}, nil
}

func ssRand(r io.Reader) io.Reader {
	if r == nil {
		return rand.Reader
	}
	return r
}

func ssWrapADOf(gen uint32) []byte {
	return strconv.AppendUint([]byte(ssWrapAD+"\x00"), uint64(gen), 10)
}

// Generation returns the generation Seal uses.
func (s *Sealer) Generation() uint32 { return s.gen }

// Including returns a Sealer that seals as s does and also opens what old
// opens. s's keys win where both hold a generation.
func (s *Sealer) Including(old *Sealer) *Sealer {
	keys := maps.Clone(old.keys)
	maps.Copy(keys, s.keys)
	return &Sealer{gen: s.gen, keys: keys, rand: s.rand}
}

// Only returns a Sealer that holds the current generation alone.
func (s *Sealer) Only() *Sealer {
	return &Sealer{gen: s.gen, keys: map[uint32]*ssKey{s.gen: s.keys[s.gen]}, rand: s.rand}
}

// Generations returns how many storage keys s holds.
func (s *Sealer) Generations() int { return len(s.keys) }

// WrapFor wraps the storage key of generation gen, which s must hold, with
// p. A rotation uses it to leave each storage key wrapped under both root
// keys until it is done.
func (s *Sealer) WrapFor(ctx context.Context, p RootKeyProvider, gen uint32) (*WrappedStorageKey, error) {
	k, ok := s.keys[gen]
	if !ok {
		return nil, fmt.Errorf("%w: no storage key of generation %d", ErrInvalidConfig, gen)
	}
	w, err := p.WrapKey(ctx, &k.secret, ssWrapADOf(gen))
	if err != nil {
		return nil, fmt.Errorf("wrapping storage key generation %d with %s: %w", gen, p, err)
	}
	return &WrappedStorageKey{Generation: gen, RootKey: p.String(), Wrapped: w}, nil
}

// ssEnvelope is a sealed record.
type ssEnvelope struct {
	V     int    `json:"v"`
	G     uint32 `json:"g,omitempty"`
	Nonce []byte `json:"nonce"`
	CT    []byte `json:"ct"`
}

func ssAD(format, kind, name string) []byte {
	ad := []byte(format + "\x00" + kind)
	if name != "" {
		ad = append(append(ad, 0), name...)
	}
	return ad
}

// Seal seals pt as the record of the given kind and name (for key records:
// "key" and the key's name; names hold no NUL) under the current storage
// key.
func (s *Sealer) Seal(kind, name string, pt []byte) ([]byte, error) {
	env := ssEnvelope{V: 2, G: s.gen, Nonce: make([]byte, chacha20poly1305.NonceSizeX)}
	format := ssFormatV2
	if s.gen == 0 {
		env.V, format = 1, ssFormatV1
	}
	if _, err := io.ReadFull(s.rand, env.Nonce); err != nil {
		return nil, fmt.Errorf("reading a nonce: %w", err)
	}
	env.CT = s.keys[s.gen].aead.Seal(nil, env.Nonce, pt, ssAD(format, kind, name))
	return json.Marshal(&env)
}

// RecordGeneration returns the storage key generation a sealed record names,
// without opening it.
func RecordGeneration(sealed []byte) (uint32, error) {
	env, err := ssDecode(sealed)
	if err != nil {
		return 0, err
	}
	return env.G, nil
}

func ssDecode(sealed []byte) (*ssEnvelope, error) {
	var env ssEnvelope
	if err := ksUnmarshalStrict(sealed, &env, ErrMalformed); err != nil {
		return nil, err
	}
	switch {
	case env.V == 1 && env.G == 0, env.V == 2 && env.G != 0:
	case env.V == 2:
		return nil, fmt.Errorf("%w: sealed record of version 2 without a generation", ErrMalformed)
	case env.V == 1:
		return nil, fmt.Errorf("%w: sealed record of version 1 with a generation", ErrMalformed)
	default:
		return nil, fmt.Errorf("%w: sealed record version %d", ErrUnsupported, env.V)
	}
	if len(env.Nonce) != chacha20poly1305.NonceSizeX || len(env.CT) < chacha20poly1305.Overhead {
		return nil, fmt.Errorf("%w: bad nonce or ciphertext length", ErrMalformed)
	}
	return &env, nil
}

// Open returns the plaintext of a record Seal sealed with the same kind and
// name; the caller clears it. A record that does not authenticate fails
// with ErrAuthFailed; one sealed under a generation s does not hold, with
// ErrRootKey.
func (s *Sealer) Open(kind, name string, sealed []byte) ([]byte, error) {
	env, err := ssDecode(sealed)
	if err != nil {
		return nil, err
	}
	k, ok := s.keys[env.G]
	if !ok {
		return nil, fmt.Errorf("%w: the record is sealed under storage key generation %d, which this store does not hold", ErrRootKey, env.G)
	}
	format := ssFormatV2
	if env.G == 0 {
		format = ssFormatV1
	}
	pt, err := k.aead.Open(nil, env.Nonce, env.CT, ssAD(format, kind, name))
	if err != nil {
		return nil, ErrAuthFailed
	}
	return pt, nil
}
