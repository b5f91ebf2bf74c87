//go:build linux

package kernels

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"testing"
)

// TestCTRNoOverread runs every AES-CTR implementation on buffers that end
// where an inaccessible page begins, and on buffers that start right after
// one: vector loads and stores past the data (a tail handled with a whole
// vector instead of a masked one) crash the test.
func TestCTRNoOverread(t *testing.T) {
	const pages = 2
	srcMem, dstMem := guardPages(t, pages), guardPages(t, pages)
	var lengths []int
	for n := 0; n <= 600; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 1023, 1024, 1025, 4095, 4096, 4097, len(srcMem))
	for _, c := range []Cipher{AES128CTR, AES256CTR} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			key, iv := r.bytes(c.KeySize()), r.bytes(16)
			b, err := aes.NewCipher(key)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range lengths {
				for _, atEnd := range []bool{true, false} {
					src, dst := srcMem[:n], dstMem[:n]
					if atEnd {
						src, dst = srcMem[len(srcMem)-n:], dstMem[len(dstMem)-n:]
					}
					copy(src, r.bytes(n))
					want := make([]byte, n)
					cipher.NewCTR(b, iv).XORKeyStream(want, src)
					mustStream(t, im, key, iv).XORKeyStream(dst, src)
					if !bytes.Equal(dst, want) {
						t.Fatalf("len %d: differs from crypto/cipher", n)
					}
					mustStream(t, im, key, iv).XORKeyStream(src, src)
					if !bytes.Equal(src, want) {
						t.Fatalf("len %d: in place differs from crypto/cipher", n)
					}
				}
			}
		})
	}
}
