// Command gcm generates the AES-GCM kernels that use VAES and VPCLMULQDQ on
// 512-bit vectors: kernels/gcm_amd64.s and its Go declarations.
//
// # Representation
//
// GCM (NIST SP 800-38D) multiplies in GF(2^128) = GF(2)[x]/P(x), P = x^128 +
// x^7 + x^2 + x + 1, and stores the coefficient of x^0 in the most
// significant bit of a block's first byte. Reversing a block's 16 bytes
// (VPSHUFB) and reading it as a little-endian 128-bit integer puts the
// coefficient of x^i at bit 127-i: the block read as a big-endian integer.
// Write y = 1/x. An element a(x) then is the integer A(y) = y^127·a(1/y), and
// carry-less multiplication, which multiplies polynomials in y, gives
//
//	A·B = y^254·(ab)(1/y) = y^127·R(ab),
//
// where R(ab) is the representation of the product. The modulus becomes
// Q(y) = y^128·P(1/y) = y^128 + y^127 + y^126 + y^121 + 1, and
// y^127·a(1/y) ≡ R(a mod P) modulo Q, so products can be reduced modulo Q.
//
// # Reduction
//
// Q ≡ 0 gives 1 ≡ y^121 + y^126 + y^127 + y^128, so a 64-bit word T0 at the
// bottom of a 256-bit product T satisfies
//
//	T0 ≡ y^64·clmul(T0, 0xc200000000000000) + y^128·T0,
//
// where 0xc2… is y^57 + y^62 + y^63. Folding the lowest word twice this way
// (two VPCLMULQDQ, two qword swaps, two three-way XORs) clears the low 128
// bits without changing T modulo Q: the high 128 bits are T·y^-128 mod Q,
// fully reduced. That is a Montgomery reduction, so mul(A, B) = A·B·y^-128
// would be the product times y^-1. The key is therefore stored pre-multiplied
// by y: K1 = y·H mod Q (computed in Go), and mul(A, K1) = R(a·h) exactly.
// The powers follow as K(i+1) = mul(K(i), K1) = y·R(h^(i+1)).
//
// The reduction is linear, so the products of many blocks with their powers
// of H can be summed unreduced and reduced once. A product of 64-bit halves
// is T = HI·y^128 + MI·y^64 + LO with LO = a0·b0, HI = a1·b1 and the middle
// product MI = a0·b1 + a1·b0, which Karatsuba's identity gives as
// (a0 + a1)·(b0 + b1) + LO + HI: three carry-less multiplies instead of
// four. The sums of LO, HI and (a0 + a1)·(b0 + b1) are accumulated over the
// blocks, and the two XORs that recover MI are paid once per reduction. The
// first fold moves LO's low word onto MI's position, the second moves MI's
// low word onto HI's:
//
//	MI' = MI ⊕ clmul(LO.lo, C) ⊕ swap(LO)
//	R   = HI ⊕ clmul(MI'.lo, C) ⊕ swap(MI')
//
// # Layout of the key powers
//
// The table holds K(N), K(N-1), …, K1 for N = aggBlocks (entry i is
// K(N-i)) and then three zero entries; its second half holds the same
// entries folded, each with both qwords k0 ⊕ k1, the key's factor in
// Karatsuba's middle product. n blocks C0…C(n-1) hash as Σ Ci·K(n-i) with
// the running value XORed into C0, so they take the n consecutive entries
// starting at entry N-n, four per vector; a last vector that is not full
// reads into the zero entries, which multiply its zero-padded lanes by zero.
// The key powers are memory operands of the multiplies: the registers hold
// the round keys and the AES states. After the folded keys come the main
// loops' packed folded keys (pairStep) and a copy of the constants
// (tableConst), all in one 64-byte-aligned block of memory.
//
// # Structure
//
// AES keeps 32 blocks (eight zmm) in flight, with every round key broadcast
// into its own register: four states would leave the loop waiting on the
// four-cycle latency of VAESENC, which issues twice per cycle. In the main
// loop the rounds of the current 512 bytes are interleaved with GHASH of the
// previous 512 bytes of ciphertext (sealing) or of the same 512 bytes
// (opening, whose ciphertext is known up front), with one reduction per 512
// bytes, or per 1024 for a key that has the powers up to K64 (gcmGroupMin):
// on Zen 5 the carry-less multiplies, and on Intel cores, where VPCLMULQDQ
// and VPSHUFB share one port and VAESENC has another, the vector
// instructions of every kind bound AES-128-GCM
// (BenchmarkSeal/aes-128-gcm/vaes512/16384), so each one saved counts. The
// counter lives in registers in byte-reversed form, so that VPADDD
// increments its last 32 bits modulo 2^32, exactly GCM's inc32; the main
// loops derive their counter blocks from it in GCM's byte order
// (aesStartAgg). The last AES round takes round key ⊕ input, which folds the
// XOR with the text into VAESENCLAST. Tails of fewer than 512 bytes go a
// vector at a time, with byte masks (BZHI, KMOVQ, VMOVDQU8) for the last
// partial vector, and the length block is hashed along with the tail's
// blocks when they leave a power of H for it. gcm256.go has the variant for
// 256-bit vectors without AVX-512.
//
// # References
//
//   - NIST SP 800-38D, Galois/Counter Mode (GCM) and GMAC.
//   - S. Gueron, M. Kounavis, Intel Carry-Less Multiplication Instruction and
//     its Usage for Computing the GCM Mode (2014): the byte-reflected
//     representation, the shifted hash key and the two-step folding reduction.
//   - N. Drucker, S. Gueron, V. Krasnov, Making AES Great Again: The
//     Forthcoming Vectorized AES Instruction (2018).
//   - E. Biggers, the Linux kernel's arch/x86/crypto/aes-gcm-avx10-x86_64.S
//     (2024) and its VAES+AVX2 sibling: the overall shape (blocks in flight,
//     key powers in descending order with zero padding, aggregated
//     reduction, stitching, Karatsuba with pre-folded key halves on AVX2)
//     that this generator re-derives.
package main

