package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// ymm returns Y0…Y15 by number.
func ymm(i int) VecPhysical {
	return []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}[i]
}

// The AVX2 kernel computes 8 blocks per pass, word i of the 8 blocks in a ymm
// register. Sixteen words and a scratch register for the rotations by 12 and
// 7 (shift, shift, OR) do not fit in AVX2's 16 registers, so word 11 lives in
// memory and Y11 is the scratch register. Word 11 is a "c" word, which a
// quarter round reads and writes only in its second and fourth steps
// (c += d; b ^= c): there the sum goes to Y11, is stored back and XORed into
// b, and then Y11 serves the rotations. All four quarter rounds of a round
// run interleaved, which the dependency chains need: each step is an add, an
// xor and a 2-cycle rotation.
//
// The stack frame holds, per word, its broadcast input state (word 12: the
// counters of the current 8 blocks) and a slot for word 11 and, after the
// rounds, for the words waiting for the second transpose.

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
	frame := AllocLocal(avx2Frame + 32)

	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	state := Load(Param("state"), GP64())
	ks := Load(Param("ks"), GP64())
	rounds := GP64()

	Comment("Align the frame to 32 bytes, so that no spill crosses a cache line.")
	base := GP64()
	LEAQ(frame.Offset(31), base)
	ANDQ(I32(-32), base)
	bcast := func(w int) Mem { return Mem{Base: base, Disp: avx2Bcast + 32*w} }
	spill := func(w int) Mem { return Mem{Base: base, Disp: avx2Spill + 32*w} }

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
		if w == 11 {
			VMOVDQU(bcast(w), Y11)
			VMOVDQU(Y11, spill(w))
			continue
		}
		VMOVDQU(bcast(w), ymm(w))
	}
	MOVQ(U32(10), rounds)
	Label("avx2_doubleround")
	quarterRoundsAVX2(columns, spill(11))
	quarterRoundsAVX2(diagonals, spill(11))
	DECQ(rounds)
	JNZ(LabelRef("avx2_doubleround"))

	Comment("Add the input state; park words 8…15 in their spill slots.")
	for w := 0; w < 16; w++ {
		if w == 11 {
			VMOVDQU(spill(w), Y11)
		}
		VPADDD(bcast(w), ymm(w), ymm(w))
		if w >= 8 {
			VMOVDQU(ymm(w), spill(w))
		}
	}

	r := io{dst: dst, src: src, n: n, ks: ks}
	xor := func(m Mem, x VecPhysical) { VPXOR(m, x, x) }
	mov := func(x VecPhysical, m Mem) { VMOVDQU(x, m) }
	CMPQ(n, U32(512))
	JB(LabelRef("avx2_tail"))
	Comment("8 full blocks.")
	for h := 0; h < 2; h++ {
		avx2Half(h, spill, halfStore(r, h, false, "avx2", xor, mov))
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
		avx2Half(h, spill, halfStore(r, h, true, "avx2", xor, mov))
	}

	Label("avx2_done")
	VZEROUPPER()
	RET()
}

// quarterRoundsAVX2 emits the four quarter rounds qrs, interleaved step by
// step, with word 11 at mem11 and Y11 as scratch.
func quarterRoundsAVX2(qrs [4][4]int, mem11 Mem) {
	const inMem = 11
	tmp := Y11
	reg := func(w int) VecPhysical {
		if w == inMem {
			panic("word 11 is in memory")
		}
		return ymm(w)
	}
	rot := func(x VecPhysical, r int) {
		switch r {
		case 16:
			VPSHUFB(rot16Mask, x, x)
		case 8:
			VPSHUFB(rot8Mask, x, x)
		default:
			VPSLLD(U8(r), x, tmp)
			VPSRLD(U8(32-r), x, x)
			VPOR(tmp, x, x)
		}
	}
	// step emits x += y; z ^= x; z <<<= r for every quarter round.
	step := func(x, y, z, r int) {
		for _, qr := range qrs {
			if qr[x] == inMem {
				VPADDD(mem11, reg(qr[y]), tmp)
				continue
			}
			VPADDD(reg(qr[y]), reg(qr[x]), reg(qr[x]))
		}
		for _, qr := range qrs {
			if qr[x] == inMem {
				VMOVDQU(tmp, mem11)
				VPXOR(tmp, reg(qr[z]), reg(qr[z]))
				continue
			}
			VPXOR(reg(qr[x]), reg(qr[z]), reg(qr[z]))
		}
		for _, qr := range qrs {
			rot(reg(qr[z]), r)
		}
	}
	const a, b, c, d = 0, 1, 2, 3
	step(a, b, d, 16)
	step(c, d, b, 12)
	step(a, b, d, 8)
	step(c, d, b, 7)
}

// transpose8 transposes 8 words of 8 blocks, word i in w[i], into 32-byte
// halves of blocks, passing the half of block b to out; t is scratch.
//
// A 4×4 transpose within each 128-bit lane (VPUNPCK{L,H}DQ, then
// VPUNPCK{L,H}QDQ) leaves in w[4q+k] the words 4q…4q+3 of block k in the low
// lane and of block 4+k in the high lane; VPERM2I128 joins the low lanes of
// w[k] and w[4+k] into block k's half and the high lanes into block 4+k's.
//
// With evex set, VSHUFI32X4 replaces VPERM2I128, which has no EVEX form and
// so cannot reach Y16–Y31.
func transpose8(w [8]VecPhysical, t [4]VecPhysical, evex bool, out func(b int, x VecPhysical)) {
	for q := 0; q < 2; q++ {
		x := w[4*q : 4*q+4]
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
		if evex {
			VSHUFI32X4(U8(0), w[4+k], w[k], t[0]) // low lanes: block k
			VSHUFI32X4(U8(3), w[4+k], w[k], t[1]) // high lanes: block 4+k
		} else {
			VPERM2I128(U8(0x20), w[4+k], w[k], t[0])
			VPERM2I128(U8(0x31), w[4+k], w[k], t[1])
		}
		out(k, t[0])
		out(4+k, t[1])
	}
}

// avx2Half transposes words 8h…8h+7 (in Y0…Y7 for h = 0, in their spill
// slots for h = 1) with Y8…Y11 as scratch.
func avx2Half(h int, spill func(int) Mem, out func(b int, x VecPhysical)) {
	Commentf("Transpose words %d…%d.", 8*h, 8*h+7)
	if h == 1 {
		for w := 0; w < 8; w++ {
			VMOVDQU(spill(8+w), ymm(w))
		}
	}
	transpose8([8]VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}, [4]VecPhysical{Y8, Y9, Y10, Y11}, false, out)
}
