package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The VAES256 kernels: the same mathematics on 256-bit vectors with VEX
// encoding only, in schoolbook form, with a table of sixteen powers laid out
// as the first half of gcmInitVAES512's (K16…K1 and three zero entries), for processors with VAES and VPCLMULQDQ
// but no AVX-512 (AMD Zen 3, Intel Alder Lake). Sixteen registers do not
// hold the round keys, so each round broadcasts its key from memory (one
// load per round per 8 blocks), and the carry-less multiplications take the
// key powers as memory operands. Eight blocks (four ymm) are in flight per
// 128-byte step, hashed with K8…K1 (table entries 8 to 15) and reduced once.
// Without byte masks or VPTERNLOGD, tails go a block at a time in xmm, and a
// last partial block is copied through a zeroed 16-byte stack buffer.

var (
	yst           = [4]VecPhysical{Y0, Y1, Y2, Y3}
	ykey          = Y4 // the round key of the current round
	yctr          = Y5 // next counters, byte-reversed
	ybsw          = Y6 // byte-reversal shuffle mask
	yacc          = Y7 // running GHASH value, lane 0
	ydat          = Y8 // the block vector being hashed
	ylo, ymi, yhi = Y9, Y10, Y11
	yt0, yt1      = Y12, Y13
)

var (
	inc2     Mem // per lane: dword 0 = 2 (32 bytes)
	bytesTab Mem // 16 bytes 0xff, then 16 bytes 0: masks for partial blocks
)

func constants256() {
	inc2 = GLOBL("gcmInc2", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		v := uint32(0)
		if i%4 == 0 {
			v = 2
		}
		DATA(4*i, U32(v))
	}
	bytesTab = GLOBL("gcmPartialMask", RODATA|NOPTR)
	for i := 0; i < 32; i++ {
		v := uint8(0)
		if i < 16 {
			v = 0xff
		}
		DATA(i, U8(v))
	}
}

// w returns r as an xmm register if x, else as a ymm register. VEX writes
// to an xmm register zero the rest of the ymm register.
func w(r VecPhysical, x bool) VecPhysical {
	if x {
		return r.AsX().(VecPhysical)
	}
	return r.AsY().(VecPhysical)
}

// mulAcc256 is mulAcc on ymm (or, if x, xmm) with two-operand XORs; k may be
// a memory operand.
func mulAcc256(d, k Op, first, x bool) {
	lo, mi, hi, t0, t1 := w(ylo, x), w(ymi, x), w(yhi, x), w(yt0, x), w(yt1, x)
	if first {
		VPCLMULQDQ(U8(0x00), k, d, lo)
		VPCLMULQDQ(U8(0x01), k, d, mi)
		VPCLMULQDQ(U8(0x10), k, d, t0)
		VPXOR(t0, mi, mi)
		VPCLMULQDQ(U8(0x11), k, d, hi)
		return
	}
	VPCLMULQDQ(U8(0x00), k, d, t0)
	VPCLMULQDQ(U8(0x01), k, d, t1)
	VPXOR(t0, lo, lo)
	VPCLMULQDQ(U8(0x10), k, d, t0)
	VPXOR(t1, mi, mi)
	VPXOR(t0, mi, mi)
	VPCLMULQDQ(U8(0x11), k, d, t0)
	VPXOR(t0, hi, hi)
}

// reduce256Fold and reduce256Finish are reduceFold and reduceFinish on ymm.
func reduce256Fold() {
	VPCLMULQDQ(U8(0x00), gfPoly, ylo, yt0)
	VPSHUFD(U8(0x4e), ylo, ylo)
	VPXOR(yt0, ymi, ymi)
	VPXOR(ylo, ymi, ymi)
}

func reduce256Finish(dst VecPhysical) {
	reduce256Lanes()
	VEXTRACTI128(U8(1), yhi, yt0.AsX())
	VPXOR(yt0.AsX(), yhi.AsX(), dst.AsX())
}