//go:generate go run . -out ../../gcm_amd64.s -stubs ../../gcm_stub_amd64.go -pkg kernels

import (
	"fmt"
	"slices"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// aggBlocks is how many blocks the main loops hash per reduction, and so how
// many powers of H the table holds; aggVecs is that in zmm vectors, which is
// also how many AES states the main loops keep in flight.
const (
	aggBlocks = 32
	aggVecs   = aggBlocks / 4
	aggBytes  = 16 * aggBlocks
	// tableEntries is how many entries the table's first half uses:
	// K(aggBlocks), …, K1 and three zero entries. The second half, at
	// foldedDisp, has the folded keys in the same order. The half is padded
	// to a whole number of vectors, so that the sections after it start on a
	// cache line, as their 64-byte loads must (tableConst).
	tableEntries = aggBlocks + 3
	foldedDisp   = 64 * ((tableEntries + 3) / 4)
	// packedDisp is where the main loops' folded keys start, packed two
	// vectors to a vector (see pairStep): aggVecs/2 vectors.
	packedDisp = 2 * foldedDisp
	// constDisp is where the table's copy of the constants starts, one
	// vector each (see tableConst).
	constDisp = packedDisp + 64*(aggVecs/2)
	// tableConsts is how many constants the table holds (tableConstList).
	tableConsts = 6
	// groupDisp is where the powers K(2·aggBlocks), …, K(aggBlocks+1)
	// start, in the order of the first half, and groupPackedDisp their
	// packed folded keys: the main loops hash two aggBytes blocks in a
	// group, the first with these powers, and reduce once per group.
	groupDisp       = constDisp + 64*tableConsts
	groupPackedDisp = groupDisp + 16*aggBlocks
	// tableLen is the table's length in entries.
	tableLen = groupPackedDisp/16 + aggBlocks/2
)

// tableType is the Go type of the table of key powers.
var tableType = fmt.Sprintf("*[%d][16]byte", tableLen)

// The vector registers of the kernels, assigned by hand: all 32 are needed
// for AES-256 with its 15 round keys and eight AES states held in registers.
var (
	st         = [8]VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7} // AES states, 4 blocks each
	ctr        = Z8                                             // next counters, byte-reversed
	acc        = Z9                                             // running GHASH value, lane 0
	dat        = Z10                                            // the block vector being hashed
	lo, mi, hi = Z11, Z12, Z13                                  // unreduced product sums
	t0, t1     = Z14, Z15                                       // scratch
	bsw        = Z31                                            // byte-reversal shuffle mask, outside the main loops
	dat2       = Z31                                            // in the main loops: the second vector of a pair
	rkRegs     = []VecPhysical{Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30}
)

// Constants, 64 bytes each so that they serve as zmm memory operands. The
// 256-bit kernels read them where they are; the 512-bit ones read the copies
// gcmInitVAES512 makes at the end of the table (tableConst).
var (
	bswapMask Mem // per lane: bytes 15, 14, …, 0
	gfPoly    Mem // every qword: 0xc200000000000000
	inc4      Mem // per lane: dword 0 = 4
	ctrInit   Mem // per lane i: dword 0 = i+1
	inc4BE    Mem // per lane: byte 15 = 4, the rest 0
	incAgg    Mem // per lane: dword 0 = aggBlocks
)

// tableConstList are the constants the table holds copies of, in order.
var tableConstList = []*Mem{&bswapMask, &gfPoly, &inc4, &ctrInit, &inc4BE, &incAgg}

// tableReg is the register that holds the table's address in the 512-bit
// function being generated; every one of them takes the table.
var tableReg Register

// tableConst returns the table's copy of constant c. Go's linker
// aligns read-only data to 32 bytes at most, so a 64-byte constant there
// straddles two cache lines in about half of all builds, and a split load in
// every VPSHUFB and VPADDD of the main loops costs the loop throughput
// (BenchmarkSeal/aes-128-gcm/vaes512/16384 moved with the link layout); the
// table is 64-byte aligned (gcmAsm.tableMem).
func tableConst(c *Mem) Mem {
	i := slices.Index(tableConstList, c)
	if i < 0 {
		panic("not a table constant")
	}
	return Mem{Base: tableReg, Disp: constDisp + 64*i}
}

// constRegs holds the constants that the function being generated keeps in
// registers in its main loops (AES-128 leaves four free), for kconst.
var constRegs map[*Mem]VecPhysical

// kconst returns constant c as the main loops read it: from its register if
// it has one, else from the table.
func kconst(c *Mem) Op {
	if r, ok := constRegs[c]; ok {
		return r
	}
	return tableConst(c)
}

func main() {
	if len(tableConstList) != tableConsts {
		panic("tableConsts does not count tableConstList")
	}
	ConstraintExpr("amd64,gc,!purego")
	constants()
	gcmInit()
	gcmAAD()
	gcmCrypt(false)
	gcmCrypt(true)
	constants256()
	gcmInit256()
	gcmAAD256()
	gcmCrypt256(false)
	gcmCrypt256(true)
	Generate()
}

