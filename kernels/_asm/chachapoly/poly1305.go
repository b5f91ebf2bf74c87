package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// poly1305File emits the Poly1305 kernels (RFC 8439 §2.5):
// kernels/poly1305_amd64.s and its Go declarations.
//
// Two kernels share one state, st = [h0, h1, h2, r0, r1]: the accumulator
// h = h0 + h1·2⁶⁴ + h2·2¹²⁸ (partially reduced, h2 < 8) and the clamped key
// r = r0 + r1·2⁶⁴.
//
//   - poly1305BlocksMULX absorbs 16-byte blocks one at a time with 64-bit
//     limbs and MULX. It serves short inputs, tails and hosts without IFMA.
//   - poly1305BlocksIFMA absorbs 128 bytes (8 blocks) per step with AVX-512
//     IFMA in radix 2⁴⁴: one 8-lane accumulator, block j of a step in lane
//     j, multiplied by r⁸ in every lane; the last step multiplies lane j by
//     the power of r its block needs instead, after which the lanes are
//     summed. The powers come from poly1305PowersIFMA, once per key. The
//     stitched ChaCha20-Poly1305 kernels take the same steps.
func poly1305File() {
	blocksMULX()
	powersIFMA()
	blocksIFMA()
}

// Offsets of the state words.
const (
	offH0 = 8 * iota
	offH1
	offH2
	offR0
	offR1
)

// blocksMULX absorbs len(msg)/16 blocks, adding hibit·2¹²⁸ to each.
func blocksMULX() {
	TEXT("poly1305BlocksMULX", NOSPLIT, "func(st *[5]uint64, msg []byte, hibit uint64)")
	Pragma("noescape")
	Doc("poly1305BlocksMULX absorbs the len(msg)/16 whole blocks of msg into st,",
		"each with hibit·2¹²⁸ added (1 for full blocks, 0 for a padded final one).")
	st := Load(Param("st"), GP64())
	msg := Load(Param("msg").Base(), GP64())
	n := Load(Param("msg").Len(), GP64())
	hibit, err := Param("hibit").Resolve()
	if err != nil {
		panic(err)
	}
	SHRQ(U8(4), n)
	JZ(LabelRef("mulx_done"))

	h0, h1, h2 := GP64(), GP64(), GP64()
	r0, r1, s1 := GP64(), GP64(), GP64()
	MOVQ(Mem{Base: st, Disp: offH0}, h0)
	MOVQ(Mem{Base: st, Disp: offH1}, h1)
	MOVQ(Mem{Base: st, Disp: offH2}, h2)
	MOVQ(Mem{Base: st, Disp: offR0}, r0)
	MOVQ(Mem{Base: st, Disp: offR1}, r1)
	Comment("s1 = 5·r1/4: r1 is a multiple of 4 (clamped), and h1·r1·2¹²⁸ =",
		"h1·(r1/4)·2¹³⁰ ≡ h1·s1 (mod 2¹³⁰−5); likewise h2·r1·2¹⁹² ≡ h2·s1·2⁶⁴.")
	MOVQ(r1, s1)
	SHRQ(U8(2), s1)
	ADDQ(r1, s1)

	Label("mulx_loop")
	Comment("h += m + hibit·2¹²⁸")
	ADDQ(Mem{Base: msg}, h0)
	ADCQ(Mem{Base: msg, Disp: 8}, h1)
	ADCQ(hibit.Addr, h2)

	mulxMulR(h0, h1, h2, r0, r1, s1)

	ADDQ(U8(16), msg)
	DECQ(n)
	JNZ(LabelRef("mulx_loop"))

	st = Load(Param("st"), GP64())
	MOVQ(h0, Mem{Base: st, Disp: offH0})
	MOVQ(h1, Mem{Base: st, Disp: offH1})
	MOVQ(h2, Mem{Base: st, Disp: offH2})
	Label("mulx_done")
	RET()
}

// clampLo and clampHi are the masks of Poly1305's clamp of r (RFC 8439
// §2.5), for its low and high 64 bits.
const (
	clampLo = 0x0ffffffc0fffffff
	clampHi = 0x0ffffffc0ffffffc
)

