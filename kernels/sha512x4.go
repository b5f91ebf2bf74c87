package kernels

import "encoding/binary"

// SHA512x4 is the state of four SHA-512 computations that advance in
// lockstep, one block of each per step: the key derivation of four messages
// at once (cryptosvc's HKDF-Expand-SHA-512). One message's derivation is a
// chain of compressions, each waiting on the last, which keeps the vector
// unit idle; four independent chains fill it. On amd64 with AVX2 the four
// run in the 64-bit lanes of ymm registers (BenchmarkSHA512x4); elsewhere
// [SHA512x4Available] is false and callers hash one message at a time with
// crypto/sha512.
//
// It is only the compression function (FIPS 180-4 §6.4): callers set each
// lane's chaining value, feed whole padded blocks and read the chaining
// values back.
type SHA512x4 struct {
	h [8][4]uint64 // word i of lane j is h[i][j]
}

// SHA512IV is SHA-512's initial hash value (FIPS 180-4 §5.3.5).
var SHA512IV = [8]uint64{
	0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
	0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179,
}

// SHA512x4Available reports whether this host runs the four-lane kernel.
// When it does not, Blocks panics.
func SHA512x4Available() bool { return sha512x4Available }

// SetLane sets lane j's chaining value.
func (s *SHA512x4) SetLane(j int, h *[8]uint64) {
	for i := range h {
		s.h[i][j] = h[i]
	}
}

// Lane returns lane j's chaining value.
func (s *SHA512x4) Lane(j int) (h [8]uint64) {
	for i := range h {
		h[i] = s.h[i][j]
	}
	return h
}

// PutLane writes lane j's chaining value big-endian into out, which is the
// digest when the lane's padded message has been fed whole.
func (s *SHA512x4) PutLane(j int, out *[64]byte) {
	for i := range 8 {
		binary.BigEndian.PutUint64(out[8*i:], s.h[i][j])
	}
}

// Blocks compresses p[j] into lane j. The four slices have the same length,
// a non-zero multiple of 128 bytes; anything else panics.
func (s *SHA512x4) Blocks(p *[4][]byte) {
	n := len(p[0])
	if n == 0 || n%128 != 0 || len(p[1]) != n || len(p[2]) != n || len(p[3]) != n {
		panic("kernels: SHA512x4.Blocks: lanes of unequal or partial blocks")
	}
	if !sha512x4Available {
		panic("kernels: SHA512x4.Blocks: not available on this host")
	}
	sha512x4Blocks(&s.h, p, n/128)
}

// Wipe zeroes the state.
func (s *SHA512x4) Wipe() { clear(s.h[:]) }
