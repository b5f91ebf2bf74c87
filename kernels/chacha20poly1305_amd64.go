//go:build amd64 && gc && !purego

package kernels

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"

	"golang.org/x/crypto/chacha20"
)

// ChaCha20-Poly1305 (RFC 8439 §2.8) and XChaCha20-Poly1305
// (draft-irtf-cfrg-xchacha §2.3) over the vector ChaCha20 kernels of
// chacha20_amd64.s and the Poly1305 kernels of poly1305_amd64.s:
//
//   - "avx512": ChaCha20 16 blocks per pass in zmm registers, Poly1305 with
//     AVX-512 IFMA for long inputs and MULX for the rest;
//   - "avx2": ChaCha20 8 blocks per pass in ymm registers, Poly1305 with MULX.
//
// Long messages go through in pieces of chachaPolyPiece bytes: each piece is
// encrypted and then authenticated (or authenticated and then decrypted)
// while it is still in the first-level cache.

func init() {
	avx512 := chachaPolySuite{chacha: chachaAVX512, ifma: true, short: true}
	for _, c := range []Cipher{ChaCha20Poly1305, XChaCha20Poly1305} {
		register(&Implementation{
			name: "avx512", cipher: c, priority: 30,
			requires: []string{"AVX", "AVX2", "AVX512F", "AVX512VL", "AVX512IFMA", "BMI2"},
			asmFuncs: append([]string{"chachaXORAVX512", "chachaKeystream4AVX512VL"}, poly1305IFMAFuncs...),
			newAEAD:  avx512.newAEAD(c == XChaCha20Poly1305),
		})
	}
	avx2 := chachaPolySuite{chacha: chachaAVX2}
	for _, c := range []Cipher{ChaCha20Poly1305, XChaCha20Poly1305} {
		register(&Implementation{
			name: "avx2", cipher: c, priority: 25,
			requires: []string{"AVX", "AVX2", "BMI2"},
			asmFuncs: append([]string{"chachaXORAVX2"}, poly1305MULXFuncs...),
			newAEAD:  avx2.newAEAD(c == XChaCha20Poly1305),
		})
	}
}

// chachaPolySuite names the kernels one implementation uses.
type chachaPolySuite struct {
	chacha chachaKernel
	ifma   bool // Poly1305 with IFMA for long inputs
	short  bool // chachaKeystream4AVX512VL for the key block and short messages
}

func (s chachaPolySuite) newAEAD(extended bool) func(key []byte) (cipher.AEAD, error) {
	return func(key []byte) (cipher.AEAD, error) {
		a := &chachaPoly{suite: s, extended: extended}
		for i := range a.key {
			a.key[i] = binary.LittleEndian.Uint32(key[4*i:])
		}
		return a, nil
	}
}

// chachaPolyShort is the longest message whose keystream comes from
// chachaKeystream4AVX512VL alone, 4 blocks per call: one or two calls cost
// less than a pass of the 16-block kernel. Longer messages take their first
// 3 blocks from the call that makes the Poly1305 key. Without that kernel, a
// message this short goes through one call of the suite's kernel together
// with block 0 (at most 8 blocks: one pass of the 8-block AVX2 kernel).
const chachaPolyShort = 448

// chachaPolyPiece is how much a long message is encrypted before it is
// authenticated: a multiple of the 64-byte ChaCha20 block and of the
// 128-byte IFMA group, small enough to stay in the 32 KiB L1 cache with its
// source.
const chachaPolyPiece = 8 << 10

var errChaChaPolyOpen = errors.New("kernels: chacha20-poly1305: message authentication failed")

type chachaPoly struct {
	key      [8]uint32
	suite    chachaPolySuite
	extended bool // XChaCha20-Poly1305: 24-byte nonces
}

func (a *chachaPoly) NonceSize() int {
	if a.extended {
		return 24
	}
	return 12
}

func (a *chachaPoly) Overhead() int { return 16 }

// xor runs the suite's ChaCha20 kernel.
func (a *chachaPoly) xor(dst, src []byte, key *[8]uint32, nonce *[3]uint32, counter uint32) {
	switch a.suite.chacha {
	case chachaAVX512:
		chacha20XORAVX512(dst, src, key, nonce, counter)
	case chachaAVX2:
		chacha20XORAVX2(dst, src, key, nonce, counter)
	default:
		panic("kernels: chacha20-poly1305: unknown ChaCha20 kernel")
	}
}

// setup returns the ChaCha20 key and nonce for a message: the AEAD's own for
// ChaCha20-Poly1305; for XChaCha20-Poly1305 the subkey HChaCha20(key,
// nonce[:16]) and the nonce 0‖nonce[16:24].
func (a *chachaPoly) setup(nonce []byte, op string) (key [8]uint32, n [3]uint32) {
	if len(nonce) != a.NonceSize() {
		panic("kernels: chacha20-poly1305: bad nonce length passed to " + op)
	}
	if !a.extended {
		for i := range n {
			n[i] = binary.LittleEndian.Uint32(nonce[4*i:])
		}
		return a.key, n
	}
	var kb [32]byte
	for i, w := range a.key {
		binary.LittleEndian.PutUint32(kb[4*i:], w)
	}
	sub, err := chacha20.HChaCha20(kb[:], nonce[:16])
	if err != nil {
		panic("kernels: chacha20-poly1305: " + err.Error()) // lengths are checked above
	}
	for i := range key {
		key[i] = binary.LittleEndian.Uint32(sub[4*i:])
	}
	clear(kb[:])
	clear(sub)
	n[1] = binary.LittleEndian.Uint32(nonce[16:])
	n[2] = binary.LittleEndian.Uint32(nonce[20:])
	return key, n
}

