// Command aeskey generates the AES-NI key schedule and single-block encryption
// shared by the VAES kernels: kernels/aeskey_amd64.s and its Go declarations.
package main

//go:generate go run . -out ../../aeskey_amd64.s -stubs ../../aeskey_stub_amd64.go -pkg kernels

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// rcon holds the AES round constants, one per AESKEYGENASSIST.
var rcon = []uint8{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36}

func main() {
	ConstraintExpr("amd64,gc,!purego")
	expandKey128()
	expandKey256()
	encryptBlock()
	Generate()
}

// prefixXOR sets w to (w0, w0^w1, w0^w1^w2, w0^w1^w2^w3), the running XOR of
// its four words that every step of the key schedule needs.
func prefixXOR(w, tmp VecVirtual) {
	MOVOU(w, tmp)
	PSLLDQ(U8(4), tmp)
	PXOR(tmp, w)
	MOVOU(w, tmp)
	PSLLDQ(U8(8), tmp)
	PXOR(tmp, w)
}

func expandKey128() {
	TEXT("expandKey128", NOSPLIT, "func(key *[16]byte, rk *[11][16]byte)")
	Pragma("noescape")
	Doc("expandKey128 writes the 11 round keys of AES-128 for key (FIPS 197 §5.2).")
	key := Load(Param("key"), GP64())
	rk := Load(Param("rk"), GP64())
	w, t, tmp := XMM(), XMM(), XMM()
	MOVOU(Mem{Base: key}, w)
	MOVOU(w, Mem{Base: rk})
	for i, c := range rcon {
		// t's word 3 is RotWord(SubWord(w3)) ^ rcon; broadcast it.
		AESKEYGENASSIST(U8(c), w, t)
		PSHUFD(U8(0xff), t, t)
		prefixXOR(w, tmp)
		PXOR(t, w)
		MOVOU(w, Mem{Base: rk, Disp: 16 * (i + 1)})
	}
	RET()
}

func expandKey256() {
	TEXT("expandKey256", NOSPLIT, "func(key *[32]byte, rk *[15][16]byte)")
	Pragma("noescape")
	Doc("expandKey256 writes the 15 round keys of AES-256 for key (FIPS 197 §5.2).")
	key := Load(Param("key"), GP64())
	rk := Load(Param("rk"), GP64())
	even, odd, t, tmp := XMM(), XMM(), XMM(), XMM()
	MOVOU(Mem{Base: key}, even)
	MOVOU(Mem{Base: key, Disp: 16}, odd)
	MOVOU(even, Mem{Base: rk})
	MOVOU(odd, Mem{Base: rk, Disp: 16})
	for i := 0; i < 7; i++ {
		// Even round keys: RotWord(SubWord(w)) ^ rcon of the previous odd key.
		AESKEYGENASSIST(U8(rcon[i]), odd, t)
		PSHUFD(U8(0xff), t, t)
		prefixXOR(even, tmp)
		PXOR(t, even)
		MOVOU(even, Mem{Base: rk, Disp: 32 * (i + 1)})
		if i == 6 {
			break
		}
		// Odd round keys: SubWord(w) of the new even key, no rotation or rcon
		// (AESKEYGENASSIST's word 2).
		AESKEYGENASSIST(U8(0), even, t)
		PSHUFD(U8(0xaa), t, t)
		prefixXOR(odd, tmp)
		PXOR(t, odd)
		MOVOU(odd, Mem{Base: rk, Disp: 32*(i+1) + 16})
	}
	RET()
}

func encryptBlock() {
	TEXT("encryptBlockAESNI", NOSPLIT, "func(rounds int, rk *[15][16]byte, dst, src *[16]byte)")
	Pragma("noescape")
	Doc("encryptBlockAESNI encrypts one block with the given round keys; rounds is 10 or 14.")
	rounds := Load(Param("rounds"), GP64())
	rk := Load(Param("rk"), GP64())
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	b, k := XMM(), XMM()
	MOVOU(Mem{Base: src}, b)
	MOVOU(Mem{Base: rk}, k)
	PXOR(k, b)
	ADDQ(U8(16), rk)
	DECQ(rounds)
	Label("round")
	MOVOU(Mem{Base: rk}, k)
	AESENC(k, b)
	ADDQ(U8(16), rk)
	DECQ(rounds)
	JNZ(LabelRef("round"))
	MOVOU(Mem{Base: rk}, k)
	AESENCLAST(k, b)
	MOVOU(b, Mem{Base: dst})
	RET()
}
