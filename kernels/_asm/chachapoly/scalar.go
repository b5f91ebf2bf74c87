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
// a round, interleaved, keep the four integer ALUs busy.
//
// The 16 words need 16 registers, and 15 are free: all but SP, with BP
// among them (the assembler saves and restores BP around a function with a
// frame, as in the standard library's SHA-2 assembly). A quarter round step
// uses either its a word (steps 1 and 3: a += b; d ^= a; d <<<= r) or its c
// word (steps 2 and 4: c += d; b ^= c; b <<<= r), never both, so R15 holds
// word 3 (an a word) in steps 1 and 3 and word 11 (a c word) in steps 2 and
// 4, the other waiting in the frame. The load and store at each step run on
// the load and store units, off the dependency chains. A double round is
// shorter this way than when, without BP, two pairs of words share R14 and
// R15, which counts where two of its double rounds run beside one of the
// zmm blocks' (head.go); BenchmarkChaCha20Poly1305Fastest/Seal/avx512/1024
// measures it.

// scalarReg holds the words that stay in registers.
var scalarReg = map[int]GPPhysical{
	0: EAX, 1: EBX, 2: R14L, 8: ECX, 9: EDX, 10: EBP,
	4: ESI, 5: EDI, 6: R8L, 7: R9L,
	12: R10L, 13: R11L, 14: R12L, 15: R13L,
}

// scalarShared are the words that take turns in R15.
var scalarShared = [2]int{3, 11}

// r15Words tracks which of the shared words is in R15, the other waiting in
// its frame slot. With out set, its moves go to that stream instead of
// being emitted.
type r15Words struct {
	held int
	slot func(w int) Mem
	out  *stream
}

// hold makes R15 hold word w, parking the word it held.
func (s *r15Words) hold(w int) {
	if s.out != nil {
		s.out.op2(MOVL, R15L, s.slot(s.held))
		s.out.op2(MOVL, s.slot(w), R15L)
	} else {
		MOVL(R15L, s.slot(s.held))
		MOVL(s.slot(w), R15L)
	}
	s.held = w
}

// reg is where word w is now.
func (s *r15Words) reg(w int) Op {
	if w == s.held {
		return R15L
	}
	r, ok := scalarReg[w]
	if !ok {
		panic("word not in a register")
	}
	return r
}

// scalarHalfRound runs the four steps of a half round, step(x, y, z, r)
// doing x += y, z ^= x, z <<<= r across the quarter rounds, with R15 handed
// to the shared word that the next step uses.
func scalarHalfRound(step func(x, y, z, r int), s *r15Words) {
	const a, b, c, d = 0, 1, 2, 3
	step(a, b, d, 16)
	s.hold(11)
	step(c, d, b, 12)
	s.hold(3)
	step(a, b, d, 8)
	s.hold(11)
	step(c, d, b, 7)
	s.hold(3)
}