// clampR emits the clamp of r = r0 + r1·2⁶⁴, in place, and s1 = r1 + r1/4,
// the multiplier mulxMulR folds the products above 2¹³⁰ with; s1 also
// holds the masks on the way.
func clampR(r0, r1, s1 Register) {
	MOVQ(U64(clampLo), s1)
	ANDQ(s1, r0)
	MOVQ(U64(clampHi), s1)
	ANDQ(s1, r1)
	MOVQ(r1, s1)
	SHRQ(U8(2), s1)
	ADDQ(r1, s1)
}

// mulxMulR emits h = h·r, partially reduced (h2 ≤ 4 after), for h2 ≤ 7
// before, r = r0 + r1·2⁶⁴ clamped and s1 = r1 + r1/4; r0, r1 and s1 are
// registers or memory operands.
func mulxMulR(h0, h1, h2 Register, r0, r1, s1 Op) {
	Comment("h·r ≡ d0 + d1·2⁶⁴ + d2·2¹²⁸ with",
		"d0 = h0·r0 + h1·s1, d1 = h0·r1 + h1·r0 + h2·s1, d2 = h2·r0.",
		"r0 < 2⁶⁰, s1 < 2⁶¹ and h2 ≤ 7, so the h2 products fit in 64 bits.")
	a0, a1, b0, b1, c0, c1, t, u := GP64(), GP64(), GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	MOVQ(h0, RDX)
	MULXQ(r0, a0, a1) // a1:a0 = h0·r0
	MULXQ(r1, b0, b1) // b1:b0 = h0·r1
	MOVQ(h1, RDX)
	MULXQ(s1, c0, c1) // c1:c0 = h1·s1
	MULXQ(r0, h0, h1) // h1:h0 = h1·r0
	MOVQ(h2, t)
	IMULQ(s1, t)  // h2·s1
	IMULQ(r0, h2) // h2·r0
	ADDQ(c0, a0)
	ADCQ(c1, a1) // a1:a0 = d0
	ADDQ(h0, b0)
	ADCQ(h1, b1)
	ADDQ(t, b0)
	ADCQ(U8(0), b1)
	ADDQ(a1, b0)
	ADCQ(U8(0), b1) // b1:b0 = d1 + d0's high word
	ADDQ(h2, b1)    // b1 = d2 + the carries, < 2⁶³

	Comment("Reduce: b1 = 4q + (b1 & 3) at 2¹²⁸, and q·2¹³⁰ ≡ 5q.")
	MOVQ(b1, h2)
	ANDQ(U8(3), h2)
	MOVQ(b1, u)
	SHRQ(U8(2), u)
	ANDQ(I8(-4), b1)
	ADDQ(u, b1) // 5q
	MOVQ(a0, h0)
	MOVQ(b0, h1)
	ADDQ(b1, h0)
	ADCQ(U8(0), h1)
	ADCQ(U8(0), h2)
}

// polyTag stores to the function's tag parameter the Poly1305 tag of h =
// h0 + h1·2⁶⁴ + h2·2¹²⁸ and s = s0 + s1·2⁶⁴: h mod 2¹³⁰−5, as
// poly1305MAC.sum reduces it (h < 2·(2¹³⁰−5), which h2 ≤ 4 ensures, so one
// conditional subtraction, taken when h + 5 reaches 2¹³⁰), plus s, mod
// 2¹²⁸. t0 and t1 are scratch; h2 is lost.
func polyTag(h0, h1, h2, t0, t1 Register, s0, s1 Op) {
	Comment("The tag: h mod 2¹³⁰−5 (h < 2p, so one conditional subtraction of p,",
		"that is adding 5 and dropping 2¹³⁰), plus s, mod 2¹²⁸.")
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
}

// Radix 2⁴⁴: a value is l0 + l1·2⁴⁴ + l2·2⁸⁸ with l0, l1 < 2⁴⁴ and l2 < 2⁴²
// when reduced; the kernels keep limbs below 2⁴⁶, inside IFMA's 52 bits.
const (
	mask44 = 1<<44 - 1
	mask42 = 1<<42 - 1
)

// A multiplier in radix 2⁴⁴ with its reduction folded in: since
// 2¹³² ≡ 20 (mod 2¹³⁰−5), the products that land at 2¹³² and 2¹⁷⁶ use
// s1 = 20·r1 and s2 = 20·r2 in place of r1 and r2.
type mulr struct{ r0, r1, r2, s1, s2 Op }

