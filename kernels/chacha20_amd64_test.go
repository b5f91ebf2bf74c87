//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/crypto/chacha20"
)

// Direct tests of the ChaCha20 kernel functions, which the ChaCha20-Poly1305
// kernels call without the cipher.Stream wrapper.

type chachaFunc func(dst, src []byte, key *[8]uint32, nonce *[3]uint32, counter uint32)

// chachaFuncs lists the kernel functions with the implementation that gates
// each, and for avx512 the chachaWide17 setting to run under: both, whatever
// the host's processor. The test skips those the host cannot run.
var chachaFuncs = []struct {
	name, impl string
	wide17     bool
	fn         chachaFunc
}{
	{"avx512/groups17", "avx512", true, chacha20XORAVX512},
	{"avx512/passes16", "avx512", false, chacha20XORAVX512},
	{"avx2", "avx2", false, chacha20XORAVX2},
}

func forEachChaChaFunc(t *testing.T, f func(t *testing.T, fn chachaFunc)) {
	for _, k := range chachaFuncs {
		im, err := Lookup(ChaCha20, k.impl)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(k.name, func(t *testing.T) {
			if !im.Available() {
				t.Skipf("%s is not available on this host", im)
			}
			defer func(w bool) { chachaWide17 = w }(chachaWide17)
			chachaWide17 = k.wide17
			f(t, k.fn)
		})
	}
}

// BenchmarkChaCha20Wide17 times the AVX-512 ChaCha20 kernel with and without
// the 17-block groups, the choice chachaWide17 makes by processor family.
func BenchmarkChaCha20Wide17(b *testing.B) {
	if im, err := Lookup(ChaCha20, "avx512"); err != nil || !im.Available() {
		b.Skip("avx512 is not available on this host")
	}
	for _, wide := range []bool{true, false} {
		for _, size := range []int{8192, 16384} {
			b.Run(fmt.Sprintf("groups17=%v/%d", wide, size), func(b *testing.B) {
				defer func(w bool) { chachaWide17 = w }(chachaWide17)
				chachaWide17 = wide
				buf := make([]byte, size)
				kw, nw := chachaWords(make([]byte, 32), make([]byte, 12))
				b.SetBytes(int64(size))
				for b.Loop() {
					chacha20XORAVX512(buf, buf, kw, nw, 0)
				}
			})
		}
	}
}

