//go:build amd64 && gc && !purego

package kernels

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// AES-GCM (NIST SP 800-38D) with a 96-bit nonce and a 128-bit tag, on VAES
// and VPCLMULQDQ. vaes512 works on 512-bit vectors (AVX-512): 32 blocks in
// flight, AES of each 512 bytes stitched with GHASH, one reduction per 512
// bytes, three carry-less multiplies per block (Karatsuba), masked tails.
// vaes256 is the same on 256-bit vectors with VEX encoding only (AVX2), for
// processors without AVX-512: 8 blocks in flight, four multiplies per block.
// The assembly and the mathematics behind it are in _asm/gcm.

const (
	gcmNonceSize = 12
	gcmTagSize   = 16
	// gcmPlaintextMax is GCM's limit: 2^32 - 2 blocks, so that the 32-bit
	// counter of a 96-bit nonce never wraps.
	gcmPlaintextMax = (1<<32 - 2) * 16
)

// The requires lists are the unions of the "// Requires:" lines of the
// functions each implementation calls (gcm_amd64.s, aeskey_amd64.s);
// vaes512 calls the VAES256 kernels for the messages gcmShort256 names.
var (
	gcmVAES512Requires = []string{"AES", "AVX", "AVX2", "AVX512BW", "AVX512F", "AVX512VL", "BMI2", "PCLMULQDQ", "VAES", "VPCLMULQDQ"}
	gcmVAES256Requires = []string{"AES", "AVX", "AVX2", "PCLMULQDQ", "VAES", "VPCLMULQDQ"}
)

func init() {
	funcs512 := append(slices.Clone(aesScheduleFuncs), "gcmInitVAES512", "gcmInitHighVAES512", "gcmInitGroupVAES512", "gcmAADVAES512", "gcmSealVAES512", "gcmOpenVAES512",
		"gcmAADVAES256", "gcmSealVAES256", "gcmOpenVAES256") // gcmShort256
	funcs256 := append(slices.Clone(aesScheduleFuncs), "gcmInitVAES256", "gcmAADVAES256", "gcmSealVAES256", "gcmOpenVAES256")
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		register(&Implementation{
			name:     "vaes512",
			cipher:   c,
			priority: 30,
			requires: gcmVAES512Requires,
			asmFuncs: funcs512,
			newAEAD:  func(key []byte) (cipher.AEAD, error) { return newGCMAsm(key, true), nil },
			codeAt: func(n int) string {
				if gcmShort256(n, 0) {
					return "vaes256"
				}
				return "vaes512"
			},
		})
		register(&Implementation{
			name:     "vaes256",
			cipher:   c,
			priority: 25,
			requires: gcmVAES256Requires,
			asmFuncs: funcs256,
			newAEAD:  func(key []byte) (cipher.AEAD, error) { return newGCMAsm(key, false), nil },
		})
	}
}

// gcmAsm is an AES-GCM key: the round keys and the table of hash-key powers
// the assembly reads, both computed when it is keyed, and which kernels to
// run.
type gcmAsm struct {
	aesSchedule
	zmm bool // the VAES512 kernels, else the VAES256 ones
	// tableMem holds the table at tableOff, the first 64-byte boundary in
	// it (see table). Go aligns the struct to 8 bytes only, and the main
	// loops read the table as 64-byte memory operands of VPCLMULQDQ and
	// VPSHUFB: each one that straddles two cache lines costs a second
	// access (BenchmarkGCMTableAlignment).
	tableMem [unsafe.Sizeof(gcmTable{}) + 63]byte
	tableOff uint8
	// high completes the VAES512 table (gcmInitHighVAES512) the first time
	// a message needs it: cryptosvc keys every message anew, and most are
	// short enough for K16…K1 (BenchmarkGCMNew, gcmNeedsHigh).
	high sync.Once
	// group adds the powers with which the main loops hash two blocks per
	// reduction (gcmInitGroupVAES512) the first time a message of
	// gcmGroupMin bytes or more needs them; grouped says it has.
	group   sync.Once
	grouped atomic.Bool
}

// gcmGroupMin is the shortest message for which a VAES512 key computes the
// powers that hash two 512-byte blocks per reduction. They cost about what
// they save on 16 KiB, so a key made for one shorter message, as cryptosvc
// makes them, would lose by them (BenchmarkGCMRekeySeal); a key that has
// them uses them from 1 KiB up.
var gcmGroupMin = 16384

// gcmNeedsHigh reports whether a message of n bytes with aad bytes of
// additional data needs more than K16…K1 of the VAES512 table: a tail of 16
// or more blocks takes K17 and up, and so does the main loop.
func gcmNeedsHigh(n, aad int) bool { return n > 15*16 || aad > 16*16 }

// prepare completes the VAES512 table of g as far as a message of n bytes
// needs when gcmNeedsHigh says it needs more than K16…K1, and reports
// whether the main loops are to hash two blocks per reduction. Seal and Open
// test gcmNeedsHigh themselves, so that short messages pay no call.
func (g *gcmAsm) prepare(n int) (groups bool) {
	g.high.Do(func() { gcmInitHighVAES512(g.table()) })
	if n < 2*16*gcmAggBlocks {
		// Fewer than two of the main loops' blocks: no group to hash.
		return false
	}
	if g.grouped.Load() {
		return true
	}
	if n < gcmGroupMin {
		return false
	}
	g.group.Do(func() {
		gcmInitGroupVAES512(g.table())
		g.grouped.Store(true)
	})
	return true
}

