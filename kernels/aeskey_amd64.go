//go:build amd64 && gc && !purego

package kernels

import "unsafe"

// aesSchedule is an expanded AES encryption key, the form every VAES kernel
// takes: round key i is rk[i], in the byte order AESENC consumes. The
// schedule is computed with AESKEYGENASSIST, in constant time.
type aesSchedule struct {
	rounds int // 10 for AES-128, 14 for AES-256
	rk     [15][16]byte
}

// aesScheduleFuncs are the assembly functions behind aesSchedule.expand and
// encryptBlock, listed in the asmFuncs of every implementation that uses them.
var aesScheduleFuncs = []string{"expandKey128", "expandKey256", "encryptBlockAESNI"}

// expand sets s to the schedule of a 16- or 32-byte key.
func (s *aesSchedule) expand(key []byte) {
	switch len(key) {
	case 16:
		s.rounds = 10
		expandKey128((*[16]byte)(key), (*[11][16]byte)(unsafe.Pointer(&s.rk)))
	case 32:
		s.rounds = 14
		expandKey256((*[32]byte)(key), &s.rk)
	default:
		panic("kernels: AES key of invalid length")
	}
}

// encryptBlock encrypts one 16-byte block.
func (s *aesSchedule) encryptBlock(dst, src *[16]byte) {
	encryptBlockAESNI(s.rounds, &s.rk, dst, src)
}