// prefetchAhead is how far ahead of the block being encrypted the main loop
// asks for its source: a message that comes from memory rather than cache
// otherwise waits on every line (PREFETCHT0 never faults, so reading past
// the end is harmless).
const prefetchAhead = 2048

func constants() {
	bswapMask = GLOBL("gcmBswapMask", RODATA|NOPTR)
	for i := 0; i < 64; i++ {
		DATA(i, U8(15-i%16))
	}
	gfPoly = GLOBL("gcmPoly", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(8*i, U64(0xc200000000000000))
	}
	inc4 = GLOBL("gcmInc4", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		v := uint32(0)
		if i%4 == 0 {
			v = 4
		}
		DATA(4*i, U32(v))
	}
	inc4BE = GLOBL("gcmInc4BE", RODATA|NOPTR)
	for i := 0; i < 64; i++ {
		v := uint8(0)
		if i%16 == 15 {
			v = 4
		}
		DATA(i, U8(v))
	}
	incAgg = GLOBL("gcmIncAgg", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		v := uint32(0)
		if i%4 == 0 {
			v = aggBlocks
		}
		DATA(4*i, U32(v))
	}
	ctrInit = GLOBL("gcmCtrInit", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		v := uint32(0)
		if i%4 == 0 {
			v = uint32(i/4 + 1)
		}
		DATA(4*i, U32(v))
	}
}

// mulAcc multiplies the blocks in d lane by lane with the key powers at k
// (table entries; their folded halves are foldedDisp further on) and adds
// the products to the unreduced sums, or sets them if first. Karatsuba: lo
// gets d0·k0, hi gets d1·k1 and mi gets (d0 ⊕ d1)·(k0 ⊕ k1), from which
// the reduction recovers the middle product d0·k1 ⊕ d1·k0 as mi ⊕ lo ⊕ hi:
// three carry-less multiplies per block instead of four, on a core where
// they, not the AES rounds, bound the loop (BenchmarkSeal/aes-128-gcm/vaes512/16384).
// d is clobbered.
func mulAcc(d VecPhysical, k Mem, first bool) {
	kf := k
	kf.Disp += foldedDisp
	if first {
		VPCLMULQDQ(U8(0x00), k, d, lo)
		VPCLMULQDQ(U8(0x11), k, d, hi)
		VPSHUFD(U8(0x4e), d, t0)
		VPXORD(t0, d, d)
		VPCLMULQDQ(U8(0x00), kf, d, mi)
		return
	}
	VPCLMULQDQ(U8(0x00), k, d, t0)
	VPXORD(t0, lo, lo)
	VPCLMULQDQ(U8(0x11), k, d, t0)
	VPXORD(t0, hi, hi)
	VPSHUFD(U8(0x4e), d, t1)
	VPXORD(t1, d, d)
	VPCLMULQDQ(U8(0x00), kf, d, t1)
	VPXORD(t1, mi, mi)
}

// mulSchool sets lo, mi and hi to the schoolbook products of d and k lane by
// lane, mi being the middle product itself: for computing the table, whose
// keys have no folded halves yet.
func mulSchool(d, k VecPhysical) {
	VPCLMULQDQ(U8(0x00), k, d, lo)
	VPCLMULQDQ(U8(0x01), k, d, t0)
	VPCLMULQDQ(U8(0x10), k, d, t1)
	VPXORD(t0, t1, mi)
	VPCLMULQDQ(U8(0x11), k, d, hi)
}

// reduceFold folds lo into mi (the first step of the reduction), turning mi
// from the Karatsuba sum into the middle product first if karatsuba.
func reduceFold(karatsuba bool) {
	if karatsuba {
		VPTERNLOGD(U8(0x96), lo, hi, mi)
	}
	VPCLMULQDQ(U8(0x00), kconst(&gfPoly), lo, t0)
	VPSHUFD(U8(0x4e), lo, lo)
	VPTERNLOGD(U8(0x96), t0, lo, mi)
}

// reduceFinish folds mi into hi, which then holds the reduced sum of each
// lane, and XORs the four lanes into the low 128 bits of dst (the rest of dst
// is zeroed).
func reduceFinish(dst VecPhysical) {
	reduceLanes()
	VEXTRACTI64X4(U8(1), hi, t0.AsY())
	VPXORD(t0.AsY(), hi.AsY(), hi.AsY())
	VEXTRACTI32X4(U8(1), hi.AsY(), t0.AsX())
	VPXORD(t0.AsX(), hi.AsX(), dst.AsX())
}

// reduceLanes folds mi into hi, which then holds the reduced product of each
// lane.
func reduceLanes() {
	VPCLMULQDQ(U8(0x00), kconst(&gfPoly), mi, t0)
	VPSHUFD(U8(0x4e), mi, mi)
	VPTERNLOGD(U8(0x96), t0, mi, hi)
}

// reduce reduces the Karatsuba sums into dst.
func reduce(dst VecPhysical) {
	reduceFold(true)
	reduceFinish(dst)
}

// ghashSteps returns the steps that hash the aggBytes bytes at base+disp
// into acc with the key powers of table: one step per pair of vectors, then
// the two halves of the reduction. Interleaved with AES rounds, they stitch
// the two. The pair that takes the running value goes last, so that the
// other products do not wait for the previous reduction. The steps use dat2
// and so clobber bsw.
func ghashSteps(table, base Register, disp int) []func() {
	return groupSteps(table, base, disp, groupSingle)
}