// reduce256Lanes is reduceLanes on ymm.
func reduce256Lanes() {
	VPCLMULQDQ(U8(0x00), gfPoly, ymi, yt0)
	VPSHUFD(U8(0x4e), ymi, ymi)
	VPXOR(yt0, yhi, yhi)
	VPXOR(ymi, yhi, yhi)
}

func reduce256(dst VecPhysical) {
	reduce256Fold()
	reduce256Finish(dst)
}

func zeroSums256() {
	VPXOR(ylo, ylo, ylo)
	VPXOR(ymi, ymi, ymi)
	VPXOR(yhi, yhi, yhi)
}

// ghash8Steps returns the steps that hash the 128 bytes at base+disp into
// yacc with K8…K1 (table entries 8 to 15).
func ghash8Steps(table, base Register, disp int) []func() {
	var steps []func()
	for k := 0; k < 4; k++ {
		k := k
		steps = append(steps, func() {
			VMOVDQU(Mem{Base: base, Disp: disp + 32*k}, ydat)
			VPSHUFB(ybsw, ydat, ydat)
			if k == 0 {
				VPXOR(yacc, ydat, ydat)
			}
			mulAcc256(ydat, Mem{Base: table, Disp: 128 + 32*k}, k == 0, false)
		})
	}
	return append(steps, reduce256Fold, func() { reduce256Finish(yacc) })
}

// copyIn copies the n < 16 bytes at src into the 16-byte buffer buf, zeroing
// the rest of it; copyOut copies the first n bytes of buf to dst.
func copyIn(buf Mem, src, n, i Register, b GPVirtual, lbl string) {
	VPXOR(yt1.AsX(), yt1.AsX(), yt1.AsX())
	VMOVDQU(yt1.AsX(), buf)
	XORQ(i, i)
	Label(lbl)
	MOVB(Mem{Base: src, Index: i, Scale: 1}, b.As8())
	MOVB(b.As8(), buf.Idx(i, 1))
	INCQ(i)
	CMPQ(i, n)
	JB(LabelRef(lbl))
}

func copyOut(buf Mem, dst, n, i Register, b GPVirtual, lbl string) {
	XORQ(i, i)
	Label(lbl)
	MOVB(buf.Idx(i, 1), b.As8())
	MOVB(b.As8(), Mem{Base: dst, Index: i, Scale: 1})
	INCQ(i)
	CMPQ(i, n)
	JB(LabelRef(lbl))
}

func gcmInit256() {
	TEXT("gcmInitVAES256", NOSPLIT, "func(table *[19][16]byte, k1 *[16]byte)")
	Pragma("noescape")
	Doc("gcmInitVAES256 fills table with K16, K15, …, K1 and three zero blocks, as",
		"gcmInitVAES512 does, two lanes at a time; without folded keys, since these",
		"kernels multiply in schoolbook form.")
	table := Load(Param("table"), GP64())
	k1 := Load(Param("k1"), GP64())
	v2, v4, v6, v8, k := yst[0], yst[1], yst[2], yst[3], ykey
	// mul sets yhi to d·k lane by lane, reduced.
	mul := func(d, k VecPhysical) {
		mulAcc256(d, k, true, false)
		reduce256Fold()
		reduce256Lanes()
	}
	store := func(v VecPhysical, entry int) { VMOVDQU(v, Mem{Base: table, Disp: 16 * entry}) }
	VMOVDQU(Mem{Base: k1}, v2.AsX()) // K1, 0
	mul(v2, v2)                      // K2, 0
	VINSERTI128(U8(1), v2.AsX(), yhi, v2)
	store(v2, 14)
	VPERM2I128(U8(0x00), v2, v2, k)
	mul(v2, k) // K4, K3
	VMOVDQA(yhi, v4)
	store(v4, 12)
	VPERM2I128(U8(0x00), v4, v4, k)
	mul(v2, k) // K6, K5
	VMOVDQA(yhi, v6)
	store(v6, 10)
	mul(v4, k) // K8, K7
	VMOVDQA(yhi, v8)
	store(v8, 8)
	VPERM2I128(U8(0x00), v8, v8, k)
	for i, v := range []VecPhysical{v2, v4, v6, v8} {
		mul(v, k) // K(10+2i), K(9+2i)
		store(yhi, 6-2*i)
	}
	VPXOR(yt0.AsX(), yt0.AsX(), yt0.AsX())
	for i := 16; i < 19; i++ {
		VMOVDQU(yt0.AsX(), Mem{Base: table, Disp: i * 16})
	}
	VZEROUPPER()
	RET()
}

