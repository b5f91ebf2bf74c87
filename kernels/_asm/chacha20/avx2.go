package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ymm returns Y0…Y15 by number.
func ymm(i int) VecPhysical {
	return []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}[i]
}

// The AVX2 kernel computes 8 blocks per pass, word i of the 8 blocks in a ymm
// register. Sixteen words and the scratch registers of the rotations do not
// fit in AVX2's 16 registers, so two of the four "c" words (8…11) live in
// memory at any time, as in OpenSSL's ChaCha20_8x: the column round runs
// quarter rounds 0 and 1 with words 8 and 9 in Y8 and Y9, then swaps in
// words 10 and 11 for quarter rounds 2 and 3; the diagonal round's first two
// quarter rounds use words 10 and 11 too, and its last two 8 and 9 again.
// Each double round thus swaps twice, and Y10 and Y11 are scratch. The
// out-of-order core overlaps the two halves of a round, which share no word.
//
// The stack frame holds, per word, its broadcast input state (word 12: the
// counters of the current 8 blocks) and a spill slot.

const (
	avx2Bcast = 0       // 16 × 32 bytes: input state, word i in every lane
	avx2Spill = 16 * 32 // 16 × 32 bytes: spill slots by word
	avx2Frame = 32 * 32
)

var rot16Mask, rot8Mask, eights Mem

// avx2Data emits the VPSHUFB masks that rotate every 32-bit lane left by 16
// and by 8 bits, and a vector of 8s that advances the counters.
func avx2Data() {
	// Byte j of VPSHUFB's result is byte mask[j] of its input, within each
	// 128-bit lane.
	rot16Mask = GLOBL("chachaRot16", RODATA|NOPTR)
	for i := 0; i < 32; i += 4 {
		l := i % 16
		DATA(i, U32(uint32(l+2)|uint32(l+3)<<8|uint32(l)<<16|uint32(l+1)<<24))
	}
	rot8Mask = GLOBL("chachaRot8", RODATA|NOPTR)
	for i := 0; i < 32; i += 4 {
		l := i % 16
		DATA(i, U32(uint32(l+3)|uint32(l)<<8|uint32(l+1)<<16|uint32(l+2)<<24))
	}
	eights = GLOBL("chachaEights", RODATA|NOPTR)
	for i := 0; i < 32; i += 4 {
		DATA(i, U32(8))
	}
}