// times20 sets s = 20·x, as (x + 4x)·4.
func times20(x, s VecVirtual) {
	VPSLLQ(U8(2), x, s)
	VPADDQ(x, s, s)
	VPSLLQ(U8(2), s, s)
}

// consts are the constants the IFMA kernels need, in every lane: the mask
// m44 in a register; the mask m42 and the multipliers of the carries (2⁸, 5
// and 5·2¹⁰) in registers or in memory (then read with an embedded
// broadcast).
type consts struct{ m44, m42, k256, k5, k5120 Op }

func loadConsts() consts {
	c := consts{ZMM(), ZMM(), ZMM(), ZMM(), ZMM()}
	t := GP64()
	for _, k := range []struct {
		v uint64
		z Op
	}{{mask44, c.m44}, {mask42, c.m42}, {1 << 8, c.k256}, {5, c.k5}, {5 << 10, c.k5120}} {
		MOVQ(U64(k.v), t)
		VPBROADCASTQ(t, k.z)
	}
	return c
}

// scratch are the registers one IFMA step works in.
type scratch struct {
	lo, hi [3]Op
	t      Op
}

func newScratch() scratch {
	return scratch{lo: [3]Op{ZMM(), ZMM(), ZMM()}, hi: [3]Op{ZMM(), ZMM(), ZMM()}, t: ZMM()}
}

// mulReduce appends to s the instructions that set h = h·r, lane by lane.
//
// Each IFMA multiply of 52-bit limbs yields a 104-bit product, split between a
// low accumulator (bits 0–51) and a high one (bits 52–103, worth 2⁸ at the
// next limb since 52 = 44+8). Column i collects
//
//	d0 = h0·r0 + h1·s2 + h2·s1
//	d1 = h0·r1 + h1·r0 + h2·s2
//	d2 = h0·r2 + h1·r1 + h2·r0
//
// and the carries run d0 → d1 → d2 → (×5) d0 → d1. The high accumulators go
// to the next column through IFMA as well, multiplied by 2⁸ (and the last by
// 5·2¹⁰, since 2¹⁴⁰ = 2¹³⁰·2¹⁰ ≡ 5·2¹⁰), one instruction where a shift and
// an add were; so does 5× the bits of d2 at 2¹³⁰ and up.
//
// Bounds. Every multiplier, and every product this function leaves, has
// r0 < 2⁴⁴, r1 < 2⁴⁴+2⁷, r2 < 2⁴² (r itself: below 2⁴⁴, 2⁴⁴, 2³⁶), so
// s1 = 20·r1 < 2^48.33 and s2 = 20·r2 < 2^46.33. The h it is given is such a
// product (or the accumulator of loadH, l0, l1 < 2⁴⁴, l2 < 2⁴³) plus one
// absorbed block (l0, l1 < 2⁴⁴, l2 < 2⁴¹) plus, in lane 0 and only after a
// product, the stitched seal kernel's general-purpose accumulator (gprPoly's
// handoff: l0, l1 < 2⁴⁴, l2 < 5·2⁴⁰): h0 < 3·2⁴⁴ < 2^45.59, h1 < 3·2⁴⁴+2⁷
// < 2^45.59, h2 < 2⁴²+2⁴¹+5·2⁴⁰ < 2^43.46 (with loadH's, < 2^43.33). All
// limbs are below 2⁵², as IFMA needs. Then
//
//	d0 < 2^89.59 + 2^91.92 + 2^91.79 < 2^92.99, so hi0 < 2^40.99
//	d1 < 2^89.59 + 2^89.59 + 2^89.79 < 2^91.24, so hi1 < 2^39.24
//	d2 < 2^87.59 + 2^89.59 + 2^87.46 < 2^90.15, so hi2 < 2^38.15
//
// (a high accumulator sums floor(p/2⁵²) over its products, at most the
// column's sum over 2⁵²), and each low accumulator is below 3·2⁵², or
// 3·2⁵²+2⁴⁴ with mulReduceNext's block. The IFMA carries add the low 52 bits
// of a product, which is the whole product here: 2⁸·hi0 < 2^48.99,
// 2⁸·hi1 < 2^47.24, 5·2¹⁰·hi2 < 2^50.48, 5·(d2 ≫ 42) < 2^13.93. Column by
// column: lo0 ≫ 44 < 2^9.59; lo1 + that + 2⁸·hi0 < 2^53.65, so its carry is
// below 2^9.65; lo2 + that + 2⁸·hi1 < 2^53.61, whose bits at 2¹³⁰ and up
// (≫ 42) are below 2^11.61. h0 = (lo0 & m44) + 5·those + 5·2¹⁰·hi2
// < 2⁴⁴ + 2^13.93 + 2^50.48 < 2^50.49, whose carry into h1 is below 2^6.49.
// The result: h0 < 2⁴⁴, h1 < 2⁴⁴+2⁷, h2 < 2⁴², as promised above.
func mulReduce(s *stream, h [3]Op, r mulr, c consts, w scratch) {
	mulReduceNext(s, h, r, c, w, nil)
}