func chachaWords(key, nonce []byte) (*[8]uint32, *[3]uint32) {
	var k [8]uint32
	var n [3]uint32
	for i := range k {
		k[i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	for i := range n {
		n[i] = binary.LittleEndian.Uint32(nonce[4*i:])
	}
	return &k, &n
}

func xcryptoXOR(t *testing.T, key, nonce []byte, counter uint32, src []byte) []byte {
	t.Helper()
	s, err := chacha20.NewUnauthenticatedCipher(key, nonce)
	if err != nil {
		t.Fatal(err)
	}
	s.SetCounter(counter)
	out := make([]byte, len(src))
	s.XORKeyStream(out, src)
	return out
}

// chachaKernelLengths are every length up to 1100 (every residue of the
// 16-block and 8-block passes, with and without a partial block), lengths
// around two 17-block groups of the AVX-512 kernel followed by each kind of
// rest, and the lengths around 16 KiB and 64 KiB.
func chachaKernelLengths() []int {
	var ls []int
	for n := 0; n <= 1100; n++ {
		ls = append(ls, n)
	}
	const two = 2 * 17 * 64
	for _, rest := range []int{-1, 0, 1, 64, 65, 512, 513, 1023, 1024, 1087} {
		ls = append(ls, two+rest)
	}
	return append(ls, 16383, 16384, 16385, 65535, 65536, 65537)
}

// randomCounter returns a block counter from which n bytes fit below 2^32:
// uniform most of the time, right at the end a quarter of the time.
func randomCounter(r testRand, n int) uint32 {
	room := uint64(1<<32) - (uint64(n)+63)/64 // largest counter that fits, plus one
	if r.IntN(4) == 0 {
		return uint32(room - 1 - r.Uint64N(min(room, 3)))
	}
	return uint32(r.Uint64N(room))
}

func TestChaCha20KernelsAgainstXCrypto(t *testing.T) {
	forEachChaChaFunc(t, func(t *testing.T, fn chachaFunc) {
		r := newRand(t)
		for _, n := range chachaKernelLengths() {
			key, nonce, src := r.bytes(32), r.bytes(12), r.bytes(n)
			counter := randomCounter(r, n)
			kw, nw := chachaWords(key, nonce)
			want := xcryptoXOR(t, key, nonce, counter, src)

			// Out of place, unaligned, dst longer than src: only len(src)
			// bytes may change.
			extra := r.IntN(80)
			g := newGuarded(1+r.IntN(15), n, extra+64)
			fn(g.window(n+extra), unaligned(r, src), kw, nw, counter)
			if !bytes.Equal(g.window(n), want) {
				t.Fatalf("len %d, counter %#x: differs from x/crypto", n, counter)
			}
			g.check(t, n)

			// In place.
			g = newGuarded(r.IntN(16), n, 64)
			buf := g.window(n)
			copy(buf, src)
			fn(buf, buf, kw, nw, counter)
			if !bytes.Equal(buf, want) {
				t.Fatalf("len %d, counter %#x: in place differs from x/crypto", n, counter)
			}
			g.check(t, n)
		}
	})
}

// TestChaCha20KernelsLastBlocks runs every kernel right up to block 2^32-1,
// the last one a nonce allows, and checks it does not carry into the nonce.
func TestChaCha20KernelsLastBlocks(t *testing.T) {
	forEachChaChaFunc(t, func(t *testing.T, fn chachaFunc) {
		r := newRand(t)
		for _, n := range []int{1, 63, 64, 65, 511, 512, 513, 1023, 1024, 1025, 1088, 1089, 2047, 2048, 2049, 2176, 3000} {
			key, nonce, src := r.bytes(32), r.bytes(12), r.bytes(n)
			counter := uint32(1<<32 - (uint64(n)+63)/64)
			kw, nw := chachaWords(key, nonce)
			want := xcryptoXOR(t, key, nonce, counter, src)
			got := make([]byte, n)
			fn(got, src, kw, nw, counter)
			if !bytes.Equal(got, want) {
				t.Errorf("len %d ending at block 2^32-1: differs from x/crypto", n)
			}
			if counter == 1<<32-1 {
				continue // counter+1 is 0, which is fine
			}
			if !panics(func() { fn(got, src, kw, nw, counter+1) }) {
				t.Errorf("len %d from counter %#x, past block 2^32-1, did not panic", n, counter+1)
			}
		}
	})
}

// TestChaCha20KernelsRFC8439 is the RFC 8439 §2.4.2 example, in place and
// out of place.
func TestChaCha20KernelsRFC8439(t *testing.T) {
	key := unhex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	nonce := unhex("000000000000004a00000000")
	pt := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	want := unhex(`6e2e359a2568f98041ba0728dd0d6981 e97e7aec1d4360c20a27afccfd9fae0b
		f91b65c5524733ab8f593dabcd62b357 1639d624e65152ab8f530c359f0861d8
		07ca0dbf500d6a6156a38e088a22b65e 52bc514d16ccf806818ce91ab7793736
		5af90bbf74a35be6b40b8eedf2785e42 874d`)
	forEachChaChaFunc(t, func(t *testing.T, fn chachaFunc) {
		kw, nw := chachaWords(key, nonce)
		got := make([]byte, len(pt))
		fn(got, pt, kw, nw, 1)
		if !bytes.Equal(got, want) {
			t.Errorf("got %x, want %x", got, want)
		}
		fn(got, got, kw, nw, 1)
		if !bytes.Equal(got, pt) {
			t.Errorf("in place, inverse: got %q", got)
		}
	})
}

func TestChaCha20KernelsShortDst(t *testing.T) {
	forEachChaChaFunc(t, func(t *testing.T, fn chachaFunc) {
		var kw [8]uint32
		var nw [3]uint32
		for _, n := range []int{1, 64, 65, 1024} {
			src := make([]byte, n)
			if !panics(func() { fn(make([]byte, n-1), src, &kw, &nw, 0) }) {
				t.Errorf("len %d into %d bytes did not panic", n, n-1)
			}
		}
		fn(nil, nil, &kw, &nw, 0) // empty: nothing to do, no panic
	})
}

// The kernel functions allocate nothing: the ChaCha20-Poly1305 kernels call
// them once or twice per message.
func TestChaCha20KernelsZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	forEachChaChaFunc(t, func(t *testing.T, fn chachaFunc) {
		var kw [8]uint32
		var nw [3]uint32
		for _, n := range []int{16, 64, 100, 1024, 1100} {
			buf := make([]byte, n)
			if a := testing.AllocsPerRun(20, func() { fn(buf, buf, &kw, &nw, 7) }); a != 0 {
				t.Errorf("len %d: %.1f allocations per call", n, a)
			}
		}
	})
}