func chachaAVX2() {
	avx2Data()
	TEXT("chachaXORAVX2", 0, "func(dst, src *byte, n int, state *[16]uint32, ks *[64]byte)")
	Pragma("noescape")
	Doc("chachaXORAVX2 is chachaXORAVX512 for AVX2: it XORs the floor(n/64) full",
		"ChaCha20 blocks of src into dst and, if n%64 != 0, writes the keystream of",
		"the next block to ks; n > 0. It computes 8 blocks per pass.")
	frame := AllocLocal(avx2Frame)
	bcast := func(w int) Mem { return frame.Offset(avx2Bcast + 32*w) }
	spill := func(w int) Mem { return frame.Offset(avx2Spill + 32*w) }

	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	state := Load(Param("state"), GP64())
	ks := Load(Param("ks"), GP64())
	rounds := GP64()

	Comment("Broadcast the input state; the counters of the first 8 blocks are counter+0 … counter+7.")
	for w := 0; w < 16; w++ {
		VPBROADCASTD(Mem{Base: state, Disp: 4 * w}, Y0)
		if w == 12 {
			VPADDD(iota16, Y0, Y0) // its first 8 lanes
		}
		VMOVDQU(Y0, bcast(w))
	}

	Label("avx2_group")
	for w := 0; w < 16; w++ {
		switch w {
		case 10, 11:
			VMOVDQU(bcast(w), Y10)
			VMOVDQU(Y10, spill(w))
		default:
			VMOVDQU(bcast(w), ymm(w))
		}
	}
	MOVQ(U32(10), rounds)
	Label("avx2_doubleround")
	ops := vecOps{
		add: func(s, d Op) { VPADDD(s, d, d) },
		xor: func(s, d Op) { VPXOR(s, d, d) },
		rot: func(x Op, r, q int) {
			switch r {
			case 16:
				VPSHUFB(rot16Mask, x, x)
			case 8:
				VPSHUFB(rot8Mask, x, x)
			default:
				t := ymm(10 + q)
				VPSLLD(U8(r), x, t)
				VPSRLD(U8(32-r), x, x)
				VPOR(t, x, x)
			}
		},
	}
	// regs maps state words to registers while words lo and hi are in Y8 and Y9.
	regs := func(lo, hi int) func(int) Op {
		return func(w int) Op {
			switch w {
			case lo:
				return Y8
			case hi:
				return Y9
			case 8, 9, 10, 11:
				panic(fmt.Sprintf("word %d is spilled", w))
			}
			return ymm(w)
		}
	}
	swap := func(outLo, outHi, inLo, inHi int) {
		VMOVDQU(Y8, spill(outLo))
		VMOVDQU(Y9, spill(outHi))
		VMOVDQU(spill(inLo), Y8)
		VMOVDQU(spill(inHi), Y9)
	}
	quarterRounds(ops, columns[0:2], regs(8, 9))
	swap(8, 9, 10, 11)
	quarterRounds(ops, columns[2:4], regs(10, 11))
	quarterRounds(ops, diagonals[0:2], regs(10, 11))
	swap(10, 11, 8, 9)
	quarterRounds(ops, diagonals[2:4], regs(8, 9))
	DECQ(rounds)
	JNZ(LabelRef("avx2_doubleround"))

	Comment("Add the input state; park words 8…15 in their spill slots.")
	for w := 0; w < 16; w++ {
		switch w {
		case 10, 11:
			VMOVDQU(spill(w), Y10)
			VPADDD(bcast(w), Y10, Y10)
			VMOVDQU(Y10, spill(w))
		default:
			VPADDD(bcast(w), ymm(w), ymm(w))
			if w >= 8 {
				VMOVDQU(ymm(w), spill(w))
			}
		}
	}

	CMPQ(n, U32(512))
	JB(LabelRef("avx2_tail"))
	Comment("8 full blocks.")
	for h := 0; h < 2; h++ {
		transpose8(h, spill, func(b int, x VecPhysical) {
			at := 64*b + 32*h
			VPXOR(Mem{Base: src, Disp: at}, x, x)
			VMOVDQU(x, Mem{Base: dst, Disp: at})
		})
	}
	ADDQ(U32(512), src)
	ADDQ(U32(512), dst)
	VMOVDQU(bcast(12), Y0)
	VPADDD(eights, Y0, Y0)
	VMOVDQU(Y0, bcast(12))
	SUBQ(U32(512), n)
	JNZ(LabelRef("avx2_group"))
	JMP(LabelRef("avx2_done"))

	Label("avx2_tail")
	Comment("Fewer than 8 blocks left: n < 512. XOR the full blocks, then keep",
		"the keystream of a final partial block in ks.")
	for h := 0; h < 2; h++ {
		transpose8(h, spill, func(b int, x VecPhysical) {
			at := 64*b + 32*h
			partial := fmt.Sprintf("avx2_partial%d_%d", b, h)
			next := fmt.Sprintf("avx2_next%d_%d", b, h)
			CMPQ(n, U32(64*(b+1)))
			JB(LabelRef(partial))
			VPXOR(Mem{Base: src, Disp: at}, x, x)
			VMOVDQU(x, Mem{Base: dst, Disp: at})
			JMP(LabelRef(next))
			Label(partial)
			CMPQ(n, U32(64*b))
			JBE(LabelRef(next))
			VMOVDQU(x, Mem{Base: ks, Disp: 32 * h})
			Label(next)
		})
	}

	Label("avx2_done")
	VZEROUPPER()
	RET()
}

// transpose8 transposes words 8h…8h+7 of 8 blocks (in Y0…Y7 for h = 0, in
// their spill slots for h = 1) into 32-byte halves of blocks, passing the
// half of block b to out. Y8…Y11 are scratch.
//
// A 4×4 transpose within each 128-bit lane (VPUNPCK{L,H}DQ, then
// VPUNPCK{L,H}QDQ) leaves in Y(4q+k) the words 8h+4q…8h+4q+3 of block k in
// the low lane and of block 4+k in the high lane; VPERM2I128 joins the low
// lanes of Yk and Y(4+k) into block k's half and the high lanes into block
// 4+k's.
func transpose8(h int, spill func(int) Mem, out func(b int, x VecPhysical)) {
	Commentf("Transpose words %d…%d.", 8*h, 8*h+7)
	if h == 1 {
		for w := 0; w < 8; w++ {
			VMOVDQU(spill(8+w), ymm(w))
		}
	}
	t := [4]VecPhysical{Y8, Y9, Y10, Y11}
	for q := 0; q < 2; q++ {
		x := [4]VecPhysical{ymm(4 * q), ymm(4*q + 1), ymm(4*q + 2), ymm(4*q + 3)}
		VPUNPCKLDQ(x[1], x[0], t[0])
		VPUNPCKHDQ(x[1], x[0], t[1])
		VPUNPCKLDQ(x[3], x[2], t[2])
		VPUNPCKHDQ(x[3], x[2], t[3])
		VPUNPCKLQDQ(t[2], t[0], x[0])
		VPUNPCKHQDQ(t[2], t[0], x[1])
		VPUNPCKLQDQ(t[3], t[1], x[2])
		VPUNPCKHQDQ(t[3], t[1], x[3])
	}
	for k := 0; k < 4; k++ {
		VPERM2I128(U8(0x20), ymm(4+k), ymm(k), t[0]) // low lanes: block k
		VPERM2I128(U8(0x31), ymm(4+k), ymm(k), t[1]) // high lanes: block 4+k
		out(k, t[0])
		out(4+k, t[1])
	}
}