// A groupPart says which part of a group of blocks hashed per reduction
// the steps of groupSteps hash.
type groupPart int

const (
	groupSingle groupPart = iota // aggBlocks blocks alone: K(aggBlocks)…K1, reduced
	groupFirst                   // the first aggBlocks of 2·aggBlocks: the higher powers, not reduced
	groupSecond                  // the second aggBlocks: K(aggBlocks)…K1, added to the first and reduced
)

// groupSteps returns the steps that hash the aggBytes bytes at base+disp as
// the given part of a group. The first part takes the running value and
// starts the sums; the second adds to them and reduces into acc.
func groupSteps(table, base Register, disp int, part groupPart) []func() {
	var steps []func()
	pw, pk := 0, packedDisp
	if part == groupFirst {
		pw, pk = groupDisp, groupPackedDisp
	}
	for i := 0; i < aggVecs/2; i++ {
		j := (i + 1) % (aggVecs / 2)
		first := i == 0 && part != groupSecond
		withAcc := j == 0 && part != groupSecond
		steps = append(steps, func() { pairStep(table, base, disp, pw, pk, j, first, withAcc) })
	}
	if part != groupFirst {
		steps = append(steps, func() { reduceFold(true) }, func() { reduceFinish(acc) })
	}
	return steps
}

// pairStep multiplies vectors 2j and 2j+1 of the blocks at base+disp by
// their key powers and adds the Karatsuba products to the sums (or sets
// them if first); vector 0 takes the running value. Two vectors at a time,
// the products combine with three-way XORs, and the halves of both fold in
// three instructions (two unpacks and an XOR) into one vector whose low and
// high qwords meet the packed folded keys: in this loop the carry-less
// multiplies run at their limit, and every other vector instruction beside
// them costs time (BenchmarkSeal/aes-128-gcm/vaes512/16384).
func pairStep(table, base Register, disp, pw, pk, j int, first, withAcc bool) {
	a, b := 2*j, 2*j+1
	VMOVDQU64(Mem{Base: base, Disp: disp + 64*a}, dat)
	VPSHUFB(kconst(&bswapMask), dat, dat)
	if withAcc {
		VPXORD(acc, dat, dat)
	}
	VMOVDQU64(Mem{Base: base, Disp: disp + 64*b}, dat2)
	VPSHUFB(kconst(&bswapMask), dat2, dat2)
	ka, kb := Mem{Base: table, Disp: pw + 64*a}, Mem{Base: table, Disp: pw + 64*b}
	sum := func(dst VecPhysical) {
		if first {
			VPXORD(t0, t1, dst)
		} else {
			VPTERNLOGD(U8(0x96), t0, t1, dst)
		}
	}
	VPCLMULQDQ(U8(0x00), ka, dat, t0)
	VPCLMULQDQ(U8(0x00), kb, dat2, t1)
	sum(lo)
	VPCLMULQDQ(U8(0x11), ka, dat, t0)
	VPCLMULQDQ(U8(0x11), kb, dat2, t1)
	sum(hi)
	// t0 = [a0 ⊕ a1, b0 ⊕ b1] in each lane.
	VPUNPCKLQDQ(dat2, dat, t0)
	VPUNPCKHQDQ(dat2, dat, t1)
	VPXORD(t1, t0, t0)
	kp := Mem{Base: table, Disp: pk + 64*j}
	VPCLMULQDQ(U8(0x00), kp, t0, t1)
	VPCLMULQDQ(U8(0x11), kp, t0, t0)
	sum(mi)
}

// tailMask sets K1 to the byte mask of the first min(n, 64) bytes of a
// vector (BZHI alone reads only the index's low byte, and tails here are
// longer than 255 bytes).
func tailMask(n, tmp Register) {
	c := GP64()
	MOVL(U32(64), c.As32())
	CMPQ(n, c)
	CMOVQCS(n, c)
	MOVQ(I32(-1), tmp)
	BZHIQ(c, tmp, tmp)
	KMOVQ(tmp, K1)
}

// lowVecs is how many vectors of powers gcmInitVAES512 computes: K16…K1,
// all that a message of up to 240 bytes (15 blocks and the length block)
// and additional data of up to 256 bytes need. The rest of the table waits
// for gcmInitHighVAES512.
const lowVecs = 4

