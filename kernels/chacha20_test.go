package kernels

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/crypto/chacha20"
)

// ChaCha20 tests beyond the generic stream suites, which keep the block
// counter far from its end: every implementation must stop exactly where
// x/crypto does, at block 2^32-1, and agree with it up to there.

// xcryptoKeystreamXOR returns src XOR x/crypto's keystream for key, nonce and
// counter, processed as the calls of lengths split, and whether x/crypto
// panicked (then the output is nil).
func xcryptoKeystreamXOR(key, nonce []byte, counter uint32, src []byte, split []int) (out []byte, panicked bool) {
	s, err := chacha20.NewUnauthenticatedCipher(key, nonce)
	if err != nil {
		panic(err)
	}
	s.SetCounter(counter)
	return streamInPieces(s, src, split)
}

// streamInPieces XORs src through s in calls of lengths split (the last call
// takes the rest), and reports whether a call panicked.
func streamInPieces(s interface{ XORKeyStream(dst, src []byte) }, src []byte, split []int) (out []byte, panicked bool) {
	out = make([]byte, len(src))
	off := 0
	for i := 0; i <= len(split); i++ {
		k := len(src) - off
		if i < len(split) {
			k = min(split[i], k)
		}
		if panics(func() { s.XORKeyStream(out[off:off+k], src[off:off+k]) }) {
			return nil, true
		}
		off += k
	}
	return out, false
}

// TestChaCha20CounterEnd checks that every implementation produces the last
// block of a nonce (counter 2^32-1), across calls that end mid-block, and
// panics on the first byte past it, where x/crypto does.
func TestChaCha20CounterEnd(t *testing.T) {
	forEachImpl(t, ChaCha20, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		cases := []struct {
			blocksLeft uint32 // counter = 2^32 - blocksLeft
			split      []int  // lengths of the calls; the last call takes the rest
			total      int
			wantPanic  bool
		}{
			{1, nil, 64, false},
			{1, nil, 65, true},
			{1, []int{10, 0, 54}, 64, false},
			{1, []int{10, 54}, 65, true},
			{2, []int{100, 28}, 128, false},
			{2, []int{100, 28}, 129, true},
			{2, []int{127}, 129, true},
			{16, nil, 1024, false},
			{16, nil, 1025, true},
			{17, []int{1000}, 1088, false},
			{17, []int{1000, 88}, 1089, true},
			{40, []int{1, 63, 1024, 1}, 2560, false},
			{40, []int{1, 63, 1024, 1}, 2561, true},
		}
		for _, tc := range cases {
			key, nonce := r.bytes(32), r.bytes(12)
			counter := uint32(1<<32 - uint64(tc.blocksLeft))
			src := r.bytes(tc.total)
			want, refPanic := xcryptoKeystreamXOR(key, nonce, counter, src, tc.split)
			if refPanic != tc.wantPanic {
				t.Fatalf("blocks left %d, split %v, %d bytes: x/crypto panicked = %v, the test expects %v",
					tc.blocksLeft, tc.split, tc.total, refPanic, tc.wantPanic)
			}
			got, gotPanic := streamInPieces(mustStream(t, im, key, chachaIV(counter, nonce)), src, tc.split)
			switch {
			case gotPanic != tc.wantPanic:
				t.Errorf("blocks left %d, split %v, %d bytes: panicked = %v, want %v",
					tc.blocksLeft, tc.split, tc.total, gotPanic, tc.wantPanic)
			case !gotPanic && !bytes.Equal(got, want):
				t.Errorf("blocks left %d, split %v, %d bytes: output differs from x/crypto",
					tc.blocksLeft, tc.split, tc.total)
			}
		}
	})
}

// FuzzChaCha20AgainstXCrypto compares every available ChaCha20
// implementation with x/crypto for any key, nonce, counter (including the
// last blocks before 2^32) and split into two calls: same output, and a
// panic exactly when x/crypto panics.
func FuzzChaCha20AgainstXCrypto(f *testing.F) {
	f.Add([]byte{}, []byte{}, uint32(0), []byte{}, uint16(0))
	f.Add([]byte("0123456789abcdef0123456789abcdef"), []byte("nonce-nonce!"), uint32(1), []byte("hello"), uint16(3))
	f.Add([]byte{1}, []byte{2}, uint32(0xffffffff), make([]byte, 64), uint16(10))
	f.Add([]byte{1}, []byte{2}, uint32(0xffffffff), make([]byte, 65), uint16(64))
	f.Add([]byte{3}, []byte{4}, uint32(0xfffffff0), make([]byte, 1024), uint16(1000))
	f.Add([]byte{5}, []byte{6}, uint32(7), make([]byte, 4099), uint16(1500))
	f.Fuzz(func(t *testing.T, key, nonce []byte, counter uint32, src []byte, split uint16) {
		if len(src) > maxFuzzLen {
			t.Skip()
		}
		key, nonce = fit(key, 32), fit(nonce, 12)
		pieces := []int{int(split) % (len(src) + 1)}
		want, refPanic := xcryptoKeystreamXOR(key, nonce, counter, src, pieces)
		for _, im := range Available(ChaCha20) {
			got, gotPanic := streamInPieces(mustStream(t, im, key, chachaIV(counter, nonce)), src, pieces)
			if gotPanic != refPanic {
				t.Fatalf("%s: panicked = %v, x/crypto panicked = %v", im, gotPanic, refPanic)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: output differs from x/crypto", im)
			}
		}
	})
}

// BenchmarkChaCha20NewStream measures one message per new stream: NewStream
// (one allocation) and one XORKeyStream, the cost a request with its own key
// or nonce pays. BenchmarkStream, like `openssl speed`, continues one stream
// across calls instead, so that a 16-byte call there uses a quarter of a
// block computed once.
func BenchmarkChaCha20NewStream(b *testing.B) {
	for _, im := range Available(ChaCha20) {
		for _, size := range []int{16, 64, 256, 1024} {
			b.Run(fmt.Sprintf("%s/%d", im.Name(), size), func(b *testing.B) {
				key, iv := make([]byte, 32), make([]byte, 16)
				buf := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for b.Loop() {
					mustStream(b, im, key, iv).XORKeyStream(buf, buf)
				}
			})
		}
	}
}
