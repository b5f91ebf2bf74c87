package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// chachaPolyHeadAVX512 runs the first 17 blocks of a ChaCha20-Poly1305
// message as chachaXORAVX512x17 runs a group (wide.go): blocks 1–16 in zmm
// registers, block 0, whose keystream keys Poly1305, in general-purpose
// registers. It also computes the powers of r that the IFMA steps multiply
// by, which would otherwise follow the pass and hold up everything after
// it.
//
// The zmm pass is the bottleneck, and the kernel is laid out for one of its
// double rounds taking about as long as two of block 0's (scalar.go), so it
// runs block 0 ahead: the first headLead double rounds of the zmm blocks
// each carry two of block 0's, which is then done, and the other 10−headLead
// carry the powers, r² … r⁸ by 130-bit multiplies in radix 2⁴⁴ with MULX
// (gprMul44), written to the table as poly1305PowersIFMA writes them.
// BenchmarkChaCha20Poly1305Fastest/Seal/avx512/1024 measures the choice of
// headLead.
const headLead = 5

func chachaPolyHead() {
	TEXT("chachaPolyHeadAVX512", 0, "func(dst, src *byte, key *[8]uint32, nonce *[3]uint32, counter uint32, polyKey *[32]byte, tbl *[80]uint64)")
	Pragma("noescape")
	Doc("chachaPolyHeadAVX512 XORs the 16 ChaCha20 blocks after block counter for",
		"key and nonce (1024 bytes) of src into dst, writes the first 32 bytes of",
		"the keystream of block counter (the Poly1305 key) to polyKey, and writes",
		"to tbl the powers of r (polyKey's first 16 bytes, clamped) that",
		"poly1305PowersIFMA writes. Blocks counter+1 … counter+16 run in zmm",
		"registers, block counter in general-purpose registers.")
	load := func(name string) func(Register) {
		return func(r Register) { Load(Param(name), r) }
	}
	headBody(headIn{key: load("key"), nonce: load("nonce"), counter: load("counter"),
		polyKey: load("polyKey"), tbl: load("tbl"), src: load("src"), dst: load("dst"),
		frame: AllocLocal(headFrame)})
	VZEROUPPER()
	RET()
}

// headIn is where headBody finds its arguments: each loads one into the
// register it is given (counter into a 32-bit one); and headFrame bytes of
// frame.
type headIn struct {
	key, nonce, counter, polyKey, tbl, src, dst func(Register)
	frame                                       Mem
	// shiftPowers has the B rows hold r² … r⁹ instead of r¹ … r⁸ (powersGPR).
	shiftPowers bool
}

const headFrame = 48

// headBody emits chachaPolyHeadAVX512 but its return.
func headBody(in headIn) {
	frame := in.frame
	var (
		fRounds = frame.Offset(36)
		fSlot3  = frame.Offset(40) // scalar words 3 and 11 take turns in R15
		fSlot11 = frame.Offset(44)
	)
	slot := func(w int) Mem {
		if w == 3 {
			return fSlot3
		}
		return fSlot11
	}
	// The input state's words: the constants, key and nonce from memory
	// (key in R15, nonce in R14 when read), the counter apart.
	word := scalarInput

	Comment("Counters: counter+1 … counter+16 in zmm, counter for the scalar block.")
	in.counter(R10L) // the scalar block's word 12
	LEAL(Mem{Base: R10, Disp: 1}, EBX)
	VPBROADCASTD(EBX, zCounter)
	VPADDD(stitchConsts.Offset(stitchIota), zCounter, zCounter)
	in.key(R15)
	in.nonce(R14)
	for i := 0; i < 16; i++ {
		if i == 12 {
			VMOVDQA32(zCounter, zmm(12))
			continue
		}
		VPBROADCASTD(word(i), zmm(i))
	}
	loadScalarInput(fSlot11)
	MOVL(U32(headLead), fRounds)

	Commentf("%d double rounds of the zmm blocks, each with two of block 0's.", headLead)
	Label("head_doubleround")
	words := &r15Words{held: 3, slot: slot}
	var v, g stream
	doubleRoundStream(&v, zmm)
	scalarDoubleRoundStream(&g, words)
	scalarDoubleRoundStream(&g, words)
	merge(v, g)
	DECL(fRounds)
	JNZ(LabelRef("head_doubleround"))

	Comment("Block 0's keystream, to key; r's powers, to tbl, among the zmm",
		"blocks' last double rounds.")
	v, g = nil, nil
	for range 10 - headLead {
		doubleRoundStream(&v, zmm)
	}
	// The first 8 words plus the input state, paired into 64-bit words in
	// registers: stored 8 bytes at a time, they reach the loads that read
	// them (the caller's, 8 bytes at a time) straight from the store queue.
	scalarKeyWords(&g, fSlot3, func() { in.key(R15) })
	g.do(func() { in.polyKey(RCX) })
	for i, r := range []Register{RAX, R14, RSI, R8} {
		g.op2(MOVQ, r, Mem{Base: RCX, Disp: 8 * i})
	}
	powersGPR(&g, RAX, R14, in.tbl, in.shiftPowers)
	merge(v, g)

	Comment("Add the input state to the 16 zmm blocks, transpose, XOR, store.")
	in.key(R15)
	in.nonce(R14)
	for i := 0; i < 16; i++ {
		if i == 12 {
			VPADDD(zCounter, zmm(12), zmm(12))
			continue
		}
		VPADDD_BCST(word(i), zmm(i), zmm(i))
	}
	transpose16()
	in.src(RSI)
	in.dst(RDI)
	for j := 0; j < 16; j++ {
		VPXORD(Mem{Base: RSI, Disp: 64 * j}, zmm(j), zmm(j))
		VMOVDQU32(zmm(j), Mem{Base: RDI, Disp: 64 * j})
	}
	Comment("Clear the key block's words 3 and 11 from the frame.")
	MOVQ(U32(0), fSlot3)
}

