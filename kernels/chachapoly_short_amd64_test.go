//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// The short-message keystream kernel chachaKeystream4AVX512 against
// x/crypto's ChaCha20, from random block counters and the last ones before
// 2³².
func TestChaChaPolyShortKeystreams(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	kernels := []struct {
		name string
		n    int
		fn   func(state *[16]uint32, ks []byte)
	}{
		{"4AVX512", 4, func(state *[16]uint32, ks []byte) { chachaKeystream4AVX512(state, (*[256]byte)(ks)) }},
	}
	for _, k := range kernels {
		for i := range 200 {
			key, nonce := r.bytes(32), r.bytes(12)
			counter := randomCounter(r, 64*k.n)
			if i == 0 {
				counter = uint32(1<<32 - k.n)
			}
			kw, nw := chachaWords(key, nonce)
			state := chachaState(kw, nw, counter)
			saved := state
			got := make([]byte, 64*k.n)
			k.fn(&state, got)
			if state != saved {
				t.Fatalf("%s: the kernel changed its input state", k.name)
			}
			if want := xcryptoXOR(t, key, nonce, counter, make([]byte, 64*k.n)); !bytes.Equal(got, want) {
				t.Fatalf("%s, counter %#x:\n got %x\nwant %x", k.name, counter, got, want)
			}
		}
	}
}

// chachaPolyShortAVX512, through the avx512 AEAD: every message length
// 0…64 with every additional-data length 0…64, for ChaCha20-Poly1305 and
// XChaCha20-Poly1305, against x/crypto, sealing and opening in place and
// into another buffer, with a canary after the output, and refusing a
// flipped bit in the tag and in the ciphertext.
func TestChaChaPolyShortAEAD(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	for _, c := range []Cipher{ChaCha20Poly1305, XChaCha20Poly1305} {
		newRef := chacha20poly1305.New
		if c == XChaCha20Poly1305 {
			newRef = chacha20poly1305.NewX
		}
		im, err := Lookup(c, "avx512")
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= 64; n++ {
			for aadLen := 0; aadLen <= 64; aadLen++ {
				key, nonce, pt, aad := r.bytes(32), r.bytes(c.IVSize()), r.bytes(n), r.bytes(aadLen)
				ref, err := newRef(key)
				if err != nil {
					t.Fatal(err)
				}
				want := ref.Seal(nil, nonce, pt, aad)
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