// mulReduceNext is mulReduce, and with a non-nil next it adds the 8 blocks
// at next as well, so that h = h·r + those blocks, ready for the next
// multiply: the blocks' limbs (absorbInto) are the low accumulators' initial
// values instead of 0, which saves absorb's three additions and the zeroing
// of the low accumulators, and takes an addition off the chain of dependent
// steps. The bounds are mulReduce's.
func mulReduceNext(s *stream, h [3]Op, r mulr, c consts, w scratch, next *blocks) {
	lo, hi, t := w.lo, w.hi, w.t
	madd := mulProducts(s, h, r, c, w, next)
	// d0 → d1
	s.op(VPSRLQ, U8(44), lo[0], t)
	s.op(VPANDQ, c.m44, lo[0], h[0])
	madd(c.k5120, hi[2], h[0])
	s.op(VPADDQ, t, lo[1], lo[1])
	// d1 → d2
	s.op(VPSRLQ, U8(44), lo[1], t)
	s.op(VPANDQ, c.m44, lo[1], h[1])
	s.op(VPADDQ, t, lo[2], lo[2])
	// d2 → 5·(bits ≥ 2¹³⁰) into d0.
	s.op(VPSRLQ, U8(42), lo[2], t)
	s.bcast(VPANDQ, VPANDQ_BCST, c.m42, lo[2], h[2])
	madd(c.k5, t, h[0])
	// d0 → d1 once more.
	s.op(VPSRLQ, U8(44), h[0], t)
	s.op(VPANDQ, c.m44, h[0], h[0])
	s.op(VPADDQ, t, h[1], h[1])
}

// mulProducts appends the part of mulReduceNext before the carries: the
// low accumulators (with next's blocks, if any) and the high ones take the
// limb products of h and r, and the high halves of d0 and d1 are folded into
// the next column's low accumulator. It returns the IFMA multiply-add of a
// constant (a register, or memory read with an embedded broadcast), which
// the carries use too.
func mulProducts(s *stream, h [3]Op, r mulr, c consts, w scratch, next *blocks) func(k, x, acc Op) {
	lo, hi, t := w.lo, w.hi, w.t
	if next != nil {
		absorbInto(s, lo, next.msg, c, next.hibit, [4]Op{hi[0], hi[1], hi[2], t})
	}
	for i := range lo {
		// x ⊕ x is a zeroing idiom; taking x from a live register
		// keeps the allocator from seeing lo and hi as read before set.
		if next == nil {
			s.op(VPXORQ, c.m44, c.m44, lo[i])
		}
		s.op(VPXORQ, c.m44, c.m44, hi[i])
	}
	terms := [3][3]Op{
		{r.r0, r.r1, r.r2}, // h0's multipliers for d0, d1, d2
		{r.s2, r.r0, r.r1}, // h1's
		{r.s1, r.s2, r.r0}, // h2's
	}
	// h2's products first, then h0's, then h1's: the order in which the
	// step before leaves them, 4 cycles apart or more, so that in a chain
	// of steps each accumulator waits on h0 and h1 only (h0 + 8 cycles,
	// where the order h0, h1, h2 would take h0 + 12;
	// BenchmarkSeal/chacha20-poly1305/avx512/1024 measures it).
	for _, j := range []int{2, 0, 1} {
		for i := range 3 {
			s.op(VPMADD52LUQ, terms[j][i], h[j], lo[i])
			s.op(VPMADD52HUQ, terms[j][i], h[j], hi[i])
		}
	}
	madd := func(k, x, acc Op) { s.bcast(VPMADD52LUQ, VPMADD52LUQ_BCST, k, x, acc) }
	// The high halves first: they do not wait for the carries.
	madd(c.k256, hi[0], lo[1])
	madd(c.k256, hi[1], lo[2])
	return madd
}

