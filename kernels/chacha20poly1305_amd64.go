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
//   - "avx512": messages of 1024 bytes or more through the stitched kernels
//     of chachapoly_amd64.s, which run ChaCha20 (16 blocks per pass in zmm
//     registers) and Poly1305 (AVX-512 IFMA) in one pass, 1024 bytes at a
//     time (a message of whole groups with under 256 bytes of additional
//     data all in one kernel), and their last partial group as shorter
//     messages go: ChaCha20 16 blocks per pass in zmm registers, Poly1305
//     with IFMA for long inputs and MULX for the rest; messages of up to 11
//     blocks with up to 64 bytes of additional data all in one kernel of
//     chachapoly_amd64.s (2, 4, 8 or 12 blocks in rows of ymm or zmm
//     registers, or on Zen 5 for up to one block, the rounds split between
//     xmm rows and general-purpose registers; Poly1305 with MULX);
//   - "avx2": ChaCha20 8 blocks per pass in ymm registers, Poly1305 with MULX.
//
// Without the stitched kernels, long messages go through in pieces of
// chachaPolyPiece bytes: each piece is encrypted and then authenticated (or
// authenticated and then decrypted) while it is still in cache.

func init() {
	avx512 := chachaPolySuite{chacha: chachaAVX512, ifma: true, short: true}
	for _, c := range []Cipher{ChaCha20Poly1305, XChaCha20Poly1305} {
		register(&Implementation{
			name: "avx512", cipher: c, priority: 30,
			requires: []string{"AVX", "AVX2", "AVX512F", "AVX512VL", "AVX512BW", "AVX512IFMA", "BMI2"},
			asmFuncs: append([]string{"chachaXORAVX512", "chachaXORAVX512x17", "chachaXORAVX2", "chachaBlockScalar",
				"chachaPolyShort2AVX512", "chachaPolyShort2SplitAVX512", "chachaPolyShort4AVX512", "chachaPolyShort8AVX512", "chachaPolyShort12AVX512", "chachaPolyHeadAVX512", "chachaPolySealAVX512IFMA", "chachaPolyOpenAVX512IFMA", "chachaPolyWholeAVX512IFMA"}, poly1305IFMAFuncs...),
			newAEAD: avx512.newAEAD(c == XChaCha20Poly1305),
		})
	}
	// The AVX2 suite runs ChaCha20 and Poly1305 one after the other, where
	// x/crypto's AVX2 assembly interleaves them, so it ranks below x/crypto
	// (priority 5 < 10) and is chosen only if the start-up benchmark finds it
	// faster on the host; BenchmarkSeal/chacha20-poly1305/avx2 against
	// BenchmarkSeal/chacha20-poly1305/xcrypto compares the two.
	avx2 := chachaPolySuite{chacha: chachaAVX2}
	for _, c := range []Cipher{ChaCha20Poly1305, XChaCha20Poly1305} {
		register(&Implementation{
			name: "avx2", cipher: c, priority: 5,
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
	short  bool // chachaPolyShort{2,4,8,12}AVX512 for short messages
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

// chachaPolyShort is the longest message whose keystream one pass of the
// 8-block AVX2 ChaCha20 kernel computes together with block 0.
const chachaPolyShort = 448

// chachaPolyShortAVX512 is the longest message that the avx512 suite, with
// at most 64 bytes of additional data, runs through one of the
// chachaPolyShort{2,4,8,12}AVX512 kernels (1, 3, 7 or 11 blocks of message),
// which do all of ChaCha20-Poly1305: keystream, XOR, Poly1305 with MULX and
// the tag. Past it, Poly1305 with MULX a block at a time would cost more
// than r's powers and IFMA.
const chachaPolyShortAVX512 = 704

// chachaPolyHead is the longest message whose keystream the avx512 suite
// computes in one call together with block 0: 17 blocks, one group of the
// AVX-512 ChaCha20 kernel.
const chachaPolyHead = 1024

// chachaPolyIFMAMin is the shortest ciphertext or additional data for which
// the avx512 suite computes r's powers for the IFMA Poly1305 kernel: the
// powers cost about as much as 11 blocks of the MULX kernel, and at 256 bytes
// the two kernels take the same time (measured).
const chachaPolyIFMAMin = 512

// chachaPolyStitchMin is the shortest message the avx512 suite runs
// through the stitched kernels, which take whole groups of 1024 bytes.
const chachaPolyStitchMin = 1024

// chachaPolyWholeAAD is the most additional data with which the avx512
// suite runs a message of whole 1024-byte groups through
// chachaPolyWholeAVX512IFMA, which absorbs it with MULX: up to 255 bytes, as
// poly1305MAC would (poly1305IFMAMin).
const chachaPolyWholeAAD = poly1305IFMAMin - 1

// chachaPolyPiece is how much a long message is encrypted before it is
// authenticated: a multiple of the 64-byte ChaCha20 block and of the
// 256-byte IFMA step, with its source about the size of a 32 KiB L1 data
// cache. Pieces of 4, 8, 16 and 32 KiB take about the same time;
// BenchmarkSeal/chacha20-poly1305/avx2/16384 and
// BenchmarkOpen/chacha20-poly1305/avx2/16384 measure it.
const chachaPolyPiece = 16 << 10

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
	a.checkNonce(nonce, op)
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

// checkNonce panics if nonce is not NonceSize bytes long.
func (a *chachaPoly) checkNonce(nonce []byte, op string) {
	if len(nonce) != a.NonceSize() {
		panic("kernels: chacha20-poly1305: bad nonce length passed to " + op)
	}
}

func (a *chachaPoly) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	if a.takesShort(len(plaintext), len(additionalData)) {
		return a.sealShort(dst, nonce, plaintext, additionalData)
	}
	if a.takesWhole(len(plaintext), len(additionalData)) {
		return a.sealWhole(dst, nonce, plaintext, additionalData)
	}
	key, n := a.setup(nonce, "Seal")
	if uint64(len(plaintext)) > 1<<38-64 {
		panic("kernels: chacha20-poly1305: plaintext too large")
	}
	ret, out := sliceForAppend(dst, len(plaintext)+16)
	if inexactOverlap(out, plaintext) || anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap")
	}
	a.crypt(out[:len(plaintext)], plaintext, additionalData, &key, &n, true, (*[16]byte)(out[len(plaintext):]))
	clear(key[:])
	return ret
}

func (a *chachaPoly) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	if a.takesShort(len(ciphertext)-16, len(additionalData)) && len(ciphertext) >= 16 {
		return a.openShort(dst, nonce, ciphertext, additionalData)
	}
	if a.takesWhole(len(ciphertext)-16, len(additionalData)) {
		return a.openWhole(dst, nonce, ciphertext, additionalData)
	}
	key, n := a.setup(nonce, "Open")
	if len(ciphertext) < 16 {
		return nil, errChaChaPolyOpen
	}
	if uint64(len(ciphertext)) > 1<<38-48 {
		panic("kernels: chacha20-poly1305: ciphertext too large")
	}
	ct, tag := ciphertext[:len(ciphertext)-16], ciphertext[len(ciphertext)-16:]
	ret, out := sliceForAppend(dst, len(ct))
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

// takesShort reports whether the suite runs a message of n bytes with aad
// bytes of additional data through sealShort and openShort: in one of the
// chachaPolyShort{2,4,8,12}AVX512 kernels, with the AEAD's own key and the
// caller's nonce as they are. A copy of the key made just before the kernel
// reads it (as setup makes for crypt) is read back with 16-byte loads from
// 4-byte stores, which the processor cannot forward: the load waits for the
// stores to reach the cache, a large part of a 16-byte message's time
// (BenchmarkSeal/chacha20-poly1305/avx512/16).
func (a *chachaPoly) takesShort(n, aad int) bool {
	return n <= chachaPolyShortAVX512 && aad <= 64 && a.suite.short && !a.extended
}

// sealShort is Seal for a message that takesShort accepts.
func (a *chachaPoly) sealShort(dst, nonce, plaintext, additionalData []byte) []byte {
	a.checkNonce(nonce, "Seal")
	ret, out := sliceForAppend(dst, len(plaintext)+16)
	if inexactOverlap(out, plaintext) || anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap")
	}
	shortKernel(out[:len(plaintext)], plaintext, additionalData, &a.key, (*[12]byte)(nonce), true, (*[16]byte)(out[len(plaintext):]))
	return ret
}

// openShort is Open for a message that takesShort accepts, of at least 16
// bytes.
func (a *chachaPoly) openShort(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	a.checkNonce(nonce, "Open")
	ct, tag := ciphertext[:len(ciphertext)-16], ciphertext[len(ciphertext)-16:]
	ret, out := sliceForAppend(dst, len(ct))
	if inexactOverlap(out, ciphertext) || anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap")
	}
	var want [16]byte
	shortKernel(out, ct, additionalData, &a.key, (*[12]byte)(nonce), false, &want)
	if !tagsEqual(&want, (*[16]byte)(tag)) {
		clear(out)
		return nil, errChaChaPolyOpen
	}
	return ret, nil
}

