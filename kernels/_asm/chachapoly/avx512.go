package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// zmm returns Z0…Z31 by number.
func zmm(i int) VecPhysical {
	return []VecPhysical{
		Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
		Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31,
	}[i]
}

// The AVX-512 kernel's registers: Z0–Z15 hold the 16 state words of 16
// blocks during the rounds and block j's keystream after the transpose;
// Z16–Z19 are scratch for the transpose; Z30 holds 16 in every lane and Z31
// the counter word of the current group of blocks.
var (
	zTmp     = [4]VecPhysical{Z16, Z17, Z18, Z19}
	zSixteen = Z30
	zCounter = Z31
)

// iota16 holds 0, 1, …, 15: lane j of the first group's counter word is
// counter+j.
var iota16 Mem

// rowsCounterIdx holds j in word 4j, for j < 4·rowsMaxSets: VPERMD with its
// 64 bytes at 64s moves counter lane 4s+j to word 0 of 128-bit lane j of set
// s, for streamRows.
var rowsCounterIdx Mem

func iotaData() {
	iota16 = GLOBL("chachaIota16", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(i))
	}
	rowsCounterIdx = GLOBL("chachaRowsCounterIdx", RODATA|NOPTR)
	for i := 0; i < 16*rowsMaxSets; i++ {
		DATA(4*i, U32(i/4))
	}
}

func chachaAVX512() {
	iotaData()
	TEXT("chachaXORAVX512", NOSPLIT, "func(dst, src *byte, n int, state *[16]uint32, ks *[64]byte)")
	Pragma("noescape")
	Doc("chachaXORAVX512 XORs the floor(n/64) full ChaCha20 blocks of src into dst",
		"and, if n%64 != 0, writes the keystream of the next block to ks. The first",
		"block's input state is state (its word 12 the block counter); n > 0. It",
		"computes 16 blocks per pass, one per 32-bit lane of the zmm registers,",
		"and the last 12 or fewer a row of the state per zmm register, 4 blocks",
		"per set of 4 registers (streamRows).")
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	state := Load(Param("state"), GP64())
	ks := Load(Param("ks"), GP64())
	rounds := GP64()
	r := io{dst: dst, src: src, n: n, ks: ks}

	Comment("Counter words of the first 16 blocks: counter+0 … counter+15.")
	VPBROADCASTD(Mem{Base: state, Disp: 4 * 12}, zCounter)
	VPADDD(iota16, zCounter, zCounter)
	sixteen := GP32()
	MOVL(U32(16), sixteen)
	VPBROADCASTD(sixteen, zSixteen)

	Label("avx512_group")
	CMPQ(n, U32(64*4*rowsMaxSets))
	JBE(LabelRef("avx512_rows"))
	loadState16(state)
	MOVQ(U32(10), rounds)
	Label("avx512_doubleround")
	doubleRoundEVEX(zmm)
	DECQ(rounds)
	JNZ(LabelRef("avx512_doubleround"))
	addState16(state)
	transpose16()

	CMPQ(n, U32(1024))
	JB(LabelRef("avx512_tail"))
	xorStore16(src, dst)
	ADDQ(U32(1024), src)
	ADDQ(U32(1024), dst)
	VPADDD(zSixteen, zCounter, zCounter)
	SUBQ(U32(1024), n)
	JNZ(LabelRef("avx512_group"))
	JMP(LabelRef("avx512_done"))

	Label("avx512_tail")
	Comment("13 to 15 blocks left: 768 < n < 1024. XOR the full blocks, then keep",
		"the keystream of a final partial block in ks.")
	for j := 0; j < 16; j++ {
		CMPQ(n, U32(64*(j+1)))
		JB(LabelRef(fmt.Sprintf("avx512_partial%d", j)))
		VPXORD(Mem{Base: src, Disp: 64 * j}, zmm(j), zmm(j))
		VMOVDQU32(zmm(j), Mem{Base: dst, Disp: 64 * j})
	}
	JMP(LabelRef("avx512_done"))
	for j := 0; j < 16; j++ {
		Label(fmt.Sprintf("avx512_partial%d", j))
		CMPQ(n, U32(64*j))
		JE(LabelRef("avx512_done"))
		VMOVDQU32(zmm(j), Mem{Base: ks})
		JMP(LabelRef("avx512_done"))
	}

	Label("avx512_rows")
	for sets := 1; sets < rowsMaxSets; sets++ {
		CMPQ(n, U32(64*4*sets))
		JA(LabelRef(fmt.Sprintf("avx512_rows%d", sets+1)))
		streamRows(state, r, sets)
		Label(fmt.Sprintf("avx512_rows%d", sets+1))
	}
	streamRows(state, r, rowsMaxSets)

	Label("avx512_done")
	VZEROUPPER()
	RET()
}

