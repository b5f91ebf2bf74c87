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

// MaxPlaintextLen is the longest plaintext a stream holds: 2^38 - 1 full
// chunks and a final chunk of ChunkSize - 1 bytes, 2^52 - 1 bytes
// (docs/FORMAT.md, Sizes).
const MaxPlaintextLen = maxChunks*ChunkSize - 1

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
	pool *sync.Pool // of *expander; nil for a key that expands once (newPRKOnce)
	key  []byte     // the key, when pool is nil
	n    int        // key length
	// pads are the HMAC key's inner and outer chaining values, from which
	// expand4 derives four messages' keys at once: set by newPRKAhead where
	// kernels.SHA512x4 is available, nil otherwise.
	pads *[2][8]uint64
}

// expander is one keyed HMAC with the scratch space of an expansion, kept
// with it so that nothing an expansion hashes escapes to the heap.
type expander struct {
	mac hash.Hash
	msg []byte // T(i-1) || info || i
	t   [sha512.Size]byte
}

// maxKeptInfo bounds the scratch space a pooled expander keeps.
const maxKeptInfo = 4 << 10

func newPRK(key []byte) prk {
	k := bytes.Clone(key)
	return prk{pool: &sync.Pool{New: func() any { return &expander{mac: hmac.New(sha512.New, k)} }}, n: len(k)}
}

// newPRKAhead is newPRK for a key that seals many messages (a version's
// direct input key, a local sealer's data key), with the pads expand4
// needs; the other PRKs of a version skip their cost.
func newPRKAhead(key []byte) prk {
	p := newPRK(key)
	if kernels.SHA512x4Available() && len(key) <= sha512.BlockSize {
		p.pads = hmacPads(key)
	}
	return p
}

// newPRKOnce returns a PRK for a key that is expanded once, such as a
// stream's data key: without the pool, which would cost more to set up than
// it saves.
func newPRKOnce(key []byte) prk {
	return prk{key: bytes.Clone(key), n: len(key)}
}

var (
	zeroByte          = []byte{0}
	chunkedInfoPrefix = []byte(chunkedInfoLabel)
)

// expand writes HKDF-Expand(prk, info) into out (at most 255 × 64 bytes). The
// info is given in parts, concatenated.
func (p prk) expand(out []byte, info ...[]byte) {
	var e *expander
	if p.pool != nil {
		e = p.pool.Get().(*expander)
	} else {
		e = &expander{mac: hmac.New(sha512.New, p.key)}
	}
	for i := 0; len(out) > 0; i++ {
		e.mac.Reset()
		e.msg = e.msg[:0]
		if i > 0 {
			e.msg = append(e.msg, e.t[:]...)
		}
		for _, part := range info {
			e.msg = append(e.msg, part...)
		}
		e.msg = append(e.msg, byte(i+1))
		e.mac.Write(e.msg)
		e.mac.Sum(e.t[:0])
		out = out[copy(out, e.t[:]):]
	}
	clear(e.t[:])
	clear(e.msg) // it held the previous block
	if cap(e.msg) > maxKeptInfo {
		e.msg = nil
	}
	if p.pool != nil {
		p.pool.Put(e)
	}
}

// chunkedKeys is one message's derived key state.
type chunkedKeys struct {
	aead  cipher.AEAD
	nonce [chunkNonceSize]byte // base nonce
	pool  *sync.Pool           // where release puts it; nil if aead cannot be rekeyed
	// n is the nonce of sealChunks and openChunks, here so that it does not
	// escape to the heap on every call; those two are for one-shot messages,
	// whose key state one goroutine uses.
	n [chunkNonceSize]byte
	// derived is deriveChunked's scratch space for the expanded key, nonce
	// and commitment; zero outside deriveChunked.
	derived [32 + chunkNonceSize + commitmentSize]byte
}

// rekeyer is an AEAD that takes a new key of the same length in place, as the
// kernels' assembly AES-GCM does. Its round keys and hash-key table are most
// of what a one-shot message allocates, so one-shot messages take their key
// state from a pool per implementation and release it when done.
type rekeyer interface{ Rekey(key []byte) error }

// keyPools maps each *kernels.Implementation whose AEADs are rekeyers to a
// *sync.Pool of *chunkedKeys.
var keyPools sync.Map

