package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// chacha20File emits the ChaCha20 (RFC 8439) keystream kernels:
// kernels/chacha20_amd64.s and its Go declarations.
//
// Both kernels use the "vertical" layout: vector register i holds state word i
// of N consecutive blocks (N = 16 in a zmm, 8 in a ymm), one block per 32-bit
// lane, so a quarter round on four registers is a quarter round on N blocks
// at once and the rounds need no shuffles. Lane j of the counter word is
// counter+j. After the rounds and the final addition of the input state, a
// transpose turns "word i of every block" into "every word of block j", which
// is then XORed with 64 bytes of input. The AVX-512 kernel computes a rest of
// up to 12 blocks in the row layout instead (streamRows).
//
// Calling convention of both kernels: state is the 16-word input state of the
// first block (constants, key, counter, nonce); n > 0 bytes are processed.
// The kernel XORs the floor(n/64) full blocks of src into dst and, if n is not
// a multiple of 64, writes the keystream of the block after them to ks
// without XORing it: the Go side finishes that block, and a cipher.Stream
// keeps the rest of it for the next call.
//
// Two more functions serve them: chachaBlockScalar computes one block in
// general-purpose registers (scalar.go), for messages of one block, and
// chachaXORAVX512x17 runs that scalar code alongside the 16-block zmm pass,
// 17 blocks per group (wide.go).
func chacha20File() {
	chachaAVX512() // first: it emits chachaIota16, which both kernels use
	chachaAVX2()
	chachaScalar()
	chachaAVX512x17()
}

// columns and diagonals are the quarter rounds of a double round, as word
// indices (a, b, c, d) into the state (RFC 8439 §2.3).
var (
	columns   = [4][4]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}
	diagonals = [4][4]int{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}}
)

// rotator emits x <<<= r for one of ChaCha20's rotation counts; q numbers the
// quarter round among those interleaved, for kernels that need a scratch
// register per quarter round.
type rotator func(x Op, r, q int)

// vecOps are the three vector instructions a quarter round uses, for one
// register width.
type vecOps struct {
	add, xor func(src, dst Op) // dst += src, dst ^= src
	rot      rotator
}

// quarterRounds emits the quarter rounds qrs interleaved step by step, so
// that their independent dependency chains overlap. reg maps a state word
// to the register holding it.
func quarterRounds(ops vecOps, qrs [][4]int, reg func(word int) Op) {
	step := func(x, y, z int, r int) {
		// x += y; z ^= x; z <<<= r
		for _, qr := range qrs {
			ops.add(reg(qr[y]), reg(qr[x]))
		}
		for _, qr := range qrs {
			ops.xor(reg(qr[x]), reg(qr[z]))
		}
		for q, qr := range qrs {
			ops.rot(reg(qr[z]), r, q)
		}
	}
	const a, b, c, d = 0, 1, 2, 3
	step(a, b, d, 16)
	step(c, d, b, 12)
	step(a, b, d, 8)
	step(c, d, b, 7)
}

// io names a kernel's pointer and length registers.
type io struct {
	dst, src, n, ks Register
}

// halfStore returns the store of a ymm half of a transposed block for a
// kernel's registers: half h of block b at byte 64b+32h, XORed with src into
// dst. With tail set, n may end before or inside block b: a block before n's
// end is stored as usual, the block in which n ends is kept in ks (its half h
// at ks+32h) and later blocks are dropped. xor and mov are the instruction
// forms for the registers (VEX for Y0–Y15, EVEX beyond). prefix makes the
// labels unique.
func halfStore(r io, h int, tail bool, prefix string, xor func(m Mem, x VecPhysical), mov func(x VecPhysical, m Mem)) func(b int, x VecPhysical) {
	return func(b int, x VecPhysical) {
		at := 64*b + 32*h
		if !tail {
			xor(Mem{Base: r.src, Disp: at}, x)
			mov(x, Mem{Base: r.dst, Disp: at})
			return
		}
		partial := fmt.Sprintf("%s_partial%d_%d", prefix, b, h)
		next := fmt.Sprintf("%s_next%d_%d", prefix, b, h)
		CMPQ(r.n, U32(64*(b+1)))
		JB(LabelRef(partial))
		xor(Mem{Base: r.src, Disp: at}, x)
		mov(x, Mem{Base: r.dst, Disp: at})
		JMP(LabelRef(next))
		Label(partial)
		CMPQ(r.n, U32(64*b))
		JBE(LabelRef(next))
		mov(x, Mem{Base: r.ks, Disp: 32 * h})
		Label(next)
	}
}
