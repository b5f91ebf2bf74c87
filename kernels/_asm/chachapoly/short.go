package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
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
// sibling cost more than the latency they save;
// BenchmarkChaCha20Poly1305Fastest at 16, 64 and 512 bytes measures the
// short kernels).
//
// Between the half rounds VPSHUFD turns the diagonals into columns and back.
// It rotates rows a, c and d, not b as usual: b is the last row a half round
// writes, and the first the next one reads (a += b), so shuffling it would
// lengthen the chain of dependent instructions by one cycle per half round;
// a, c and d are done earlier and their shuffles overlap b's last steps.
//
// chachaPolyShort{2,4,8,12}AVX512 do all of a message of up to 1, 3, 7 or
// 11 blocks with up to 64 bytes of additional data: the keystream, the XOR,
// Poly1305 (with MULX, a block at a time) and the tag.

func shortKernels() {
	rowsData()
	shortAEAD(2)
	shortSplit()
	shortAEAD(4)
	shortAEAD(8)
	shortAEAD(12)
}

// rowRounds emits ChaCha20's 20 rounds over sets of rows a, b, c, d, in a
// loop of double rounds labelled loop, the sets' instructions interleaved
// step by step.
func rowRounds(sets [][4]VecPhysical, loop string) {
	rounds := GP64()
	MOVL(U32(10), rounds.As32())
	Label(loop)
	var s stream
	rowDoubleRound(&s, sets)
	s.emit()
	DECL(rounds.As32())
	JNZ(LabelRef(loop))
}

// rowDoubleRound appends to s a double round over sets of rows a, b, c, d,
// the sets' instructions interleaved step by step.
func rowDoubleRound(s *stream, sets [][4]VecPhysical) {
	half := func() {
		// a += b; d ^= a; d <<<= 16; c += d; b ^= c; b <<<= 12; and again
		// with 8 and 7.
		for _, st := range []struct{ x, y, z, rot int }{{0, 1, 3, 16}, {2, 3, 1, 12}, {0, 1, 3, 8}, {2, 3, 1, 7}} {
			for _, r := range sets {
				s.op(VPADDD, r[st.y], r[st.x], r[st.x])
			}
			for _, r := range sets {
				s.op(VPXORD, r[st.x], r[st.z], r[st.z])
			}
			for _, r := range sets {
				s.op(VPROLD, U8(st.rot), r[st.z], r[st.z])
			}
		}
	}
	shuffle := func(imm ...uint8) { // of rows a, d and c
		for i, row := range []int{0, 3, 2} {
			for _, r := range sets {
				s.op(VPSHUFD, U8(imm[i]), r[row], r[row])
			}
		}
	}
	half()
	s.do(func() {
		Comment("Diagonals to columns: lane word j of each row in the quarter round",
			"of b's word j.")
	})
	shuffle(0x93, 0x4e, 0x39)
	half()
	shuffle(0x39, 0x4e, 0x93)
}

// nonceRow loads row d of a block's input but for its counter: zero, then
// the nonce's three words.
func nonceRow(nonce, x Register) {
	VPXOR(x, x, x)
	for i := 0; i < 3; i++ {
		VPINSRD(U8(i+1), Mem{Base: nonce, Disp: 4 * i}, x, x)
	}
}

// rowsSigma, rowsCtr and rowsClamp are the constant row, the counter
// offsets and Poly1305's clamp masks of the short kernels: lane j of
// rowsCtr+16·j is j in its first word.
var rowsSigma, rowsCtr, rowsClamp Mem

func rowsData() {
	rowsSigma = GLOBL("chachaPolySigma", RODATA|NOPTR)
	for i, w := range []uint32{0x61707865, 0x3320646e, 0x79622d32, 0x6b206574} {
		DATA(4*i, U32(w))
	}
	rowsClamp = GLOBL("chachaPolyClamp", RODATA|NOPTR)
	DATA(0, U64(clampLo))
	DATA(8, U64(clampHi))
	rowsCtr = GLOBL("chachaPolyRowsCtr", RODATA|NOPTR)
	for j := 0; j < 12; j++ {
		DATA(16*j, U32(uint32(j)))
		DATA(16*j+4, U32(0))
		DATA(16*j+8, U64(0))
	}
}