// tagsEqual reports whether two tags are equal, in time independent of
// their contents: two 64-bit words each, XORed and ORed together, and one
// comparison of the result with zero, whatever bytes differ. It stands
// in for subtle.ConstantTimeCompare where the message is so short that its
// byte loop is a noticeable part of Open
// (BenchmarkOpen/chacha20-poly1305/avx512/16).
func tagsEqual(x, y *[16]byte) bool {
	d := binary.LittleEndian.Uint64(x[:8]) ^ binary.LittleEndian.Uint64(y[:8])
	d |= binary.LittleEndian.Uint64(x[8:]) ^ binary.LittleEndian.Uint64(y[8:])
	return d == 0
}

// shortSplit has messages of up to 64 bytes whose MAC input is three blocks
// or more (additional data and message, each padded to 16 bytes, and the
// lengths) run through chachaPolyShort2SplitAVX512 instead of
// chachaPolyShort2AVX512: on Zen 5, where vector rounds are slow, it is
// faster from three blocks, and slower at two, where the rows kernel's
// Poly1305 is short enough to overlap the next message's rounds
// (BenchmarkChaChaPolyOneBlockKernels for the kernels alone,
// BenchmarkChaCha20Poly1305Fastest/Seal/avx512/16 and …/64 through the AEAD).
var shortSplit = amdFamily1Ah

