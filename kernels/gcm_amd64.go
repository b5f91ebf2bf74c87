//go:build amd64 && gc && !purego

package kernels

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"slices"
)

// AES-GCM (NIST SP 800-38D) with a 96-bit nonce and a 128-bit tag, on
// VAES and VPCLMULQDQ over 512-bit vectors: 16 blocks in flight, AES of each
// 256 bytes stitched with GHASH, one reduction per 256 bytes. The assembly
// and the mathematics behind it are in _asm/gcm.

const (
	gcmNonceSize = 12
	gcmTagSize   = 16
	// gcmPlaintextMax is GCM's limit: 2^32 - 2 blocks, so that the 32-bit
	// counter of a 96-bit nonce never wraps.
	gcmPlaintextMax = (1<<32 - 2) * 16
)

// gcmVAES512Requires is the union of the "// Requires:" lines of the
// functions a vaes512 AEAD calls (gcm_amd64.s, aeskey_amd64.s).
var gcmVAES512Requires = []string{"AES", "AVX", "AVX512BW", "AVX512F", "AVX512VL", "BMI2", "VAES", "VPCLMULQDQ"}

func init() {
	funcs := append(slices.Clone(aesScheduleFuncs), "gcmInitVAES512", "gcmAADVAES512", "gcmSealVAES512", "gcmOpenVAES512")
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		register(&Implementation{
			name:     "vaes512",
			cipher:   c,
			priority: 30,
			requires: gcmVAES512Requires,
			asmFuncs: funcs,
			newAEAD:  newGCMVAES512,
		})
	}
}

// gcmVAES512 is an AES-GCM key: the round keys and the table of hash-key
// powers the assembly reads, both computed once at construction.
type gcmVAES512 struct {
	rk     [15][16]byte
	rounds int
	table  [19][16]byte
}

func newGCMVAES512(key []byte) (cipher.AEAD, error) {
	ks := newAESSchedule(key)
	g := &gcmVAES512{rk: ks.rk, rounds: ks.rounds}
	ks.wipe()
	var h, zero [16]byte
	encryptBlockAESNI(g.rounds, &g.rk, &h, &zero)
	k1 := gcmKeyTimesY(&h)
	gcmInitVAES512(&g.table, &k1)
	clear(h[:])
	clear(k1[:])
	return g, nil
}

// gcmKeyTimesY returns the hash key H = E(K, 0^128) in the assembly's form:
// byte-reversed (the block read as a big-endian integer) and multiplied by y
// = x^-1 modulo y^128 + y^127 + y^126 + y^121 + 1, that is shifted left by
// one bit and reduced. Stored little-endian, low qword first.
func gcmKeyTimesY(h *[16]byte) [16]byte {
	hi, lo := binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:])
	carry := hi >> 63
	hi, lo = hi<<1|lo>>63, lo<<1
	// Constant time: the mask is all ones exactly when a bit was carried out.
	mask := -carry
	hi ^= 0xc200000000000000 & mask
	lo ^= 1 & mask
	var k [16]byte
	binary.LittleEndian.PutUint64(k[:8], lo)
	binary.LittleEndian.PutUint64(k[8:], hi)
	return k
}

func (g *gcmVAES512) NonceSize() int { return gcmNonceSize }
func (g *gcmVAES512) Overhead() int  { return gcmTagSize }

func (g *gcmVAES512) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	if len(nonce) != gcmNonceSize {
		panic("crypto/cipher: incorrect nonce length given to GCM")
	}
	if uint64(len(plaintext)) > gcmPlaintextMax {
		panic("crypto/cipher: message too large for GCM")
	}
	ret, out := sliceForAppend(dst, len(plaintext)+gcmTagSize)
	if inexactOverlap(out, plaintext) {
		panic("crypto/cipher: invalid buffer overlap of output and input")
	}
	if anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap of output and additional data")
	}
	var acc [16]byte
	if len(additionalData) > 0 {
		gcmAADVAES512(&g.table, &acc, additionalData)
	}
	gcmSealVAES512(&g.rk, g.rounds, &g.table, &acc, out, plaintext, (*[12]byte)(nonce), 1,
		len(additionalData), (*[16]byte)(out[len(plaintext):]))
	return ret
}

// errGCMOpen is the one error of a failed Open, worded as the standard
// library's.
var errGCMOpen = errors.New("cipher: message authentication failed")

func (g *gcmVAES512) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	if len(nonce) != gcmNonceSize {
		panic("crypto/cipher: incorrect nonce length given to GCM")
	}
	if len(ciphertext) < gcmTagSize || uint64(len(ciphertext)) > gcmPlaintextMax+gcmTagSize {
		return nil, errGCMOpen
	}
	n := len(ciphertext) - gcmTagSize
	ret, out := sliceForAppend(dst, n)
	if inexactOverlap(out, ciphertext) {
		panic("crypto/cipher: invalid buffer overlap of output and input")
	}
	if anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap of output and additional data")
	}
	var acc, tag [16]byte
	if len(additionalData) > 0 {
		gcmAADVAES512(&g.table, &acc, additionalData)
	}
	gcmOpenVAES512(&g.rk, g.rounds, &g.table, &acc, out, ciphertext[:n], (*[12]byte)(nonce), 1,
		len(additionalData), &tag)
	if subtle.ConstantTimeCompare(tag[:], ciphertext[n:]) != 1 {
		// The plaintext was written before the tag was checked: take it back.
		clear(out)
		return nil, errGCMOpen
	}
	return ret, nil
}

// sliceForAppend returns in extended by n bytes, reusing its capacity when it
// suffices, and the n new bytes.
func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	tail = head[len(in):]
	return
}
