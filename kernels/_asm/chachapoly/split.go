package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// On a core whose vector integer instructions take 2 cycles where their
// general-purpose counterparts take 1 (Zen 5), the 20 rounds of a block in
// vector rows take twice as long as in general-purpose registers, and they
// are most of a short message's time. chachaPolyShort2SplitAVX512 does what
// chachaPolyShort2AVX512 does, but splits the rounds between the register
// files: the first 5 double rounds of block 1 run in xmm rows beside all 10
// of block 0's in general-purpose registers (two scalar double rounds take
// about as long as one in vectors), and block 1's last 5 in general-purpose
// registers once block 0 is done. The chain to the keystream is then 5
// vector double rounds and 5 scalar ones instead of 10 vector ones.
//
// It loses where the rows kernel's Poly1305 is short enough for the core to
// overlap it with the next message's rounds (two MAC blocks), and wins from
// three; kernels/chacha20poly1305_amd64.go chooses between them, and
// BenchmarkChaChaPolyOneBlockKernels and
// BenchmarkChaCha20Poly1305Fastest/Seal/avx512/16 and …/64 measure the
// choice.
func shortSplit() {
	name := "chachaPolyShort2SplitAVX512"
	TEXT(name, NOSPLIT, "func(out, in *byte, n int, aad *byte, aadLen int, key *[8]uint32, nonce *[12]byte, tag *[16]byte, seal bool)")
	Pragma("noescape")
	Doc(name+" computes what chachaPolyShort2AVX512 computes, for n ≤ 64,",
		"with block 0 and half of block 1's rounds in general-purpose registers.")
	// Frame: the MAC input (as chachaPolyShort2AVX512's), r0, r1, s1, s0 and
	// s1 of s, the round counter, block 1's state between the register files
	// (64 bytes, whose words 3 and 11 are also the slots of the scalar
	// rounds of block 1), and block 0's slots.
	const macSize = 64 + 64 + 16
	frame := AllocLocal(macSize + 48 + 64 + 8)
	r0m, r1m, s1m := frame.Offset(macSize), frame.Offset(macSize+8), frame.Offset(macSize+16)
	sm0, sm1 := frame.Offset(macSize+24), frame.Offset(macSize+32)
	fRounds := frame.Offset(macSize + 40)
	rows := frame.Offset(macSize + 48)
	slots0 := frame.Offset(macSize + 48 + 64)

	Comment("Block 1 in xmm rows X0–X3, its input in X4–X7.")
	key, nonce := Load(Param("key"), R15), Load(Param("nonce"), R14)
	VMOVDQU(rowsSigma, X4)
	VMOVDQU(Mem{Base: key}, X5)
	VMOVDQU(Mem{Base: key, Disp: 16}, X6)
	nonceRow(nonce, X7)
	VPADDD(rowsCtr.Offset(16), X7, X7)
	xs := []VecPhysical{X0, X1, X2, X3, X4, X5, X6, X7}
	for i := 0; i < 4; i++ {
		VMOVDQA(xs[4+i], xs[i])
	}

	Comment("Block 0 in general-purpose registers (scalar.go), its word 11 in",
		"the frame while R15 holds word 3.")
	slot0 := func(w int) Mem {
		if w == 3 {
			return slots0
		}
		return slots0.Offset(4)
	}
	XORL(scalarReg[12], scalarReg[12]) // block 0's counter
	loadScalarInput(slot0(11))
	MOVL(U32(5), fRounds)

	Comment("5 double rounds of block 1 in xmm rows, each with two of block 0's.")
	Label("split_mixed")
	words := &r15Words{held: 3, slot: slot0}
	var v, g stream
	rowDoubleRound(&v, [][4]VecPhysical{{X0, X1, X2, X3}})
	scalarDoubleRoundStream(&g, words)
	scalarDoubleRoundStream(&g, words)
	merge(v, g)
	DECL(fRounds)
	JNZ(LabelRef("split_mixed"))

	Comment("r (clamped) and s from block 0's first 8 words plus its input.")
	var kw stream
	scalarKeyWords(&kw, slot0(3), func() { Load(Param("key"), R15) })
	kw.emit()
	MOVQ(U32(0), slots0)
	MOVQ(RSI, sm0)
	MOVQ(R8, sm1)
	clampR(RAX, R14, RCX)
	MOVQ(RAX, r0m)
	MOVQ(R14, r1m)
	MOVQ(RCX, s1m)

	Comment("Block 1's other 5 double rounds in general-purpose registers, its",
		"words 3 and 11 taking turns in R15 from their places in the frame.")
	for i := 0; i < 4; i++ {
		VMOVDQU(xs[i], rows.Offset(16*i))
	}
	slot1 := func(w int) Mem { return rows.Offset(4 * w) }
	for w := 0; w < 16; w++ {
		if r, ok := scalarReg[w]; ok {
			MOVL(slot1(w), r)
		}
	}
	MOVL(slot1(3), R15L)
	MOVL(U32(5), fRounds)
	Label("split_scalar")
	words = &r15Words{held: 3, slot: slot1}
	g = nil
	scalarDoubleRoundStream(&g, words)
	g.emit()
	DECL(fRounds)
	JNZ(LabelRef("split_scalar"))

	Comment("Block 1's keystream: its words paired into 64-bit registers, to",
		"X8–X11, plus its input, and together in Z8.")
	SHLQ(U8(32), R15)
	ORQ(R15, R14) // words 2 and 3
	MOVL(slot1(11), R15L)
	for _, p := range [][2]Register{{RAX, RBX}, {RSI, RDI}, {R8, R9}, {RCX, RDX}, {RBP, R15}, {R10, R11}, {R12, R13}} {
		SHLQ(U8(32), p[1])
		ORQ(p[1], p[0])
	}
	for i, p := range [][2]Register{{RAX, R14}, {RSI, R8}, {RCX, RBP}, {R10, R12}} {
		x := []VecPhysical{X8, X9, X10, X11}[i]
		VMOVQ(p[0], x)
		VPINSRQ(U8(1), p[1], x, x)
		VPADDD([]VecPhysical{X4, X5, X6, X7}[i], x, x)
	}
	VINSERTI128(U8(1), X9, Y8, Y8)
	VINSERTI128(U8(1), X11, Y10, Y10)
	VINSERTI64X4(U8(1), Y10, Z8, Z8)

	shortMAC(name, 2, frame, macSize, []VecPhysical{nil, Z8}, r0m, r1m, s1m, sm0, sm1, GP64())
	Comment("Clear r, s and block 1's state from the frame.")
	VPXORQ(Z0, Z0, Z0)
	VMOVDQU64(Z0, frame.Offset(macSize))
	VMOVDQU64(Z0, rows)
	VZEROUPPER()
	RET()
}