// scalarDoubleRoundStream appends a double round of the scalar block in
// general-purpose registers (scalar.go) to s, words 3 and 11 taking turns in
// R15 as scalarHalfRound hands it over.
func scalarDoubleRoundStream(s *stream, words *r15Words) {
	words.out = s
	defer func() { words.out = nil }()
	for _, qrs := range [][4][4]int{columns, diagonals} {
		scalarHalfRound(func(x, y, z, r int) {
			for _, qr := range qrs {
				s.op2(ADDL, words.reg(qr[y]), words.reg(qr[x]))
			}
			for _, qr := range qrs {
				s.op2(XORL, words.reg(qr[x]), words.reg(qr[z]))
			}
			for _, qr := range qrs {
				s.op2(ROLL, U8(r), words.reg(qr[z]))
			}
		}, words)
	}
}

// Lanes of the powers table (poly1305.go): lane j of the B rows holds
// r^(8−order[j]), order = 0 4 1 5 2 6 3 7 the order absorb leaves blocks in.
var blockOrder = [8]int{0, 4, 1, 5, 2, 6, 3, 7}

// laneOf returns the lane of the B rows that holds r^k, 1 ≤ k ≤ 8.
func laneOf(k int) int {
	for j, o := range blockOrder {
		if o == 8-k {
			return j
		}
	}
	panic("no lane")
}

