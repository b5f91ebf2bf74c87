// Command sha512x4 generates the four-lane SHA-512 compression,
// kernels/sha512x4_amd64.s and its Go declaration.
//
// sha512Block4AVX2 runs four independent SHA-512 computations in lockstep,
// one per 64-bit lane of each ymm register (FIPS 180-4 §6.4). A message's
// key derivation is a chain of HMAC-SHA-512 blocks, each waiting on the
// last, so one message cannot use more than the scalar unit; four messages
// derived together fill the vector unit. AVX2 has no 64-bit rotate: each
// rotation is two shifts whose results are XORed into the sum they belong to.
//
// The state is transposed: h[i] holds word i of all four lanes. The four
// lanes' blocks are read through four pointers, transposed into 16 ymm words
// and byte-swapped; the message schedule is computed whole onto the stack
// before the 80 rounds, which keep the eight state words in Y0–Y7.
package main

//go:generate go run . -out ../../sha512x4_amd64.s -stubs ../../sha512x4_stub_amd64.go -pkg kernels

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// k512 are SHA-512's round constants (FIPS 180-4 §4.2.3).
var k512 = [80]uint64{
	0x428a2f98d728ae22, 0x7137449123ef65cd, 0xb5c0fbcfec4d3b2f, 0xe9b5dba58189dbbc,
	0x3956c25bf348b538, 0x59f111f1b605d019, 0x923f82a4af194f9b, 0xab1c5ed5da6d8118,
	0xd807aa98a3030242, 0x12835b0145706fbe, 0x243185be4ee4b28c, 0x550c7dc3d5ffb4e2,
	0x72be5d74f27b896f, 0x80deb1fe3b1696b1, 0x9bdc06a725c71235, 0xc19bf174cf692694,
	0xe49b69c19ef14ad2, 0xefbe4786384f25e3, 0x0fc19dc68b8cd5b5, 0x240ca1cc77ac9c65,
	0x2de92c6f592b0275, 0x4a7484aa6ea6e483, 0x5cb0a9dcbd41fbd4, 0x76f988da831153b5,
	0x983e5152ee66dfab, 0xa831c66d2db43210, 0xb00327c898fb213f, 0xbf597fc7beef0ee4,
	0xc6e00bf33da88fc2, 0xd5a79147930aa725, 0x06ca6351e003826f, 0x142929670a0e6e70,
	0x27b70a8546d22ffc, 0x2e1b21385c26c926, 0x4d2c6dfc5ac42aed, 0x53380d139d95b3df,
	0x650a73548baf63de, 0x766a0abb3c77b2a8, 0x81c2c92e47edaee6, 0x92722c851482353b,
	0xa2bfe8a14cf10364, 0xa81a664bbc423001, 0xc24b8b70d0f89791, 0xc76c51a30654be30,
	0xd192e819d6ef5218, 0xd69906245565a910, 0xf40e35855771202a, 0x106aa07032bbd1b8,
	0x19a4c116b8d2d0c8, 0x1e376c085141ab53, 0x2748774cdf8eeb99, 0x34b0bcb5e19b48a8,
	0x391c0cb3c5c95a63, 0x4ed8aa4ae3418acb, 0x5b9cca4f7763e373, 0x682e6ff3d6b2b8a3,
	0x748f82ee5defb2fc, 0x78a5636f43172f60, 0x84c87814a1f0ab72, 0x8cc702081a6439ec,
	0x90befffa23631e28, 0xa4506cebde82bde9, 0xbef9a3f7b2c67915, 0xc67178f2e372532b,
	0xca273eceea26619c, 0xd186b8c721c0c207, 0xeada7dd6cde0eb1e, 0xf57d4f7fee6ed178,
	0x06f067aa72176fba, 0x0a637dc5a2c898a6, 0x113f9804bef90dae, 0x1b710b35131c471b,
	0x28db77f523047d84, 0x32caab7b40c72493, 0x3c9ebe0a15c9bebc, 0x431d67c49c100d4c,
	0x4cc5d4becb3e42b6, 0x597f299cfc657e2a, 0x5fcb6fab3ad6faec, 0x6c44198c4a475817,
}

