package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// In the stitched seal kernel the vector pipes are the bottleneck and the
// integer pipes idle (stitched.go). So the last scalarSteps × 8 blocks of
// every group go through a Poly1305 accumulator in general-purpose
// registers (MULX, 64-bit limbs, one block after the other), and only the
// first ifmaSteps steps through IFMA.
//
// The two accumulators evaluate one polynomial. The IFMA lanes' last step
// in a group multiplies by r^(8+8·scalarSteps) instead of r⁸, which moves
// them past the scalar blocks. The scalar accumulator starts each group at
// 0 and evaluates its blocks by Horner's rule, (h + m)·r per block, so that
// at the group's end it holds Σ m_i·r^(e+1−i) (block e the group's last). At
// the start of the next group's steps it is added to lane 0 together with
// that group's first block (handoff), where it is multiplied by exactly the
// power of r that that block is, the one it lacks; after the last group it
// is added before the lanes are summed.
//
// scalarSteps is the split that measured fastest of 2 to 6 scalar steps in
// BenchmarkSeal/chacha20-poly1305/avx512/16384, the kernel regenerated for
// each. With 5, 40 blocks at about 14 cycles each are a chain of some 560
// cycles, inside the group's ChaCha20.
const (
	scalarSteps = 5
	ifmaSteps   = 8 - scalarSteps
)

// gprPoly is a Poly1305 accumulator in general-purpose registers: h = h0 +
// h1·2⁶⁴ + h2·2¹²⁸ with h2 ≤ 4 between blocks, four scratch registers,
// and r = r0 + r1·2⁶⁴ and s1 = r1 + r1/4 in memory. The registers of h and
// the scratch ones change roles from block to block (block); canon returns
// them to the registers h started in.
type gprPoly struct {
	h, canon   [3]Register
	t          [4]Register
	r0, r1, s1 Mem
}

func newGPRPoly(r0, r1, s1 Mem) *gprPoly {
	p := &gprPoly{r0: r0, r1: r1, s1: s1}
	for i := range p.h {
		p.h[i] = GP64()
	}
	for i := range p.t {
		p.t[i] = GP64()
	}
	p.canon = p.h
	return p
}

// zero sets h to 0.
func (p *gprPoly) zero() {
	for _, r := range p.h {
		XORL(r.(GPVirtual).As32(), r.(GPVirtual).As32())
	}
}

// block appends to s the instructions that set h = (h + m + 2¹²⁸)·r,
// partially reduced, for the block at m; with fresh, h is taken as 0.
//
// As in poly1305BlocksMULX: with s1 = 5·r1/4 (r1 is a multiple of 4),
// h·r ≡ d0 + d1·2⁶⁴ + d2·2¹²⁸ with d0 = h0·r0 + h1·s1, d1 = h0·r1 + h1·r0 +
// h2·s1, d2 = h2·r0. h2 ≤ 4 before the block and ≤ 6 after adding it, so the
// h2 products fit in 64 bits (r0 < 2⁶⁰, s1 < 2⁶¹), and d2 plus the carries
// stays below 2⁶³. Reducing b1 = 4q + (b1 & 3) at 2¹²⁸ by q·2¹³⁰ ≡ 5q leaves
// h2 ≤ 3 + 1.
func (p *gprPoly) block(s *stream, m Mem, fresh bool) {
	h0, h1, h2 := p.h[0], p.h[1], p.h[2]
	a0, a1, b0, b1 := p.t[0], p.t[1], p.t[2], p.t[3]
	// Instructions that pass a carry on are one element of s, so that
	// nothing merged with s can come between them and change the flags.
	if fresh {
		s.do(func() { MOVQ(m, h0) })
		s.do(func() { MOVQ(m.Offset(8), h1) })
		s.do(func() { MOVL(U32(1), h2.(GPVirtual).As32()) })
	} else {
		s.do(func() {
			ADDQ(m, h0)
			ADCQ(m.Offset(8), h1)
			ADCQ(U8(1), h2)
		})
	}
	s.do(func() { MOVQ(h0, RDX) })
	s.do(func() { MULXQ(p.r0, a0, a1) }) // a1:a0 = h0·r0
	s.do(func() { MULXQ(p.r1, b0, b1) }) // b1:b0 = h0·r1
	s.do(func() { MOVQ(h1, RDX) })
	s.do(func() { MULXQ(p.s1, h0, h1) }) // h1:h0 = h1·s1
	s.do(func() {
		ADDQ(h0, a0)
		ADCQ(h1, a1) // a1:a0 = d0
	})
	s.do(func() { MULXQ(p.r0, h0, h1) }) // h1:h0 = h1·r0 (RDX is still h1)
	s.do(func() {
		ADDQ(h0, b0)
		ADCQ(h1, b1)
	})
	s.do(func() { MOVQ(p.s1, h0) })
	s.do(func() { IMULQ(h2, h0) }) // h2·s1
	s.do(func() {
		ADDQ(h0, b0)
		ADCQ(U8(0), b1)
	})
	s.do(func() { IMULQ(p.r0, h2) }) // d2 = h2·r0
	s.do(func() {
		ADDQ(a1, b0)
		ADCQ(h2, b1) // b1:b0 = d1 + d0's high word, b1 += d2
	})
	s.do(func() { MOVQ(b1, h2) })
	s.do(func() { ANDQ(U8(3), h2) })
	s.do(func() { MOVQ(b1, h1) })
	s.do(func() { SHRQ(U8(2), h1) })
	s.do(func() { ANDQ(I8(-4), b1) })
	s.do(func() { ADDQ(h1, b1) }) // 5q
	s.do(func() {
		ADDQ(b1, a0)
		ADCQ(U8(0), b0)
		ADCQ(U8(0), h2)
	})
	p.h = [3]Register{a0, b0, h2}
	p.t = [4]Register{h0, h1, a1, b1}
}

// toCanon appends to s the moves that put h back in the registers it
// started in.
func (p *gprPoly) toCanon(s *stream) {
	for i := 0; i < 2; i++ { // h2 never moves
		cur, want := p.h[i], p.canon[i]
		if cur == want {
			continue
		}
		if other := p.h[1-i]; other == want {
			s.do(func() { XCHGQ(cur, want) })
			p.h[i], p.h[1-i] = want, cur
			continue
		}
		s.do(func() { MOVQ(cur, want) })
		for j, t := range p.t {
			if t == want {
				p.t[j] = cur
			}
		}
		p.h[i] = want
	}
}

// handoff returns the stream element that adds h, in radix 2⁴⁴, to lane 0
// of acc, using x as a vector scratch register and m44 (2⁴⁴−1) as a memory
// operand. h must be in its canonical registers; it is left spoiled.
func (p *gprPoly) handoff(acc [3]Op, x VecPhysical, m44 Mem) func() {
	h0, h1, h2, t := p.canon[0], p.canon[1], p.canon[2], p.t[0]
	return func() {
		MOVQ(h0, t)
		ANDQ(m44, t)         // l0
		SHRQ(U8(44), h1, h0) // h0 = h0≫44 | h1≪20
		ANDQ(m44, h0)        // l1
		SHRQ(U8(24), h2, h1) // h1 = h1≫24 | h2≪40, l2 < 2⁴²+2⁴⁰
		for i, l := range []Register{t, h0, h1} {
			VMOVQ(l, x.AsX())
			VPADDQ(x, acc[i], acc[i])
		}
	}
}
