package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// A single block is faster in general-purpose registers than in vectors: the
// quarter round's add, xor and rotate form a dependency chain, and ROLL's
// latency is 1 cycle where VPROLD's is 2, so a scalar double round takes
// about 24 cycles of latency to a vector one's 32. The four quarter rounds of
// a round keep the four integer ALUs busy.
//
// The 16 words need 16 registers, and 14 are free (not SP, not BP). As in
// the AVX2 kernel, two of the four c words (8…11) wait in the frame while the
// quarter rounds that do not use them run.

// scalarReg holds the words that stay in registers; the c words take turns
// in R14 and R15.
var scalarReg = map[int]GPPhysical{
	0: EAX, 1: EBX, 2: ECX, 3: EDX,
	4: ESI, 5: EDI, 6: R8L, 7: R9L,
	12: R10L, 13: R11L, 14: R12L, 15: R13L,
}

func chachaScalar() {
	TEXT("chachaBlockScalar", NOSPLIT, "func(state *[16]uint32, ks *[64]byte)")
	Pragma("noescape")
	Doc("chachaBlockScalar writes the keystream of the one block whose input",
		"state is state to ks, computing it in general-purpose registers.")
	// The frame: the c words in their spill slots, then the round counter.
	frame := AllocLocal(24)
	spill := func(w int) Mem { return frame.Offset(4 * (w - 8)) }
	rounds := frame.Offset(16)

	// The argument pointers share registers with the state; load them again
	// at the end.
	Load(Param("state"), R14)
	for w := 0; w < 16; w++ {
		if r, ok := scalarReg[w]; ok {
			MOVL(Mem{Base: R14, Disp: 4 * w}, r)
		}
	}
	for _, w := range []int{10, 11} {
		MOVL(Mem{Base: R14, Disp: 4 * w}, R15L)
		MOVL(R15L, spill(w))
	}
	MOVL(Mem{Base: R14, Disp: 4 * 9}, R15L)
	MOVL(Mem{Base: R14, Disp: 4 * 8}, R14L)
	MOVL(U32(10), rounds)

	Label("scalar_doubleround")
	ops := vecOps{
		add: func(s, d Op) { ADDL(s, d) },
		xor: func(s, d Op) { XORL(s, d) },
		rot: func(x Op, r, _ int) { ROLL(U8(r), x) },
	}
	regs := func(lo, hi int) func(int) Op {
		return func(w int) Op {
			switch w {
			case lo:
				return R14L
			case hi:
				return R15L
			}
			return scalarReg[w]
		}
	}
	swap := func(outLo, outHi, inLo, inHi int) {
		MOVL(R14L, spill(outLo))
		MOVL(R15L, spill(outHi))
		MOVL(spill(inLo), R14L)
		MOVL(spill(inHi), R15L)
	}
	quarterRounds(ops, columns[0:2], regs(8, 9))
	swap(8, 9, 10, 11)
	quarterRounds(ops, columns[2:4], regs(10, 11))
	quarterRounds(ops, diagonals[0:2], regs(10, 11))
	swap(10, 11, 8, 9)
	quarterRounds(ops, diagonals[2:4], regs(8, 9))
	DECL(rounds)
	JNZ(LabelRef("scalar_doubleround"))

	Comment("Add the input state and store the keystream.")
	MOVL(R14L, spill(8))
	MOVL(R15L, spill(9))
	Load(Param("state"), R14)
	Load(Param("ks"), R15)
	for w := 0; w < 16; w++ {
		r, ok := scalarReg[w]
		if !ok {
			continue
		}
		ADDL(Mem{Base: R14, Disp: 4 * w}, r)
		MOVL(r, Mem{Base: R15, Disp: 4 * w})
	}
	for w := 8; w < 12; w++ {
		MOVL(spill(w), EAX)
		ADDL(Mem{Base: R14, Disp: 4 * w}, EAX)
		MOVL(EAX, Mem{Base: R15, Disp: 4 * w})
	}
	RET()
}