func gcmAAD256() {
	TEXT("gcmAADVAES256", NOSPLIT, "func(table *[19][16]byte, acc *[16]byte, aad []byte)")
	Pragma("noescape")
	Doc("gcmAADVAES256 is gcmAADVAES512 without AVX-512.")
	buf := AllocLocal(16)
	table := Load(Param("table"), GP64())
	accp := Load(Param("acc"), GP64())
	p := Load(Param("aad").Base(), GP64())
	n := Load(Param("aad").Len(), GP64())
	VMOVDQU(bswapMask, ybsw)
	VMOVDQU(Mem{Base: accp}, yacc.AsX())

	CMPQ(n, U8(128))
	JB(LabelRef("aad256Tail"))
	Label("aad256Loop")
	for _, s := range ghash8Steps(table, p, 0) {
		s()
	}
	ADDQ(U8(128), p)
	SUBQ(U8(128), n)
	CMPQ(n, U8(128))
	JAE(LabelRef("aad256Loop"))

	Label("aad256Tail")
	TESTQ(n, n)
	JZ(LabelRef("aad256Done"))
	hp := GP64()
	MOVQ(n, hp)
	ADDQ(U8(15), hp)
	ANDQ(I32(-16), hp)
	NEGQ(hp)
	LEAQ(Mem{Base: table, Index: hp, Scale: 1, Disp: 256}, hp)
	zeroSums256()
	dat := ydat.AsX()
	hashBlock := func() {
		VPSHUFB(ybsw.AsX(), dat, dat)
		VPXOR(yacc.AsX(), dat, dat)
		VPXOR(yacc.AsX(), yacc.AsX(), yacc.AsX())
		mulAcc256(dat, Mem{Base: hp}, false, true)
		ADDQ(U8(16), hp)
	}
	Label("aad256Blocks")
	CMPQ(n, U8(16))
	JB(LabelRef("aad256Partial"))
	VMOVDQU(Mem{Base: p}, dat)
	hashBlock()
	ADDQ(U8(16), p)
	SUBQ(U8(16), n)
	JMP(LabelRef("aad256Blocks"))

	Label("aad256Partial")
	TESTQ(n, n)
	JZ(LabelRef("aad256Reduce"))
	i, b := GP64(), GP64()
	copyIn(buf, p, n, i, b, "aad256CopyIn")
	VMOVDQU(buf, dat)
	hashBlock()

	Label("aad256Reduce")
	reduce256(yacc)
	Label("aad256Done")
	VMOVDQU(yacc.AsX(), Mem{Base: accp})
	VZEROUPPER()
	RET()
}

// gcmCrypt256 generates gcmSealVAES256 or gcmOpenVAES256.
func gcmCrypt256(open bool) {
	name := "gcmSealVAES256"
	if open {
		name = "gcmOpenVAES256"
	}
	TEXT(name, NOSPLIT, "func(rk *[15][16]byte, rounds int, table *[19][16]byte, acc *[16]byte, dst, src []byte, nonce *[12]byte, ctr uint32, aadLen int, tag *[16]byte)")
	Pragma("noescape")
	if open {
		Doc(name + " is gcmOpenVAES512 without AVX-512.")
	} else {
		Doc(name + " is gcmSealVAES512 without AVX-512.")
	}
	buf := AllocLocal(16)
	a := cryptArgs{
		rk:     Load(Param("rk"), GP64()),
		table:  Load(Param("table"), GP64()),
		accp:   Load(Param("acc"), GP64()),
		dst:    Load(Param("dst").Base(), GP64()),
		src:    Load(Param("src").Base(), GP64()),
		n:      Load(Param("src").Len(), GP64()),
		nonce:  Load(Param("nonce"), GP64()),
		aadLen: Load(Param("aadLen"), GP64()),
		tag:    Load(Param("tag"), GP64()),
	}
	rounds := Load(Param("rounds"), GP64())
	CMPQ(rounds, U8(10))
	JNE(LabelRef("aes256" + name))
	cryptBody256(a, buf, 10, open, name+"128")
	Label("aes256" + name)
	cryptBody256(a, buf, 14, open, name+"256")
}