var (
	kTab  Mem // k512, each constant repeated in four lanes
	bswap Mem // VPSHUFB control reversing the bytes of each 64-bit lane
)

func main() {
	ConstraintExpr("amd64,gc,!purego")
	constants()
	block4()
	Generate()
}

func constants() {
	kTab = GLOBL("sha512x4K", RODATA|NOPTR)
	for i, k := range k512 {
		for j := 0; j < 4; j++ {
			DATA(32*i+8*j, U64(k))
		}
	}
	bswap = GLOBL("sha512x4Bswap", RODATA|NOPTR)
	for j := 0; j < 2; j++ {
		DATA(16*j, U64(0x0001020304050607))
		DATA(16*j+8, U64(0x08090a0b0c0d0e0f))
	}
}

// rotr XORs x rotated right by n into acc's pair of temporaries: lo gets
// x>>n and hi x<<(64-n), to be XORed into the sum by the caller.
func rotr(n uint8, x, lo, hi VecPhysical) {
	VPSRLQ(U8(n), x, lo)
	VPSLLQ(U8(64-n), x, hi)
}

// bigSigma sets t[0] to x rotated right by r0, r1 and r2, XORed, using
// t[0..5]: the three rotations' six shifts first, then a tree of XORs.
func bigSigma(x VecPhysical, r [3]uint8, t []VecPhysical) {
	rotr(r[0], x, t[0], t[1])
	rotr(r[1], x, t[2], t[3])
	rotr(r[2], x, t[4], t[5])
	VPXOR(t[1], t[0], t[0])
	VPXOR(t[3], t[2], t[2])
	VPXOR(t[5], t[4], t[4])
	VPXOR(t[2], t[0], t[0])
	VPXOR(t[4], t[0], t[0])
}

// smallSigma sets t[0] to x rotated right by r0 and r1 and shifted right by
// s, XORed, using t[0..4].
func smallSigma(x VecPhysical, r0, r1, s uint8, t []VecPhysical) {
	rotr(r0, x, t[0], t[1])
	rotr(r1, x, t[2], t[3])
	VPSRLQ(U8(s), x, t[4])
	VPXOR(t[1], t[0], t[0])
	VPXOR(t[3], t[2], t[2])
	VPXOR(t[4], t[0], t[0])
	VPXOR(t[2], t[0], t[0])
}

