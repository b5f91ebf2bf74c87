//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"fmt"
	"testing"
)

// chachaPolyShort{2,4,8,12}AVX512, through the avx512 AEAD: every message
// length 0…chachaPolyShortAVX512+1 with every additional-data length 0…65 up to
// 64 bytes of message and some of them after, for ChaCha20-Poly1305 and
// XChaCha20-Poly1305, against x/crypto, sealing and opening in place and
// into another buffer, with a canary after the output, and refusing a
// flipped bit.
func TestChaChaPolyShortAEAD(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	for _, c := range []Cipher{ChaCha20Poly1305, XChaCha20Poly1305} {
		im, err := Lookup(c, "avx512")
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= chachaPolyShortAVX512+1; n++ {
			for aadLen := 0; aadLen <= 65; aadLen++ {
				if n > 64 && aadLen%16 > 1 && aadLen < 63 {
					continue
				}
				key, nonce, pt, aad := r.bytes(32), r.bytes(c.IVSize()), r.bytes(n), r.bytes(aadLen)
				want := xcryptoSeal(t, c, key, nonce, pt, aad)
				a := mustAEAD(t, im, key)
				canary := []byte{0xa5, 0x5a, 0xa5, 0x5a}
				buf := append(make([]byte, n+16), canary...)[:0]
				if got := a.Seal(buf, nonce, pt, aad); !bytes.Equal(got, want) {
					t.Fatalf("%s: len %d, aad %d: Seal differs from x/crypto", c, n, aadLen)
				}
				if !bytes.Equal(buf[n+16:n+20], canary) {
					t.Fatalf("%s: len %d, aad %d: Seal wrote past its output", c, n, aadLen)
				}
				inPlace := append(bytes.Clone(pt), make([]byte, 16)...)
				if got := a.Seal(inPlace[:0], nonce, inPlace[:n], aad); !bytes.Equal(got, want) {
					t.Fatalf("%s: len %d, aad %d: in-place Seal differs from x/crypto", c, n, aadLen)
				}
				if got, err := a.Open(nil, nonce, want, aad); err != nil || !bytes.Equal(got, pt) {
					t.Fatalf("%s: len %d, aad %d: Open = %v", c, n, aadLen, err)
				}
				if got, err := a.Open(inPlace[:0], nonce, inPlace, aad); err != nil || !bytes.Equal(got, pt) {
					t.Fatalf("%s: len %d, aad %d: in-place Open = %v", c, n, aadLen, err)
				}
				bad := bytes.Clone(want)
				bad[r.IntN(len(bad))] ^= 1 << r.IntN(8)
				if _, err := a.Open(nil, nonce, bad, aad); err == nil {
					t.Fatalf("%s: len %d, aad %d: Open accepted a flipped bit", c, n, aadLen)
				}
			}
		}
	}
}

// oneBlockKernels are the two kernels for messages of up to 64 bytes, of
// which the AEAD uses one or the other by host and length (shortSplit).
var oneBlockKernels = []struct {
	name string
	fn   func(out, in *byte, n int, aad *byte, aadLen int, key *[8]uint32, nonce *[12]byte, tag *[16]byte, seal bool)
}{
	{"chachaPolyShort2AVX512", chachaPolyShort2AVX512},
	{"chachaPolyShort2SplitAVX512", chachaPolyShort2SplitAVX512},
}

// Both one-block kernels, called directly, so that each is tested on every
// host that can run them whichever the AEAD chooses: every message length
// 0…64 with every additional-data length 0…64, sealing and opening,
// against x/crypto, with a canary after the output.
func TestChaChaPolyOneBlockKernels(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	canary := []byte{0xa5, 0x5a, 0xa5, 0x5a}
	for _, k := range oneBlockKernels {
		for n := 0; n <= 64; n++ {
			for aadLen := 0; aadLen <= 64; aadLen++ {
				key, nonce, pt, aad := r.bytes(32), r.bytes(12), r.bytes(n), r.bytes(aadLen)
				want := xcryptoSeal(t, ChaCha20Poly1305, key, nonce, pt, aad)
				kw, _ := chachaWords(key, nonce)
				out := append(make([]byte, n), canary...)
				var tag [16]byte
				k.fn(&out[0], firstByte(pt), n, firstByte(aad), aadLen, kw, (*[12]byte)(nonce), &tag, true)
				if !bytes.Equal(out[:n], want[:n]) || !bytes.Equal(tag[:], want[n:]) {
					t.Fatalf("%s: len %d, aad %d: sealing differs from x/crypto", k.name, n, aadLen)
				}
				if !bytes.Equal(out[n:], canary) {
					t.Fatalf("%s: len %d, aad %d: wrote past its output", k.name, n, aadLen)
				}
				clear(out[:n])
				tag = [16]byte{}
				k.fn(&out[0], firstByte(want[:n]), n, firstByte(aad), aadLen, kw, (*[12]byte)(nonce), &tag, false)
				if !bytes.Equal(out[:n], pt) || !bytes.Equal(tag[:], want[n:]) {
					t.Fatalf("%s: len %d, aad %d: opening differs from x/crypto", k.name, n, aadLen)
				}
			}
		}
	}
}

// BenchmarkChaChaPolyOneBlockKernels seals with each one-block kernel
// called directly, by message and additional-data length: what shortSplit
// and twoMACBlocks choose between on family 1Ah.
func BenchmarkChaChaPolyOneBlockKernels(b *testing.B) {
	skipWithoutStitched(b)
	key, nonce := make([]byte, 32), make([]byte, 12)
	kw, _ := chachaWords(key, nonce)
	var tag [16]byte
	for _, k := range oneBlockKernels {
		for _, c := range []struct{ n, aadLen int }{{16, 0}, {17, 0}, {64, 0}, {0, 32}, {1, 1}} {
			in, aad := make([]byte, c.n), make([]byte, c.aadLen)
			out := make([]byte, c.n+1)
			b.Run(fmt.Sprintf("%s/%d+%d", k.name, c.n, c.aadLen), func(b *testing.B) {
				b.SetBytes(int64(c.n))
				for b.Loop() {
					k.fn(&out[0], firstByte(in), c.n, firstByte(aad), c.aadLen, kw, (*[12]byte)(nonce), &tag, true)
				}
			})
		}
	}
}