// gcmShort256 reports whether a VAES512 key seals or opens a message of n
// bytes with aad bytes of additional data with the VAES256 kernels, which
// read the K16…K1 part of the same table (table256): none, one or two whole
// blocks and no additional data, the sizes at which the 256-bit code is the
// faster on the AVX-512 hosts measured (BenchmarkSeal/aes-*-gcm/*/16 on
// Zen 5 and on Granite Rapids). vaes512's CodeAt says so, and the start-up
// benchmark does not pit the two against each other where they run one code.
func gcmShort256(n, aad int) bool { return n <= 32 && n%16 == 0 && aad == 0 }

// gcmAggBlocks is how many blocks the VAES512 kernels hash per reduction:
// aggBlocks in _asm/gcm.
const gcmAggBlocks = 32

// gcmTable is the VAES512 kernels' table: K(gcmAggBlocks), …, K1, three
// zero entries and one of padding, then the folded keys of the same entries,
// then the main loops' folded keys packed two vectors to a vector, then six
// 64-byte constants, then the powers K(2·gcmAggBlocks), …,
// K(gcmAggBlocks+1) with which the main loops hash the first of two blocks
// per reduction, and their packed folded keys. The VAES256 kernels use the
// entries from K16 to the zero entries (table256).
type gcmTable = [2*(gcmAggBlocks+4) + gcmAggBlocks/2 + 24 + 3*gcmAggBlocks/2][16]byte

// table256 is the part of t the VAES256 kernels read.
func table256(t *gcmTable) *[19][16]byte {
	return (*[19][16]byte)(t[gcmAggBlocks-16 : gcmAggBlocks+3])
}

func newGCMAsm(key []byte, zmm bool) *gcmAsm {
	g := &gcmAsm{zmm: zmm}
	g.tableOff = uint8(-uintptr(unsafe.Pointer(&g.tableMem)) & 63)
	g.setKey(key)
	return g
}

// table returns the table of key powers. Its place in tableMem is fixed when
// g is made, so the table is the same bytes even if g moves (a copied stack);
// heap objects, where keys live, do not move, and so stay aligned.
func (g *gcmAsm) table() *gcmTable {
	return (*gcmTable)(unsafe.Pointer(&g.tableMem[g.tableOff]))
}

// Rekey replaces the key with another of the same length, reusing g's
// memory: cryptosvc derives a key per message and keeps a pool of AEADs.
func (g *gcmAsm) Rekey(key []byte) error {
	if len(key) != g.keySize() {
		return fmt.Errorf("kernels: AES-GCM rekeyed with a %d-byte key, not %d", len(key), g.keySize())
	}
	g.setKey(key)
	return nil
}

func (g *gcmAsm) keySize() int {
	if g.rounds == 10 {
		return 16
	}
	return 32
}

func (g *gcmAsm) setKey(key []byte) {
	g.expand(key)
	var h, zero [16]byte
	encryptBlockAESNI(g.rounds, &g.rk, &h, &zero)
	k1 := gcmKeyTimesY(&h)
	if g.zmm {
		g.high = sync.Once{}
		g.group = sync.Once{}
		g.grouped.Store(false)
		gcmInitVAES512(g.table(), &k1)
	} else {
		gcmInitVAES256(table256(g.table()), &k1)
	}
	clear(h[:])
	clear(k1[:])
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

func (g *gcmAsm) NonceSize() int { return gcmNonceSize }
func (g *gcmAsm) Overhead() int  { return gcmTagSize }

func (g *gcmAsm) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
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
	tag := (*[16]byte)(out[len(plaintext):])
	groups := false
	if g.zmm && gcmNeedsHigh(len(plaintext), len(additionalData)) {
		groups = g.prepare(len(plaintext))
	}
	if g.zmm && !gcmShort256(len(plaintext), len(additionalData)) {
		if len(additionalData) > 0 {
			gcmAADVAES512(g.table(), &acc, additionalData)
		}
		gcmSealVAES512(&g.rk, g.rounds, g.table(), &acc, out, plaintext, (*[12]byte)(nonce), 1, len(additionalData), tag, groups)
	} else {
		if len(additionalData) > 0 {
			gcmAADVAES256(table256(g.table()), &acc, additionalData)
		}
		gcmSealVAES256(&g.rk, g.rounds, table256(g.table()), &acc, out, plaintext, (*[12]byte)(nonce), 1, len(additionalData), tag)
	}
	return ret
}

// errGCMOpen is the one error of a failed Open, worded as the standard
// library's.
var errGCMOpen = errors.New("cipher: message authentication failed")

func (g *gcmAsm) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
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
	groups := false
	if g.zmm && gcmNeedsHigh(n, len(additionalData)) {
		groups = g.prepare(n)
	}
	if g.zmm && !gcmShort256(n, len(additionalData)) {
		if len(additionalData) > 0 {
			gcmAADVAES512(g.table(), &acc, additionalData)
		}
		gcmOpenVAES512(&g.rk, g.rounds, g.table(), &acc, out, ciphertext[:n], (*[12]byte)(nonce), 1, len(additionalData), &tag, groups)
	} else {
		if len(additionalData) > 0 {
			gcmAADVAES256(table256(g.table()), &acc, additionalData)
		}
		gcmOpenVAES256(&g.rk, g.rounds, table256(g.table()), &acc, out, ciphertext[:n], (*[12]byte)(nonce), 1, len(additionalData), &tag)
	}
	if subtle.ConstantTimeCompare(tag[:], ciphertext[n:]) != 1 {
		// The plaintext was written before the tag was checked: take it back.
		clear(out)
		return nil, errGCMOpen
	}
	return ret, nil
}

// sliceForAppend returns in extended by n bytes, reusing its capacity when it
// suffices, and the n new bytes: the dst handling of every assembly AEAD.
func sliceForAppend(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	return head, head[len(in):]
}
