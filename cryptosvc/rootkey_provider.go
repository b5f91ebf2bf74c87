package cryptosvc

import (
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"

	"golang.org/x/crypto/chacha20poly1305"
)

// A RootKeyProvider holds the root of trust: it wraps and unwraps the
// storage key under which a keystore seals its records at rest (see
// Sealer). The root key itself need not be in this process: the PKCS#11
// provider (package cryptosvc/pkcs11) keeps it in a token and sends the
// storage key there to be wrapped or unwrapped.
//
// Providers are safe for concurrent use. A keystore calls UnwrapKey when it
// opens and WrapKey only when it creates a storage key (a new store, or a
// root-key rotation), so a provider that becomes unreachable while the
// service runs stops neither reads nor writes of records.
type RootKeyProvider interface {
	// String names the provider for logs and errors: "static", or a
	// PKCS#11 URI without its PIN and module attributes. It never holds
	// material.
	String() string
	// WrapKey encrypts key, binding ad (which is not secret) to the result.
	WrapKey(ctx context.Context, key *Secret, ad []byte) ([]byte, error)
	// UnwrapKey reverses WrapKey. If wrapped does not authenticate under
	// this root key and ad, the error wraps ErrRootKey; if the provider
	// cannot be reached, it does not.
	UnwrapKey(ctx context.Context, wrapped, ad []byte) (Secret, error)
}

// StaticRootKey is the RootKeyProvider of a root key held in memory: read
// from a file or an environment variable (LoadRootKey), or the development
// root key.
//
// It wraps with XChaCha20-Poly1305 under
//
//	HKDF-SHA-256(secret = root key, salt = none, info = "cipherd root key wrap v1", 32 bytes)
//
// and a random 24-byte nonce; the wrapped form is nonce || ciphertext || tag
// (72 bytes for a 32-byte key).
type StaticRootKey struct {
	root Secret // kept for stores of layout 1, which derive from it directly
	aead cipher.AEAD
	rand io.Reader
}

var _ RootKeyProvider = (*StaticRootKey)(nil)

const rkWrapInfo = "cipherd root key wrap v1"

// NewStaticRootKey returns the provider of root. r supplies nonces; nil
// means crypto/rand.Reader.
func NewStaticRootKey(root *Secret, r io.Reader) (*StaticRootKey, error) {
	var zero Secret
	if root == nil || root.Equal(&zero) {
		return nil, fmt.Errorf("%w: the static root key is missing or all zeros", ErrRootKey)
	}
	if r == nil {
		r = rand.Reader
	}
	key, err := hkdf.Key(sha256.New, root.Expose(), nil, rkWrapInfo, chacha20poly1305.KeySize)
	defer clear(key)
	if err != nil {
		return nil, fmt.Errorf("cryptosvc: deriving the root wrapping key: %w", err)
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	return &StaticRootKey{root: *root, aead: aead, rand: r}, nil
}

// String returns "static".
func (*StaticRootKey) String() string { return "static" }

// WrapKey seals key under the root key with ad.
func (p *StaticRootKey) WrapKey(_ context.Context, key *Secret, ad []byte) ([]byte, error) {
	out := make([]byte, chacha20poly1305.NonceSizeX, chacha20poly1305.NonceSizeX+SecretSize+p.aead.Overhead())
	if _, err := io.ReadFull(p.rand, out); err != nil {
		return nil, fmt.Errorf("cryptosvc: reading a nonce: %w", err)
	}
	return p.aead.Seal(out, out, key.Expose(), ad), nil
}

// UnwrapKey opens what WrapKey sealed; anything else fails with ErrRootKey.
func (p *StaticRootKey) UnwrapKey(_ context.Context, wrapped, ad []byte) (Secret, error) {
	if len(wrapped) != chacha20poly1305.NonceSizeX+SecretSize+p.aead.Overhead() {
		return Secret{}, fmt.Errorf("%w: the wrapped storage key has the wrong length", ErrRootKey)
	}
	var buf [SecretSize]byte
	defer clear(buf[:])
	n := chacha20poly1305.NonceSizeX
	if _, err := p.aead.Open(buf[:0], wrapped[:n], wrapped[n:], ad); err != nil {
		return Secret{}, fmt.Errorf("%w: the static root key does not unwrap the storage key", ErrRootKey)
	}
	return NewSecret(buf[:])
}
