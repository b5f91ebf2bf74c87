package kernels

import (
	"bytes"
	"testing"
)

// Random differential tests: every available implementation against the
// reference implementation of its cipher (see referenceImpl), at every length
// residue, with unaligned and in-place buffers. The reference runs on fresh
// aligned buffers, the implementation under test on unaligned ones, so the
// tests also bite when the implementation under test is the reference itself.

// diffLengths returns 0…520 (every residue modulo the widest vector loops, with
// and without a partial tail), the lengths around 1 KiB and 1.5 KiB (one and
// one and a half of the VAES512 GCM loops' groups of two 512-byte blocks per
// reduction), and around 8 KiB and 64 KiB.
func diffLengths() []int {
	var ls []int
	for n := 0; n <= 520; n++ {
		ls = append(ls, n)
	}
	return append(ls, 1023, 1024, 1025, 1535, 1536, 1537, 8191, 8192, 8193, 65535, 65536, 65537)
}

// repeat returns k copies of ls, one after the other.
func repeat(ls []int, k int) []int {
	var out []int
	for range k {
		out = append(out, ls...)
	}
	return out
}

// unaligned returns a copy of b that starts 1 to 15 bytes into a larger buffer.
func unaligned(r testRand, b []byte) []byte {
	off := 1 + r.IntN(15)
	buf := make([]byte, off+len(b)+16)
	return append(buf[off:off], b...)
}

func TestAEADAgainstReference(t *testing.T) {
	for _, c := range ciphersOf(KindAEAD) {
		ref := reference(t, c)
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			for _, n := range repeat(diffLengths(), iterations(12)) {
				aadLen := r.IntN(33)
				if n%5 == 0 {
					aadLen = r.IntN(600)
				}
				key, nonce, pt, aad := r.bytes(c.KeySize()), r.bytes(c.IVSize()), r.bytes(n), r.bytes(aadLen)
				want := mustAEAD(t, ref, key).Seal(nil, nonce, pt, aad)
				a := mustAEAD(t, im, key)

				// Out of place; source, additional data and destination
				// each unaligned.
				g := newGuarded(1+r.IntN(15), 0, n+c.Overhead()+32)
				got := a.Seal(g.window(0), unaligned(r, nonce), unaligned(r, pt), unaligned(r, aad))
				if !bytes.Equal(got, want) {
					t.Fatalf("len %d, aad %d: Seal differs from %s", n, aadLen, ref)
				}
				g.check(t, len(got))
				g = newGuarded(1+r.IntN(15), 0, n+32)
				opened, err := a.Open(g.window(0), nonce, unaligned(r, want), unaligned(r, aad))
				if err != nil || !bytes.Equal(opened, pt) {
					t.Fatalf("len %d, aad %d: Open of %s's output = %v", n, aadLen, ref, err)
				}
				g.check(t, len(opened))

				// In place, unaligned.
				g = newGuarded(1+r.IntN(15), n, c.Overhead()+32)
				buf := g.window(n)
				copy(buf, pt)
				got = a.Seal(buf[:0], nonce, buf, aad)
				if !bytes.Equal(got, want) {
					t.Fatalf("len %d, aad %d: in-place Seal differs from %s", n, aadLen, ref)
				}
				opened, err = a.Open(got[:0], nonce, got, aad)
				if err != nil || !bytes.Equal(opened, pt) {
					t.Fatalf("len %d, aad %d: in-place Open = %v", n, aadLen, err)
				}
				g.check(t, len(got))
			}
		})
	}
}

func TestStreamAgainstReference(t *testing.T) {
	for _, c := range ciphersOf(KindStream) {
		ref := reference(t, c)
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			for _, n := range repeat(diffLengths(), iterations(12)) {
				key, iv, src := r.bytes(c.KeySize()), r.bytes(c.IVSize()), r.bytes(n)
				safeChaChaCounter(c, iv)
				want := make([]byte, n)
				mustStream(t, ref, key, iv).XORKeyStream(want, src)

				// One call, out of place, unaligned.
				g := newGuarded(1+r.IntN(15), n, 32)
				mustStream(t, im, key, iv).XORKeyStream(g.window(n), unaligned(r, src))
				if !bytes.Equal(g.window(n), want) {
					t.Fatalf("len %d: XORKeyStream differs from %s", n, ref)
				}
				g.check(t, n)

				// In place, unaligned, in random pieces.
				g = newGuarded(1+r.IntN(15), n, 32)
				buf := g.window(n)
				copy(buf, src)
				s, off := mustStream(t, im, key, iv), 0
				for _, k := range r.chunks(n, 1) {
					s.XORKeyStream(buf[off:off+k], buf[off:off+k])
					off += k
				}
				if !bytes.Equal(buf, want) {
					t.Fatalf("len %d: chunked in-place XORKeyStream differs from %s", n, ref)
				}
				g.check(t, n)
			}
		})
	}
}

func TestBlockModeAgainstReference(t *testing.T) {
	// Whole blocks only: every block count up to 33, and the block counts
	// around 8 KiB and 64 KiB.
	var lengths []int
	for n := 0; n <= 528; n += 16 {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 8176, 8192, 8208, 65520, 65536, 65552)
	for _, c := range ciphersOf(KindBlockMode) {
		ref := reference(t, c)
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			for _, n := range repeat(lengths, iterations(12)) {
				key, iv, pt := r.bytes(c.KeySize()), r.bytes(c.IVSize()), r.bytes(n)
				ct := make([]byte, n)
				mustMode(t, ref, key, iv, false).CryptBlocks(ct, pt)
				for _, decrypt := range []bool{false, true} {
					src, want := pt, ct
					if decrypt {
						src, want = ct, pt
					}
					g := newGuarded(1+r.IntN(15), n, 32)
					mustMode(t, im, key, iv, decrypt).CryptBlocks(g.window(n), unaligned(r, src))
					if !bytes.Equal(g.window(n), want) {
						t.Fatalf("len %d decrypt=%v: CryptBlocks differs from %s", n, decrypt, ref)
					}
					g.check(t, n)

					g = newGuarded(1+r.IntN(15), n, 32)
					buf := g.window(n)
					copy(buf, src)
					mustMode(t, im, key, iv, decrypt).CryptBlocks(buf, buf)
					if !bytes.Equal(buf, want) {
						t.Fatalf("len %d decrypt=%v: in-place CryptBlocks differs from %s", n, decrypt, ref)
					}
					g.check(t, n)
				}
			}
		})
	}
}
