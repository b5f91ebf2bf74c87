package cryptosvc

import (
	"bytes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha512"
	"crypto/subtle"
	"fmt"
	"hash"
	"sync"

	"github.com/cipherd/cipherd/kernels"
)

// The body of every sealed message follows c2sp.org/chunked-encryption
// (Cobblestone), instantiated with HKDF-Expand-SHA-512:
//
//	key || base nonce || commitment = HKDF-Expand-SHA-512(prk = input key,
//	    info = "c2sp.org/chunked-encryption@v1+" || aead || 0x00 || salt || context)
//	body = salt || commitment || chunk₀ || chunk₁ || … || chunkₙ
//
// Chunks hold 16 KiB of plaintext each, except the final one, which is always
// shorter (possibly empty): that is what marks the end. Chunk i is sealed with
// the derived key under the base nonce XOR i (big-endian, in the low 38 bits),
// with no additional data.
const (
	ChunkSize        = 16384
	saltSize         = 24
	commitmentSize   = 32
	chunkNonceSize   = 12
	tagSize          = 16
	chunkedPrefix    = saltSize + commitmentSize
	maxChunks        = 1 << 38
	chunkedInfoLabel = "c2sp.org/chunked-encryption@v1+"
)

// ianaName returns the AEAD's name in the IANA AEAD registry, as the scheme's
// key derivation names it.
func ianaName(c kernels.Cipher) string {
	switch c {
	case kernels.AES128GCM:
		return "AEAD_AES_128_GCM"
	case kernels.AES256GCM:
		return "AEAD_AES_256_GCM"
	case kernels.ChaCha20Poly1305:
		return "AEAD_CHACHA20_POLY1305"
	}
	return ""
}

// ianaNames holds ianaName of each AEAD ID, as bytes.
var ianaNames = func() (n [len(aeadIDs)][]byte) {
	for id, c := range aeadIDs {
		n[id] = []byte(ianaName(c))
	}
	return n
}()

// prk is HMAC-SHA-512 keyed once with an HKDF pseudorandom key. Expansions
// take a keyed HMAC from a pool and reset it, which restores the keyed state
// without hashing the key again, so that deriving a message's keys costs only
// the blocks of its own info.
type prk struct {
	pool *sync.Pool
	n    int // key length
}

func newPRK(key []byte) prk {
	k := bytes.Clone(key)
	return prk{&sync.Pool{New: func() any { return hmac.New(sha512.New, k) }}, len(k)}
}

var (
	zeroByte          = []byte{0}
	chunkedInfoPrefix = []byte(chunkedInfoLabel)
)

// expand writes HKDF-Expand(prk, info) into out (at most 255 × 64 bytes). The
// info is given in parts, concatenated.
func (p prk) expand(out []byte, info ...[]byte) {
	h := p.pool.Get().(hash.Hash)
	defer p.pool.Put(h)
	var t [sha512.Size]byte
	var ctr [1]byte
	for i := 0; len(out) > 0; i++ {
		h.Reset()
		if i > 0 {
			h.Write(t[:])
		}
		for _, part := range info {
			h.Write(part)
		}
		ctr[0] = byte(i + 1)
		h.Write(ctr[:])
		h.Sum(t[:0])
		out = out[copy(out, t[:]):]
	}
	clear(t[:])
}

// chunkedKeys is one message's derived key state.
type chunkedKeys struct {
	aead  cipher.AEAD
	nonce [chunkNonceSize]byte // base nonce
}

// deriveChunked derives a message's AEAD, base nonce and commitment from the
// input key, salt and context, using the implementation im of the AEAD.
func deriveChunked(im *kernels.Implementation, input prk, salt, context []byte) (*chunkedKeys, [commitmentSize]byte, error) {
	c := im.Cipher()
	var commitment [commitmentSize]byte
	var buf [32 + chunkNonceSize + commitmentSize]byte
	out := buf[:c.KeySize()+chunkNonceSize+commitmentSize]
	id := aeadID(c)
	if id == 0 {
		return nil, commitment, fmt.Errorf("%w: %s is not a sealed-format AEAD", ErrUnsupported, c)
	}
	if input.n != c.KeySize() {
		return nil, commitment, fmt.Errorf("cryptosvc: chunked-encryption input key of %d bytes for %s", input.n, c)
	}
	input.expand(out, chunkedInfoPrefix, ianaNames[id], zeroByte, salt, context)
	aead, err := im.NewAEAD(out[:c.KeySize()])
	clear(out[:c.KeySize()])
	if err != nil {
		return nil, commitment, err
	}
	k := &chunkedKeys{aead: aead}
	copy(k.nonce[:], out[c.KeySize():])
	copy(commitment[:], out[c.KeySize()+chunkNonceSize:])
	return k, commitment, nil
}

// checkCommitment compares in constant time; a mismatch is an authentication
// failure like any other.
func checkCommitment(got []byte, want *[commitmentSize]byte) error {
	if subtle.ConstantTimeCompare(got, want[:]) != 1 {
		return ErrAuthFailed
	}
	return nil
}

// chunkNonce returns the nonce of chunk i.
func (k *chunkedKeys) chunkNonce(n *[chunkNonceSize]byte, i uint64) {
	*n = k.nonce
	n[7] ^= byte(i >> 32)
	n[8] ^= byte(i >> 24)
	n[9] ^= byte(i >> 16)
	n[10] ^= byte(i >> 8)
	n[11] ^= byte(i)
}

// openChunk opens chunk i into dst, with n as the nonce's storage (a field
// of the caller's, so that it does not escape per chunk). Every failure is
// ErrAuthFailed.
func (k *chunkedKeys) openChunk(dst []byte, n *[chunkNonceSize]byte, i uint64, chunk []byte) ([]byte, error) {
	k.chunkNonce(n, i)
	plain, err := k.aead.Open(dst, n[:], chunk, nil)
	if err != nil {
		return nil, ErrAuthFailed
	}
	return plain, nil
}

// sealChunks appends the chunks of plaintext to dst.
func (k *chunkedKeys) sealChunks(dst, plaintext []byte) []byte {
	var n [chunkNonceSize]byte
	for i := uint64(0); ; i++ {
		k.chunkNonce(&n, i)
		if len(plaintext) < ChunkSize {
			return k.aead.Seal(dst, n[:], plaintext, nil)
		}
		dst = k.aead.Seal(dst, n[:], plaintext[:ChunkSize], nil)
		plaintext = plaintext[ChunkSize:]
	}
}

// openChunks appends the plaintext of the chunks in body (after salt and
// commitment) to dst.
func (k *chunkedKeys) openChunks(dst, body []byte) ([]byte, error) {
	const full = ChunkSize + tagSize
	var n [chunkNonceSize]byte
	out, start := dst, len(dst)
	for i := uint64(0); ; i++ {
		if i >= maxChunks {
			clear(out[start:])
			return nil, ErrTooLarge
		}
		chunk := body[:min(len(body), full)]
		if len(chunk) < tagSize {
			clear(out[start:])
			return nil, ErrTruncated
		}
		plain, err := k.openChunk(out, &n, i, chunk)
		if err != nil {
			clear(out[start:])
			return nil, err
		}
		out, body = plain, body[len(chunk):]
		if len(chunk) < full {
			return out, nil // the short final chunk
		}
	}
}

// chunkedLen returns the length of the chunks for n bytes of plaintext.
func chunkedLen(n int64) int64 {
	return n + (n/ChunkSize+1)*tagSize
}