// mulFold appends to s the instructions that set w.lo to h·r lane by lane,
// as mulReduce computes it but for the carries: the high accumulators are
// folded into the low ones, which hold the columns d0, d1, d2 whole, for a
// message's last step, whose lanes sumLanes adds up and carries once in
// general-purpose registers. That takes the carries' chain, a dozen cycles,
// off the end of the message; BenchmarkChaCha20Poly1305Fastest at
// Seal/avx512/1024, Seal/avx512/2048 and Open/avx512/1024 measures it.
//
// Bounds, with mulReduce's inputs: each low accumulator is below 3·2⁵² plus
// its fold (2⁸·hi0 < 2^48.99, 2⁸·hi1 < 2^47.24, 5·2¹⁰·hi2 < 2^50.48), so
// below 2^53.73.
func mulFold(s *stream, h [3]Op, r mulr, c consts, w scratch) {
	madd := mulProducts(s, h, r, c, w, nil)
	madd(c.k5120, w.hi[2], w.lo[0])
}

// Layout of the powers table, in 64-byte rows of 8 lanes, five rows
// (l0, l1, l2, 20·l1, 20·l2) per multiplier: the lane powers r⁸ r⁴ r⁷ r³ r⁶
// r² r⁵ r¹ that the last step of a message multiplies by, then r⁸ in every
// lane, which every other step multiplies by.
const (
	rowsPerMul = 5
	tblB       = 0
	tblR8      = rowsPerMul * 64
)

type vmulr struct{ r0, r1, r2, s1, s2 VecVirtual }

func (v vmulr) op() mulr { return mulr{v.r0, v.r1, v.r2, v.s1, v.s2} }

// withS fills in the 20× limbs.
func (v *vmulr) withS() {
	v.s1, v.s2 = ZMM(), ZMM()
	times20(v.r1, v.s1)
	times20(v.r2, v.s2)
}

// newVmulr wraps three limbs; withS must be called before it multiplies.
func newVmulr(l [3]VecVirtual) vmulr { return vmulr{r0: l[0], r1: l[1], r2: l[2]} }

// product returns a fresh copy of v multiplied by m.
func product(v vmulr, m vmulr, c consts) vmulr {
	h := [3]VecVirtual{ZMM(), ZMM(), ZMM()}
	VMOVDQA64(v.r0, h[0])
	VMOVDQA64(v.r1, h[1])
	VMOVDQA64(v.r2, h[2])
	var s stream
	mulReduce(&s, [3]Op{h[0], h[1], h[2]}, m.op(), c, newScratch())
	s.emit()
	return newVmulr(h)
}

// blend returns the lanes of b where mask k is set, and of a elsewhere.
func blend(k Op, a, b vmulr) vmulr {
	var l [3]VecVirtual
	for i, pair := range [3][2]VecVirtual{{a.r0, b.r0}, {a.r1, b.r1}, {a.r2, b.r2}} {
		l[i] = ZMM()
		VPBLENDMQ(pair[1], pair[0], k, l[i])
	}
	return newVmulr(l)
}

func storeMulr(v vmulr, tbl Register, off int) {
	for i, z := range []VecVirtual{v.r0, v.r1, v.r2, v.s1, v.s2} {
		VMOVDQU64(z, Mem{Base: tbl, Disp: off + 64*i})
	}
}

