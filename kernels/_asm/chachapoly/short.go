package main

import (
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
//   - chachaPolyShortAVX512: all of a message of one block or less, with up
//     to 64 bytes of additional data: blocks 0 and 1 in ymm registers, the
//     XOR, Poly1305 and the tag;
//   - chachaKeystream4AVX512: blocks 0–3 in zmm registers, for messages of
//     two or three blocks, as raw keystream, which the Go side XORs and keys
//     Poly1305 with.

func shortKernels() {
	keystreamRows()
	shortAEAD()
}

// rowRounds emits ChaCha20's 20 rounds over the rows a, b, c, d, in a loop
// of double rounds labelled loop.
func rowRounds(a, b, c, d VecPhysical, loop string) {
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
}

// keystreamRows emits chachaKeystream4AVX512.
func keystreamRows() {
	const n = 4
	name, regs := "chachaKeystream4AVX512", []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11}
	ctr := GLOBL(name+"Ctr", RODATA|NOPTR)
	for i := 0; i < n; i++ {
		DATA(16*i, U32(i))
		DATA(16*i+4, U32(0))
		DATA(16*i+8, U64(0))
	}

	TEXT(name, NOSPLIT, "func(state *[16]uint32, ks *[256]byte)")
	Pragma("noescape")
	Doc(name+" writes the keystream of the 4 blocks from",
		"state's counter (word 12) on to ks: block j at ks[64j:]. Each register",
		"holds one row of the state, block j in its 128-bit lane j.")
	state := Load(Param("state"), GP64())
	ks := Load(Param("ks"), GP64())
	a, b, c, d := regs[0], regs[1], regs[2], regs[3]
	in := regs[4:8] // the input rows
	for i, r := range in {
		VBROADCASTI32X4(Mem{Base: state, Disp: 16 * i}, r)
	}
	VPADDD(ctr, in[3], in[3])
	for i, r := range []VecPhysical{a, b, c, d} {
		VMOVDQA64(in[i], r)
	}
	rowRounds(a, b, c, d, "rows4_doubleround")
	for i, r := range []VecPhysical{a, b, c, d} {
		VPADDD(in[i], r, r)
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

// shortAEAD emits chachaPolyShortAVX512, all of ChaCha20-Poly1305 for a
// message of at most one block with at most 64 bytes of additional data:
// the two blocks' keystream in ymm rows, the message and additional data
// read and written through byte masks (which never touch memory past the
// buffers), their MAC input laid out in the frame, Poly1305 over it with
// MULX (gprPoly) and the tag. It spares the short path the calls, copies
// and clears between the steps in Go, which cost about as much as the
// Poly1305 they feed.
func shortAEAD() {
	sigma := GLOBL("chachaPolySigma", RODATA|NOPTR)
	for i, w := range []uint32{0x61707865, 0x3320646e, 0x79622d32, 0x6b206574} {
		DATA(4*i, U32(w))
	}
	ctr := GLOBL("chachaPolyShortCtr", RODATA|NOPTR)
	DATA(0, U64(0))
	DATA(8, U64(0))
	DATA(16, U32(1))
	DATA(20, U32(0))
	DATA(24, U64(0))

	TEXT("chachaPolyShortAVX512", NOSPLIT, "func(out, in *byte, n int, aad *byte, aadLen int, key *[8]uint32, nonce *[3]uint32, tag *[16]byte, seal bool)")
	Pragma("noescape")
	Doc("chachaPolyShortAVX512 sets out[:n] = in[:n] XOR the ChaCha20 keystream of",
		"block 1 for key and nonce, and writes to tag the Poly1305 tag (RFC 8439",
		"§2.8) of the n ≤ 64 bytes of ciphertext (out when sealing, in when",
		"opening) and the aadLen ≤ 64 bytes of additional data at aad, under the",
		"key of block 0. out and in are equal or do not overlap; pointers to no",
		"bytes may be nil.")
	// Frame: the MAC input (additional data, ciphertext, both padded to 16
	// bytes, and the lengths: at most 144 bytes, written 64 at a time), then
	// r0, r1 and s1.
	frame := AllocLocal(192)
	r0m, r1m, s1m := frame.Offset(160), frame.Offset(168), frame.Offset(176)

	Comment("The state of blocks 0 and 1, a row per register, a block per lane.")
	key, nonce := Load(Param("key"), GP64()), Load(Param("nonce"), GP64())
	a, b, c, d := Y0, Y1, Y2, Y3
	in := []VecPhysical{Y4, Y5, Y6, Y7}
	VBROADCASTI128(sigma, in[0])
	VBROADCASTI128(Mem{Base: key}, in[1])
	VBROADCASTI128(Mem{Base: key, Disp: 16}, in[2])
	VPXOR(X7, X7, X7)
	for i := 0; i < 3; i++ {
		VPINSRD(U8(i+1), Mem{Base: nonce, Disp: 4 * i}, X7, X7)
	}
	VINSERTI128(U8(1), X7, Y7, Y7)
	VPADDD(ctr, in[3], in[3])
	for i, r := range []VecPhysical{a, b, c, d} {
		VMOVDQA64(in[i], r)
	}
	rowRounds(a, b, c, d, "short_doubleround")
	for i, r := range []VecPhysical{a, b, c, d} {
		VPADDD(in[i], r, r)
	}

	Comment("r (clamped) and s from block 0, in lane 0 of rows a and b.")
	r0, r1, s0, s1 := GP64(), GP64(), GP64(), GP64()
	VMOVQ(X0, r0)
	VPEXTRQ(U8(1), X0, r1)
	VMOVQ(X1, s0)
	VPEXTRQ(U8(1), X1, s1)
	t := GP64()
	MOVQ(U64(0x0ffffffc0fffffff), t)
	ANDQ(t, r0)
	MOVQ(U64(0x0ffffffc0ffffffc), t)
	ANDQ(t, r1)
	MOVQ(r0, r0m)
	MOVQ(r1, r1m)
	MOVQ(r1, t)
	SHRQ(U8(2), t)
	ADDQ(r1, t)
	MOVQ(t, s1m)

	Comment("Block 1's keystream, lane 1 of each row, in Z8.")
	VSHUFI64X2(U8(0x55), Z1, Z0, Z9)  // a1 a1 b1 b1
	VSHUFI64X2(U8(0x55), Z3, Z2, Z10) // c1 c1 d1 d1
	VSHUFI64X2(U8(0x88), Z10, Z9, Z8) // a1 b1 c1 d1

	Comment("The message through byte mask K1, the additional data through K2.")
	n, aadLen := Load(Param("n"), GP64()), Load(Param("aadLen"), GP64())
	MOVQ(I32(-1), t)
	BZHIQ(n, t, t)
	KMOVQ(t, K1)
	MOVQ(I32(-1), t)
	BZHIQ(aadLen, t, t)
	KMOVQ(t, K2)
	Comment("An empty buffer is not read: a masked load from an address that",
		"would fault, such as nil, costs a microcode assist.")
	VPXORQ(Z12, Z12, Z12)
	VPXORQ(Z15, Z15, Z15)
	TESTQ(n, n)
	JZ(LabelRef("short_noin"))
	src := Load(Param("in"), GP64())
	VMOVDQU8_Z(Mem{Base: src}, K1, Z12)
	Label("short_noin")
	VPXORQ(Z8, Z12, Z13)
	dst := Load(Param("out"), GP64())
	VMOVDQU8(Z13, K1, Mem{Base: dst})
	TESTQ(aadLen, aadLen)
	JZ(LabelRef("short_noaad"))
	ad := Load(Param("aad"), GP64())
	VMOVDQU8_Z(Mem{Base: ad}, K2, Z15)
	Label("short_noaad")

	Comment("The MAC input: additional data, ciphertext (the output when",
		"sealing, the input when opening), lengths.")
	VMOVDQU64(Z15, frame.Offset(0))
	p := GP64()
	LEAQ(Mem{Base: aadLen, Disp: 15}, p)
	ANDQ(I8(-16), p)
	ctm := frame.Offset(0)
	ctm.Index, ctm.Scale = p, 1
	seal, err := Param("seal").Resolve()
	if err != nil {
		panic(err)
	}
	CMPB(seal.Addr, U8(0))
	JE(LabelRef("short_open"))
	VMOVDQU8_Z(Z13, K1, Z12)
	Label("short_open")
	VMOVDQU64(Z12, ctm)
	LEAQ(Mem{Base: n, Disp: 15}, t)
	ANDQ(I8(-16), t)
	ADDQ(t, p)
	lm := frame.Offset(0)
	lm.Index, lm.Scale = p, 1
	MOVQ(aadLen, lm)
	MOVQ(n, lm.Offset(8))
	SHRQ(U8(4), p)
	INCQ(p) // blocks

	Comment("Poly1305 over the MAC input, a block at a time.")
	gp := newGPRPoly(r0m, r1m, s1m)
	gp.zero()
	msg := GP64()
	LEAQ(frame.Offset(0), msg)
	Label("short_mac")
	var s stream
	gp.block(&s, Mem{Base: msg}, false)
	gp.toCanon(&s)
	s.emit()
	ADDQ(U8(16), msg)
	DECQ(p)
	JNZ(LabelRef("short_mac"))

	Comment("The tag: h mod 2¹³⁰−5 (h < 2¹³¹, so one conditional subtraction of",
		"2¹³⁰−5, that is adding 5 and dropping 2¹³⁰), plus s, mod 2¹²⁸.")
	h0, h1, h2 := gp.h[0], gp.h[1], gp.h[2]
	t0, t1 := gp.t[0], gp.t[1]
	MOVQ(h0, t0)
	ADDQ(U8(5), t0)
	MOVQ(h1, t1)
	ADCQ(U8(0), t1)
	ADCQ(U8(0), h2)
	SHRQ(U8(2), h2)
	CMOVQNE(t0, h0)
	CMOVQNE(t1, h1)
	ADDQ(s0, h0)
	ADCQ(s1, h1)
	tag := Load(Param("tag"), GP64())
	MOVQ(h0, Mem{Base: tag})
	MOVQ(h1, Mem{Base: tag, Disp: 8})
	Comment("Clear r from the frame.")
	VPXOR(X0, X0, X0)
	VMOVDQU(Y0, frame.Offset(160))
	VZEROUPPER()
	RET()
}