// gcmInit computes the table of key powers in log2(aggBlocks) rounds of
// multiplication rather than aggBlocks-1: K2 = K1·K1; (K4, K3) = (K2,
// K1)·K2; then each round multiplies every vector of four powers so far by
// the highest power so far, broadcast, doubling the number of powers with
// independent products. A per-message key pays for the table on every
// message (BenchmarkGCMNew), and a chain of dependent products would be
// most of its cost; so gcmInitVAES512 stops at K16, and the last round,
// with the packed folded keys of the main loops, is gcmInitHighVAES512,
// run only for a key that meets a longer message.
func gcmInit() {
	TEXT("gcmInitVAES512", NOSPLIT, "func(table "+tableType+", k1 *[16]byte)")
	Pragma("noescape")
	Doc("gcmInitVAES512 fills table entries "+fmt.Sprint(aggBlocks-16)+" on with K16, …, K1 and three zero blocks,",
		"where K1 = y·H is the byte-reversed hash key multiplied by y (see the",
		"generator), and the folded keys of the same entries: each entry's two",
		"qwords XORed together, in both qwords; and the last "+fmt.Sprint(4*tableConsts)+" entries with the",
		"kernels' constants.")
	table := Load(Param("table"), GP64())
	tableReg = table
	k1 := Load(Param("k1"), GP64())
	for _, c := range tableConstList {
		VMOVDQU64(*c, t0)
		VMOVDQU64(t0, tableConst(c))
	}
	vec := st[:lowVecs] // vec[j] = K(4j+4), …, K(4j+1)
	k := ctr
	VMOVDQU(Mem{Base: k1}, vec[0].AsX()) // K1, 0, 0, 0
	initMul(vec[0], vec[0])              // K2, 0, 0, 0
	VINSERTI32X4(U8(1), vec[0].AsX(), hi, vec[0])
	VSHUFI32X4(U8(0), hi, hi, k)
	initMul(vec[0], k) // K4, K3, 0, 0
	VINSERTI64X4(U8(1), vec[0].AsY(), hi, vec[0])
	for m := 1; m < lowVecs; m *= 2 {
		initRound(vec, m)
	}
	for j, v := range vec {
		storePowers(table, j, v)
	}
	VPXORD(t0.AsX(), t0.AsX(), t0.AsX())
	for i := aggBlocks; i < tableEntries; i++ {
		VMOVDQU(t0.AsX(), Mem{Base: table, Disp: i * 16})
		VMOVDQU(t0.AsX(), Mem{Base: table, Disp: foldedDisp + i*16})
	}
	VZEROUPPER()
	RET()

	TEXT("gcmInitHighVAES512", NOSPLIT, "func(table "+tableType+")")
	Pragma("noescape")
	Doc("gcmInitHighVAES512 completes a table that gcmInitVAES512 filled: the",
		"powers K"+fmt.Sprint(aggBlocks)+", …, K17 and their folded keys, and the",
		"folded keys packed for the main loops.")
	table = Load(Param("table"), GP64())
	tableReg = table
	vec = st[:aggVecs]
	for j := 0; j < lowVecs; j++ {
		VMOVDQU64(Mem{Base: table, Disp: 16 * (aggBlocks - 4 - 4*j)}, vec[j])
	}
	for m := lowVecs; m < aggVecs; m *= 2 {
		initRound(vec, m)
	}
	for j := lowVecs; j < aggVecs; j++ {
		storePowers(table, j, vec[j])
	}
	packKeys(table, vec, packedDisp)
	VZEROUPPER()
	RET()

	TEXT("gcmInitGroupVAES512", NOSPLIT, "func(table "+tableType+")")
	Pragma("noescape")
	Doc("gcmInitGroupVAES512 adds to a table that gcmInitHighVAES512 completed",
		"the powers K"+fmt.Sprint(2*aggBlocks)+", …, K"+fmt.Sprint(aggBlocks+1)+" with which the main loops hash the first",
		"of two blocks per reduction, and their packed folded keys.")
	table = Load(Param("table"), GP64())
	tableReg = table
	// vec[j] = K(4j+4), …, K(4j+1): the AES states and the round-key
	// registers, free here.
	vec = append(append([]VecPhysical{}, st[:]...), rkRegs[:aggVecs]...)
	for j := 0; j < aggVecs; j++ {
		VMOVDQU64(Mem{Base: table, Disp: 16 * (aggBlocks - 4 - 4*j)}, vec[j])
	}
	initRound(vec, aggVecs)
	for j := aggVecs; j < 2*aggVecs; j++ {
		VMOVDQU64(vec[j], Mem{Base: table, Disp: groupDisp + 16*(2*aggBlocks-4-4*j)})
	}
	packKeys(table, vec[aggVecs:], groupPackedDisp)
	VZEROUPPER()
	RET()
}

// packKeys stores the packed folded keys of the powers in vec (vec[j] =
// K(4j+4+c), …, K(4j+1+c) for some c) at disp: for each vector pair (2j,
// 2j+1) of the table, lane l holds the folded key of entry 8j+l in its low
// qword and of entry 8j+4+l in its high qword. vec runs up, the table down.
func packKeys(table Register, vec []VecPhysical, disp int) {
	nv := len(vec)
	for j := 0; j < nv/2; j++ {
		va, vb := vec[nv-1-2*j], vec[nv-2-2*j]
		VPSHUFD(U8(0x4e), va, t0)
		VPXORD(va, t0, t0)
		VPSHUFD(U8(0x4e), vb, t1)
		VPXORD(vb, t1, t1)
		VPUNPCKLQDQ(t1, t0, t0)
		VMOVDQU64(t0, Mem{Base: table, Disp: disp + 64*j})
	}
}

// initMul sets hi to d·k lane by lane, reduced.
func initMul(d, k VecPhysical) {
	mulSchool(d, k)
	reduceFold(false)
	reduceLanes()
}

// initRound doubles the m vectors of powers in vec: vec[m+i] = vec[i]·K(4m),
// K(4m) being lane 0 of vec[m-1].
func initRound(vec []VecPhysical, m int) {
	k := ctr
	VSHUFI32X4(U8(0), vec[m-1], vec[m-1], k) // K(4m)
	for i := 0; i < m; i++ {
		initMul(vec[i], k)
		VMOVDQA64(hi, vec[m+i])
	}
}

