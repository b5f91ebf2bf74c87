//go:build amd64 && gc && !purego && linux

package kernels

import (
	"bytes"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// The avx512 ChaCha20-Poly1305 reads and writes nothing outside its buffers:
// messages whose plaintext, ciphertext and additional data each end where
// an inaccessible page begins, at lengths around the stitched kernels'
// 1024-byte groups and the short paths, sealed and opened in place and
// into another buffer.
func TestChaCha20Poly1305GuardPage(t *testing.T) {
	skipWithoutStitched(t)
	im, err := Lookup(ChaCha20Poly1305, "avx512")
	if err != nil {
		t.Fatal(err)
	}
	r := newRand(t)
	for i, n := range []int{0, 1, 15, 16, 17, 63, 64, 65, 191, 192, 193, 447, 448, 449, 703, 704, 705, 1023, 1024, 1025, 1087, 1088, 2047, 2048, 2049, 3071, 16383, 16384, 16385} {
		key, nonce, aadLen := r.bytes(32), r.bytes(12), r.IntN(300)
		if i%2 == 0 {
			aadLen = r.IntN(65) // the lengths of the one-block kernel
		}
		ref, err := chacha20poly1305.New(key)
		if err != nil {
			t.Fatal(err)
		}
		a := mustAEAD(t, im, key)
		aad := guardPaged(t, aadLen)
		copy(aad, r.bytes(aadLen))
		pt := guardPaged(t, n)
		copy(pt, r.bytes(n))
		want := ref.Seal(nil, nonce, pt, aad)

		sealed := guardPaged(t, n+16)
		if got := a.Seal(sealed[:0], nonce, pt, aad); !bytes.Equal(got, want) {
			t.Fatalf("len %d: Seal differs from x/crypto", n)
		}
		inPlace := guardPaged(t, n+16)
		copy(inPlace, pt)
		if got := a.Seal(inPlace[:0], nonce, inPlace[:n], aad); !bytes.Equal(got, want) {
			t.Fatalf("len %d: in-place Seal differs from x/crypto", n)
		}
		opened := guardPaged(t, n)
		if got, err := a.Open(opened[:0], nonce, sealed, aad); err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("len %d: Open = %v", n, err)
		}
		if got, err := a.Open(inPlace[:0], nonce, inPlace, aad); err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("len %d: in-place Open = %v", n, err)
		}
	}
}

// chachaPolyWholeAVX512IFMA's masked read of the additional data's last
// partial block stays inside it: every length it takes, ending where an
// inaccessible page begins.
func TestChaChaPolyWholeGuardPage(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	key, nonce := r.bytes(32), r.bytes(12)
	kw, _ := chachaWords(key, nonce)
	pt := guardPaged(t, 1024)
	copy(pt, r.bytes(1024))
	dst := guardPaged(t, 1024)
	for aadLen := 0; aadLen <= chachaPolyWholeAAD; aadLen++ {
		aad := guardPaged(t, aadLen)
		copy(aad, r.bytes(aadLen))
		want := xcryptoSeal(t, ChaCha20Poly1305, key, nonce, pt, aad)
		var tag [16]byte
		chachaPolyWholeAVX512IFMA(&dst[0], &pt[0], &dst[0], 1, kw, (*[12]byte)(nonce), firstByte(aad), aadLen, &tag)
		if !bytes.Equal(dst, want[:1024]) || !bytes.Equal(tag[:], want[1024:]) {
			t.Fatalf("aad %d: differs from x/crypto", aadLen)
		}
	}
}

// Both one-block kernels read and write nothing outside their buffers: the
// message, output and additional data each end where an inaccessible page
// begins, whichever kernel the AEAD uses on this host.
func TestChaChaPolyOneBlockGuardPage(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	for _, k := range oneBlockKernels {
		for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 63, 64} {
			for _, aadLen := range []int{0, 1, 15, 16, 17, 63, 64} {
				key, nonce := r.bytes(32), r.bytes(12)
				kw, _ := chachaWords(key, nonce)
				pt, aad, out := guardPaged(t, n), guardPaged(t, aadLen), guardPaged(t, n)
				copy(pt, r.bytes(n))
				copy(aad, r.bytes(aadLen))
				want := xcryptoSeal(t, ChaCha20Poly1305, key, nonce, pt, aad)
				var tag [16]byte
				k.fn(firstByte(out), firstByte(pt), n, firstByte(aad), aadLen, kw, (*[12]byte)(nonce), &tag, true)
				if !bytes.Equal(out, want[:n]) || !bytes.Equal(tag[:], want[n:]) {
					t.Fatalf("%s: len %d, aad %d: differs from x/crypto", k.name, n, aadLen)
				}
			}
		}
	}
}