// shortKernel runs the chachaPolyShort{2,4,8,12}AVX512 kernel for a message
// of len(in) ≤ chachaPolyShortAVX512 bytes with at most 64 bytes of aad:
// out = in XOR the keystream from block 1, and the tag of aad and the
// ciphertext (out when sealing, in when opening). Direct calls: through a
// func value, the arguments would escape.
func shortKernel(out, in, aad []byte, key *[8]uint32, nonce *[12]byte, seal bool, tag *[16]byte) {
	o, i, ad := firstByte(out), firstByte(in), firstByte(aad)
	switch {
	case twoMACBlocks(len(in), len(aad)) || !shortSplit && len(in) <= 64:
		chachaPolyShort2AVX512(o, i, len(in), ad, len(aad), key, nonce, tag, seal)
	case len(in) <= 64:
		chachaPolyShort2SplitAVX512(o, i, len(in), ad, len(aad), key, nonce, tag, seal)
	case len(in) <= 192:
		chachaPolyShort4AVX512(o, i, len(in), ad, len(aad), key, nonce, tag, seal)
	case len(in) <= 448:
		chachaPolyShort8AVX512(o, i, len(in), ad, len(aad), key, nonce, tag, seal)
	default:
		chachaPolyShort12AVX512(o, i, len(in), ad, len(aad), key, nonce, tag, seal)
	}
}

// twoMACBlocks reports whether the MAC input of a message of n bytes with
// aad bytes of additional data (each padded to 16 bytes, then the lengths)
// is at most two blocks: at most 16 bytes of one and none of the other.
// shortKernel asks it first, as the rows kernel's case: that leaves the
// path of a 16-byte message as short as it is without the split kernel,
// where counting the blocks before choosing makes
// BenchmarkChaCha20Poly1305Fastest/Seal/avx512/16 slower.
func twoMACBlocks(n, aad int) bool {
	return n+aad <= 16 && (n == 0 || aad == 0)
}

// takesWhole reports whether the suite runs a message of n bytes with aad
// bytes of additional data through chachaPolyWholeAVX512IFMA: whole
// 1024-byte groups and under 256 bytes of additional data. Small enough to
// be inlined, it costs the other messages a comparison, not a call.
func (a *chachaPoly) takesWhole(n, aad int) bool {
	return n > 0 && n%1024 == 0 && aad <= chachaPolyWholeAAD && a.suite.ifma
}

// sealWhole is Seal for a message that takesWhole accepts. It and openWhole
// repeat Seal's and Open's checks rather than share one path with them: one
// path, checks first, then whole or crypt, would make Seal and Open of
// short messages slower; BenchmarkChaCha20Poly1305Fastest at Seal/avx512/16,
// Seal/avx512/64, Open/avx512/16 and Open/avx512/64 measures it.
func (a *chachaPoly) sealWhole(dst, nonce, plaintext, additionalData []byte) []byte {
	a.checkNonce(nonce, "Seal")
	if uint64(len(plaintext)) > 1<<38-64 {
		panic("kernels: chacha20-poly1305: plaintext too large")
	}
	ret, out := sliceForAppend(dst, len(plaintext)+16)
	if inexactOverlap(out, plaintext) || anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap")
	}
	a.whole(out[:len(plaintext)], plaintext, additionalData, nonce, true, (*[16]byte)(out[len(plaintext):]))
	return ret
}