// storePowers stores vec[j] = K(4j+4), …, K(4j+1) and its folded keys.
func storePowers(table Register, j int, v VecPhysical) {
	entry := aggBlocks - 4 - 4*j
	VMOVDQU64(v, Mem{Base: table, Disp: 16 * entry})
	VPSHUFD(U8(0x4e), v, t0)
	VPXORD(v, t0, t0)
	VMOVDQU64(t0, Mem{Base: table, Disp: foldedDisp + 16*entry})
}

// gcmAAD hashes additional data into the running value.
func gcmAAD() {
	TEXT("gcmAADVAES512", NOSPLIT, "func(table "+tableType+", acc *[16]byte, aad []byte)")
	Pragma("noescape")
	Doc("gcmAADVAES512 hashes aad, zero-padded to a whole number of blocks, into acc.")
	table := Load(Param("table"), GP64())
	tableReg = table
	accp := Load(Param("acc"), GP64())
	p := Load(Param("aad").Base(), GP64())
	n := Load(Param("aad").Len(), GP64())
	VMOVDQU64(tableConst(&bswapMask), bsw)
	VMOVDQU(Mem{Base: accp}, acc.AsX())

	CMPQ(n, U32(aggBytes))
	JB(LabelRef("aadTail"))
	Label("aadLoop")
	for _, s := range ghashSteps(table, p, 0) {
		s()
	}
	ADDQ(U32(aggBytes), p)
	SUBQ(U32(aggBytes), n)
	CMPQ(n, U32(aggBytes))
	JAE(LabelRef("aadLoop"))

	Label("aadTail")
	VMOVDQU64(tableConst(&bswapMask), bsw)
	TESTQ(n, n)
	JZ(LabelRef("aadDone"))
	// Powers K(nb)… for the nb remaining blocks start at entry aggBlocks-nb.
	hp := GP64()
	MOVQ(n, hp)
	ADDQ(U8(15), hp)
	ANDQ(I32(-16), hp)
	NEGQ(hp)
	LEAQ(Mem{Base: table, Index: hp, Scale: 1, Disp: aggBytes}, hp)
	zeroSums()
	m := GP64()
	Label("aadTailLoop")
	tailMask(n, m)
	VMOVDQU8_Z(Mem{Base: p}, K1, dat)
	VPSHUFB(bsw, dat, dat)
	VPXORD(acc, dat, dat)
	VPXORD(acc, acc, acc)
	mulAcc(dat, Mem{Base: hp}, false)
	ADDQ(U8(64), p)
	ADDQ(U8(64), hp)
	SUBQ(U8(64), n)
	JG(LabelRef("aadTailLoop"))
	reduce(acc)

	Label("aadDone")
	VMOVDQU(acc.AsX(), Mem{Base: accp})
	VZEROUPPER()
	RET()
}

func zeroSums() {
	VPXORD(lo, lo, lo)
	VPXORD(mi, mi, mi)
	VPXORD(hi, hi, hi)
}

// cryptArgs are the general-purpose registers of gcmSeal and gcmOpen.
type cryptArgs struct {
	rk, table, accp, dst, src, n, nonce, aadLen, tag Register
}

// gcmCrypt generates gcmSealVAES512 or gcmOpenVAES512.
func gcmCrypt(open bool) {
	name, what := "gcmSealVAES512", "encrypts src into dst"
	if open {
		name, what = "gcmOpenVAES512", "decrypts src into dst"
	}
	TEXT(name, NOSPLIT, "func(rk *[15][16]byte, rounds int, table "+tableType+", acc *[16]byte, dst, src []byte, nonce *[12]byte, ctr uint32, aadLen int, tag *[16]byte, groups bool)")
	Pragma("noescape")
	Doc(name+" "+what+" with AES-GCM and writes the tag, computed over",
		"the additional data already hashed into acc (aadLen bytes of it) and the",
		"ciphertext, to tag. The pre-counter block J0 is nonce ‖ ctr (ctr = 1 for GCM",
		"with a 96-bit nonce; other values are for tests); the text takes the",
		"counters after J0, incremented modulo 2^32 in the last four bytes. rounds",
		"is 10 or 14; dst must be at least as long as src. groups says that the",
		"table holds the powers of gcmInitGroupVAES512, for the main loops to hash",
		"two blocks of "+fmt.Sprint(aggBytes)+" bytes per reduction.")
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
	tableReg = a.table
	rounds := Load(Param("rounds"), GP64())
	CMPQ(rounds, U8(10))
	JNE(LabelRef("aes256"))
	cryptBody(a, 10, open, "128")
	Label("aes256")
	cryptBody(a, 14, open, "256")
}

