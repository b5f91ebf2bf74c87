package main

import (
	"math/bits"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The stitched kernels run ChaCha20 and Poly1305 at once, 1024 bytes (a
// group) at a time. Each group's 10 double rounds of ChaCha20 over 16
// blocks in zmm registers, unrolled, have one group's Poly1305 spread evenly
// among them (merge).
//
// Poly1305 uses one 8-lane accumulator in radix 2⁴⁴: each step adds 8
// blocks, one per lane, and multiplies every lane by r⁸; the last step of a
// message multiplies lane j by the power of r its blocks need instead (the
// table's B row) and the lanes are summed. The one chain of dependent steps,
// about 35 cycles each, hides among the double rounds.
//
// What the steps cost is vector throughput: with the rounds, the vector
// pipes are the bottleneck, and an IFMA instruction costs about as much
// ChaCha20 time as three simple ones. The seal kernel therefore takes only
// ifmaSteps of a group's 8 steps with IFMA and the rest of its blocks with
// MULX in general-purpose registers, which the rounds leave idle
// (gprpoly.go); BenchmarkSeal/chacha20-poly1305/avx512/16384 measures the
// split.
//
//   - Sealing, Poly1305 authenticates the ciphertext, so it runs one group
//     behind: group g's rounds carry Poly1305 over the ciphertext of group
//     g−1, and the last group's ciphertext is authenticated after the loop,
//     7 of its 8 steps with IFMA, whose chain is the shorter, and the
//     other 8 blocks with MULX beside them (tail). The first group is
//     not the seal kernel's: chachaPolyHeadAVX512 runs it together with
//     block 0 (head.go), whose keystream is the Poly1305 key, and r's
//     powers, so that block and the powers cost nothing and both are known
//     before the kernel. Opening into a
//     buffer that the input does not overlap takes the same path,
//     authenticating the input (which stays intact) instead.
//   - Opening, Poly1305 authenticates the input, so group g's rounds carry
//     the steps over group g's own input, all of them before its output is
//     stored (dst may be src). The last group's are all IFMA steps, the
//     last one multiplying by the lane powers.
//
// Both compute r^(8+8·scalarSteps), the multiplier that moves the IFMA lanes
// past a group's scalar blocks, before the first group, for messages of
// more than one group. It costs about what one group saves, so long
// messages gain from it; BenchmarkChaCha20Poly1305Fastest/Seal/avx512/2048
// and BenchmarkSeal/chacha20-poly1305/avx512/16384 measure it.
//
// Registers: Z0–Z15 the ChaCha20 state (Z16–Z19 scratch for the transpose),
// Z20–Z22 the accumulator, Z23–Z29 a step's scratch, Z30 the 44-bit mask,
// Z31 the counter words. r's powers are read from the table as memory
// operands, and the other constants with embedded broadcasts.
var (
	zAcc     = [3]Op{Z20, Z21, Z22}
	zScratch = scratch{lo: [3]Op{Z23, Z24, Z25}, hi: [3]Op{Z26, Z27, Z28}, t: Z29}
	zMask44  = Z30
)

// stitchConsts holds the constants of the stitched kernels.
var stitchConsts Mem

const (
	stitchIota    = 0  // 0, 1, …, 15 as 32-bit words
	stitchMask42  = 64 // 2⁴²−1
	stitchHibit   = 72 // 2⁴⁰: the 2¹²⁸ of a full block, at limb 2
	stitchSixteen = 80 // 16 as a 32-bit word
	stitchK256    = 88 // 2⁸, 5 and 5·2¹⁰: the multipliers of mulReduce's carries
	stitchK5      = 96
	stitchK5120   = 104
	stitchMask44  = 112 // 2⁴⁴−1
)

func stitchData() {
	stitchConsts = GLOBL("chachaPolyStitch", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(stitchIota+4*i, U32(i))
	}
	DATA(stitchMask42, U64(mask42))
	DATA(stitchHibit, U64(1<<40))
	DATA(stitchSixteen, U32(16))
	DATA(stitchSixteen+4, U32(0))
	DATA(stitchK256, U64(1<<8))
	DATA(stitchK5, U64(5))
	DATA(stitchK5120, U64(5<<10))
	DATA(stitchMask44, U64(mask44))
}

// stitchArgs are a stitched kernel's pointers and counts.
type stitchArgs struct {
	dst, src, groups, state, tbl Register
}

func stitchedKernels() {
	stitchData()
	chachaPolyHead()
	powersMULX()
	stitched(true)
	stitched(false)
	chachaPolyWhole()
}

func stitched(seal bool) {
	name, op, input := "chachaPolySealAVX512IFMA", "seal", "ciphertext it writes"
	if !seal {
		name, op, input = "chachaPolyOpenAVX512IFMA", "open", "input it reads"
	}
	if seal {
		TEXT(name, NOSPLIT, "func(dst, src, mac *byte, groups int, state *[16]uint32, st *[5]uint64, tbl *[80]uint64)")
		Pragma("noescape")
		Doc(name+" XORs groups−1 × 1024 bytes of src+1024 with the ChaCha20",
			"keystream into dst+1024, and absorbs groups × 1024 bytes of ciphertext",
			"at mac into the Poly1305 state st, each group after the one before has",
			"been XORed, with the powers of r that poly1305PowersIFMA wrote to tbl.",
			"Sealing, mac is dst, whose first 1024 bytes chachaPolyHeadAVX512 wrote;",
			"opening into a buffer that src does not overlap, mac is src.",
			"state is the input state of the block at dst+1024 (its word 12 the",
			"block counter); groups > 0. dst and src are equal or do not overlap.")
	} else {
		TEXT(name, NOSPLIT, "func(dst, src *byte, groups int, state *[16]uint32, st *[5]uint64, tbl *[80]uint64)")
		Pragma("noescape")
		Doc(name+" XORs groups × 1024 bytes of src with the ChaCha20 keystream",
			"into dst and absorbs the "+input+" into the Poly1305 state st,",
			"with the powers of r that poly1305PowersIFMA wrote to tbl. The first",
			"block's input state is state (its word 12 the block counter); groups > 0.",
			"dst and src are equal or do not overlap.")
	}
	param := func(name string) func() Register {
		return func() Register { return Load(Param(name), GP64()) }
	}
	in := stitchIn{op: op, dst: param("dst"), src: param("src"), groups: param("groups"),
		state: param("state"), st: param("st"), tbl: param("tbl"),
		frame: AllocLocal(stitchFrame)}
	if seal {
		in.mac = param("mac")
	}
	stitchedBody(seal, in)
	VZEROUPPER()
	RET()
}

// stitchIn is where stitchedBody finds its arguments: loaders of the
// registers (each called once), a prefix for its labels and stitchFrame
// bytes of frame.
type stitchIn struct {
	op                                    string
	mac, dst, src, groups, state, st, tbl func() Register
	frame                                 Mem
	// finish, if not nil, takes the accumulator's lanes at the end instead
	// of storeH, and the caller clears the frame.
	finish func(h [3]Op)
	// early, if not nil, appends to the seal's last group's general-purpose
	// stream, once the table and the state are read for the last time,
	// stores that clear them, with z a zeroed zmm register.
	early func(g *stream, z VecPhysical)
}

// stitchFrame is the frame stitchedBody needs: r0, r1 and s1 for the
// general-purpose accumulator, then r^(8+8·scalarSteps) in every lane (five
// rows).
const stitchFrame = 32 + rowsPerMul*64

// stitchedBody emits the stitched seal or open kernel up to the Poly1305
// state stored to st and the frame cleared.
func stitchedBody(seal bool, in stitchIn) {
	op := in.op
	var mac Register
	if seal {
		mac = in.mac()
	}
	a := stitchArgs{
		dst:    in.dst(),
		src:    in.src(),
		groups: in.groups(),
		state:  in.state(),
		tbl:    in.tbl(),
	}
	c := consts{m44: zMask44, m42: stitchConsts.Offset(stitchMask42),
		k256: stitchConsts.Offset(stitchK256), k5: stitchConsts.Offset(stitchK5), k5120: stitchConsts.Offset(stitchK5120)}
	hibit := stitchConsts.Offset(stitchHibit)

	t := GP64()
	MOVQ(U64(mask44), t)
	VPBROADCASTQ(t, zMask44)
	frame := in.frame
	Comment("r^(8+8·scalarSteps) for the last IFMA step of every group but",
		"the last, by square and multiply from r⁸; one group needs none.")
	CMPQ(a.groups, U8(1))
	JE(LabelRef(op + "_nojump"))
	r8 := loadMulr(a.tbl, tblR8)
	e := 1 + scalarSteps
	p := r8
	for bit := bits.Len(uint(e)) - 2; bit >= 0; bit-- {
		p = product(p, p, c)
		p.withS()
		if e>>bit&1 == 1 {
			p = product(p, r8, c)
			p.withS()
		}
	}
	for i, z := range []VecVirtual{p.r0, p.r1, p.r2, p.s1, p.s2} {
		VMOVDQU64(z, frame.Offset(32+64*i))
	}
	Label(op + "_nojump")

	Comment("Counter words of the first 16 blocks; the accumulator in lane 0",
		"of Z20–Z22, the other lanes 0.")
	VPBROADCASTD(Mem{Base: a.state, Disp: 4 * 12}, zCounter)
	VPADDD(stitchConsts.Offset(stitchIota), zCounter, zCounter)
	st := in.st()
	loadH(st, zAcc)

	Comment("r and s1 = r1 + r1/4 for the general-purpose accumulator.")
	r0, r1, s1 := frame.Offset(0), frame.Offset(8), frame.Offset(16)
	MOVQ(Mem{Base: st, Disp: offR0}, t)
	MOVQ(t, r0)
	MOVQ(Mem{Base: st, Disp: offR1}, t)
	MOVQ(t, r1)
	MOVQ(t, st)
	SHRQ(U8(2), st)
	ADDQ(t, st)
	MOVQ(st, s1)
	gp := newGPRPoly(r0, r1, s1)
	gp.zero()
	m44 := stitchConsts.Offset(stitchMask44)

	// group runs ChaCha20 over one group with poly's instructions among the
	// double rounds, then XORs and stores it and moves on to the next.
	group := func(poly stream) {
		loadState16(a.state)
		var rounds stream
		for range 10 {
			doubleRoundStream(&rounds, zmm)
		}
		merge(rounds, poly)
		addState16(a.state)
		transpose16()
		xorStore16(a.src, a.dst)
		ADDQ(U32(1024), a.src)
		ADDQ(U32(1024), a.dst)
		VPADDD_BCST(stitchConsts.Offset(stitchSixteen), zCounter, zCounter)
	}

	// tail appends to v, which loaded the multipliers, the seal's last
	// group at msg in 7 IFMA steps, with blocks 49…56 (msg+768) in gp,
	// where the general-purpose registers idle otherwise. The steps take
	// blocks 1…48 and then 57…64; the one before the last multiplies by
	// r¹⁶ instead of r⁸, which puts everything before it 8 blocks further
	// from the end. gp, from 0 over blocks 49…56 by Horner's rule, holds
	// Σ m_i·r^(57−i); added to lane 0 before the last step, whose power
	// there is r⁸ (lane 0 takes a step's first block), it gets the power
	// each block needs. The lanes then hold what 8 steps would leave, but
	// for the last step's carries (mulFold): they are in zScratch.lo.
	//
	// The general-purpose stream computes r¹⁶ = r⁸·r⁸ first (gprMul44, into
	// the frame's rows for r^(8+8·scalarSteps), unused in the last group),
	// then the 8 blocks, a chain of some 110 cycles, both well before the
	// steps need them; Z15–Z19 take r¹⁶ broadcast before its step.
	// Against a tail of 8 IFMA steps, that is one step fewer on the vector
	// pipes and on the chain; BenchmarkChaCha20Poly1305Fastest at
	// Seal/avx512/1024, Seal/avx512/2048, Open/avx512/1024 and
	// Open/avx512/2048 measures it.
	// r¹⁶ is one gprMul44; the lane powers times r⁸ for the last step, in
	// its place, would be eight, here or in the head's general-purpose
	// stream, and the general-purpose registers have room for one multiply,
	// not eight.
	//
	// Bounds. r⁸ (the table's, from powersGPR or mulReduce) has l0 < 2⁴⁴,
	// l1 < 2⁴⁴+2⁷, l2 < 2⁴²: gprMul44's argument but l1's 2⁷, which grows
	// its columns by less than 2⁻³⁰ of themselves and leaves its bounds and
	// outputs as they are; those are within mulReduce's multipliers. Lane 0
	// before the last step is what the steps' handoff leaves at a group's
	// start: a step's output, 8 blocks and gp.
	loaded := false // the seal's last group's multipliers are in registers
	tail := func(v stream, msg Register, r8, last mulr, c consts, hibit Op) stream {
		r16 := func(i int) Mem { return frame.Offset(32 + 8*i) }
		var g stream
		rowR8 := func(i int) Mem { return Mem{Base: a.tbl, Disp: tblR8 + 64*i} }
		gprMul44(&g, rowR8, rowR8, r16)
		// The broadcasts below read r¹⁶ from the frame: merge must place
		// them after its stores, as it does with the steps spread over
		// the blocks' stream; the generator checks.
		stored, store := false, g[len(g)-1]
		g[len(g)-1] = func() { store(); stored = true }
		if in.early != nil {
			// Z31, the counter words, is free: the last group runs no
			// ChaCha20.
			g.op(VPXORQ, Z31, Z31, Z31)
			n := len(g)
			in.early(&g, Z31)
			for i := n; i < len(g); i++ {
				f := g[i]
				g[i] = func() {
					if !loaded {
						panic("the table cleared before the last step's multipliers are loaded")
					}
					f()
				}
			}
		}
		for b := 0; b < 8; b++ {
			gp.block(&g, Mem{Base: msg, Disp: 768 + 16*b}, b == 0)
		}
		gp.toCanon(&g)

		zr16 := [5]VecPhysical{Z15, Z16, Z17, Z18, Z19}
		absorb(&v, zAcc, Mem{Base: msg}, c, hibit, zScratch)
		for k := 0; k < 6; k++ {
			off, mul := 128*(k+1), r8
			if k == 5 {
				for i, z := range zr16 {
					v.do(func() {
						if !stored {
							panic("r¹⁶ read before it is stored")
						}
						VPBROADCASTQ(r16(i), z)
					})
				}
				off, mul = 896, mulr{zr16[0], zr16[1], zr16[2], zr16[3], zr16[4]}
			}
			next := blocks{Mem{Base: msg, Disp: off}, hibit}
			mulReduceNext(&v, zAcc, mul, c, zScratch, &next)
		}
		s := mergeStreams(v, g)
		s.do(gp.handoff(zAcc, zScratch.t.(VecPhysical), m44))
		mulFold(&s, zAcc, last, c, zScratch)
		return s
	}

	// steps returns Poly1305 over the group at msg: the scalar accumulator
	// of the group before handed off to lane 0, then, with scalar,
	// ifmaSteps IFMA steps, the last one multiplying by r^(8+8·scalarSteps),
	// and the scalar accumulator over the rest of the group, the two
	// interleaved; without scalar (the message's last group), 8 IFMA
	// steps, the last one multiplying by the lane powers, or alone, tail.
	//
	// Alone (with no ChaCha20 to share the registers with: the seal's last
	// group), the steps take r⁸, the lane powers, 2⁴⁰ and the carries'
	// multipliers from Z0–Z14, loaded once, where a step would read 18
	// rows of 64 bytes and 6 broadcasts from memory;
	// BenchmarkChaCha20Poly1305Fastest at Seal/avx512/1536 and
	// Seal/avx512/2048 measures it.
	steps := func(msg Register, scalar, alone bool) stream {
		n, last := 8, tblMulr(a.tbl, tblB)
		if scalar {
			n, last = ifmaSteps, mulr{frame.Offset(32), frame.Offset(32 + 64), frame.Offset(32 + 128), frame.Offset(32 + 192), frame.Offset(32 + 256)}
		}
		r8, c := tblMulr(a.tbl, tblR8), c
		var hibit Op = hibit
		var v stream
		if alone {
			load := func(m mulr, z [5]VecPhysical) mulr {
				for i, row := range []Op{m.r0, m.r1, m.r2, m.s1, m.s2} {
					v.op(VMOVDQU64, row, z[i])
				}
				return mulr{z[0], z[1], z[2], z[3], z[4]}
			}
			r8 = load(r8, [5]VecPhysical{Z0, Z1, Z2, Z3, Z4})
			last = load(last, [5]VecPhysical{Z5, Z6, Z7, Z8, Z9})
			bc := func(m Op, z VecPhysical) Op {
				v.op(VPBROADCASTQ, m, z)
				return z
			}
			c.m42, c.k256, c.k5, c.k5120 = bc(c.m42, Z10), bc(c.k256, Z11), bc(c.k5, Z12), bc(c.k5120, Z13)
			hibit = bc(hibit, Z14)
			v.do(func() { loaded = true })
			// Before the general-purpose stream below reuses gp's registers.
			gp.handoff(zAcc, zScratch.t.(VecPhysical), m44)()
			return tail(v, msg, r8, last, c, hibit)
		}
		v.do(gp.handoff(zAcc, zScratch.t.(VecPhysical), m44))
		absorb(&v, zAcc, Mem{Base: msg}, c, hibit, zScratch)
		for k := 0; k < n; k++ {
			if k == n-1 {
				mulReduce(&v, zAcc, last, c, zScratch)
				break
			}
			next := blocks{Mem{Base: msg, Disp: 128 * (k + 1)}, hibit}
			mulReduceNext(&v, zAcc, r8, c, zScratch, &next)
		}
		if !scalar {
			return v
		}
		var g stream
		for b := 0; b < 8*scalarSteps; b++ {
			gp.block(&g, Mem{Base: msg, Disp: 128*ifmaSteps + 16*b}, b == 0)
		}
		gp.toCanon(&g)
		return mergeStreams(v, g)
	}

	if seal {
		Comment("Group 0 is ciphertext already.")
		ADDQ(U32(1024), a.src)
		ADDQ(U32(1024), a.dst)
		DECQ(a.groups)
		JZ(LabelRef(op + "_last"))
		Label(op + "_loop")
		Comment("Group g, with Poly1305 over group g−1's ciphertext.")
		group(steps(mac, true, false))
		ADDQ(U32(1024), mac)
		DECQ(a.groups)
		JNZ(LabelRef(op + "_loop"))
		Label(op + "_last")
		Comment("Poly1305 over the last group's ciphertext: with no ChaCha20 to",
			"hide among, 7 IFMA steps, the shorter chain, and 8 blocks with MULX.")
		steps(mac, false, true).emit()
		Comment("Clear r⁸, the lane powers and r¹⁶ from Z0–Z9 and Z15–Z19.")
		for _, z := range []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z15, Z16, Z17, Z18, Z19} {
			VPXORQ(z, z, z)
		}
	} else {
		Label(op + "_loop")
		CMPQ(a.groups, U8(1))
		JE(LabelRef(op + "_last"))
		Comment("Group g, with Poly1305 over its input.")
		group(steps(a.src, true, false))
		DECQ(a.groups)
		JMP(LabelRef(op + "_loop"))
		Label(op + "_last")
		Comment("The last group, with Poly1305 over its input all with IFMA, the",
			"last step multiplying by the lane powers.")
		group(steps(a.src, false, false))
	}
	// The seal's last step (tail, mulFold) leaves its lanes in the low
	// accumulators, with the carries to do.
	acc := zAcc
	if seal {
		acc = zScratch.lo
	}
	if in.finish != nil {
		in.finish(acc)
		return
	}
	storeH(acc, in.st(), Z16)
	Comment("Clear the frame: r and its powers.")
	VPXORQ(Z16, Z16, Z16)
	for i := 0; i < rowsPerMul; i++ {
		VMOVDQU64(Z16, frame.Offset(32+64*i))
	}
	VMOVDQU64(Z16.AsY(), frame.Offset(0))
}
