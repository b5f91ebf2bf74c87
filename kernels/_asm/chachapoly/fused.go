package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// chachaPolyWholeAVX512IFMA is a whole ChaCha20-Poly1305 message of whole
// 1024-byte groups in one call: chachaPolyHeadAVX512, the additional data
// with MULX, chachaPolySealAVX512IFMA, the block of lengths and the tag.
// Around a 1 KiB message the separate calls cost as much as a fifth of the
// time: the caller built the ChaCha20 state, zeroed the powers table before
// the head and wiped it after, and Poly1305's key, its accumulator and the
// table went through memory between calls, each wait on the stores before
// it a step in the message's chain. Here the table, the key block and the
// state live in the frame, which the kernel wipes with a few zmm stores.
//
// The block of lengths, L, costs no multiply after the message's last step:
// the head writes the lane powers times r (powersGPR with shift), so that the
// lanes sum to h·r where they would sum to h, and L·r, computed beside the
// additional data, joins that sum: (h + L)·r. That is one multiply fewer
// on the chain at the end of the message, which counts most in messages of
// one or two groups; BenchmarkChaCha20Poly1305Fastest at Seal/avx512/1024,
// Open/avx512/1024 and Seal/avx512/2048 measures it.
//
// The frame, in order: the head's, the state of block 17 for the stitched
// kernel, the Poly1305 state (h0 h1 h2 r0 r1), a block of padding for the
// additional data's last partial block, the powers table, then from a 64-byte
// row on the Poly1305 key, L·r in radix 2⁴⁴ and the stitched kernel's frame;
// rounded up to whole 64-byte rows. The rows before the key are no longer
// read once the seal's last group has its multipliers in registers, and are
// cleared then, among its steps (stitchIn.early); the rest at the end.
// That leaves fewer stores for the end of the message, where Seal runs the
// next message while the last one's tag is still being computed and the
// frame's stores seem to hold it up; BenchmarkChaCha20Poly1305Fastest at
// Seal/avx512/1024, Seal/avx512/2048 and Open/avx512/2048 measures it.
const (
	fusedState = headFrame
	fusedSt    = fusedState + 64
	fusedPad   = fusedSt + 40
	fusedTbl   = fusedPad + 16
	fusedKey   = (fusedTbl + 2*rowsPerMul*64 + 63) &^ 63
	fusedLr    = fusedKey + 32
	fusedStit  = fusedLr + 24
	fusedFrame = (fusedStit + stitchFrame + 63) &^ 63
)