func cryptBody(a cryptArgs, rounds int, open bool, sfx string) {
	L := func(s string) string { return s + sfx }
	rk := rkRegs[:rounds+1]
	for i := range rk {
		VBROADCASTI32X4(Mem{Base: a.rk, Disp: 16 * i}, rk[i])
	}
	VMOVDQU64(tableConst(&bswapMask), bsw)

	// J0 = nonce ‖ ctr (big-endian), byte-reversed into ctr: dword 0 is the
	// counter.
	loadJ0(a, t1.AsX())
	VPSHUFB(bsw.AsX(), t1.AsX(), ctr.AsX())

	// Counters J0+1 … J0+4 in the four lanes (inc32: modulo 2^32).
	VSHUFI32X4(U8(0), ctr, ctr, ctr)
	VPADDD(tableConst(&ctrInit), ctr, ctr)
	VMOVDQU(Mem{Base: a.accp}, acc.AsX())

	n, src, dst := a.n, a.src, a.dst
	aesStart := func(nv int) {
		if nv == aggVecs {
			aesStartAgg(rk[0])
			return
		}
		aesStartReversed(nv, rk[0])
	}
	aesRound := func(r, nv int) {
		for k := 0; k < nv; k++ {
			VAESENC(rk[r], st[k], st[k])
		}
	}
	aesLast := func(nv int) {
		for k := 0; k < nv; k++ {
			VPXORD(Mem{Base: src, Disp: 64 * k}, rk[rounds], t1)
			VAESENCLAST(t1, st[k], st[k])
			VMOVDQU64(st[k], Mem{Base: dst, Disp: 64 * k})
		}
	}
	// stitched runs the AES of aggBytes bytes from src to dst with the
	// given GHASH steps spread over its middle rounds.
	stitched := func(steps []func()) {
		aesStart(aggVecs)
		for k := 0; k < aggVecs; k++ {
			PREFETCHT0(Mem{Base: src, Disp: prefetchAhead + 64*k})
		}
		for r := 1; r < rounds; r++ {
			aesRound(r, aggVecs)
			// Step i goes after round 1 + i·(rounds-2)/len(steps).
			for i, s := range steps {
				if 1+i*(rounds-2)/len(steps) == r {
					s()
				}
			}
		}
		aesLast(aggVecs)
	}
	advance := func() {
		ADDQ(U32(aggBytes), src)
		ADDQ(U32(aggBytes), dst)
		SUBQ(U32(aggBytes), n)
	}

	CMPQ(n, U32(aggBytes))
	JB(LabelRef(L("tail")))
	// In the main loops the round-key registers AES-128 leaves free hold
	// the constants, sparing their loads
	// (BenchmarkOpen/aes-128-gcm/vaes512/16384); the tail reads them from
	// the table.
	if free := rkRegs[rounds+1:]; len(free) >= 4 {
		constRegs = map[*Mem]VecPhysical{}
		for i, c := range []*Mem{&bswapMask, &inc4BE, &gfPoly, &inc4} {
			constRegs[c] = free[i]
			VMOVDQU64(tableConst(c), free[i])
		}
	}
	// The loops hash two blocks of aggBytes per reduction (groupSteps),
	// and a last odd block alone: the reduction's multiplies, shuffles and
	// horizontal XORs compete with the rest for the vector ports
	// (BenchmarkSeal/aes-128-gcm/vaes512/16384).
	groups, _ := Param("groups").Resolve()
	// loop hashes the blocks at base+disp: two blocks at a time while
	// groups allows and two remain, else one.
	loop := func(kind string, base Register, disp int) {
		Label(L(kind + "Loop"))
		CMPQ(n, U32(2*aggBytes))
		JB(LabelRef(L(kind + "Single")))
		CMPB(groups.Addr, U8(0))
		JE(LabelRef(L(kind + "Single")))
		stitched(groupSteps(a.table, base, disp, groupFirst))
		advance()
		stitched(groupSteps(a.table, base, disp, groupSecond))
		advance()
		JMP(LabelRef(L(kind + "Loop")))
		Label(L(kind + "Single"))
		CMPQ(n, U32(aggBytes))
		JB(LabelRef(L(kind + "Done")))
		stitched(ghashSteps(a.table, base, disp))
		advance()
		JMP(LabelRef(L(kind + "Loop")))
		Label(L(kind + "Done"))
	}
	if open {
		loop("open", src, 0)
	} else {
		// Each block is hashed while the next one is encrypted.
		stitched(nil)
		advance()
		loop("seal", dst, -aggBytes)
		for _, s := range ghashSteps(a.table, dst, -aggBytes) {
			s()
		}
	}

	constRegs = nil

	// Tail: n < aggBytes bytes in nb = ceil(n/16) blocks, then the length
	// block. With nb < aggBlocks the length block takes K1 and the blocks
	// K(nb+1)…K2, starting at entry aggBlocks-1-nb; with nb = aggBlocks the
	// blocks take all the powers and the length block is hashed after a
	// reduction.
	Label(L("tail"))
	VMOVDQU64(tableConst(&bswapMask), bsw)
	// E(K, J0), for the tag, computed alongside the tail and kept in a
	// register: parked in memory it would wait for the tail's masked stores,
	// which cover the tag's place.
	ej := st[7].AsX()
	loadJ0(a, ej)
	VPXORD(rk[0].AsX(), ej, ej)
	for r := 1; r < rounds; r++ {
		VAESENC(rk[r].AsX(), ej, ej)
	}
	VAESENCLAST(rk[rounds].AsX(), ej, ej)

	hp, sep := GP64(), GP64()
	MOVQ(n, hp)
	ADDQ(U8(15), hp)
	ANDQ(I32(-16), hp) // 16·nb
	XORQ(sep, sep)
	CMPQ(hp, U32(aggBytes))
	SETEQ(sep.As8())
	NEGQ(hp)
	LEAQ(Mem{Base: a.table, Index: hp, Scale: 1, Disp: aggBytes - 16}, hp)
	SHLQ(U8(4), sep)
	ADDQ(sep, hp) // back to entry 0 when nb = aggBlocks
	zeroSums()
	TESTQ(n, n)
	JZ(LabelRef(L("lengths")))
	m := GP64()
	Label(L("tailLoop"))
	tailMask(n, m)
	aesStart(1)
	for r := 1; r < rounds; r++ {
		aesRound(r, 1)
	}
	// A message of one block or less is read and written with 128-bit
	// masked moves: a 512-bit one reaches 48 bytes past it, often into the
	// next cache line, and a masked move across lines costs several
	// nanoseconds (BenchmarkSeal/aes-128-gcm/vaes512/16).
	CMPQ(n, U8(16))
	JA(LabelRef(L("tailWide")))
	VMOVDQU8_Z(Mem{Base: src}, K1, dat.AsX())
	VPXORD(dat, rk[rounds], t1)
	VAESENCLAST(t1, st[0], st[0])
	VMOVDQU8(st[0].AsX(), K1, Mem{Base: dst})
	JMP(LabelRef(L("tailMoved")))
	Label(L("tailWide"))
	VMOVDQU8_Z(Mem{Base: src}, K1, dat)
	VPXORD(dat, rk[rounds], t1)
	VAESENCLAST(t1, st[0], st[0])
	VMOVDQU8(st[0], K1, Mem{Base: dst})
	Label(L("tailMoved"))
	if !open {
		// The ciphertext, zero past the message (the mask applies before
		// the byte reversal).
		VMOVDQU8_Z(st[0], K1, dat)
	}
	VPSHUFB(bsw, dat, dat)
	VPXORD(acc, dat, dat)
	VPXORD(acc, acc, acc)
	mulAcc(dat, Mem{Base: hp}, false)
	ADDQ(U8(64), src)
	ADDQ(U8(64), dst)
	ADDQ(U8(64), hp)
	SUBQ(U8(64), n)
	JG(LabelRef(L("tailLoop")))
	// nb = aggBlocks: reduce now; the length block goes alone.
	TESTQ(sep, sep)
	JZ(LabelRef(L("lengths")))
	reduce(acc)
	zeroSums()

	// The length block: bit lengths of the additional data and the
	// ciphertext, byte-reversed (high qword, low qword), times K1 (whose
	// vector's other lanes are the zero entries).
	Label(L("lengths"))
	ln := dat.AsX()
	var bits Register = GP64()
	bits = Load(Param("src").Len(), bits) // n was consumed
	SHLQ(U8(3), bits)
	VMOVQ(bits, ln)
	MOVQ(a.aadLen, bits)
	SHLQ(U8(3), bits)
	VPINSRQ(U8(1), bits, ln, ln)
	VPXORD(acc, dat, dat)
	mulAcc(dat, Mem{Base: a.table, Disp: aggBytes - 16}, false)
	reduce(acc)

	// tag = E(K, J0) ⊕ the hash, back in GCM's byte order.
	VPSHUFB(bsw.AsX(), acc.AsX(), acc.AsX())
	VPXOR(ej, acc.AsX(), acc.AsX())
	VMOVDQU(acc.AsX(), Mem{Base: a.tag})
	VZEROUPPER()
	RET()
}