func powersIFMA() {
	TEXT("poly1305PowersIFMA", NOSPLIT, "func(st *[5]uint64, tbl *[80]uint64)")
	Pragma("noescape")
	Doc("poly1305PowersIFMA writes the powers of st's r that poly1305BlocksIFMA",
		"and the stitched ChaCha20-Poly1305 kernels multiply by: r⁸ r⁴ r⁷ r³ r⁶",
		"r² r⁵ r¹ by lane, and r⁸ in every lane.")
	st := Load(Param("st"), GP64())
	tbl := Load(Param("tbl"), GP64())
	c := loadConsts()

	Comment("r in radix 2⁴⁴, broadcast.")
	r0, r1, t := GP64(), GP64(), GP64()
	MOVQ(Mem{Base: st, Disp: offR0}, r0)
	MOVQ(Mem{Base: st, Disp: offR1}, r1)
	var l [3]VecVirtual
	for i := range l {
		l[i] = ZMM()
	}
	VPBROADCASTQ(r0, l[0])
	VPANDQ(c.m44, l[0], l[0])
	MOVQ(r1, t)
	SHLQ(U8(20), t)
	SHRQ(U8(44), r0)
	ORQ(r0, t)
	VPBROADCASTQ(t, l[1])
	VPANDQ(c.m44, l[1], l[1])
	SHRQ(U8(24), r1)
	VPBROADCASTQ(r1, l[2])
	p1 := newVmulr(l)

	Comment("Lane exponents: T = 2 2 1 1 2 2 1 1, Q = T·r² on lanes 0–3 = 4 4 3 3 2 2 1 1,",
		"P = Q·r⁴ on even lanes = 8 4 7 3 6 2 5 1.")
	k := K()
	m := GP32()
	p1.withS()
	p2 := product(p1, p1, c)
	p2.withS()
	MOVL(U32(0x33), m)
	KMOVW(m, k)
	tt := blend(k, p1, p2)
	y := product(tt, p2, c)
	MOVL(U32(0x0f), m)
	KMOVW(m, k)
	q := blend(k, tt, y)
	p4 := product(p2, p2, c)
	p4.withS()
	z := product(q, p4, c)
	MOVL(U32(0x55), m)
	KMOVW(m, k)
	lanes := blend(k, q, z)
	lanes.withS()
	storeMulr(lanes, tbl, tblB)
	p8 := product(p4, p4, c)
	p8.withS()
	storeMulr(p8, tbl, tblR8)
	VZEROUPPER()
	RET()
}

// tblMulr is the multiplier whose five rows start at off in the table, as
// memory operands.
func tblMulr(tbl Register, off int) mulr {
	row := func(i int) Mem { return Mem{Base: tbl, Disp: off + 64*i} }
	return mulr{row(0), row(1), row(2), row(3), row(4)}
}

// loadMulr loads five rows of the table.
func loadMulr(tbl Register, off int) vmulr {
	v := vmulr{ZMM(), ZMM(), ZMM(), ZMM(), ZMM()}
	for i, z := range []VecVirtual{v.r0, v.r1, v.r2, v.s1, v.s2} {
		VMOVDQU64(Mem{Base: tbl, Disp: off + 64*i}, z)
	}
	return v
}

// absorb appends to s the instructions that add the 8 blocks at msg to the
// lanes of h: lane j takes block order[j] = 0 4 1 5 2 6 3 7, the order
// VPUNPCK{L,H}QDQ leaves them in. hibit (2⁴⁰ in every lane) is a register or
// a memory operand read with an embedded broadcast. It works in w.
func absorb(s *stream, h [3]Op, msg Mem, c consts, hibit Op, w scratch) {
	a, b, lo, hi, t := w.lo[0], w.lo[1], w.lo[2], w.hi[0], w.hi[1]
	s.op(VMOVDQU64, msg, a)
	s.op(VMOVDQU64, msg.Offset(64), b)
	s.op(VPUNPCKLQDQ, b, a, lo) // low words of blocks 0 4 1 5 2 6 3 7
	s.op(VPUNPCKHQDQ, b, a, hi) // high words
	// l0 = lo & m44; l1 = (lo>>44 | hi<<20) & m44; l2 = hi>>24 | 2⁴⁰.
	s.op(VPSRLQ, U8(44), lo, t)
	s.op(VPANDQ, c.m44, lo, lo)
	s.op(VPADDQ, lo, h[0], h[0])
	s.op(VPSLLQ, U8(20), hi, a)
	s.op(VPTERNLOGQ, U8(0xa8), c.m44, a, t) // t = (t | a) & m44
	s.op(VPADDQ, t, h[1], h[1])
	s.op(VPSRLQ, U8(24), hi, hi)
	s.bcast(VPORQ, VPORQ_BCST, hibit, hi, hi)
	s.op(VPADDQ, hi, h[2], h[2])
}

// blocks are 8 blocks of message at msg, and hibit as in absorb.
type blocks struct {
	msg   Mem
	hibit Op
}

