package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// A short message needs few blocks (the Poly1305 key block and one to three
// of data for up to 192 bytes), and their cost is the latency of 20 rounds,
// not throughput. chachaKeystream4AVX512VL computes 4 consecutive blocks, one
// per 32-bit lane of xmm registers ("vertical" layout: register i holds word
// i of the 4 blocks), rotating with VPROLD; the four quarter rounds of each
// half round are interleaved so that their dependency chains overlap.
// (Rotating by 16 and 8 with VPSHUFB instead, from registers or memory, made
// the kernel 5% slower on this Zen 4.) It writes the raw keystream, which the Go side
// XORs and keys Poly1305 with.

var xmm = []VecPhysical{X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10, X11, X12, X13, X14, X15}

// halfRound emits the quarter rounds qrs, step by step across them.
func halfRound(qrs [][4]int) {
	step := func(a, b, d, r int) {
		for _, q := range qrs { // a += b
			VPADDD(xmm[q[b]], xmm[q[a]], xmm[q[a]])
		}
		for _, q := range qrs { // d ^= a
			VPXORD(xmm[q[a]], xmm[q[d]], xmm[q[d]])
		}
		for _, q := range qrs { // d <<<= r
			VPROLD(U8(r), xmm[q[d]], xmm[q[d]])
		}
	}
	step(0, 1, 3, 16)
	step(2, 3, 1, 12)
	step(0, 1, 3, 8)
	step(2, 3, 1, 7)
}

func keystream4() {
	iota4 := GLOBL("chachaPolyIota4", RODATA|NOPTR)
	for i := 0; i < 4; i++ {
		DATA(4*i, U32(i))
	}

	TEXT("chachaKeystream4AVX512VL", NOSPLIT, "func(state *[16]uint32, ks *[256]byte)")
	Pragma("noescape")
	Doc("chachaKeystream4AVX512VL writes the keystream of the 4 blocks from",
		"state's counter (word 12) on to ks: block j at ks[64j:].")
	state := Load(Param("state"), GP64())
	ks := Load(Param("ks"), GP64())
	ctr, t := X16, X17
	for i := 0; i < 16; i++ {
		VPBROADCASTD(Mem{Base: state, Disp: 4 * i}, xmm[i])
	}
	VPADDD(iota4, xmm[12], xmm[12])
	VMOVDQA32(xmm[12], ctr)
	rounds := GP64()
	MOVL(U32(10), rounds.As32())
	Label("ks4_doubleround")
	halfRound(columns[:])
	halfRound(diagonals[:])
	DECL(rounds.As32())
	JNZ(LabelRef("ks4_doubleround"))

	Comment("Add the input state.")
	for i := 0; i < 16; i++ {
		if i == 12 {
			VPADDD(ctr, xmm[12], xmm[12])
			continue
		}
		VPBROADCASTD(Mem{Base: state, Disp: 4 * i}, t)
		VPADDD(t, xmm[i], xmm[i])
	}

	Comment("Transpose each quad of words 4q…4q+3 to blocks and store them.")
	s := []VecPhysical{X16, X17, X18, X19}
	for q := 0; q < 4; q++ {
		x := xmm[4*q : 4*q+4]
		VPUNPCKLDQ(x[1], x[0], s[0]) // x0[0] x1[0] x0[1] x1[1]
		VPUNPCKHDQ(x[1], x[0], s[1]) // x0[2] x1[2] x0[3] x1[3]
		VPUNPCKLDQ(x[3], x[2], s[2])
		VPUNPCKHDQ(x[3], x[2], s[3])
		VPUNPCKLQDQ(s[2], s[0], x[0]) // words 4q… of block 0
		VPUNPCKHQDQ(s[2], s[0], x[1]) // block 1
		VPUNPCKLQDQ(s[3], s[1], x[2]) // block 2
		VPUNPCKHQDQ(s[3], s[1], x[3]) // block 3
		for j := 0; j < 4; j++ {
			VMOVDQU(x[j], Mem{Base: ks, Disp: 64*j + 16*q})
		}
	}
	RET()
}