func cryptBody256(a cryptArgs, buf Mem, rounds int, open bool, sfx string) {
	L := func(s string) string { return s + sfx }
	rkMem := func(r int) Mem { return Mem{Base: a.rk, Disp: 16 * r} }
	VMOVDQU(bswapMask, ybsw)

	// J0 = nonce ‖ ctr; E(K, J0) parked in the tag's place.
	ej := yt1.AsX()
	w0, w1, c := GP64(), GP64(), GP32()
	MOVQ(Mem{Base: a.nonce}, w0)
	MOVL(Mem{Base: a.nonce, Disp: 8}, w1.As32())
	Load(Param("ctr"), c)
	BSWAPL(c)
	SHLQ(U8(32), c.As64())
	ORQ(c.As64(), w1)
	VMOVQ(w0, ej)
	VPINSRQ(U8(1), w1, ej, ej)
	VPSHUFB(ybsw.AsX(), ej, yctr.AsX())
	VPXOR(rkMem(0), ej, ej)
	for r := 1; r < rounds; r++ {
		VAESENC(rkMem(r), ej, ej)
	}
	VAESENCLAST(rkMem(rounds), ej, ej)
	VMOVDQU(ej, Mem{Base: a.tag})

	// Counters J0+1 and J0+2 in the two lanes.
	VINSERTI128(U8(1), yctr.AsX(), yctr, yctr)
	VPADDD(ctrInit, yctr, yctr)
	VMOVDQU(Mem{Base: a.accp}, yacc.AsX())

	n, src, dst := a.n, a.src, a.dst
	stitched := func(steps []func()) {
		for k := 0; k < 4; k++ {
			VPSHUFB(ybsw, yctr, yst[k])
			VPADDD(inc2, yctr, yctr)
		}
		VBROADCASTI128(rkMem(0), ykey)
		for k := 0; k < 4; k++ {
			VPXOR(ykey, yst[k], yst[k])
		}
		PREFETCHT0(Mem{Base: src, Disp: prefetchAhead})
		PREFETCHT0(Mem{Base: src, Disp: prefetchAhead + 64})
		for r := 1; r < rounds; r++ {
			VBROADCASTI128(rkMem(r), ykey)
			for k := 0; k < 4; k++ {
				VAESENC(ykey, yst[k], yst[k])
			}
			for i, s := range steps {
				if 1+i*(rounds-2)/len(steps) == r {
					s()
				}
			}
		}
		VBROADCASTI128(rkMem(rounds), ykey)
		for k := 0; k < 4; k++ {
			VPXOR(Mem{Base: src, Disp: 32 * k}, ykey, yt1)
			VAESENCLAST(yt1, yst[k], yst[k])
			VMOVDQU(yst[k], Mem{Base: dst, Disp: 32 * k})
		}
	}
	advance := func() {
		ADDQ(U8(128), src)
		ADDQ(U8(128), dst)
		SUBQ(U8(128), n)
	}

	CMPQ(n, U8(128))
	JB(LabelRef(L("tail")))
	if open {
		Label(L("openLoop"))
		stitched(ghash8Steps(a.table, src, 0))
		advance()
		CMPQ(n, U8(128))
		JAE(LabelRef(L("openLoop")))
	} else {
		stitched(nil)
		advance()
		CMPQ(n, U8(128))
		JB(LabelRef(L("sealLast")))
		Label(L("sealLoop"))
		stitched(ghash8Steps(a.table, dst, -128))
		advance()
		CMPQ(n, U8(128))
		JAE(LabelRef(L("sealLoop")))
		Label(L("sealLast"))
		for _, s := range ghash8Steps(a.table, dst, -128) {
			s()
		}
	}

	// Tail: n < 128 bytes in nb ≤ 8 blocks, a block at a time; the length
	// block folds in as with gcmSealVAES512 when nb ≤ 7.
	Label(L("tail"))
	hp, sep := GP64(), GP64()
	MOVQ(n, hp)
	ADDQ(U8(15), hp)
	ANDQ(I32(-16), hp) // 16·nb
	XORQ(sep, sep)
	CMPQ(hp, U8(128))
	SETEQ(sep.As8())
	NEGQ(hp)
	LEAQ(Mem{Base: a.table, Index: hp, Scale: 1, Disp: 240}, hp)
	SHLQ(U8(4), sep)
	ADDQ(sep, hp)
	zeroSums256()

	s, dat, t := yst[0].AsX(), ydat.AsX(), yt1.AsX()
	// block encrypts the counter block into s with the text in dat: s =
	// E(ctr) ⊕ dat, and hashes the ciphertext.
	block := func() {
		VPSHUFB(ybsw.AsX(), yctr.AsX(), s)
		VPADDD(ctrInit, yctr.AsX(), yctr.AsX())
		VPXOR(rkMem(0), s, s)
		for r := 1; r < rounds; r++ {
			VAESENC(rkMem(r), s, s)
		}
		VPXOR(rkMem(rounds), dat, t)
		VAESENCLAST(t, s, s)
	}
	hash := func() {
		VPSHUFB(ybsw.AsX(), dat, dat)
		VPXOR(yacc.AsX(), dat, dat)
		VPXOR(yacc.AsX(), yacc.AsX(), yacc.AsX())
		mulAcc256(dat, Mem{Base: hp}, false, true)
		ADDQ(U8(16), hp)
	}
	Label(L("blocks"))
	CMPQ(n, U8(16))
	JB(LabelRef(L("partial")))
	VMOVDQU(Mem{Base: src}, dat)
	block()
	VMOVDQU(s, Mem{Base: dst})
	if !open {
		VMOVDQA(s, dat)
	}
	hash()
	ADDQ(U8(16), src)
	ADDQ(U8(16), dst)
	SUBQ(U8(16), n)
	JMP(LabelRef(L("blocks")))

	Label(L("partial"))
	TESTQ(n, n)
	JZ(LabelRef(L("tailDone")))
	i, b := GP64(), GP64()
	copyIn(buf, src, n, i, b, L("copyIn"))
	VMOVDQU(buf, dat)
	block()
	VMOVDQU(s, buf)
	copyOut(buf, dst, n, i, b, L("copyOut"))
	if !open {
		// The ciphertext, zero past the message.
		NEGQ(n)
		LEAQ(bytesTab, i)
		VPAND(Mem{Base: i, Disp: 16, Index: n, Scale: 1}, s, dat)
	}
	hash()

	Label(L("tailDone"))
	TESTQ(sep, sep)
	JZ(LabelRef(L("lengths")))
	reduce256(yacc)
	zeroSums256()

	Label(L("lengths"))
	var bits Register = GP64()
	bits = Load(Param("src").Len(), bits)
	SHLQ(U8(3), bits)
	VMOVQ(bits, dat)
	MOVQ(a.aadLen, bits)
	SHLQ(U8(3), bits)
	VPINSRQ(U8(1), bits, dat, dat)
	VPXOR(yacc.AsX(), dat, dat)
	mulAcc256(dat, Mem{Base: a.table, Disp: 240}, false, true)
	reduce256(yacc)

	VPSHUFB(ybsw.AsX(), yacc.AsX(), yacc.AsX())
	VPXOR(Mem{Base: a.tag}, yacc.AsX(), yacc.AsX())
	VMOVDQU(yacc.AsX(), Mem{Base: a.tag})
	VZEROUPPER()
	RET()
}