// rowsMaxSets is the most sets of 4 blocks streamRows computes. With 3 sets
// a double round is 90 instructions for 12 blocks, about the 96 of the
// 16-block pass, which then wins on its 4 more blocks
// (BenchmarkStream/chacha20/avx512/1024).
const rowsMaxSets = 3

// streamRows emits the last 1 to 4·sets blocks of chachaXORAVX512, n <=
// 256·sets, in the row layout of the short AEAD kernels (short.go): a row of
// the state per zmm register, a block per 128-bit lane, 4 registers per set
// of 4 blocks, the sets' instructions interleaved. A double round is 30
// instructions per set, against 96 for the 16-block pass, and with one or two
// sets the 20 rounds are bound by their latency
// (BenchmarkStream/chacha20/avx512/64 and /256). The counters are lanes
// 0…4·sets−1 of zCounter; it ends with a jump to avx512_done.
func streamRows(state Register, r io, sets int) {
	name := fmt.Sprintf("avx512_rows%dsets", sets)
	all := [][4]VecPhysical{{Z0, Z1, Z2, Z3}, {Z8, Z9, Z10, Z11}, {Z16, Z17, Z18, Z19}}[:sets]
	in := [3]VecPhysical{Z4, Z5, Z6}          // rows a, b and c of the input
	dIn := []VecPhysical{Z7, Z15, Z14}[:sets] // each set's input row d
	Comment("Rows a, b, c and d of the input state in every lane, then block j's",
		"counter in word 0 of its lane of row d.")
	for i := range in {
		VBROADCASTI32X4(Mem{Base: state, Disp: 16 * i}, in[i])
	}
	k := GP32()
	MOVL(U32(0x1111), k)
	KMOVW(k, K1)
	for s, d := range dIn {
		VBROADCASTI32X4(Mem{Base: state, Disp: 48}, d)
		VMOVDQU32(rowsCounterIdx.Offset(64*s), Z12)
		VPERMD(zCounter, Z12, Z12)
		VMOVDQA32(Z12, K1, d)
	}
	for s, set := range all {
		for i := 0; i < 3; i++ {
			VMOVDQA64(in[i], set[i])
		}
		VMOVDQA64(dIn[s], set[3])
	}
	rowRounds(all, name+"_doubleround")
	var blocks []VecPhysical
	tmp := []VecPhysical{Z24, Z25, Z26, Z27}
	for s, set := range all {
		for i := 0; i < 3; i++ {
			VPADDD(in[i], set[i], set[i])
		}
		VPADDD(dIn[s], set[3], set[3])
		Commentf("Set %d: rows of 4 blocks to blocks of 4 rows.", s)
		a, b, c, d := set[0], set[1], set[2], set[3]
		VSHUFI64X2(U8(0x44), b, a, tmp[0]) // a0 a1 b0 b1
		VSHUFI64X2(U8(0xee), b, a, tmp[1]) // a2 a3 b2 b3
		VSHUFI64X2(U8(0x44), d, c, tmp[2]) // c0 c1 d0 d1
		VSHUFI64X2(U8(0xee), d, c, tmp[3]) // c2 c3 d2 d3
		VSHUFI64X2(U8(0x88), tmp[2], tmp[0], a)
		VSHUFI64X2(U8(0xdd), tmp[2], tmp[0], b)
		VSHUFI64X2(U8(0x88), tmp[3], tmp[1], c)
		VSHUFI64X2(U8(0xdd), tmp[3], tmp[1], d)
		blocks = append(blocks, a, b, c, d)
	}
	for j, x := range blocks {
		CMPQ(r.n, U32(64*(j+1)))
		JB(LabelRef(fmt.Sprintf("%s_partial%d", name, j)))
		VPXORD(Mem{Base: r.src, Disp: 64 * j}, x, x)
		VMOVDQU32(x, Mem{Base: r.dst, Disp: 64 * j})
	}
	JMP(LabelRef("avx512_done"))
	for j, x := range blocks {
		Label(fmt.Sprintf("%s_partial%d", name, j))
		CMPQ(r.n, U32(64*j))
		JE(LabelRef("avx512_done"))
		VMOVDQU32(x, Mem{Base: r.ks})
		JMP(LabelRef("avx512_done"))
	}
}

// ymmEVEX returns Y0…Y31 by number.
func ymmEVEX(i int) VecPhysical { return zmm(i).AsY().(VecPhysical) }

// doubleRoundEVEX emits a double round with AVX-512 instructions, word i in
// reg(i).
func doubleRoundEVEX(reg func(int) VecPhysical) {
	var s stream
	doubleRoundStream(&s, reg)
	s.emit()
}