// absorbInto appends to s the instructions that set acc to the limbs of
// the 8 blocks at msg with 2¹²⁸ added, lane j taking block order[j] as in
// absorb. It works in tmp.
func absorbInto(s *stream, acc [3]Op, msg Mem, c consts, hibit Op, tmp [4]Op) {
	a, lo, hi, _ := tmp[0], tmp[1], tmp[2], tmp[3]
	s.op(VMOVDQU64, msg, a)
	s.op(VPUNPCKLQDQ, msg.Offset(64), a, lo) // low words of blocks 0 4 1 5 2 6 3 7
	s.op(VPUNPCKHQDQ, msg.Offset(64), a, hi) // high words
	s.op(VPANDQ, c.m44, lo, acc[0])
	s.op(VPSRLQ, U8(44), lo, acc[1])
	s.op(VPSLLQ, U8(20), hi, a)
	s.op(VPTERNLOGQ, U8(0xa8), c.m44, a, acc[1]) // acc1 = (acc1 | a) & m44
	s.op(VPSRLQ, U8(24), hi, hi)
	s.bcast(VPORQ, VPORQ_BCST, hibit, hi, acc[2])
}

// loadH sets lane 0 of h to st's accumulator in radix 2⁴⁴ and its other
// lanes to 0.
func loadH(st Register, h [3]Op) {
	h0, h1, h2 := GP64(), GP64(), GP64()
	MOVQ(Mem{Base: st, Disp: offH0}, h0)
	MOVQ(Mem{Base: st, Disp: offH1}, h1)
	MOVQ(Mem{Base: st, Disp: offH2}, h2)
	l := to44(h0, h1, h2)
	for i := range h {
		VMOVQ(l[i], h[i].(Vec).AsX())
	}
}

// to44 returns h0 + h1·2⁶⁴ + h2·2¹²⁸ in radix 2⁴⁴: l0 and l1 below 2⁴⁴, and
// l2 = h1≫24 + h2·2⁴⁰ (below 2⁴² + 2⁴⁰ for h2 ≤ 4). h0, h1 and h2 are lost.
func to44(h0, h1, h2 Register) [3]Register {
	m44, l0, l1 := GP64(), GP64(), GP64()
	MOVQ(U64(mask44), m44)
	MOVQ(h0, l0)
	ANDQ(m44, l0)
	SHRQ(U8(44), h0)
	MOVQ(h1, l1)
	SHLQ(U8(20), l1)
	ORQ(h0, l1)
	ANDQ(m44, l1)
	SHRQ(U8(24), h1)
	SHLQ(U8(40), h2)
	ORQ(h1, h2)
	return [3]Register{l0, l1, h2}
}

// storeH sums the lanes of h and stores the sum to st's accumulator in
// radix 2⁶⁴, partially reduced. s is a scratch vector register.
func storeH(h [3]Op, st Register, s Op) {
	h0, h1, h2 := sumLanes(h, s, nil)
	MOVQ(h0, Mem{Base: st, Disp: offH0})
	MOVQ(h1, Mem{Base: st, Disp: offH1})
	MOVQ(h2, Mem{Base: st, Disp: offH2})
}