func block4() {
	TEXT("sha512Block4AVX2", 0, "func(h *[8][4]uint64, p *[4]*byte, blocks int)")
	Pragma("noescape")
	Doc("sha512Block4AVX2 compresses blocks 128-byte blocks of each of four",
		"messages into h, whose word i of lane j is h[i][j]; lane j's blocks",
		"start at p[j]. blocks must be at least 1.")
	w := AllocLocal(80 * 32)

	hp, pp, n := RDI, RAX, RCX
	lanes := []GPPhysical{R8, R9, R10, R11}
	wp, kp, rounds := RSI, RBX, RDX
	Load(Param("h"), hp)
	Load(Param("p"), pp)
	Load(Param("blocks"), n)
	for j, r := range lanes {
		MOVQ(Mem{Base: pp, Disp: 8 * j}, r)
	}
	y := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}

	Label("block")
	Comment("The block's 16 words, transposed to one word of every lane per",
		"register and byte-swapped, into W[0..15].")
	VMOVDQU(bswap, Y15)
	for t := 0; t < 16; t += 4 {
		for j, r := range lanes {
			VMOVDQU(Mem{Base: r, Disp: 8 * t}, y[8+j])
		}
		VPUNPCKLQDQ(Y9, Y8, Y12)   // words t, t+2 of lanes 0, 1
		VPUNPCKHQDQ(Y9, Y8, Y13)   // words t+1, t+3 of lanes 0, 1
		VPUNPCKLQDQ(Y11, Y10, Y14) // words t, t+2 of lanes 2, 3
		VPUNPCKHQDQ(Y11, Y10, Y8)  // words t+1, t+3 of lanes 2, 3
		VPERM2I128(U8(0x20), Y14, Y12, Y9)
		VPERM2I128(U8(0x20), Y8, Y13, Y10)
		VPERM2I128(U8(0x31), Y14, Y12, Y11)
		VPERM2I128(U8(0x31), Y8, Y13, Y12)
		for i, r := range []VecPhysical{Y9, Y10, Y11, Y12} {
			VPSHUFB(Y15, r, r)
			VMOVDQU(r, w.Offset(32*(t+i)))
		}
	}

	Comment("W[16..79], two words a step: W[t+1] does not depend on W[t].")
	LEAQ(w.Offset(16*32), wp)
	MOVQ(U32(32), rounds)
	Label("schedule")
	for j := 0; j < 2; j++ {
		at := func(back int) Mem { return Mem{Base: wp, Disp: 32 * (j - back)} }
		t := y[8*j : 8*j+8]
		VMOVDQU(at(2), t[5])
		smallSigma(t[5], 19, 61, 6, t) // σ1(W[t-2]) in t[0]
		VMOVDQU(at(15), t[6])
		VPADDQ(at(7), t[0], t[0])
		smallSigma(t[6], 1, 8, 7, t[1:]) // σ0(W[t-15]) in t[1]
		VPADDQ(at(16), t[1], t[1])
		VPADDQ(t[1], t[0], t[0])
		VMOVDQU(t[0], at(0))
	}
	ADDQ(U8(64), wp)
	DECQ(rounds)
	JNZ(LabelRef("schedule"))

	Comment("The 80 rounds, eight a step, renaming a..h instead of moving them.")
	for i := 0; i < 8; i++ {
		VMOVDQU(Mem{Base: hp, Disp: 32 * i}, y[i])
	}
	LEAQ(w, wp)
	LEAQ(kTab, kp)
	MOVQ(U32(10), rounds)
	Label("rounds")
	for i := 0; i < 8; i++ {
		s := func(k int) VecPhysical { return y[((k-i)%8+8)%8] }
		round(s(0), s(1), s(2), s(3), s(4), s(5), s(6), s(7), 32*i, wp, kp, y[8:14])
	}
	ADDQ(U32(256), wp)
	ADDQ(U32(256), kp)
	DECQ(rounds)
	JNZ(LabelRef("rounds"))

	for i := 0; i < 8; i++ {
		VPADDQ(Mem{Base: hp, Disp: 32 * i}, y[i], y[i])
		VMOVDQU(y[i], Mem{Base: hp, Disp: 32 * i})
	}
	for _, r := range lanes {
		ADDQ(U32(128), r)
	}
	DECQ(n)
	JNZ(LabelRef("block"))
	VZEROUPPER()
	RET()
}

// round is one SHA-512 round on four lanes. It leaves T1+T2, the next a, in
// h and d+T1, the next e, in d; the caller renames the rest.
func round(a, b, c, d, e, f, g, h VecPhysical, disp int, wp, kp GPPhysical, t []VecPhysical) {
	VPADDQ(Mem{Base: wp, Disp: disp}, h, h)
	VPADDQ(Mem{Base: kp, Disp: disp}, h, h)
	// Ch(e, f, g) = (e & f) ^ (^e & g)
	VPAND(f, e, t[0])
	VPANDN(g, e, t[1])
	VPXOR(t[1], t[0], t[0])
	VPADDQ(t[0], h, h)
	bigSigma(e, [3]uint8{14, 18, 41}, t) // Σ1(e)
	VPADDQ(t[0], h, h)                   // T1
	VPADDQ(h, d, d)
	bigSigma(a, [3]uint8{28, 34, 39}, t) // Σ0(a)
	VPADDQ(t[0], h, h)
	// Maj(a, b, c) = ((a | b) & c) | (a & b)
	VPOR(b, a, t[1])
	VPAND(c, t[1], t[1])
	VPAND(b, a, t[2])
	VPOR(t[2], t[1], t[1])
	VPADDQ(t[1], h, h)
}