func (a *chachaPoly) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	key, n := a.setup(nonce, "Seal")
	if uint64(len(plaintext)) > 1<<38-64 {
		panic("kernels: chacha20-poly1305: plaintext too large")
	}
	ret, out := appendSlot(dst, len(plaintext)+16)
	if inexactOverlap(out, plaintext) || anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap")
	}
	a.crypt(out[:len(plaintext)], plaintext, additionalData, &key, &n, true, (*[16]byte)(out[len(plaintext):]))
	clear(key[:])
	return ret
}

func (a *chachaPoly) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	key, n := a.setup(nonce, "Open")
	if len(ciphertext) < 16 {
		return nil, errChaChaPolyOpen
	}
	if uint64(len(ciphertext)) > 1<<38-48 {
		panic("kernels: chacha20-poly1305: ciphertext too large")
	}
	ct, tag := ciphertext[:len(ciphertext)-16], ciphertext[len(ciphertext)-16:]
	ret, out := appendSlot(dst, len(ct))
	if inexactOverlap(out, ciphertext) || anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap")
	}
	var want [16]byte
	a.crypt(out, ct, additionalData, &key, &n, false, &want)
	clear(key[:])
	if subtle.ConstantTimeCompare(want[:], tag) != 1 {
		clear(out)
		return nil, errChaChaPolyOpen
	}
	return ret, nil
}

// crypt sets out = in XOR the keystream from block 1 and writes the tag of
// aad and the ciphertext (out when sealing, in when opening) to tag. out and
// in are equal or disjoint. Each span of the ciphertext is authenticated
// right after it is written, or right before it is overwritten.
func (a *chachaPoly) crypt(out, in, aad []byte, key *[8]uint32, nonce *[3]uint32, seal bool, tag *[16]byte) {
	var m poly1305MAC
	var tbl *poly1305Powers
	if a.suite.ifma && max(len(in), len(aad)) >= poly1305IFMAMin {
		tbl = new(poly1305Powers) // on the stack, cleared only when needed
	}
	span := func(off, end int, ks []byte) {
		if !seal {
			m.padded(in[off:end], tbl) // pads only the last span: the others are whole blocks
		}
		if ks != nil {
			subtle.XORBytes(out[off:end], in[off:end], ks)
		} else {
			a.xor(out[off:end], in[off:end], key, nonce, uint32(1+off/64))
		}
		if seal {
			m.padded(out[off:end], tbl)
		}
	}
	off := 0
	if a.suite.short {
		// Block 0 keys Poly1305; blocks 1–3 cover the first 192 bytes,
		// and further calls 256 bytes each while the message is short.
		state := chachaState(key, nonce, 0)
		var ks [256]byte
		chachaKeystream4AVX512VL(&state, &ks)
		m.init((*[32]byte)(ks[:32]))
		m.padded(aad, tbl)
		end := min(len(in), 192)
		span(0, end, ks[64:64+end])
		for off = end; off < len(in) && len(in) <= chachaPolyShort; off = end {
			end = min(len(in), off+256)
			state[12] = uint32(1 + off/64)
			chachaKeystream4AVX512VL(&state, &ks)
			span(off, end, ks[:end-off])
		}
		clear(ks[:])
	} else if len(in) <= chachaPolyShort {
		// One kernel call for block 0 and the message: its keystream over
		// zeros, then over the message.
		var buf [64 + chachaPolyShort]byte
		copy(buf[64:], in)
		a.xor(buf[:64+len(in)], buf[:64+len(in)], key, nonce, 0)
		m.init((*[32]byte)(buf[:32]))
		m.padded(aad, tbl)
		if !seal {
			m.padded(in, tbl)
		}
		copy(out, buf[64:64+len(in)])
		if seal {
			m.padded(out, tbl)
		}
		clear(buf[:])
		off = len(in)
	} else {
		var block [32]byte
		a.xor(block[:], block[:], key, nonce, 0)
		m.init(&block)
		clear(block[:])
		m.padded(aad, tbl)
	}
	for ; off < len(in); off += chachaPolyPiece {
		span(off, min(off+chachaPolyPiece, len(in)), nil)
	}
	m.lengths(len(aad), len(in))
	m.sum(tag)
	m.wipe(tbl)
}

// appendSlot returns in extended by n bytes, reusing its capacity when
// it suffices, and the n new bytes.
func appendSlot(in []byte, n int) (head, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		head = in[:total]
	} else {
		head = make([]byte, total)
		copy(head, in)
	}
	return head, head[len(in):]
}