// powersGPR appends to s the instructions that compute r's powers r¹ … r⁸
// from r in the registers r0 and r1 (low and high 64 bits, clamped here)
// and write them to the table, its pointer loaded by loadTbl: each
// power's five limbs (l0, l1, l2, 20·l1, 20·l2) to its lane of the B
// rows, and r⁸ to every lane of the r⁸ rows. It uses Z16 and the
// general-purpose registers RAX, RBX, RCX, RDX, RDI, R8–R14 and r0 and r1.
//
// With shift, it also computes r⁹, and the B rows hold r^(k+1) where they
// would hold r^k: a last step that multiplies by them leaves h·r, as if
// the block of lengths, L, had been absorbed too but for L·r, which the
// caller adds (chachaPolyWhole). r¹ then waits in lane 0 of the r⁸ rows
// until r⁸ replaces it.
func powersGPR(s *stream, r0in, r1in Register, loadTbl func(Register), shift bool) {
	tbl := RDI
	s.do(func() { loadTbl(tbl) })
	at := func(k int) func(i int) Mem {
		if shift && k == 1 {
			return func(i int) Mem { return Mem{Base: tbl, Disp: tblR8 + 64*i} }
		}
		if shift {
			k--
		}
		return func(i int) Mem { return Mem{Base: tbl, Disp: tblB + 64*i + 8*laneOf(k)} }
	}
	// r = key[0:16] & 0x0ffffffc0ffffffc0ffffffc0fffffff, in radix 2⁴⁴:
	// l0 = r & m44, l1 = r ≫ 44 & m44, l2 = r ≫ 88 (< 2³⁶).
	r0, r1, t, m := RAX, RBX, RCX, RDX
	for _, p := range [][2]Register{{r0in, r0}, {r1in, r1}} {
		if p[0] != p[1] {
			s.op2(MOVQ, p[0], p[1])
		}
	}
	s.op2(MOVQ, U64(clampLo), m)
	s.op2(ANDQ, m, r0)
	s.op2(MOVQ, U64(clampHi), m)
	s.op2(ANDQ, m, r1)
	s.op2(MOVQ, U64(mask44), m)
	s.op2(MOVQ, r0, t)
	s.op2(ANDQ, m, t)
	s.op2(MOVQ, t, at(1)(0))
	s.op(SHRQ, U8(44), r1, r0) // r0 = r0≫44 | r1≪20
	s.op2(ANDQ, m, r0)
	s.op2(MOVQ, r0, at(1)(1))
	s.op(SHRQ, U8(24), r1)
	s.op2(MOVQ, r1, at(1)(2))
	times20GPR(s, r0, t)
	s.op2(MOVQ, t, at(1)(3))
	times20GPR(s, r1, t)
	s.op2(MOVQ, t, at(1)(4))

	gprMul44(s, at(1), at(1), at(2))
	gprMul44(s, at(2), at(1), at(3))
	gprMul44(s, at(2), at(2), at(4))
	gprMul44(s, at(4), at(1), at(5))
	gprMul44(s, at(4), at(2), at(6))
	gprMul44(s, at(4), at(3), at(7))
	gprMul44(s, at(4), at(4), at(8))
	if shift {
		gprMul44(s, at(5), at(4), at(9))
	}
	for i := 0; i < rowsPerMul; i++ {
		s.op(VPBROADCASTQ, at(8)(i), Z16)
		s.op(VMOVDQU64, Z16, Mem{Base: tbl, Disp: tblR8 + 64*i})
	}
}

// powersMULX emits poly1305PowersMULX, powersGPR on its own, so that the
// tests can run the code chachaPolyHeadAVX512 computes r's powers with on
// chosen keys. Alone it is slower than poly1305PowersIFMA: its multiplies
// wait on one another through memory.
func powersMULX() {
	TEXT("poly1305PowersMULX", NOSPLIT, "func(st *[5]uint64, tbl *[80]uint64)")
	Pragma("noescape")
	Doc("poly1305PowersMULX writes the same powers of st's r as poly1305PowersIFMA,",
		"computed with MULX as chachaPolyHeadAVX512 computes them.")
	st := Load(Param("st"), RSI)
	MOVQ(Mem{Base: st, Disp: offR0}, RAX)
	MOVQ(Mem{Base: st, Disp: offR1}, RBX)
	var s stream
	powersGPR(&s, RAX, RBX, func(r Register) { Load(Param("tbl"), r) }, false)
	s.emit()
	VZEROUPPER()
	RET()
}

// times20GPR appends d = 20·x, as (x + 4x)·4.
func times20GPR(s *stream, x, d Register) {
	s.op2(LEAQ, Mem{Base: x, Index: x, Scale: 4}, d)
	s.op(SHLQ, U8(2), d)
}

