package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The stitched kernels run ChaCha20 and Poly1305 at once, 1024 bytes (a
// group) at a time. ChaCha20's 16-block double rounds in zmm registers are
// bound by the latency of their dependency chains (VPROLD takes 2 cycles),
// not by the vector pipes, which stay about a quarter idle; Poly1305's IFMA
// steps fill them. Each group's 10 double rounds, unrolled, have the 8
// Poly1305 steps of 128 bytes of one group spread evenly among them (merge).
//
// Poly1305 uses one 8-lane accumulator in radix 2⁴⁴: each step adds 8
// blocks, one per lane, and multiplies every lane by r⁸; the last step of a
// message multiplies lane j by the power of r its blocks need instead (the
// table's B row) and the lanes are summed. The one chain of dependent steps,
// about 35 cycles each, hides among the double rounds as two would.
//
//   - Sealing, Poly1305 authenticates the ciphertext, so it runs one group
//     behind: group g's rounds carry the steps over the ciphertext of group
//     g−1, and the last group's ciphertext is authenticated after the loop.
//     The first group is not the seal kernel's: chachaPolyHeadAVX512 runs it
//     together with block 0 (wide.go), whose keystream is the Poly1305 key,
//     so that block costs nothing and the key is known before the kernel.
//     Opening into a buffer that the input does not overlap takes the same
//     path, authenticating the input (which stays intact) instead.
//   - Opening, Poly1305 authenticates the input, so group g's rounds carry
//     the steps over group g's own input, all of them before its output is
//     stored (dst may be src). In the last group the last step takes its
//     multiplier through a register that points at the B row.
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
}

// stitchArgs are a stitched kernel's pointers and counts.
type stitchArgs struct {
	dst, src, groups, state, st, tbl Register
}

func stitchedKernels() {
	stitchData()
	chachaPolyHead()
	stitched(true)
	stitched(false)
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
			"opening into a buffer that src does not overlap, mac is src. state is",
			"the input state of the block at dst+1024 (its word 12 the block",
			"counter); groups > 0. dst and src are equal or do not overlap.")
	} else {
		TEXT(name, NOSPLIT, "func(dst, src *byte, groups int, state *[16]uint32, st *[5]uint64, tbl *[80]uint64)")
		Pragma("noescape")
		Doc(name+" XORs groups × 1024 bytes of src with the ChaCha20 keystream",
			"into dst and absorbs the "+input+" into the Poly1305 state st,",
			"with the powers of r that poly1305PowersIFMA wrote to tbl. The first",
			"block's input state is state (its word 12 the block counter); groups > 0.",
			"dst and src are equal or do not overlap.")
	}
	var mac Register
	if seal {
		mac = Load(Param("mac"), GP64())
	}
	a := stitchArgs{
		dst:    Load(Param("dst"), GP64()),
		src:    Load(Param("src"), GP64()),
		groups: Load(Param("groups"), GP64()),
		state:  Load(Param("state"), GP64()),
		st:     Load(Param("st"), GP64()),
		tbl:    Load(Param("tbl"), GP64()),
	}
	c := consts{m44: zMask44, m42: stitchConsts.Offset(stitchMask42),
		k256: stitchConsts.Offset(stitchK256), k5: stitchConsts.Offset(stitchK5), k5120: stitchConsts.Offset(stitchK5120)}
	hibit := stitchConsts.Offset(stitchHibit)

	Comment("Counter words of the first 16 blocks; the 44-bit mask; the",
		"accumulator in lane 0 of Z20–Z22, the other lanes 0.")
	VPBROADCASTD(Mem{Base: a.state, Disp: 4 * 12}, zCounter)
	VPADDD(stitchConsts.Offset(stitchIota), zCounter, zCounter)
	t := GP64()
	MOVQ(U64(mask44), t)
	VPBROADCASTQ(t, zMask44)
	loadH(a.st, zAcc)

	// steps returns Poly1305's 8 steps over the group at msg, the last one
	// multiplying by last.
	steps := func(msg Register, last mulr) stream {
		var s stream
		r8 := tblMulr(a.tbl, tblR8)
		for k := 0; k < 8; k++ {
			m := r8
			if k == 7 {
				m = last
			}
			absorb(&s, zAcc, Mem{Base: msg, Disp: 128 * k}, c, hibit, zScratch)
			mulReduce(&s, zAcc, m, c, zScratch)
		}
		return s
	}
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

	if seal {
		Comment("Group 0 is ciphertext already.")
		ADDQ(U32(1024), a.src)
		ADDQ(U32(1024), a.dst)
		DECQ(a.groups)
		JZ(LabelRef(op + "_last"))
		Label(op + "_loop")
		Comment("Group g, with Poly1305 over group g−1's ciphertext.")
		group(steps(mac, tblMulr(a.tbl, tblR8)))
		ADDQ(U32(1024), mac)
		DECQ(a.groups)
		JNZ(LabelRef(op + "_loop"))
		Label(op + "_last")
		Comment("Poly1305 over the last group's ciphertext.")
		steps(mac, tblMulr(a.tbl, tblB)).emit()
	} else {
		last := GP64()
		LEAQ(Mem{Base: a.tbl, Disp: tblR8}, last)
		Label(op + "_loop")
		CMPQ(a.groups, U8(1))
		JNE(LabelRef(op + "_group"))
		Comment("The last group: its last step multiplies by the lane powers.")
		LEAQ(Mem{Base: a.tbl, Disp: tblB}, last)
		Label(op + "_group")
		Comment("Group g, with Poly1305 over its input.")
		group(steps(a.src, tblMulr(last, 0)))
		DECQ(a.groups)
		JNZ(LabelRef(op + "_loop"))
	}
	storeH(zAcc, a.st, Z16)
	VZEROUPPER()
	RET()
}