// shortAEAD emits chachaPolyShort{2,4,8,12}AVX512, all of ChaCha20-Poly1305
// for a message of at most blocks−1 blocks with at most 64 bytes of
// additional data: the blocks' keystream in rows (ymm registers for 2
// blocks, one set of zmm for 4, two or three sets for 8 or 12, their
// instructions interleaved), the message and additional
// data read and written through byte masks (which never touch memory past
// the buffers), their MAC input laid out in the frame, Poly1305 over it
// with MULX (gprPoly) and the tag. It spares the short path the calls,
// copies and clears between those steps in Go, which cost about as much as
// the Poly1305 they feed.
func shortAEAD(blocks int) {
	name := fmt.Sprintf("chachaPolyShort%dAVX512", blocks)
	maxN := 64 * (blocks - 1)
	// The 12-block kernel's frame is too large for NOSPLIT.
	var flags attr.Attribute = NOSPLIT
	if blocks > 8 {
		flags = 0
	}
	TEXT(name, flags, "func(out, in *byte, n int, aad *byte, aadLen int, key *[8]uint32, nonce *[12]byte, tag *[16]byte, seal bool)")
	Pragma("noescape")
	Doc(name+" sets out[:n] = in[:n] XOR the ChaCha20 keystream from block",
		"1 on for key and nonce, and writes to tag the Poly1305 tag (RFC 8439",
		fmt.Sprintf("§2.8) of the n ≤ %d bytes of ciphertext (out when sealing, in when", maxN),
		"opening) and the aadLen ≤ 64 bytes of additional data at aad, under the",
		"key of block 0. out and in are equal or do not overlap; pointers to no",
		"bytes may be nil.")
	// Frame: the MAC input (additional data and ciphertext, both padded to
	// 16 bytes and written 64 bytes at a time, and the lengths), then r0,
	// r1, s1, a spare word, and s.
	macSize := 64 + maxN + 16
	frame := AllocLocal(macSize + 48)
	r0m, r1m, s1m := frame.Offset(macSize), frame.Offset(macSize+8), frame.Offset(macSize+16)
	sm := frame.Offset(macSize + 32)

	Comment(fmt.Sprintf("The state of blocks 0–%d, a row per register, a block per lane.", blocks-1))
	key, nonce := Load(Param("key"), GP64()), Load(Param("nonce"), GP64())
	z := func(i int) VecPhysical { return zmm(i) }
	if blocks == 2 {
		z = ymmEVEX
	}
	sets := [][4]VecPhysical{{z(0), z(1), z(2), z(3)}}
	in := [4]VecPhysical{z(4), z(5), z(6), z(7)} // input rows
	dIn := []VecPhysical{in[3], z(15), z(14)}    // each set's input row d
	if blocks >= 8 {
		sets = append(sets, [4]VecPhysical{z(8), z(9), z(10), z(11)})
	}
	if blocks >= 12 {
		sets = append(sets, [4]VecPhysical{z(16), z(17), z(18), z(19)})
	}
	if blocks == 2 {
		VBROADCASTI128(rowsSigma, in[0])
		VBROADCASTI128(Mem{Base: key}, in[1])
		VBROADCASTI128(Mem{Base: key, Disp: 16}, in[2])
	} else {
		VBROADCASTI32X4(rowsSigma, in[0])
		VBROADCASTI32X4(Mem{Base: key}, in[1])
		VBROADCASTI32X4(Mem{Base: key, Disp: 16}, in[2])
	}
	x := in[3].AsX()
	nonceRow(nonce, x)
	if blocks == 2 {
		VINSERTI128(U8(1), x, in[3], in[3])
	} else {
		VSHUFI32X4(U8(0), in[3], in[3], in[3])
	}
	for s := len(sets) - 1; s >= 0; s-- { // set 0's last: it overwrites in[3]
		VPADDD(rowsCtr.Offset(64*s), in[3], dIn[s])
	}
	for s, set := range sets {
		for i, r := range set {
			if i == 3 {
				VMOVDQA64(dIn[s], r)
				continue
			}
			VMOVDQA64(in[i], r)
		}
	}
	rowRounds(sets, fmt.Sprintf("short%d_doubleround", blocks))
	for s, set := range sets {
		for i, r := range set {
			if i == 3 {
				VPADDD(dIn[s], r, r)
				continue
			}
			VPADDD(in[i], r, r)
		}
	}

	// r (clamped), s1 and s go to the frame from vector registers: every
	// integer instruction that waits on the rounds takes a place in the
	// integer scheduler, and a short message's Poly1305 needs them all for
	// the core to overlap it with the next message's rounds
	// (BenchmarkChaCha20Poly1305Fastest/Seal/avx512/16).
	Comment("r (clamped), s1 = r1 + r1/4 and s from block 0, in lane 0 of rows a",
		"and b, to the frame.")
	VPANDQ(rowsClamp, X0, X12)
	VMOVDQU64(X12, r0m) // and r1m
	VPSRLQ(U8(2), X12, X13)
	VPADDQ(X12, X13, X13)
	VPEXTRQ(U8(1), X13, s1m)
	VMOVDQU64(X1, sm)

	// ks[j] is the register with block j's keystream.
	var ks []VecPhysical
	if blocks == 2 {
		Comment("Block 1's keystream, lane 1 of each row, in Z8.")
		VSHUFI64X2(U8(0x55), Z1, Z0, Z9)  // a1 a1 b1 b1
		VSHUFI64X2(U8(0x55), Z3, Z2, Z10) // c1 c1 d1 d1
		VSHUFI64X2(U8(0x88), Z10, Z9, Z8) // a1 b1 c1 d1
		ks = []VecPhysical{nil, Z8}
	} else {
		Comment("Transpose the 128-bit lanes: rows of 4 blocks to blocks of 4 rows.")
		tmp := []VecPhysical{Z24, Z25, Z26, Z27}
		for _, set := range sets {
			a, b, c, d := set[0], set[1], set[2], set[3]
			VSHUFI64X2(U8(0x44), b, a, tmp[0]) // a0 a1 b0 b1
			VSHUFI64X2(U8(0xee), b, a, tmp[1]) // a2 a3 b2 b3
			VSHUFI64X2(U8(0x44), d, c, tmp[2]) // c0 c1 d0 d1
			VSHUFI64X2(U8(0xee), d, c, tmp[3]) // c2 c3 d2 d3
			VSHUFI64X2(U8(0x88), tmp[2], tmp[0], a)
			VSHUFI64X2(U8(0xdd), tmp[2], tmp[0], b)
			VSHUFI64X2(U8(0x88), tmp[3], tmp[1], c)
			VSHUFI64X2(U8(0xdd), tmp[3], tmp[1], d)
			ks = append(ks, a, b, c, d)
		}
	}

	shortMAC(name, blocks, frame, macSize, ks, r0m, r1m, s1m, sm, sm.Offset(8), GP64())
	Comment("Clear r and s from the frame.")
	VPXOR(X0, X0, X0)
	VMOVDQU(Y0, frame.Offset(macSize))
	VMOVDQU(X0, sm)
	VZEROUPPER()
	RET()
}

