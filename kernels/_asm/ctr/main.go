// Command ctr generates the VAES AES-CTR kernels, kernels/ctr_amd64.s and
// their Go declarations: ctrXORVAES512 (zmm, AVX-512) and ctrXORVAES256 (ymm,
// VAES with AVX2 only).
//
// Both XOR n bytes of AES-CTR keystream into dst. The 128-bit big-endian
// counter block arrives as two native 64-bit words, low half first. The
// kernels keep it little-endian in 64-bit vector lanes, one block per 128-bit
// lane, add block numbers to the low words with VPADDQ and byte-reverse each
// lane with VPSHUFB to get the big-endian block to encrypt. VPADDQ does not
// carry into the high word: the Go caller splits a call where the low half
// would wrap, so within one call the blocks the caller asked for never carry.
// (Blocks computed past the end of the data may wrap; they are discarded.)
//
// The final XOR with the data is folded into the last round:
// AESENCLAST(k, s) ^ d = AESENCLAST(k ^ d, s).
//
// When n is not a multiple of 16 the kernels also write the whole keystream
// block of the last, partial block to ks, so that the caller can serve the
// rest of that block to its next call.
package main

//go:generate go run . -out ../../ctr_amd64.s -stubs ../../ctr_stub_amd64.go -pkg kernels

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

var (
	zmm = []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}
	ymm = []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}
)

// Constants, in 16-byte units that VBROADCASTI32X4 and VBROADCASTI128 repeat
// into every lane.
var (
	bswapMask   Mem // VPSHUFB control reversing the 16 bytes of a lane
	laneOffsets Mem // 64-bit words 0,0, 1,0, 2,0, 3,0: block number of each lane
	inc4        Mem // 4,0: four blocks, one zmm
	inc2        Mem // 2,0: two blocks, one ymm
	inc16Y      Mem // 16,0, 16,0: 16 blocks, eight ymm (32 bytes)
	byteOffsY   Mem // 8 ymm constants: byte 15 of each lane is 2i, the others 0
)

const signature = "func(rk *[15][16]byte, rounds int, lo, hi uint64, dst *byte, src *byte, n int, ks *[16]byte)"

// Argument registers, shared by both kernels.
var (
	rkPtr  = RAX // round keys
	rounds = RBX // 10 or 14
	dst    = RDX
	src    = RSI
	n      = RDI // bytes left
	ksPtr  = R8  // keystream of the last partial block
)

func main() {
	ConstraintExpr("amd64,gc,!purego")
	constants()
	ctrVAES512()
	ctrVAES256()
	Generate()
}

func constants() {
	bswapMask = GLOBL("ctrBswapMask", RODATA|NOPTR)
	DATA(0, U64(0x08090a0b0c0d0e0f))
	DATA(8, U64(0x0001020304050607))

	laneOffsets = GLOBL("ctrLaneOffsets", RODATA|NOPTR)
	for j := 0; j < 4; j++ {
		DATA(16*j, U64(j))
		DATA(16*j+8, U64(0))
	}

	inc4 = GLOBL("ctrInc4", RODATA|NOPTR)
	DATA(0, U64(4))
	DATA(8, U64(0))

	inc2 = GLOBL("ctrInc2", RODATA|NOPTR)
	DATA(0, U64(2))
	DATA(8, U64(0))

	inc16Y = GLOBL("ctrInc16Y", RODATA|NOPTR)
	for j := 0; j < 2; j++ {
		DATA(16*j, U64(16))
		DATA(16*j+8, U64(0))
	}

	byteOffsY = GLOBL("ctrByteOffsY", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		for j := 0; j < 2; j++ {
			DATA(32*i+16*j, U64(0))
			DATA(32*i+16*j+8, U64(uint64(2*i)<<56))
		}
	}
}

func loadArgs() {
	Load(Param("rk"), rkPtr)
	Load(Param("rounds"), rounds)
	Load(Param("dst"), dst)
	Load(Param("src"), src)
	Load(Param("n"), n)
	Load(Param("ks"), ksPtr)
}