func chachaPolyWhole() {
	TEXT("chachaPolyWholeAVX512IFMA", 0, "func(dst, src, mac *byte, groups int, key *[8]uint32, nonce *[12]byte, aad *byte, aadLen int, tag *[16]byte)")
	Pragma("noescape")
	Doc("chachaPolyWholeAVX512IFMA XORs groups × 1024 bytes of src with the ChaCha20",
		"keystream from block 1 on for key and nonce (the 12 bytes of RFC 8439)",
		"into dst, and writes to tag",
		"the Poly1305 tag (RFC 8439 §2.8) of the aadLen bytes of additional data",
		"at aad and of the groups × 1024 bytes of ciphertext at mac: dst when",
		"sealing, src when opening into a buffer that src does not overlap.",
		"groups > 0; dst and src are equal or do not overlap; aad may be nil",
		"when aadLen is 0.")
	frame := AllocLocal(fusedFrame)
	at := func(off int) Mem { return frame.Offset(off) }
	lea := func(off int) func(Register) {
		return func(r Register) { LEAQ(at(off), r) }
	}
	load := func(name string) func(Register) {
		return func(r Register) { Load(Param(name), r) }
	}

	Comment("The state of block 17, for the stitched kernel.")
	for w, v := range []uint32{0x61707865, 0x3320646e, 0x79622d32, 0x6b206574} {
		MOVL(U32(v), at(fusedState+4*w))
	}
	Load(Param("key"), RAX)
	for w := 0; w < 8; w++ {
		MOVL(Mem{Base: RAX, Disp: 4 * w}, EBX)
		MOVL(EBX, at(fusedState+16+4*w))
	}
	MOVL(U32(17), at(fusedState+48))
	Comment("The nonce read 8 and 4 bytes at a time, as it is most likely",
		"written: a read that only part of a store holds waits for the store",
		"to reach the cache.")
	Load(Param("nonce"), RAX)
	MOVQ(Mem{Base: RAX}, RBX)
	MOVL(Mem{Base: RAX, Disp: 8}, ECX)
	MOVL(EBX, at(fusedState+52))
	SHRQ(U8(32), RBX)
	MOVL(EBX, at(fusedState+56))
	MOVL(ECX, at(fusedState+60))

	Comment("The head reads key and nonce from the state above, written 4 bytes",
		"at a time as it reads them.")
	headBody(headIn{key: lea(fusedState + 16), nonce: lea(fusedState + 52),
		counter: func(r Register) { XORL(r, r) },
		polyKey: lea(fusedKey), tbl: lea(fusedTbl), src: load("src"), dst: load("dst"),
		frame: at(0), shiftPowers: true})

	Comment("Poly1305's r, clamped, and the additional data, with MULX.")
	r0, r1, s1 := GP64(), GP64(), GP64()
	MOVQ(at(fusedKey), r0)
	MOVQ(at(fusedKey+8), r1)
	clampR(r0, r1, s1)
	MOVQ(r0, at(fusedSt+offR0))
	MOVQ(r1, at(fusedSt+offR1))
	h0, h1, h2 := GP64(), GP64(), GP64()
	XORL(h0.As32(), h0.As32())
	XORL(h1.As32(), h1.As32())
	XORL(h2.As32(), h2.As32())
	aad, n := GP64(), GP64()
	Load(Param("aad"), aad)
	Load(Param("aadLen"), n)
	CMPQ(n, U8(16))
	JB(LabelRef("whole_aad_tail"))
	Label("whole_aad_loop")
	ADDQ(Mem{Base: aad}, h0)
	ADCQ(Mem{Base: aad, Disp: 8}, h1)
	ADCQ(U8(1), h2)
	mulxMulR(h0, h1, h2, r0, r1, s1)
	ADDQ(U8(16), aad)
	SUBQ(U8(16), n)
	CMPQ(n, U8(16))
	JAE(LabelRef("whole_aad_loop"))
	Label("whole_aad_tail")
	TESTQ(n, n)
	JZ(LabelRef("whole_aad_done"))
	Comment("The last n < 16 bytes, zero-padded: a masked load reads no byte",
		"past them.")
	m := GP64()
	MOVQ(U32(1), m)
	SHLXQ(n, m, m)
	DECQ(m)
	KMOVQ(m, K1)
	VMOVDQU8_Z(Mem{Base: aad}, K1, X16)
	VMOVDQU64(X16, at(fusedPad))
	ADDQ(at(fusedPad), h0)
	ADCQ(at(fusedPad+8), h1)
	ADCQ(U8(1), h2)
	mulxMulR(h0, h1, h2, r0, r1, s1)
	Label("whole_aad_done")
	MOVQ(h0, at(fusedSt+offH0))
	MOVQ(h1, at(fusedSt+offH1))
	MOVQ(h2, at(fusedSt+offH2))

	Comment("L·r, L the block of lengths: aadLen, and 1024·groups bytes of",
		"ciphertext; in radix 2⁴⁴ (l2 < 2^42.33, as mulxMulR leaves the top",
		"word at most 4).")
	l0, l1, l2 := GP64(), GP64(), GP64()
	Load(Param("aadLen"), l0)
	Load(Param("groups"), l1)
	SHLQ(U8(10), l1)
	MOVL(U32(1), l2.As32())
	mulxMulR(l0, l1, l2, r0, r1, s1)
	for i, l := range to44(l0, l1, l2) {
		MOVQ(l, at(fusedLr+8*i))
	}

	param := func(name string) func() Register {
		return func() Register { return Load(Param(name), GP64()) }
	}
	leaReg := func(off int) func() Register {
		return func() Register {
			r := GP64()
			LEAQ(at(off), r)
			return r
		}
	}
	lr := at(fusedLr)
	finish := func(h [3]Op) {
		h0, h1, h2 := sumLanes(h, Z16, &lr)
		polyTag(h0, h1, h2, GP64(), GP64(), at(fusedKey+16), at(fusedKey+24))
	}
	stitchedBody(true, stitchIn{op: "whole", mac: param("mac"), dst: param("dst"), src: param("src"),
		groups: param("groups"), state: leaReg(fusedState), st: leaReg(fusedSt), tbl: leaReg(fusedTbl),
		frame: at(fusedStit), finish: finish, early: func(g *stream, z VecPhysical) {
			for off := 0; off < fusedKey; off += 64 {
				g.op(VMOVDQU64, z, at(off))
			}
		}})

	Comment("Wipe the rest of the frame: the key block, L·r, r and r¹⁶.")
	VPXORQ(Z16, Z16, Z16)
	for off := fusedKey; off < fusedFrame; off += 64 {
		VMOVDQU64(Z16, at(off))
	}
	VZEROUPPER()
	RET()
}