// openWhole is Open for a message that takesWhole accepts. Opening in
// place, each group must be authenticated before it is overwritten: such a
// message goes through crypt.
func (a *chachaPoly) openWhole(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	a.checkNonce(nonce, "Open")
	if uint64(len(ciphertext)) > 1<<38-48 {
		panic("kernels: chacha20-poly1305: ciphertext too large")
	}
	ct, tag := ciphertext[:len(ciphertext)-16], ciphertext[len(ciphertext)-16:]
	ret, out := sliceForAppend(dst, len(ct))
	if inexactOverlap(out, ciphertext) || anyOverlap(out, additionalData) {
		panic("crypto/cipher: invalid buffer overlap")
	}
	var want [16]byte
	if &out[0] != &ct[0] {
		a.whole(out, ct, additionalData, nonce, false, &want)
	} else {
		key, n := a.setup(nonce, "Open")
		a.crypt(out, ct, additionalData, &key, &n, false, &want)
		clear(key[:])
	}
	if subtle.ConstantTimeCompare(want[:], tag) != 1 {
		clear(out)
		return nil, errChaChaPolyOpen
	}
	return ret, nil
}

// whole seals or opens a message that takesWhole accepts through
// chachaPolyWholeAVX512IFMA; opening, out and in do not overlap. Out and in
// are as for crypt, nonce is the caller's, of the right length. The kernel
// reads the key from a and the nonce from the caller's bytes as they are: a
// copy made just before would be read back before it reached the cache
// (BenchmarkSeal/chacha20-poly1305/avx512/1024 and
// BenchmarkOpen/chacha20-poly1305/avx512/1024 measure it).
func (a *chachaPoly) whole(out, in, aad, nonce []byte, seal bool, tag *[16]byte) {
	mac := &out[0]
	if !seal {
		mac = &in[0]
	}
	if !a.extended {
		chachaPolyWholeAVX512IFMA(&out[0], &in[0], mac, len(in)/1024, &a.key, (*[12]byte)(nonce), firstByte(aad), len(aad), tag)
		return
	}
	key, _ := a.setup(nonce, "")
	var n [12]byte // 0‖nonce[16:24], as setup's
	copy(n[4:], nonce[16:24])
	chachaPolyWholeAVX512IFMA(&out[0], &in[0], mac, len(in)/1024, &key, &n, firstByte(aad), len(aad), tag)
	clear(key[:])
}

// crypt sets out = in XOR the keystream from block 1 and writes the tag of
// aad and the ciphertext (out when sealing, in when opening) to tag. out and
// in are equal or disjoint. The message goes through in pieces of
// chachaPolyPiece bytes, each authenticated in one call right after it is
// written, or right before it is overwritten, while it is in L1.
func (a *chachaPoly) crypt(out, in, aad []byte, key *[8]uint32, nonce *[3]uint32, seal bool, tag *[16]byte) {
	if a.suite.short && len(in) <= chachaPolyShortAVX512 && len(aad) <= 64 {
		var n [12]byte
		for j, w := range nonce {
			binary.LittleEndian.PutUint32(n[4*j:], w)
		}
		shortKernel(out, in, aad, key, &n, seal, tag)
		return
	}
	if a.suite.ifma && len(in) >= chachaPolyStitchMin {
		cryptStitched(out, in, aad, key, nonce, seal, tag)
		return
	}
	var m poly1305MAC
	var tbl *poly1305Powers
	if a.suite.ifma && max(len(in), len(aad)) >= chachaPolyIFMAMin {
		tbl = new(poly1305Powers) // on the stack, cleared only when needed
	}
	// head is the keystream of blocks 1… computed with block 0, which keys
	// Poly1305: for a message of at most 7 blocks, all of it from one call
	// of the 8-block AVX2 kernel; in the avx512 suite, for one of at most
	// 16 blocks, all of it from one call of the AVX-512 kernel (16 blocks in
	// zmm registers and a 17th in general-purpose ones).
	var ks [64 + chachaPolyHead]byte
	var head []byte
	switch {
	case len(in) <= chachaPolyShort:
		chacha20XORAVX2(ks[:64+len(in)], ks[:64+len(in)], key, nonce, 0)
		head = ks[64 : 64+len(in)]
	case a.suite.short && len(in) <= chachaPolyHead:
		chacha20XORAVX512(ks[:64+len(in)], ks[:64+len(in)], key, nonce, 0)
		head = ks[64 : 64+len(in)]
	default:
		a.xor(ks[:32], ks[:32], key, nonce, 0)
	}
	m.init((*[32]byte)(ks[:32]))
	m.padded(aad, tbl)
	for off := 0; off < len(in); off += chachaPolyPiece {
		end := min(off+chachaPolyPiece, len(in))
		if !seal {
			m.padded(in[off:end], tbl) // pads only the last piece: the others are whole blocks
		}
		a.xorPiece(out, in, off, end, head, key, nonce)
		if seal {
			m.padded(out[off:end], tbl)
		}
	}
	m.lengths(len(aad), len(in))
	m.sum(tag)
	m.wipe(tbl)
	clear(ks[:])
}

