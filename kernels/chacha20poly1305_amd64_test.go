//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// The ChaCha20-Poly1305 kernels' own boundaries, on top of the registry-wide
// AEAD suites: the short kernels, the switch to the 16-block kernel, and the
// pieces of long messages, each with additional data that straddles the
// IFMA threshold.
func TestChaCha20Poly1305Boundaries(t *testing.T) {
	var lengths []int
	for _, b := range []int{192, chachaPolyShort, chachaPolyPiece + 192, 2*chachaPolyPiece + 192, 3 * chachaPolyPiece} {
		for d := -17; d <= 17; d++ {
			lengths = append(lengths, b+d)
		}
	}
	for _, c := range []Cipher{ChaCha20Poly1305, XChaCha20Poly1305} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			for _, n := range lengths {
				for _, aadLen := range []int{0, 13, 255, 256, 257, 1000} {
					key, nonce, pt, aad := r.bytes(32), r.bytes(c.IVSize()), r.bytes(n), r.bytes(aadLen)
					want := xcryptoSeal(t, c, key, nonce, pt, aad)
					a := mustAEAD(t, im, key)
					buf := bytes.Clone(pt)
					if got := a.Seal(buf[:0], nonce, buf, aad); !bytes.Equal(got, want) {
						t.Fatalf("len %d, aad %d: in-place Seal differs from x/crypto", n, aadLen)
					}
					if got, err := a.Open(nil, nonce, want, aad); err != nil || !bytes.Equal(got, pt) {
						t.Fatalf("len %d, aad %d: Open of x/crypto's output = %v", n, aadLen, err)
					}
				}
			}
		})
	}
}

func FuzzChaCha20Poly1305AgainstXCrypto(f *testing.F) {
	f.Add(false, []byte{}, []byte{}, []byte{}, []byte{}, uint32(0))
	f.Add(true, []byte("0123456789abcdef0123456789abcdef"), []byte("nonce-nonce-nonce-nonce-"), []byte("aad"), []byte("plaintext"), uint32(5))
	f.Add(false, bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 12), bytes.Repeat([]byte{0xff}, 300), bytes.Repeat([]byte{0xff}, 449), uint32(1000))
	f.Add(true, []byte{1}, []byte{2}, make([]byte, 17), make([]byte, 8192+200), uint32(70000))
	f.Fuzz(func(t *testing.T, extended bool, key, nonce, aad, pt []byte, flip uint32) {
		if len(pt) > maxFuzzLen || len(aad) > maxFuzzLen {
			t.Skip()
		}
		c := ChaCha20Poly1305
		if extended {
			c = XChaCha20Poly1305
		}
		key, nonce = fit(key, 32), fit(nonce, c.IVSize())
		want := xcryptoSeal(t, c, key, nonce, pt, aad)
		bad := bytes.Clone(want)
		bit := int(flip) % (8 * len(bad))
		bad[bit/8] ^= 1 << (bit % 8)
		for _, im := range Available(c) {
			a := mustAEAD(t, im, key)
			if got := a.Seal(nil, nonce, pt, aad); !bytes.Equal(got, want) {
				t.Fatalf("%s: Seal differs from x/crypto", im)
			}
			buf := bytes.Clone(want)
			if got, err := a.Open(buf[:0], nonce, buf, aad); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s: in-place Open of x/crypto's output = %v", im, err)
			}
			if got, err := a.Open(nil, nonce, bad, aad); err == nil || got != nil {
				t.Fatalf("%s: Open accepted bit %d flipped", im, bit)
			}
		}
	})
}

// TestChaCha20Poly1305ZeroAllocsShort extends TestZeroAllocs, which
// measures 16 KiB messages, to the short paths: nothing they keep on the
// stack may move to the heap.
func TestChaCha20Poly1305ZeroAllocsShort(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, c := range []Cipher{ChaCha20Poly1305, XChaCha20Poly1305} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			if im.Name() == "xcrypto" {
				t.Skip("x/crypto's allocations are TestZeroAllocs's business")
			}
			for _, size := range []int{0, 16, 200, chachaPolyShort, chachaPolyShort + 1, 1024} {
				for _, op := range []opConstructor{newSealOp, newOpenOp} {
					if n := testing.AllocsPerRun(20, op(t, im, size)); n != 0 {
						t.Errorf("%d bytes: %.1f allocations per message", size, n)
					}
				}
			}
		})
	}
}

// BenchmarkChaCha20Poly1305Fastest reports, besides the usual ns/op, the
// fastest of all bursts of 32 consecutive operations (fastest-ns/op). On a
// shared host the mean and median carry other tenants' load; a burst that
// ran undisturbed shows what the code itself costs, and stays put from run
// to run. The operations are BenchmarkSeal's and BenchmarkOpen's.
func BenchmarkChaCha20Poly1305Fastest(b *testing.B) {
	for _, op := range []struct {
		name  string
		newOp opConstructor
	}{{"Seal", newSealOp}, {"Open", newOpenOp}} {
		for _, im := range Available(ChaCha20Poly1305) {
			for _, size := range []int{16, 64, 512, 1024, 1536, 2048, 16384} {
				b.Run(fmt.Sprintf("%s/%s/%d", op.name, im.Name(), size), func(b *testing.B) {
					b.SetBytes(int64(size))
					loopFastest(b, op.newOp(b, im, size))
				})
			}
		}
	}
}

// loopFastest runs f for b.Loop and reports the fastest burst of 32 calls
// as fastest-ns/op.
func loopFastest(b *testing.B, f func()) {
	const burst = 32
	best := time.Duration(1<<63 - 1)
	n, start := 0, time.Now()
	for b.Loop() {
		f()
		if n++; n == burst {
			best = min(best, time.Since(start))
			n, start = 0, time.Now()
		}
	}
	if best < time.Duration(1<<63-1) {
		b.ReportMetric(float64(best.Nanoseconds())/burst, "fastest-ns/op")
	}
}

// xcryptoSeal seals with x/crypto's ChaCha20-Poly1305 or XChaCha20-Poly1305,
// the reference the assembly is held to.
func xcryptoSeal(t *testing.T, c Cipher, key, nonce, pt, aad []byte) []byte {
	t.Helper()
	newRef := chacha20poly1305.New
	if c == XChaCha20Poly1305 {
		newRef = chacha20poly1305.NewX
	}
	ref, err := newRef(key)
	if err != nil {
		t.Fatal(err)
	}
	return ref.Seal(nil, nonce, pt, aad)
}