// aesStartAgg starts the AES of the main loops' aggBlocks counter blocks.
// When the counters' last byte does not wrap within them, the blocks are
// counted in GCM's byte order, adding to their last byte, which spares the
// byte reversal of each vector: VPSHUFB competes with VPCLMULQDQ for one
// port on Intel cores (BenchmarkSeal/aes-128-gcm/vaes512/16384). Otherwise,
// one time in 256/aggBlocks, each vector is reversed from ctr.
func aesStartAgg(rk0 VecPhysical) {
	slow, done := nextLabel("ctrWrap"), nextLabel("ctrDone")
	c := GP32()
	VMOVD(ctr.AsX(), c)
	ADDB(U8(aggBlocks-1), c.As8())
	JCS(LabelRef(slow))
	VPSHUFB(kconst(&bswapMask), ctr, st[0])
	for k := 1; k < aggVecs; k++ {
		VPADDD(kconst(&inc4BE), st[k-1], st[k])
	}
	for k := 0; k < aggVecs; k++ {
		VPXORD(rk0, st[k], st[k])
	}
	VPADDD(tableConst(&incAgg), ctr, ctr)
	JMP(LabelRef(done))
	Label(slow)
	aesStartReversed(aggVecs, rk0)
	Label(done)
}

// aesStartReversed starts the AES of nv vectors of counter blocks, each
// byte-reversed from ctr, which it advances.
func aesStartReversed(nv int, rk0 VecPhysical) {
	for k := 0; k < nv; k++ {
		VPSHUFB(kconst(&bswapMask), ctr, st[k])
		VPADDD(kconst(&inc4), ctr, ctr)
		VPXORD(rk0, st[k], st[k])
	}
}

var labels int

// nextLabel returns a new label name starting with prefix.
func nextLabel(prefix string) string {
	labels++
	return fmt.Sprintf("%s%d", prefix, labels)
}

// loadJ0 sets x to J0 = nonce ‖ ctr (ctr big-endian), assembled from scalar
// loads, which the processor can forward from the caller's recent stores of
// the nonce (a vector load spanning several of them could not be).
func loadJ0(a cryptArgs, x Register) {
	w0, w1, c := GP64(), GP64(), GP32()
	MOVQ(Mem{Base: a.nonce}, w0)
	MOVL(Mem{Base: a.nonce, Disp: 8}, w1.As32())
	Load(Param("ctr"), c)
	BSWAPL(c)
	SHLQ(U8(32), c.As64())
	ORQ(c.As64(), w1)
	VMOVQ(w0, x)
	VPINSRQ(U8(1), w1, x, x)
}
