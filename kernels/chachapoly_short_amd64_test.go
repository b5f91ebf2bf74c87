//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
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