// sumLanes returns the sum of h's lanes, plus the value in radix 2⁴⁴ at
// add's three words if add is not nil (limbs below 2⁴⁴, 2⁴⁴ and 2⁴³), in
// radix 2⁶⁴, below 2¹³⁰ + 2⁴⁶. s is a scratch vector register. The lanes'
// limbs may be as large as mulFold leaves them.
//
// Bounds. With limbs below 2^53.73 (mulFold's; mulReduce's are smaller), the
// sums are below 2^56.74 with the addend. Then the carries: l0's is below
// 2^12.74, l1's below 2^12.75, and l2's bits at 2¹³⁰ and up (≫ 42) are below
// 2^14.75, which come back as 5× that < 2^17.07 into l0 < 2⁴⁴, whose carry,
// at most 1, leaves l1 ≤ 2⁴⁴. So l0 < 2⁴⁴, l1 ≤ 2⁴⁴, l2 < 2⁴², and the
// value is below 2⁴⁴ + 2⁸⁸ + (2⁴²−1)·2⁸⁸ < 2¹³⁰ + 2⁴⁶.
func sumLanes(h [3]Op, s Op, add *Mem) (h0, h1, h2 GPVirtual) {
	if add == nil {
		Comment("Sum the lanes: each limb is below 2^53.73 (mulFold; mulReduce",
			"leaves less), the sums below 2^56.73.")
	} else {
		Comment("Sum the lanes and the addend: each lane's limbs are below",
			"2^53.73 (mulFold), the sums below 2^56.74.")
	}
	h0, h1, h2 = GP64(), GP64(), GP64()
	t, u, m44 := GP64(), GP64(), GP64()
	out := [3]GPVirtual{h0, h1, h2}
	for i := range h {
		VALIGNQ(U8(4), h[i], h[i], s)
		VPADDQ(s, h[i], h[i])
		VALIGNQ(U8(2), h[i], h[i], s)
		VPADDQ(s, h[i], h[i])
		VALIGNQ(U8(1), h[i], h[i], s)
		VPADDQ(s, h[i], h[i])
		VMOVQ(h[i].(Vec).AsX(), out[i])
		if add != nil {
			ADDQ(add.Offset(8*i), out[i])
		}
	}

	Comment("Carry to l0, l1 < 2⁴⁴, l2 < 2⁴², folding 2¹³⁰ back as 5.")
	MOVQ(U64(mask44), m44)
	MOVQ(h0, t)
	SHRQ(U8(44), t)
	ANDQ(m44, h0)
	ADDQ(t, h1)
	MOVQ(h1, t)
	SHRQ(U8(44), t)
	ANDQ(m44, h1)
	ADDQ(t, h2)
	MOVQ(h2, t)
	SHRQ(U8(42), t)
	MOVQ(U64(mask42), u)
	ANDQ(u, h2)
	LEAQ(Mem{Base: t, Index: t, Scale: 4}, t)
	ADDQ(t, h0)
	MOVQ(h0, t)
	SHRQ(U8(44), t)
	ANDQ(m44, h0)
	ADDQ(t, h1) // l1 may now be 2⁴⁴; the adds below carry it.

	Comment("Back to radix 2⁶⁴: h = l0 + l1·2⁴⁴ + l2·2⁸⁸, each shifted piece",
		"split at the word boundary, then added with carries.")
	MOVQ(h1, t)
	SHLQ(U8(44), t)
	SHRQ(U8(20), h1)
	MOVQ(h2, u)
	SHLQ(U8(24), u)
	SHRQ(U8(40), h2)
	ADDQ(t, h0)
	ADCQ(u, h1)
	ADCQ(U8(0), h2)
	return h0, h1, h2
}

func blocksIFMA() {
	TEXT("poly1305BlocksIFMA", NOSPLIT, "func(st *[5]uint64, tbl *[80]uint64, msg []byte)")
	Pragma("noescape")
	Doc("poly1305BlocksIFMA absorbs the len(msg)/128 groups of 8 blocks of msg into st,",
		"with the powers of r that poly1305PowersIFMA wrote to tbl.")
	st := Load(Param("st"), GP64())
	tbl := Load(Param("tbl"), GP64())
	msg := Load(Param("msg").Base(), GP64())
	n := Load(Param("msg").Len(), GP64())
	SHRQ(U8(7), n)
	JZ(LabelRef("ifma_done"))

	c := loadConsts()
	hibit := ZMM()
	t := GP64()
	MOVQ(U64(1<<40), t)
	VPBROADCASTQ(t, hibit)

	Comment("h into lane 0 in radix 2⁴⁴; the other lanes start at 0.")
	h := [3]Op{ZMM(), ZMM(), ZMM()}
	loadH(st, h)

	Comment("Each step multiplies by r⁸ and adds the next 128 bytes; the first",
		"128 bytes are added before, and the last step multiplies by the lane",
		"powers.")
	var s stream
	absorb(&s, h, Mem{Base: msg}, c, hibit, newScratch())
	s.emit()
	r8 := loadMulr(tbl, tblR8).op()
	DECQ(n)
	JZ(LabelRef("ifma_last"))
	Label("ifma_loop")
	s = nil
	mulReduceNext(&s, h, r8, c, newScratch(), &blocks{Mem{Base: msg, Disp: 128}, hibit})
	s.emit()
	ADDQ(U32(128), msg)
	DECQ(n)
	JNZ(LabelRef("ifma_loop"))

	Label("ifma_last")
	s = nil
	mulReduce(&s, h, tblMulr(tbl, tblB), c, newScratch())
	s.emit()
	storeH(h, st, ZMM())
	VZEROUPPER()
	Label("ifma_done")
	RET()
}