// cryptStitched is crypt for the avx512 suite and a message of at least
// chachaPolyStitchMin bytes: its whole 1024-byte groups go through the
// stitched kernels of chachapoly_amd64.s, which run ChaCha20 and Poly1305 in
// one pass, and the rest, under 1024 bytes, through the AVX-512 ChaCha20
// kernel and the Poly1305 kernels. The Poly1305 key comes from block 0 in
// general-purpose registers: sealing, and opening into another buffer,
// alongside the first group's ChaCha20 (chachaPolyHeadAVX512), so that it
// and r's powers cost nothing, and the seal kernel authenticates one group
// behind; opening in place, alone, because each group's input must be
// authenticated before it is overwritten. (A message of whole groups with
// under 256 bytes of additional data, sealed or opened into another buffer,
// does not come here: whole takes it.)
func cryptStitched(out, in, aad []byte, key *[8]uint32, nonce *[3]uint32, seal bool, tag *[16]byte) {
	head := seal || &out[0] != &in[0]
	var ks [64]byte // the key block (the head writes the Poly1305 key, 32 bytes)
	var tbl poly1305Powers
	// Sealing, and opening into another buffer (out and in are equal or
	// disjoint), the ciphertext of the first group stays available after it
	// is XORed: block 0 runs alongside blocks 1–16, which XOR the first group,
	// and r's powers are computed alongside them too. The head reads key and
	// nonce where they are: the state built here is for the kernels after it.
	if head {
		chachaPolyHeadAVX512(&out[0], &in[0], key, nonce, 0, (*[32]byte)(ks[:32]), (*[80]uint64)(&tbl))
	}
	state := chachaState(key, nonce, 0)
	if !head {
		chachaBlockScalar(&state, &ks)
	}
	var m poly1305MAC
	m.init((*[32]byte)(ks[:32]))
	m.powers = head
	clear(ks[:])
	m.padded(aad, &tbl)
	bulk := len(in) &^ 1023
	if head {
		mac := &out[0]
		if !seal {
			mac = &in[0]
		}
		state[12] = 1 + 16
		chachaPolySealAVX512IFMA(&out[0], &in[0], mac, bulk/1024, &state, &m.st, m.powersTable(&tbl))
	} else {
		state[12] = 1
		chachaPolyOpenAVX512IFMA(&out[0], &in[0], bulk/1024, &state, &m.st, m.powersTable(&tbl))
	}
	if rest := in[bulk:]; len(rest) > 0 {
		if !seal {
			m.padded(rest, &tbl)
		}
		chacha20XORAVX512(out[bulk:], rest, key, nonce, uint32(1+bulk/64))
		if seal {
			m.padded(out[bulk:], &tbl)
		}
	}
	m.lengths(len(aad), len(in))
	m.sum(tag)
	m.wipe(&tbl)
	clear(state[4:12])
}

// xorPiece sets out[off:end] = in[off:end] XOR the keystream, whose first
// len(head) bytes are given and the rest comes from the suite's kernel.
func (a *chachaPoly) xorPiece(out, in []byte, off, end int, head []byte, key *[8]uint32, nonce *[3]uint32) {
	if off < len(head) {
		off += subtle.XORBytes(out[off:end], in[off:end], head[off:])
	}
	if off < end {
		a.xor(out[off:end], in[off:end], key, nonce, uint32(1+off/64))
	}
}

// firstByte returns &b[0], or nil for an empty b.
func firstByte(b []byte) *byte {
	if len(b) == 0 {
		return nil
	}
	return &b[0]
}