// newChunkedKeys returns key state for a message under im, for setKey to
// key: a recycled one from im's pool when there is one, or a new one that
// will go back to that pool. (Only an implementation whose AEADs can be
// rekeyed has a pool.)
func newChunkedKeys(im *kernels.Implementation) *chunkedKeys {
	p, _ := keyPools.Load(im)
	pool, _ := p.(*sync.Pool)
	if pool != nil {
		if k, _ := pool.Get().(*chunkedKeys); k != nil {
			return k
		}
	}
	return &chunkedKeys{pool: pool}
}

// setKey keys k's AEAD: a recycled one is rekeyed in place; a new one is
// made, and k joins im's pool if its AEAD can be rekeyed.
func (k *chunkedKeys) setKey(im *kernels.Implementation, key []byte) error {
	if k.aead != nil {
		return k.aead.(rekeyer).Rekey(key)
	}
	aead, err := im.NewAEAD(key)
	if err != nil {
		return err
	}
	k.aead = aead
	switch _, ok := aead.(rekeyer); {
	case !ok:
		k.pool = nil
	case k.pool == nil: // the implementation's first: make its pool
		p, _ := keyPools.LoadOrStore(im, new(sync.Pool))
		k.pool = p.(*sync.Pool)
	}
	return nil
}

// release hands the key state of a finished one-shot message back for reuse;
// k must not be used after. The AEAD keeps the message's key until it is
// rekeyed: a key derived from a version secret that the process holds anyway.
func (k *chunkedKeys) release() {
	if k != nil && k.pool != nil {
		k.nonce, k.n = [chunkNonceSize]byte{}, [chunkNonceSize]byte{}
		k.pool.Put(k)
	}
}

// deriveChunked derives a message's AEAD, base nonce and commitment from the
// input key, salt and context, using the implementation im of the AEAD.
func deriveChunked(im *kernels.Implementation, input prk, salt, context []byte) (*chunkedKeys, [commitmentSize]byte, error) {
	c := im.Cipher()
	var commitment [commitmentSize]byte
	id := aeadID(c)
	if id == 0 {
		return nil, commitment, fmt.Errorf("%w: %s is not a sealed-format AEAD", ErrUnsupported, c)
	}
	if input.n != c.KeySize() {
		return nil, commitment, fmt.Errorf("cryptosvc: chunked-encryption input key of %d bytes for %s", input.n, c)
	}
	k := newChunkedKeys(im)
	out := k.derivedFor(c)
	input.expand(out, chunkedInfoPrefix, ianaNames[id], zeroByte, salt, context)
	return k.useDerived(im, c)
}

// derivedFor returns k's scratch space for the expanded key, nonce and
// commitment of a message under c. It is on the heap already: the AEAD
// constructor and Rekey would move a local buffer there.
func (k *chunkedKeys) derivedFor(c kernels.Cipher) []byte {
	return k.derived[:c.KeySize()+chunkNonceSize+commitmentSize]
}

// useDerived keys k with what derivedFor's space holds, clears it, and
// returns the commitment.
func (k *chunkedKeys) useDerived(im *kernels.Implementation, c kernels.Cipher) (*chunkedKeys, [commitmentSize]byte, error) {
	var commitment [commitmentSize]byte
	out := k.derivedFor(c)
	err := k.setKey(im, out[:c.KeySize()])
	copy(k.nonce[:], out[c.KeySize():])
	copy(commitment[:], out[c.KeySize()+chunkNonceSize:])
	clear(out)
	if err != nil {
		return nil, commitment, err
	}
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
	for i := uint64(0); ; i++ {
		k.chunkNonce(&k.n, i)
		if len(plaintext) < ChunkSize {
			return k.aead.Seal(dst, k.n[:], plaintext, nil)
		}
		dst = k.aead.Seal(dst, k.n[:], plaintext[:ChunkSize], nil)
		plaintext = plaintext[ChunkSize:]
	}
}

// openChunks appends the plaintext of the chunks in body (after salt and
// commitment) to dst.
func (k *chunkedKeys) openChunks(dst, body []byte) ([]byte, error) {
	const full = ChunkSize + tagSize
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
		plain, err := k.openChunk(out, &k.n, i, chunk)
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
