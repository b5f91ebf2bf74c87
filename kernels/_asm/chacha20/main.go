// Command chacha20 generates the ChaCha20 (RFC 8439) keystream kernels:
// kernels/chacha20_amd64.s and its Go declarations.
//
// Both kernels use the "vertical" layout: vector register i holds state word i
// of N consecutive blocks (N = 16 in a zmm, 8 in a ymm), one block per 32-bit
// lane, so a quarter round on four registers is a quarter round on N blocks
// at once and the rounds need no shuffles. Lane j of the counter word is
// counter+j. After the rounds and the final addition of the input state, a
// transpose turns "word i of every block" into "every word of block j", which
// is then XORed with 64 bytes of input.
//
// Calling convention of both kernels: state is the 16-word input state of the
// first block (constants, key, counter, nonce); n > 0 bytes are processed.
// The kernel XORs the floor(n/64) full blocks of src into dst and, if n is not
// a multiple of 64, writes the keystream of the block after them to ks
// without XORing it: the Go side finishes that block, and a cipher.Stream
// keeps the rest of it for the next call.
package main

//go:generate go run . -out ../../chacha20_amd64.s -stubs ../../chacha20_stub_amd64.go -pkg kernels

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
)

func main() {
	ConstraintExpr("amd64,gc,!purego")
	chachaAVX512() // first: it emits chachaIota16, which both kernels use
	chachaAVX2()
	Generate()
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