// doubleRoundStream appends a double round with AVX-512 instructions, word i
// in reg(i), to s.
func doubleRoundStream(s *stream, reg func(int) VecPhysical) {
	ops := vecOps{
		add: func(x, d Op) { s.op(VPADDD, x, d, d) },
		xor: func(x, d Op) { s.op(VPXORD, x, d, d) },
		rot: func(x Op, r, _ int) { s.op(VPROLD, U8(r), x, x) },
	}
	w := func(i int) Op { return reg(i) }
	quarterRounds(ops, columns[:], w)
	quarterRounds(ops, diagonals[:], w)
}

// loadState16 sets Zi to word i of the 16 blocks from state: state's word i
// in every lane, but the counters, from Z31.
func loadState16(state Register) {
	Comment("State words for 16 blocks: word i of every block in Zi.")
	for i := 0; i < 16; i++ {
		if i == 12 {
			VMOVDQA32(zCounter, zmm(12))
			continue
		}
		VPBROADCASTD(Mem{Base: state, Disp: 4 * i}, zmm(i))
	}
}

// addState16 adds the input state to the rounds' output, as loadState16 set
// it.
func addState16(state Register) {
	Comment("Add the input state.")
	for i := 0; i < 16; i++ {
		if i == 12 {
			VPADDD(zCounter, zmm(12), zmm(12))
			continue
		}
		VPADDD_BCST(Mem{Base: state, Disp: 4 * i}, zmm(i), zmm(i))
	}
}

// xorStore16 XORs the 16 transposed blocks in Z0–Z15 with 1024 bytes of
// src into dst.
func xorStore16(src, dst Register) {
	Comment("16 full blocks.")
	for j := 0; j < 16; j++ {
		VPXORD(Mem{Base: src, Disp: 64 * j}, zmm(j), zmm(j))
		VMOVDQU32(zmm(j), Mem{Base: dst, Disp: 64 * j})
	}
}

// transpose16 turns Zi = word i of blocks 0…15 into Zj = words 0…15 of
// block j, with Z16–Z19 as scratch.
//
// First, within every 128-bit lane, each quad of words 4q…4q+3 goes through a
// 4×4 transpose (VPUNPCK{L,H}DQ, then VPUNPCK{L,H}QDQ), which leaves in
// Z(4q+k) lane L the words 4q…4q+3 of block 4L+k. Then, for each k, the four
// registers Zk, Z(4+k), Z(8+k), Z(12+k) go through a 4×4 transpose of 128-bit
// lanes (two rounds of VSHUFI32X4), which leaves block 4L+k in Z(4L+k).
func transpose16() {
	Comment("Transpose: 4×4 dwords within each 128-bit lane.")
	t := zTmp
	for q := 0; q < 4; q++ {
		x := [4]VecPhysical{zmm(4 * q), zmm(4*q + 1), zmm(4*q + 2), zmm(4*q + 3)}
		VPUNPCKLDQ(x[1], x[0], t[0]) // x0[0] x1[0] x0[1] x1[1]
		VPUNPCKHDQ(x[1], x[0], t[1]) // x0[2] x1[2] x0[3] x1[3]
		VPUNPCKLDQ(x[3], x[2], t[2])
		VPUNPCKHDQ(x[3], x[2], t[3])
		VPUNPCKLQDQ(t[2], t[0], x[0]) // x0[0] x1[0] x2[0] x3[0]
		VPUNPCKHQDQ(t[2], t[0], x[1])
		VPUNPCKLQDQ(t[3], t[1], x[2])
		VPUNPCKHQDQ(t[3], t[1], x[3])
	}
	Comment("Transpose: 4×4 128-bit lanes across registers.")
	// shuf sets dst's lanes 0 and 1 from lo and its lanes 2 and 3 from hi,
	// each picked by two bits of sel.
	shuf := func(sel uint8, lo, hi, dst VecPhysical) { VSHUFI32X4(U8(sel), hi, lo, dst) }
	for k := 0; k < 4; k++ {
		y := [4]VecPhysical{zmm(k), zmm(4 + k), zmm(8 + k), zmm(12 + k)}
		shuf(0x44, y[0], y[1], t[0]) // y0.L0 y0.L1 y1.L0 y1.L1
		shuf(0xee, y[0], y[1], t[1]) // y0.L2 y0.L3 y1.L2 y1.L3
		shuf(0x44, y[2], y[3], t[2])
		shuf(0xee, y[2], y[3], t[3])
		shuf(0x88, t[0], t[2], y[0]) // y0.L0 y1.L0 y2.L0 y3.L0: block k
		shuf(0xdd, t[0], t[2], y[1]) // block 4+k
		shuf(0x88, t[1], t[3], y[2]) // block 8+k
		shuf(0xdd, t[1], t[3], y[3]) // block 12+k
	}
}
