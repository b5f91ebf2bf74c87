package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// A short message needs few blocks (the Poly1305 key block and one to three
// of data for up to 192 bytes), and their cost is the latency of 20 rounds,
// not throughput. The short kernels keep the state in the "row" layout: one
// vector register per row of the 4×4 state, one block per 128-bit lane, so
// that the four quarter rounds of a half round are the four words of each
// lane and a double round is 30 instructions (the 16-register "vertical"
// layout takes 96 for 4 blocks, which on a core shared with a busy SMT
// sibling cost more than the latency it saves: 118 ns against 92 for 4
// blocks here, and 80 ns for 2 blocks in ymm registers).
//
// Between the half rounds VPSHUFD turns the diagonals into columns and back.
// It rotates rows a, c and d, not b as usual: b is the last row a half round
// writes, and the first the next one reads (a += b), so shuffling it would
// lengthen the chain of dependent instructions by one cycle per half round;
// a, c and d are done earlier and their shuffles overlap b's last steps.
//
//   - chachaKeystream2AVX512VL: blocks 0 and 1 in ymm registers, for
//     messages of one block;
//   - chachaKeystream4AVX512: blocks 0–3 in zmm registers, for messages of
//     two or three blocks.
//
// They write the raw keystream, which the Go side XORs and keys Poly1305
// with.

func shortKernels() {
	keystreamRows(2)
	keystreamRows(4)
}

// keystreamRows emits the kernel for n = 2 (ymm) or 4 (zmm) blocks.
func keystreamRows(n int) {
	name, regs := "chachaKeystream2AVX512VL", []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11}
	if n == 4 {
		name, regs = "chachaKeystream4AVX512", []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11}
	}
	ctr := GLOBL(name+"Ctr", RODATA|NOPTR)
	for i := 0; i < n; i++ {
		DATA(16*i, U32(i))
		DATA(16*i+4, U32(0))
		DATA(16*i+8, U64(0))
	}

	TEXT(name, NOSPLIT, fmt.Sprintf("func(state *[16]uint32, ks *[%d]byte)", 64*n))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s writes the keystream of the %d blocks from", name, n),
		"state's counter (word 12) on to ks: block j at ks[64j:]. Each register",
		"holds one row of the state, block j in its 128-bit lane j.")
	state := Load(Param("state"), GP64())
	ks := Load(Param("ks"), GP64())
	a, b, c, d := regs[0], regs[1], regs[2], regs[3]
	in := regs[4:8] // the input rows
	for i, r := range in {
		if n == 4 {
			VBROADCASTI32X4(Mem{Base: state, Disp: 16 * i}, r)
		} else {
			VBROADCASTI128(Mem{Base: state, Disp: 16 * i}, r)
		}
	}
	VPADDD(ctr, in[3], in[3])
	for i, r := range []VecPhysical{a, b, c, d} {
		VMOVDQA64(in[i], r)
	}
	half := func() {
		// a += b; d ^= a; d <<<= 16; c += d; b ^= c; b <<<= 12; and again
		// with 8 and 7.
		for _, s := range []struct {
			x, y, z VecPhysical
			rot     int
		}{{a, b, d, 16}, {c, d, b, 12}, {a, b, d, 8}, {c, d, b, 7}} {
			VPADDD(s.y, s.x, s.x)
			VPXORD(s.x, s.z, s.z)
			VPROLD(U8(s.rot), s.z, s.z)
		}
	}
	rounds := GP64()
	MOVL(U32(10), rounds.As32())
	loop := fmt.Sprintf("rows%d_doubleround", n)
	Label(loop)
	half()
	Comment("Diagonals to columns: lane word j of each row in the quarter round",
		"of b's word j.")
	VPSHUFD(U8(0x93), a, a)
	VPSHUFD(U8(0x4e), d, d)
	VPSHUFD(U8(0x39), c, c)
	half()
	VPSHUFD(U8(0x39), a, a)
	VPSHUFD(U8(0x4e), d, d)
	VPSHUFD(U8(0x93), c, c)
	DECL(rounds.As32())
	JNZ(LabelRef(loop))
	for i, r := range []VecPhysical{a, b, c, d} {
		VPADDD(in[i], r, r)
	}

	if n == 2 {
		for i, r := range []VecPhysical{a, b, c, d} {
			VMOVDQU(r.AsX(), Mem{Base: ks, Disp: 16 * i})
			VEXTRACTI128(U8(1), r, Mem{Base: ks, Disp: 64 + 16*i})
		}
		VZEROUPPER()
		RET()
		return
	}
	Comment("Transpose the 128-bit lanes: rows of 4 blocks to blocks of 4 rows.")
	t := regs[8:12]
	VSHUFI64X2(U8(0x44), b, a, t[0]) // a0 a1 b0 b1
	VSHUFI64X2(U8(0xee), b, a, t[1]) // a2 a3 b2 b3
	VSHUFI64X2(U8(0x44), d, c, t[2]) // c0 c1 d0 d1
	VSHUFI64X2(U8(0xee), d, c, t[3]) // c2 c3 d2 d3
	VSHUFI64X2(U8(0x88), t[2], t[0], a)
	VSHUFI64X2(U8(0xdd), t[2], t[0], b)
	VSHUFI64X2(U8(0x88), t[3], t[1], c)
	VSHUFI64X2(U8(0xdd), t[3], t[1], d)
	for i, r := range []VecPhysical{a, b, c, d} {
		VMOVDQU64(r, Mem{Base: ks, Disp: 64 * i})
	}
	VZEROUPPER()
	RET()
}
