package kernels

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"testing"
)

// AES-CTR tests aimed at the VAES kernels (ctr_amd64.go): they count blocks in
// 64-bit vector lanes, leave carries into the high half to the Go caller, work
// in batches of 32 (zmm) or 16 (ymm) blocks with masked or piecewise tails,
// and hand the rest of a partial block to the next call. They run over every
// available AES-CTR implementation, the standard library's included.

// TestCTRLengths compares every length 0…1100 with crypto/cipher.NewCTR: out of
// place with both buffers unaligned and dst's capacity ending at its length,
// and in place in two calls split at a random point. Canary bytes before dst
// and past its capacity must survive.
func TestCTRLengths(t *testing.T) {
	for _, c := range []Cipher{AES128CTR, AES256CTR} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			key := r.bytes(c.KeySize())
			b, err := aes.NewCipher(key)
			if err != nil {
				t.Fatal(err)
			}
			for n := 0; n <= 1100; n++ {
				iv, src := r.bytes(16), r.bytes(n)
				want := make([]byte, n)
				cipher.NewCTR(b, iv).XORKeyStream(want, src)

				g := newGuarded(1+r.IntN(63), n, 80)
				out := g.window(n)
				mustStream(t, im, key, iv).XORKeyStream(out[:n:n], unaligned(r, src))
				if !bytes.Equal(out, want) {
					t.Fatalf("len %d: XORKeyStream differs from crypto/cipher", n)
				}
				g.check(t, n)

				g = newGuarded(r.IntN(64), n, 80)
				buf := g.window(n)[:n:n]
				copy(buf, src)
				s, h := mustStream(t, im, key, iv), r.IntN(n+1)
				s.XORKeyStream(buf[:h], buf[:h])
				s.XORKeyStream(buf[h:], buf[h:])
				if !bytes.Equal(buf, want) {
					t.Fatalf("len %d: in place, split at %d, differs from crypto/cipher", n, h)
				}
				g.check(t, n)
			}
		})
	}
}

// TestCTRCounterCarry makes the low 64 bits of the counter wrap after every
// block count 1…70 and around the batch sizes, with the high half random or
// all ones (then the whole 128-bit counter wraps to zero): in one call that
// ends at the wrap, one that runs a little past it, one that runs kilobytes
// past it, and in calls split at the wrap, a few bytes before it and a few
// bytes after it. The expected keystream is computed block by block.
func TestCTRCounterCarry(t *testing.T) {
	var befores []int // blocks before the low half wraps
	for k := 0; k <= 70; k++ {
		befores = append(befores, k) // 0: the low half starts at zero
	}
	befores = append(befores, 95, 96, 97, 127, 128, 129, 255, 256, 257, 1000)
	for _, c := range []Cipher{AES128CTR, AES256CTR} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			key := r.bytes(c.KeySize())
			b, err := aes.NewCipher(key)
			if err != nil {
				t.Fatal(err)
			}
			for _, before := range befores {
				for _, hi := range []uint64{r.Uint64(), ^uint64(0)} {
					iv := make([]byte, 16)
					binary.BigEndian.PutUint64(iv, hi)
					binary.BigEndian.PutUint64(iv[8:], -uint64(before))
					wrap := 16 * before // byte offset of the first block after the wrap
					for _, n := range []int{wrap, wrap + 1 + r.IntN(40), wrap + 4096 + r.IntN(600)} {
						src := r.bytes(n)
						want := ctrByDefinition(b, iv, src)
						got := make([]byte, n)
						mustStream(t, im, key, iv).XORKeyStream(got, src)
						if !bytes.Equal(got, want) {
							t.Fatalf("IV %x, len %d: one call differs from the 128-bit counter's keystream", iv, n)
						}
						for _, split := range []int{wrap, wrap - 1 - r.IntN(15), wrap + 1 + r.IntN(15)} {
							if split < 0 || split > n {
								continue
							}
							clear(got)
							s := mustStream(t, im, key, iv)
							s.XORKeyStream(got[:split], src[:split])
							s.XORKeyStream(got[split:], src[split:])
							if !bytes.Equal(got, want) {
								t.Fatalf("IV %x, len %d: split at %d differs from the 128-bit counter's keystream", iv, n, split)
							}
						}
					}
				}
			}
		})
	}
}

// FuzzCTRAgainstStdlib compares every available AES-CTR implementation with
// crypto/cipher.NewCTR over one call and over three calls at fuzzed split
// points. A nonzero wrap sets the IV's low 64 bits so that they wrap after
// that many blocks.
func FuzzCTRAgainstStdlib(f *testing.F) {
	f.Add(false, []byte{}, []byte{}, []byte{}, uint8(0), uint16(0), uint16(0))
	f.Add(false, []byte("0123456789abcdef"), []byte("fedcba9876543210"), make([]byte, 600), uint8(3), uint16(17), uint16(515))
	f.Add(true, bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{0xff}, 16), make([]byte, 1100), uint8(0), uint16(512), uint16(513))
	f.Add(true, []byte{1}, bytes.Repeat([]byte{0xff}, 8), make([]byte, 33), uint8(1), uint16(15), uint16(16))
	f.Add(false, []byte{2}, []byte{3}, make([]byte, 4099), uint8(200), uint16(3200), uint16(5))
	f.Fuzz(func(t *testing.T, aes256 bool, key, iv, src []byte, wrap uint8, s1, s2 uint16) {
		if len(src) > maxFuzzLen {
			t.Skip()
		}
		c := AES128CTR
		if aes256 {
			c = AES256CTR
		}
		key, iv = fit(key, c.KeySize()), fit(iv, 16)
		if wrap != 0 {
			binary.BigEndian.PutUint64(iv[8:], -uint64(wrap))
		}
		b, err := aes.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, len(src))
		cipher.NewCTR(b, iv).XORKeyStream(want, src)
		n := len(src)
		a, z := int(s1)%(n+1), int(s2)%(n+1)
		if a > z {
			a, z = z, a
		}
		for _, im := range Available(c) {
			got := make([]byte, n)
			mustStream(t, im, key, iv).XORKeyStream(got, src)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: one call differs from crypto/cipher", im)
			}
			buf := bytes.Clone(src)
			s := mustStream(t, im, key, iv)
			for _, part := range [][]byte{buf[:a], buf[a:z], buf[z:]} {
				s.XORKeyStream(part, part)
			}
			if !bytes.Equal(buf, want) {
				t.Fatalf("%s: in place in calls split at %d and %d differs from crypto/cipher", im, a, z)
			}
		}
	})
}