func chachaScalar() {
	TEXT("chachaBlockScalar", NOSPLIT, "func(state *[16]uint32, ks *[64]byte)")
	Pragma("noescape")
	Doc("chachaBlockScalar writes the keystream of the one block whose input",
		"state is state to ks, computing it in general-purpose registers.")
	// The frame: slots for words 3 and 11, the round counter, and a slot
	// for word 2 at the end.
	frame := AllocLocal(24)
	slot := func(w int) Mem {
		for i, s := range scalarShared {
			if s == w {
				return frame.Offset(4 * i)
			}
		}
		panic("no slot")
	}
	rounds := frame.Offset(8)

	// The argument pointers share registers with the state; load them again
	// at the end.
	Load(Param("state"), R14)
	for w := 0; w < 16; w++ {
		if r, ok := scalarReg[w]; ok && w != 2 { // word 2 goes to R14 last
			MOVL(Mem{Base: R14, Disp: 4 * w}, r)
		}
	}
	MOVL(Mem{Base: R14, Disp: 4 * 11}, R15L)
	MOVL(R15L, slot(11))
	MOVL(Mem{Base: R14, Disp: 4 * 3}, R15L)
	MOVL(Mem{Base: R14, Disp: 4 * 2}, R14L)
	MOVL(U32(10), rounds)

	words := &r15Words{held: 3, slot: slot}
	round := func(qrs [4][4]int) {
		scalarHalfRound(func(x, y, z, r int) {
			for _, qr := range qrs {
				ADDL(words.reg(qr[y]), words.reg(qr[x]))
			}
			for _, qr := range qrs {
				XORL(words.reg(qr[x]), words.reg(qr[z]))
			}
			for _, qr := range qrs {
				ROLL(U8(r), words.reg(qr[z]))
			}
		}, words)
	}

	Label("scalar_doubleround")
	round(columns)
	round(diagonals)
	DECL(rounds)
	JNZ(LabelRef("scalar_doubleround"))

	Comment("Add the input state and store the keystream.")
	word2 := frame.Offset(12)
	MOVL(R15L, slot(3))
	MOVL(R14L, word2)
	Load(Param("state"), R14)
	Load(Param("ks"), R15)
	for w := 0; w < 16; w++ {
		r, ok := scalarReg[w]
		if !ok || w == 2 {
			continue
		}
		ADDL(Mem{Base: R14, Disp: 4 * w}, r)
		MOVL(r, Mem{Base: R15, Disp: 4 * w})
	}
	for _, w := range []int{2, 3, 11} {
		m := word2
		if w != 2 {
			m = slot(w)
		}
		MOVL(m, EAX)
		ADDL(Mem{Base: R14, Disp: 4 * w}, EAX)
		MOVL(EAX, Mem{Base: R15, Disp: 4 * w})
	}
	RET()
}

// scalarInput returns where word w of a block's input state is while R15
// holds the key's address and R14 the nonce's: the constants, the key and
// the nonce. Word 12, the block counter, is the caller's.
func scalarInput(w int) Mem {
	switch {
	case w < 4:
		return rowsSigma.Offset(4 * w)
	case w < 12:
		return Mem{Base: R15, Disp: 4 * (w - 4)}
	default:
		return Mem{Base: R14, Disp: 4 * (w - 13)}
	}
}

// loadScalarInput loads a block's input state from scalarInput into the
// scalar layout, all but word 12: word 11 to slot11 (through EAX), words 2
// and 3 last, into R14 and R15, which held the nonce's and the key's
// addresses.
func loadScalarInput(slot11 Mem) {
	for w := 4; w < 16; w++ {
		if r, ok := scalarReg[w]; ok && w != 12 {
			MOVL(scalarInput(w), r)
		}
	}
	MOVL(scalarInput(11), EAX)
	MOVL(EAX, slot11)
	for w := 0; w < 4; w++ {
		r := R15L
		if w < 3 {
			r = scalarReg[w]
		}
		MOVL(scalarInput(w), r)
	}
}

// scalarKeyWords appends to s the instructions that turn a scalar block
// whose rounds are done, word 3 in R15 and word 11 parked, into its
// keystream's first 32 bytes (the Poly1305 key) in four registers: RAX
// words 0 and 1, R14 words 2 and 3, RSI 4 and 5, R8 6 and 7. loadKey loads
// the key's address into R15; slot3 is a free slot for word 3.
func scalarKeyWords(s *stream, slot3 Mem, loadKey func()) {
	s.op2(MOVL, R15L, slot3)
	s.do(loadKey)
	for _, w := range []int{0, 1, 2, 4, 5, 6, 7} {
		s.op2(ADDL, scalarInput(w), scalarReg[w])
	}
	s.op2(MOVL, slot3, EDX) // word 9's register, no longer needed
	s.op2(ADDL, scalarInput(3), EDX)
	for _, p := range [][2]Register{{RAX, RBX}, {R14, RDX}, {RSI, RDI}, {R8, R9}} {
		s.op(SHLQ, U8(32), p[1])
		s.op2(ORQ, p[1], p[0])
	}
}