// paramAddr returns the stack address of a scalar argument.
func paramAddr(name string) Mem {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// advance moves src and dst forward by k bytes and takes k from n.
func advance(k int) {
	ADDQ(U32(k), src)
	ADDQ(U32(k), dst)
	SUBQ(U32(k), n)
}

// ---------------------------------------------------------------------------
// zmm: 32 registers hold 8 states (32 blocks), the counter, its increment, the
// byte-swap mask, every round key, and temporaries.

const (
	zStateN = 8
	zCtr    = 8
	zInc    = 9
	zBswap  = 10
	zKey0   = 13 // round key i in Z(13+i), i = 0…14
)

var zTemps = []VecPhysical{Z11, Z12, Z28, Z29, Z30, Z31}

func zKey(i int) VecPhysical { return zmm[zKey0+i] }

func ctrVAES512() {
	TEXT("ctrXORVAES512", NOSPLIT, signature)
	Pragma("noescape")
	Doc(
		"ctrXORVAES512 XORs n bytes of AES-CTR keystream into dst, 32 blocks per",
		"iteration in zmm registers. The blocks' counters are hi:lo+i, and",
		"lo+ceil(n/16)-1 must not wrap. rounds is 10 or 14. If n%16 != 0 the",
		"keystream block of the last, partial block is written to ks.",
	)
	scratch := AllocLocal(64)
	loadArgs()
	TESTQ(n, n)
	JLE(LabelRef("ret"))

	Comment("Counters of the first four blocks, little-endian, one per lane. The",
		"halves are loaded as they were stored, 8 bytes each, so that the loads",
		"are forwarded from the caller's stores.")
	VPBROADCASTQ(paramAddr("lo"), zmm[zCtr])
	VPBROADCASTQ(paramAddr("hi"), zmm[zInc])
	VPUNPCKLQDQ(zmm[zInc], zmm[zCtr], zmm[zCtr])
	VPADDQ(laneOffsets, zmm[zCtr], zmm[zCtr])
	VBROADCASTI32X4(inc4, zmm[zInc])
	VBROADCASTI32X4(bswapMask, zmm[zBswap])
	CMPQ(rounds, U32(14))
	JEQ(LabelRef("aes256"))
	body512(10, scratch)
	body512(14, scratch)
	Label("ret")
	RET()
}

// zEncrypt runs every round but the last on states Z0…Z(nv-1), built from the
// next nv×4 counters. With advance set the counter register moves past them.
func zEncrypt(nv, rounds int, advanceCtr bool) {
	for i := 0; i < nv; i++ {
		VPSHUFB(zmm[zBswap], zmm[zCtr], zmm[i])
		if advanceCtr || i < nv-1 {
			VPADDQ(zmm[zInc], zmm[zCtr], zmm[zCtr])
		}
	}
	for i := 0; i < nv; i++ {
		VPXORD(zKey(0), zmm[i], zmm[i])
	}
	for r := 1; r < rounds; r++ {
		for i := 0; i < nv; i++ {
			VAESENC(zKey(r), zmm[i], zmm[i])
		}
	}
}

func body512(rounds int, scratch Mem) {
	p := fmt.Sprintf("aes%d_", map[int]int{10: 128, 14: 256}[rounds])
	Label(p[:len(p)-1])
	Commentf("AES-%s: all %d round keys stay in Z%d…Z%d.", p[3:6], rounds+1, zKey0, zKey0+rounds)
	for i := 0; i <= rounds; i++ {
		VBROADCASTI32X4(Mem{Base: rkPtr, Disp: 16 * i}, zKey(i))
	}
	last := zKey(rounds)
	CMPQ(n, U32(512))
	JB(LabelRef(p + "tail"))

	Label(p + "loop")
	Comment("512 bytes: 8 vectors of 4 blocks.")
	zEncrypt(zStateN, rounds, true)
	for i := 0; i < zStateN; i++ {
		t := zTemps[i%len(zTemps)]
		VPXORD(Mem{Base: src, Disp: 64 * i}, last, t)
		VAESENCLAST(t, zmm[i], zmm[i])
		VMOVDQU64(zmm[i], Mem{Base: dst, Disp: 64 * i})
	}
	advance(512)
	CMPQ(n, U32(512))
	JAE(LabelRef(p + "loop"))

	Label(p + "tail")
	Comment("1 to 511 bytes left: 1 to 8 vectors, the last one masked.")
	TESTQ(n, n)
	JZ(LabelRef(p + "done"))
	// A binary search on n-1 for the number of vectors, ⌈n/64⌉.
	CMPQ(n, U32(256))
	JA(LabelRef(p + "tail5to8"))
	CMPQ(n, U32(128))
	JA(LabelRef(p + "tail3to4"))
	CMPQ(n, U32(64))
	JA(LabelRef(p + "tail2"))
	zTail(p, rounds, 1, scratch)
	Label(p + "tail3to4")
	CMPQ(n, U32(192))
	JA(LabelRef(p + "tail4"))
	zTail(p, rounds, 3, scratch)
	Label(p + "tail5to8")
	CMPQ(n, U32(384))
	JA(LabelRef(p + "tail7to8"))
	CMPQ(n, U32(320))
	JA(LabelRef(p + "tail6"))
	zTail(p, rounds, 5, scratch)
	Label(p + "tail7to8")
	CMPQ(n, U32(448))
	JA(LabelRef(p + "tail8"))
	zTail(p, rounds, 7, scratch)
	for _, nv := range []int{2, 4, 6, 8} {
		Label(fmt.Sprintf("%stail%d", p, nv))
		zTail(p, rounds, nv, scratch)
	}

	Label(p + "done")
	VZEROUPPER()
	RET()
}

// zTail processes the last n bytes, 64(nv-1) < n ≤ 64nv, with nv vectors: all
// but the last whole, the last loaded and stored under the byte mask K1. It
// ends with a jump to done.
func zTail(p string, rounds, nv int, scratch Mem) {
	Commentf("Tail of %d vectors.", nv)
	lastVec := nv - 1
	// K1 = 2^(n-64(nv-1)) - 1, BZHI of all ones; n-64(nv-1) is 1…64, and
	// BZHI leaves all bits set for 64.
	XORQ(R10, R10)
	NOTQ(R10)
	MOVQ(n, R11)
	if lastVec > 0 {
		SUBQ(U32(64*lastVec), R11)
	}
	BZHIQ(R11, R10, R11)
	KMOVQ(R11, K1)
	zEncrypt(nv, rounds, false)
	last := zKey(rounds)
	for i := 0; i < lastVec; i++ {
		t := zTemps[i%len(zTemps)]
		VPXORD(Mem{Base: src, Disp: 64 * i}, last, t)
		VAESENCLAST(t, zmm[i], zmm[i])
		VMOVDQU64(zmm[i], Mem{Base: dst, Disp: 64 * i})
	}
	t, z := zTemps[lastVec%len(zTemps)], zmm[lastVec]
	VMOVDQU8_Z(Mem{Base: src, Disp: 64 * lastVec}, K1, t)
	VPXORD(t, last, t)
	VAESENCLAST(t, z, z)
	VMOVDQU8(z, K1, Mem{Base: dst, Disp: 64 * lastVec})
	Comment("A partial last block: its data bytes were loaded as zero, so the",
		"rest of its output block is keystream. Copy that block to ks.")
	TESTQ(U32(15), n)
	JZ(LabelRef(p + "done"))
	VMOVDQU64(z, scratch)
	MOVQ(n, R11)
	ANDQ(I32(-16), R11)
	LEAQ(scratch, R9)
	VMOVDQU(Mem{Base: R9, Index: R11, Scale: 1, Disp: -64 * lastVec}, X11)
	VMOVDQU(X11, Mem{Base: ksPtr})
	JMP(LabelRef(p + "done"))
}

// ---------------------------------------------------------------------------
// ymm: only 16 registers without AVX-512, so 8 states (16 blocks), the
// counter, its increment, the byte-swap mask, the first and last round keys
// and two temporaries; the middle round keys are broadcast from memory once
// per round per 8 vectors.

const (
	yStateN = 8
	yCtr    = 8
	yInc    = 9
	yBswap  = 10
	yTmp    = 12
	yFirst  = 13
	yLast   = 14
)

var yKeyTemps = []VecPhysical{Y11, Y15}

func ctrVAES256() {
	TEXT("ctrXORVAES256", NOSPLIT, signature)
	Pragma("noescape")
	Doc(
		"ctrXORVAES256 XORs n bytes of AES-CTR keystream into dst, 16 blocks per",
		"iteration in ymm registers (VAES with AVX2, no AVX-512). The blocks'",
		"counters are hi:lo+i, and lo+ceil(n/16)-1 must not wrap.",
		"rounds is 10 or 14. If n%16 != 0 the keystream block of the last, partial",
		"block is written to ks.",
	)
	loadArgs()
	TESTQ(n, n)
	JLE(LabelRef("ret"))

	Comment("Counters of the first two blocks, little-endian, one per lane.")
	VPBROADCASTQ(paramAddr("lo"), ymm[yCtr])
	VPBROADCASTQ(paramAddr("hi"), ymm[yInc])
	VPUNPCKLQDQ(ymm[yInc], ymm[yCtr], ymm[yCtr])
	VPADDQ(laneOffsets, ymm[yCtr], ymm[yCtr])
	VBROADCASTI128(inc2, ymm[yInc])
	VBROADCASTI128(bswapMask, ymm[yBswap])
	CMPQ(rounds, U32(14))
	JEQ(LabelRef("aes256"))
	body256(10)
	body256(14)
	Label("ret")
	RET()
}

// yEncrypt runs every round but the last on states Y0…Y(nv-1), built from the
// next nv×2 counters. With advance set the counter register moves past them.
func yEncrypt(nv, rounds int, advanceCtr bool) {
	yCounters(nv, advanceCtr)
	yRounds(nv, rounds)
}

// yCounters sets Y0…Y(nv-1) to the next nv×2 counter blocks, big-endian, one
// VPSHUFB per vector.
func yCounters(nv int, advanceCtr bool) {
	for i := 0; i < nv; i++ {
		VPSHUFB(ymm[yBswap], ymm[yCtr], ymm[i])
		if advanceCtr || i < nv-1 {
			VPADDQ(ymm[yInc], ymm[yCtr], ymm[yCtr])
		}
	}
}

// yRounds runs every round but the last on states Y0…Y(nv-1).
func yRounds(nv, rounds int) {
	for i := 0; i < nv; i++ {
		VPXOR(ymm[yFirst], ymm[i], ymm[i])
	}
	for r := 1; r < rounds; r++ {
		k := yKeyTemps[r%len(yKeyTemps)]
		VBROADCASTI128(Mem{Base: rkPtr, Disp: 16 * r}, k)
		for i := 0; i < nv; i++ {
			VAESENC(k, ymm[i], ymm[i])
		}
	}
}

func body256(rounds int) {
	p := fmt.Sprintf("aes%d_", map[int]int{10: 128, 14: 256}[rounds])
	Label(p[:len(p)-1])
	VBROADCASTI128(Mem{Base: rkPtr}, ymm[yFirst])
	VBROADCASTI128(Mem{Base: rkPtr, Disp: 16 * rounds}, ymm[yLast])
	CMPQ(n, U32(256))
	JB(LabelRef(p + "tail"))
	Load(Param("lo"), R9) // its low byte follows the counter through the loop

	Label(p + "loop")
	Comment("256 bytes: 8 vectors of 2 blocks, counters lo+0…lo+15. Unless the",
		"low byte of lo is above 240, adding 2i to the last byte of the",
		"big-endian blocks lo, lo+1 cannot carry, and one VPSHUFB and 8 VPADDB",
		"replace 8 VPSHUFB and 8 VPADDQ, which compete with VAESENC for ports.")
	CMPB(R9B, U8(240))
	JA(LabelRef(p + "ctrslow"))
	VPSHUFB(ymm[yBswap], ymm[yCtr], ymm[yTmp])
	for i := 0; i < yStateN; i++ {
		VPADDB(byteOffsY.Offset(32*i), ymm[yTmp], ymm[i])
	}
	VPADDQ(inc16Y, ymm[yCtr], ymm[yCtr])
	JMP(LabelRef(p + "ctrdone"))
	Label(p + "ctrslow")
	yCounters(yStateN, true)
	Label(p + "ctrdone")
	ADDQ(U32(16), R9)
	yRounds(yStateN, rounds)
	for i := 0; i < yStateN; i++ {
		VPXOR(Mem{Base: src, Disp: 32 * i}, ymm[yLast], ymm[yTmp])
		VAESENCLAST(ymm[yTmp], ymm[i], ymm[i])
		VMOVDQU(ymm[i], Mem{Base: dst, Disp: 32 * i})
	}
	advance(256)
	CMPQ(n, U32(256))
	JAE(LabelRef(p + "loop"))

	Label(p + "tail")
	Comment("1 to 255 bytes left: keystream for 1, 2, 4 or 8 vectors.")
	TESTQ(n, n)
	JZ(LabelRef(p + "done"))
	CMPQ(n, U32(32))
	JBE(LabelRef(p + "tail1"))
	CMPQ(n, U32(64))
	JBE(LabelRef(p + "tail2"))
	CMPQ(n, U32(128))
	JBE(LabelRef(p + "tail4"))
	yTail(p, rounds, 8)
	Label(p + "tail1")
	yTail(p, rounds, 1)
	Label(p + "tail2")
	yTail(p, rounds, 2)
	Label(p + "tail4")
	yTail(p, rounds, 4)

	Label(p + "partial")
	Comment("Y0 holds the keystream for the last 0 to 31 bytes.")
	TESTQ(n, n)
	JZ(LabelRef(p + "done"))
	CMPQ(n, U32(16))
	JB(LabelRef(p + "short"))
	VPXOR(Mem{Base: src}, X0, X1)
	VMOVDQU(X1, Mem{Base: dst})
	advance(16)
	JZ(LabelRef(p + "done"))
	VEXTRACTI128(U8(1), Y0, X0)
	Label(p + "short")
	Comment("1 to 15 bytes: keep the block's keystream in ks and XOR from there.")
	VMOVDQU(X0, Mem{Base: ksPtr})
	for _, w := range []struct {
		size int
		r    Register
		mov  func(mr, mr1 Op)
		xor  func(mr, mr1 Op)
	}{{8, R11, MOVQ, XORQ}, {4, R11L, MOVL, XORL}, {2, R11W, MOVW, XORW}, {1, R11B, MOVB, XORB}} {
		skip := fmt.Sprintf("%sno%d", p, w.size)
		TESTQ(U32(w.size), n)
		JZ(LabelRef(skip))
		w.mov(Mem{Base: src}, w.r)
		w.xor(Mem{Base: ksPtr}, w.r)
		w.mov(w.r, Mem{Base: dst})
		if w.size > 1 {
			ADDQ(U32(w.size), src)
			ADDQ(U32(w.size), dst)
			ADDQ(U32(w.size), ksPtr)
		}
		Label(skip)
	}

	Label(p + "done")
	VZEROUPPER()
	RET()
}

// yTail computes the keystream of nv vectors for the last n bytes,
// 32×(nv/2) < n ≤ 32×nv, XORs whole vectors into dst and leaves the rest to
// the partial path, with the keystream moved to Y0.
func yTail(p string, rounds, nv int) {
	Commentf("Tail of %d vectors.", nv)
	yEncrypt(nv, rounds, false)
	for i := 0; i < nv; i++ {
		VAESENCLAST(ymm[yLast], ymm[i], ymm[i])
	}
	for i := 0; i < nv; i++ {
		CMPQ(n, U32(32))
		JB(LabelRef(fmt.Sprintf("%st%dpartial%d", p, nv, i)))
		VPXOR(Mem{Base: src}, ymm[i], ymm[i])
		VMOVDQU(ymm[i], Mem{Base: dst})
		advance(32)
	}
	JMP(LabelRef(p + "done"))
	for i := 0; i < nv; i++ {
		Label(fmt.Sprintf("%st%dpartial%d", p, nv, i))
		if i > 0 {
			VMOVDQU(ymm[i], Y0)
		}
		JMP(LabelRef(p + "partial"))
	}
}