// shortMAC emits the part of a short kernel after the keystream: the
// message and additional data through byte masks, their MAC input laid
// out in the frame's first macSize bytes, Poly1305 over it with r and s1
// at r0m, r1m and s1m, and the tag, plus s0 and s1. ks[j] holds block j's
// keystream, for j from 1 to blocks−1. t is a scratch register.
func shortMAC(name string, blocks int, frame Mem, macSize int, ks []VecPhysical, r0m, r1m, s1m Mem, s0, s1 Op, t GPVirtual) {
	Comment("The additional data through byte mask K2, into the frame. An empty",
		"buffer is not read: a masked load from an address that would fault,",
		"such as nil, costs a microcode assist.")
	n, aadLen := Load(Param("n"), GP64()), Load(Param("aadLen"), GP64())
	VPXORQ(Z22, Z22, Z22)
	TESTQ(aadLen, aadLen)
	JZ(LabelRef(name + "_noaad"))
	MOVQ(I32(-1), t)
	BZHIQ(aadLen, t, t)
	KMOVQ(t, K2)
	ad := Load(Param("aad"), GP64())
	VMOVDQU8_Z(Mem{Base: ad}, K2, Z22)
	Label(name + "_noaad")
	VMOVDQU64(Z22, frame.Offset(0))

	Comment("The message, 64 bytes at a time through byte mask K1: the output,",
		"and the ciphertext (the output when sealing, the input when opening)",
		"after the additional data, padded, in the frame.")
	p := GP64()
	LEAQ(Mem{Base: aadLen, Disp: 15}, p)
	ANDQ(I8(-16), p)
	seal, err := Param("seal").Resolve()
	if err != nil {
		panic(err)
	}
	src, dst := Load(Param("in"), GP64()), Load(Param("out"), GP64())
	left := GP64() // bytes left
	MOVQ(n, left)
	sixtyFour := GP64()
	MOVL(U32(64), sixtyFour.As32())
	done := name + "_data_done"
	for j := 1; j < blocks; j++ {
		off := 64 * (j - 1)
		TESTQ(left, left)
		JZ(LabelRef(done))
		Comment(fmt.Sprintf("Block %d.", j))
		MOVQ(left, t)
		CMPQ(left, sixtyFour)
		CMOVQCC(sixtyFour, t) // min(left, 64)
		SUBQ(t, left)
		u := GP64()
		MOVQ(I32(-1), u)
		BZHIQ(t, u, u)
		KMOVQ(u, K1)
		VMOVDQU8_Z(Mem{Base: src, Disp: off}, K1, Z20)
		VPXORQ(ks[j], Z20, Z21)
		VMOVDQU8(Z21, K1, Mem{Base: dst, Disp: off})
		ctm := frame.Offset(off)
		ctm.Index, ctm.Scale = p, 1
		CMPB(seal.Addr, U8(0))
		JE(LabelRef(fmt.Sprintf("%s_open%d", name, j)))
		VMOVDQU8_Z(Z21, K1, Z20)
		Label(fmt.Sprintf("%s_open%d", name, j))
		VMOVDQU64(Z20, ctm)
	}
	Label(done)

	Comment("The lengths after the ciphertext, padded.")
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
	Label(name + "_mac")
	var s stream
	gp.block(&s, Mem{Base: msg}, false)
	gp.toCanon(&s)
	s.emit()
	ADDQ(U8(16), msg)
	DECQ(p)
	JNZ(LabelRef(name + "_mac"))

	polyTag(gp.h[0], gp.h[1], gp.h[2], gp.t[0], gp.t[1], s0, s1)
}