// gprMul44 appends to s the instructions that set z = x·y (mod 2¹³⁰−5) in
// radix 2⁴⁴ with MULX, the general-purpose counterpart of mulReduce: x's
// limbs are x(0), x(1), x(2); y's are y(0) … y(4) (l0, l1, l2, 20·l1,
// 20·l2), and z's five go to z(0) … z(4). It uses RAX, RBX, RCX, RDX and
// R8–R14.
//
// Bounds. x and y have l0 < 2⁴⁴, l1 ≤ 2⁴⁴, l2 < 2⁴² (r: below 2⁴⁴, 2⁴⁴,
// 2³⁶), so 20·l1 < 2^48.33 and 20·l2 < 2^46.33, and the columns
//
//	d0 = x0·y0 + x1·20y2 + x2·20y1 < 2⁸⁸ + 2^90.33 + 2^90.33 < 2^91.5
//	d1 = x0·y1 + x1·y0 + x2·20y2   < 2⁸⁸ + 2⁸⁸ + 2^88.33 < 2⁹⁰
//	d2 = x0·y2 + x1·y1 + x2·y0     < 2⁸⁶ + 2⁸⁸ + 2⁸⁶ < 2^88.6
//
// fit in 128 bits, as do the carries added to them (below 2^47.5 and 2⁴⁶).
// Then c = d2 ≫ 42 < 2^46.6 and z0 = (d0 & m44) + 5c < 2^49.0; its carry
// is below 2⁵, so z1 = (d1 & m44) + that < 2⁴⁴ + 2⁵ carries at most 1 into
// z2 = (d2 & m42) + that ≤ 2⁴², whose carry, at most 1, comes back as 5 into
// z0 < 2⁴⁴ + 5, whose carry, at most 1, makes z1 ≤ 2⁴⁴. So z0 < 2⁴⁴,
// z1 ≤ 2⁴⁴, z2 < 2⁴²: the bounds of x and y, and within mulReduce's for
// the multipliers of the IFMA steps (r1 < 2⁴⁴+2⁷, r2 < 2⁴²).
func gprMul44(s *stream, x, y, z func(i int) Mem) {
	d := [3][2]Register{{R8, R9}, {R10, R11}, {R12, R13}} // lo, hi
	t0, t1 := RAX, RBX
	// Column i takes x(j)·y(mul[j][i]).
	mul := [3][3]int{
		{0, 1, 2}, // x0: y0, y1, y2
		{4, 0, 1}, // x1: 20y2, y0, y1
		{3, 4, 0}, // x2: 20y1, 20y2, y0
	}
	for j := range 3 {
		s.op2(MOVQ, x(j), RDX)
		for i := range 3 {
			if j == 0 {
				s.op3(MULXQ, y(mul[j][i]), d[i][0], d[i][1])
				continue
			}
			s.op3(MULXQ, y(mul[j][i]), t0, t1)
			s.do(func() {
				ADDQ(t0, d[i][0])
				ADCQ(t1, d[i][1])
			})
		}
	}
	z0, z1, z2, c, m := RCX, t0, t1, R14, RDX
	s.op2(MOVQ, U64(mask44), m)
	// d0 → d1 → d2
	s.op2(MOVQ, d[0][0], z0)
	s.op2(ANDQ, m, z0)
	s.op(SHRQ, U8(44), d[0][1], d[0][0])
	s.do(func() {
		ADDQ(d[0][0], d[1][0])
		ADCQ(U8(0), d[1][1])
	})
	s.op2(MOVQ, d[1][0], z1)
	s.op2(ANDQ, m, z1)
	s.op(SHRQ, U8(44), d[1][1], d[1][0])
	s.do(func() {
		ADDQ(d[1][0], d[2][0])
		ADCQ(U8(0), d[2][1])
	})
	// 2¹³⁰ ≡ 5: c = d2 ≫ 42 comes back as 5c.
	s.op2(MOVQ, d[2][0], z2)
	s.op(SHLQ, U8(22), z2)
	s.op(SHRQ, U8(22), z2)
	s.op(SHRQ, U8(42), d[2][1], d[2][0])
	s.op2(LEAQ, Mem{Base: d[2][0], Index: d[2][0], Scale: 4}, c)
	s.op2(ADDQ, c, z0)
	// z0 → z1 → z2 → (×5) z0 → z1
	s.op2(MOVQ, z0, c)
	s.op(SHRQ, U8(44), c)
	s.op2(ANDQ, m, z0)
	s.op2(ADDQ, c, z1)
	s.op2(MOVQ, z1, c)
	s.op(SHRQ, U8(44), c)
	s.op2(ANDQ, m, z1)
	s.op2(ADDQ, c, z2)
	s.op2(MOVQ, z2, c)
	s.op(SHRQ, U8(42), c)
	s.op(SHLQ, U8(22), z2)
	s.op(SHRQ, U8(22), z2)
	s.op2(LEAQ, Mem{Base: c, Index: c, Scale: 4}, c)
	s.op2(ADDQ, c, z0)
	s.op2(MOVQ, z0, c)
	s.op(SHRQ, U8(44), c)
	s.op2(ANDQ, m, z0)
	s.op2(ADDQ, c, z1)
	s.op2(MOVQ, z0, z(0))
	s.op2(MOVQ, z1, z(1))
	s.op2(MOVQ, z2, z(2))
	times20GPR(s, z1, c)
	s.op2(MOVQ, c, z(3))
	times20GPR(s, z2, c)
	s.op2(MOVQ, c, z(4))
}
