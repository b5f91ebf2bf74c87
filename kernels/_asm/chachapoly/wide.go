package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The 16-block zmm pass leaves the integer ALUs idle, and the one-block
// scalar code leaves the vector units idle, so chachaXORAVX512x17 runs both
// at once: blocks 0…15 of each 1088-byte group in zmm registers, block 16 in
// general-purpose registers, their double rounds interleaved step by step.
// The scalar block needs all 15 free general-purpose registers, so the
// pointers and counters live in the frame.

func chachaAVX512x17() {
	TEXT("chachaXORAVX512x17", 0, "func(dst, src *byte, groups int, state *[16]uint32)")
	Pragma("noescape")
	Doc("chachaXORAVX512x17 XORs groups × 17 ChaCha20 blocks of src into dst, the",
		"first block's input state being state; groups > 0. Each group runs 16",
		"blocks in zmm registers and the 17th in general-purpose registers.")
	wide17()
}

// wide17 emits the body of chachaXORAVX512x17.
func wide17() {
	frame := AllocLocal(128)
	var (
		fDst    = frame.Offset(0)
		fSrc    = frame.Offset(8)
		fGroups = frame.Offset(16)
		fState  = frame.Offset(24)
		fCtr    = frame.Offset(32) // the scalar block's counter
		fRounds = frame.Offset(36)
		fSlot3  = frame.Offset(40) // scalar words 3 and 11 take turns in R15
		fSlot11 = frame.Offset(44)
		fKS     = frame.Offset(64) // the scalar block's keystream
	)
	slot := func(w int) Mem {
		if w == 3 {
			return fSlot3
		}
		return fSlot11
	}
	Load(Param("dst"), RAX)
	MOVQ(RAX, fDst)
	Load(Param("src"), RAX)
	MOVQ(RAX, fSrc)
	Load(Param("groups"), RAX)
	MOVQ(RAX, fGroups)
	Load(Param("state"), RAX)
	MOVQ(RAX, fState)

	Comment("Counters: counter+0 … counter+15 in zmm, counter+16 for the scalar block.")
	VPBROADCASTD(Mem{Base: RAX, Disp: 4 * 12}, zCounter)
	VPADDD(iota16, zCounter, zCounter)
	MOVL(Mem{Base: RAX, Disp: 4 * 12}, EBX)
	ADDL(U32(16), EBX)
	MOVL(EBX, fCtr)
	MOVL(U32(17), EBX)
	VPBROADCASTD(EBX, zSixteen) // here: 17 in every lane
	MOVL(U32(0xefff), EBX)
	KMOVW(EBX, K1) // every word but 12

	Label("x17_group")
	MOVQ(fState, R15)
	for i := 0; i < 16; i++ {
		if i == 12 {
			VMOVDQA32(zCounter, zmm(12))
			continue
		}
		VPBROADCASTD(Mem{Base: R15, Disp: 4 * i}, zmm(i))
	}
	for w := 0; w < 16; w++ {
		if r, ok := scalarReg[w]; ok && w != 12 && w != 2 {
			MOVL(Mem{Base: R15, Disp: 4 * w}, r)
		}
	}
	MOVL(fCtr, scalarReg[12])
	MOVL(Mem{Base: R15, Disp: 4 * 11}, R14L)
	MOVL(R14L, fSlot11)
	MOVL(Mem{Base: R15, Disp: 4 * 2}, R14L)
	MOVL(Mem{Base: R15, Disp: 4 * 3}, R15L)
	MOVL(U32(10), fRounds)

	Label("x17_doubleround")
	words := &r15Words{held: 3, slot: slot}
	round := func(qrs [4][4]int) {
		scalarHalfRound(func(x, y, z, r int) {
			for _, qr := range qrs {
				VPADDD(zmm(qr[y]), zmm(qr[x]), zmm(qr[x]))
				ADDL(words.reg(qr[y]), words.reg(qr[x]))
			}
			for _, qr := range qrs {
				VPXORD(zmm(qr[x]), zmm(qr[z]), zmm(qr[z]))
				XORL(words.reg(qr[x]), words.reg(qr[z]))
			}
			for _, qr := range qrs {
				VPROLD(U8(r), zmm(qr[z]), zmm(qr[z]))
				ROLL(U8(r), words.reg(qr[z]))
			}
		}, words)
	}
	round(columns)
	round(diagonals)
	DECL(fRounds)
	JNZ(LabelRef("x17_doubleround"))

	Comment("Park the scalar block's words (before the input state is added).")
	for w := 0; w < 16; w++ {
		if w == 11 { // word 3 is in R15
			MOVL(slot(w), EAX) // word 0 is stored already
			MOVL(EAX, fKS.Offset(4*w))
			continue
		}
		MOVL(words.reg(w), fKS.Offset(4*w))
	}
	MOVL(fCtr, EAX)
	ADDL(EAX, fKS.Offset(4*12))

	Comment("Add the input state to the 16 zmm blocks, transpose, XOR, store.")
	MOVQ(fState, R15)
	for i := 0; i < 16; i++ {
		if i == 12 {
			VPADDD(zCounter, zmm(12), zmm(12))
			continue
		}
		VPADDD_BCST(Mem{Base: R15, Disp: 4 * i}, zmm(i), zmm(i))
	}
	transpose16()
	MOVQ(fSrc, RSI)
	MOVQ(fDst, RDI)
	for j := 0; j < 16; j++ {
		VPXORD(Mem{Base: RSI, Disp: 64 * j}, zmm(j), zmm(j))
		VMOVDQU32(zmm(j), Mem{Base: RDI, Disp: 64 * j})
	}
	Comment("The scalar block: add the input state but word 12 (added above).")
	VMOVDQU32(fKS, Z0)
	VMOVDQU32(Mem{Base: R15}, Z1)
	VPADDD(Z1, Z0, K1, Z0)
	VPXORD(Mem{Base: RSI, Disp: 1024}, Z0, Z0)
	VMOVDQU32(Z0, Mem{Base: RDI, Disp: 1024})

	ADDQ(U32(1088), RSI)
	ADDQ(U32(1088), RDI)
	MOVQ(RSI, fSrc)
	MOVQ(RDI, fDst)
	VPADDD(zSixteen, zCounter, zCounter)
	ADDL(U32(17), fCtr)
	DECQ(fGroups)
	JNZ(LabelRef("x17_group"))
	VZEROUPPER()
	RET()
}
