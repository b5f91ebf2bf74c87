//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"crypto/sha512"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// sha512Pad returns msg with SHA-512's padding (FIPS 180-4 §5.1.2), a
// whole number of blocks.
func sha512Pad(msg []byte) []byte {
	n := (len(msg) + 17 + 127) / 128 * 128
	p := make([]byte, n)
	copy(p, msg)
	p[len(msg)] = 0x80
	binary.BigEndian.PutUint64(p[n-8:], uint64(len(msg))*8)
	return p
}

func skipWithoutSHA512x4(t testing.TB) {
	t.Helper()
	if !SHA512x4Available() {
		t.Skip("no four-lane SHA-512 on this host")
	}
}

// Four different messages of each length, hashed in lockstep, give
// crypto/sha512's four digests: lengths across the padding's edges (111
// and 112 bytes need one and two blocks) and up to many blocks.
func TestSHA512x4MatchesSHA512(t *testing.T) {
	skipWithoutSHA512x4(t)
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 63, 64, 111, 112, 127, 128, 129, 239, 240, 255, 256, 1000, 4096 + 17}
	for range 20 {
		lengths = append(lengths, rng.IntN(2000))
	}
	for _, n := range lengths {
		var s SHA512x4
		var padded [4][]byte
		var want [4][64]byte
		for j := range 4 {
			msg := make([]byte, n)
			for i := range msg {
				msg[i] = byte(rng.Uint32())
			}
			want[j] = sha512.Sum512(msg)
			padded[j] = sha512Pad(msg)
			s.SetLane(j, &SHA512IV)
		}
		s.Blocks(&padded)
		for j := range 4 {
			var got [64]byte
			s.PutLane(j, &got)
			if got != want[j] {
				t.Fatalf("length %d, lane %d: %x, want %x", n, j, got, want[j])
			}
		}
	}
}

// A lane's chaining value carries over between calls and starts where
// SetLane put it: hashing a message in two calls gives the same digest as
// in one, and a lane set from another's Lane continues that lane's hash.
func TestSHA512x4Chaining(t *testing.T) {
	skipWithoutSHA512x4(t)
	msg := bytes.Repeat([]byte("cipherd"), 100) // 700 bytes: 6 blocks padded
	want := sha512.Sum512(msg)
	p := sha512Pad(msg)
	var s SHA512x4
	for j := range 4 {
		s.SetLane(j, &SHA512IV)
	}
	s.Blocks(&[4][]byte{p[:256], p[:256], p[:256], p[:256]})
	mid := s.Lane(2)
	var t2 SHA512x4
	for j := range 4 {
		t2.SetLane(j, &mid)
	}
	t2.Blocks(&[4][]byte{p[256:], p[256:], p[256:], p[256:]})
	for j := range 4 {
		var got [64]byte
		t2.PutLane(j, &got)
		if got != want {
			t.Fatalf("lane %d: %x, want %x", j, got, want)
		}
	}
}

func TestSHA512x4RefusesUnequalLanes(t *testing.T) {
	skipWithoutSHA512x4(t)
	b := make([]byte, 256)
	for _, p := range [][4][]byte{
		{b[:128], b[:128], b[:128], b[:256]},
		{b[:100], b[:100], b[:100], b[:100]},
		{nil, nil, nil, nil},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Blocks(%d, %d, %d, %d bytes) did not panic", len(p[0]), len(p[1]), len(p[2]), len(p[3]))
				}
			}()
			var s SHA512x4
			s.Blocks(&p)
		}()
	}
}

// Lanes advance together, so the four messages are cut to the shortest's
// length; their bytes differ, and each lane's digest is its own.
func FuzzSHA512x4(f *testing.F) {
	f.Add([]byte("abc"), []byte("def"), []byte("ghi"), []byte("0123456789"))
	f.Fuzz(func(t *testing.T, a, b, c, d []byte) {
		skipWithoutSHA512x4(t)
		msgs := [4][]byte{a, b, c, d}
		n := min(len(a), len(b), len(c), len(d))
		var s SHA512x4
		var p [4][]byte
		for j := range msgs {
			msgs[j] = msgs[j][:n]
			p[j] = sha512Pad(msgs[j])
			s.SetLane(j, &SHA512IV)
		}
		s.Blocks(&p)
		for j, m := range msgs {
			var got [64]byte
			s.PutLane(j, &got)
			if want := sha512.Sum512(m); got != want {
				t.Fatalf("lane %d (%d bytes): %x, want %x", j, len(m), got, want)
			}
		}
	})
}

// BenchmarkSHA512x4 compresses one block in each of four lanes; ns/op over
// four is the cost of a block, to set against BenchmarkSHA512Block's.
func BenchmarkSHA512x4(b *testing.B) {
	skipWithoutSHA512x4(b)
	var s SHA512x4
	blk := make([]byte, 128)
	p := [4][]byte{blk, blk, blk, blk}
	b.SetBytes(4 * 128)
	for b.Loop() {
		s.Blocks(&p)
	}
}

// BenchmarkSHA512Block is crypto/sha512 hashing one message of 111 bytes,
// one block padded.
func BenchmarkSHA512Block(b *testing.B) {
	msg := make([]byte, 111)
	b.SetBytes(128)
	for b.Loop() {
		sha512.Sum512(msg)
	}
}
