package kernels

import (
	"bytes"
	"slices"
	"testing"
)

// The cipher.AEAD contract, checked for every available implementation of every
// AEAD cipher: parameters, append semantics, in-place operation, overlap
// panics and canaries past len(dst). The failure half of the contract is in
// conformance_tamper_test.go.

func TestAEADParameters(t *testing.T) {
	forEachImplOf(t, KindAEAD, func(t *testing.T, im *Implementation) {
		c := im.Cipher()
		a := mustAEAD(t, im, make([]byte, c.KeySize()))
		if a.NonceSize() != c.IVSize() {
			t.Errorf("NonceSize() = %d, want %d", a.NonceSize(), c.IVSize())
		}
		if a.Overhead() != c.Overhead() {
			t.Errorf("Overhead() = %d, want %d", a.Overhead(), c.Overhead())
		}

		// The registry rejects every key of the wrong size, including sizes
		// the primitive itself would take (AES-192, or a 32-byte key for an
		// AES-128 cipher).
		for _, n := range []int{0, 1, 15, 16, 17, 24, 31, 32, 33, 64} {
			if n == c.KeySize() {
				continue
			}
			if a, err := im.NewAEAD(make([]byte, n)); err == nil || a != nil {
				t.Errorf("NewAEAD with a %d-byte key = %v, %v; want an error", n, a, err)
			}
		}

		// A nonce of the wrong length is a programmer error: Seal and Open
		// panic, as the standard library's and x/crypto's AEADs do.
		nonce := make([]byte, a.NonceSize())
		sealed := a.Seal(nil, nonce, []byte("plaintext"), nil)
		for _, n := range []int{0, 1, 8, 11, 12, 13, 16, 23, 24, 25, 32} {
			if n == a.NonceSize() {
				continue
			}
			bad := make([]byte, n)
			if !panics(func() { a.Seal(nil, bad, []byte("plaintext"), nil) }) {
				t.Errorf("Seal with a %d-byte nonce did not panic", n)
			}
			if !panics(func() { _, _ = a.Open(nil, bad, sealed, nil) }) {
				t.Errorf("Open with a %d-byte nonce did not panic", n)
			}
		}
	})
}

// TestAEADAppend checks that Seal and Open append to dst: the prefix is kept,
// the result is dst followed by the output, dst's spare capacity is reused, and
// nothing past the output is written.
func TestAEADAppend(t *testing.T) {
	forEachImplOf(t, KindAEAD, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		c := im.Cipher()
		a := mustAEAD(t, im, r.bytes(c.KeySize()))
		for _, n := range []int{0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 1024 + 3} {
			for _, p := range []int{0, 1, 7, 16, 33} {
				nonce, pt, aad := r.bytes(a.NonceSize()), r.bytes(n), r.bytes(r.IntN(40))
				want := a.Seal(nil, nonce, pt, aad)
				if len(want) != n+a.Overhead() {
					t.Fatalf("Seal of %d bytes returned %d bytes", n, len(want))
				}
				prefix := r.bytes(p)
				inputs := slices.Concat(nonce, pt, aad)

				// Seal into dst with room to spare.
				g := newGuarded(r.IntN(16), p, len(want)+64)
				dst := append(g.window(0), prefix...)
				got := a.Seal(dst, nonce, pt, aad)
				if !bytes.Equal(got[:p], prefix) || !bytes.Equal(got[p:], want) {
					t.Fatalf("n=%d prefix=%d: Seal(dst) != dst ‖ Seal(nil)", n, p)
				}
				if !sameArray(got, dst) {
					t.Errorf("n=%d prefix=%d: Seal did not reuse dst's capacity", n, p)
				}
				g.check(t, len(got))

				// Open into dst with room to spare.
				g = newGuarded(r.IntN(16), p, n+64)
				dst = append(g.window(0), prefix...)
				opened, err := a.Open(dst, nonce, want, aad)
				if err != nil {
					t.Fatalf("n=%d prefix=%d: Open: %v", n, p, err)
				}
				if !bytes.Equal(opened[:p], prefix) || !bytes.Equal(opened[p:], pt) {
					t.Fatalf("n=%d prefix=%d: Open(dst) != dst ‖ plaintext", n, p)
				}
				if len(opened) > 0 && !sameArray(opened, dst) {
					t.Errorf("n=%d prefix=%d: Open did not reuse dst's capacity", n, p)
				}
				g.check(t, len(opened))

				// A dst without spare capacity is left alone and the
				// result is a new array.
				g = newGuarded(r.IntN(16), p, 0)
				dst = g.window(p)
				copy(dst, prefix)
				got = a.Seal(dst, nonce, pt, aad)
				if !bytes.Equal(got, slices.Concat(prefix, want)) {
					t.Fatalf("n=%d prefix=%d: Seal into a full dst != dst ‖ Seal(nil)", n, p)
				}
				opened, err = a.Open(dst, nonce, want, aad)
				if err != nil || !bytes.Equal(opened, slices.Concat(prefix, pt)) {
					t.Fatalf("n=%d prefix=%d: Open into a full dst = %v; want dst ‖ plaintext", n, p, err)
				}
				if !bytes.Equal(dst, prefix) {
					t.Errorf("n=%d prefix=%d: a full dst was modified", n, p)
				}
				g.check(t, p)

				if !bytes.Equal(inputs, slices.Concat(nonce, pt, aad)) {
					t.Errorf("n=%d: Seal or Open modified its nonce, plaintext or additional data", n)
				}
			}
		}
	})
}

// TestAEADInPlace checks exact in-place operation: Seal(pt[:0], nonce, pt, aad)
// and Open(ct[:0], nonce, ct, aad), also behind a prefix in the same buffer.
func TestAEADInPlace(t *testing.T) {
	forEachImplOf(t, KindAEAD, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		c := im.Cipher()
		a := mustAEAD(t, im, r.bytes(c.KeySize()))
		for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 127, 128, 129, 1000, 4096 + 7} {
			for _, p := range []int{0, 5, 16} {
				nonce, pt, aad := r.bytes(a.NonceSize()), r.bytes(n), r.bytes(r.IntN(20))
				want := a.Seal(nil, nonce, pt, aad)

				g := newGuarded(1+r.IntN(15), p+n, a.Overhead()+32)
				buf := g.window(p + n)
				prefix := bytes.Clone(buf[:p])
				copy(buf[p:], pt)
				sealed := a.Seal(buf[:p], nonce, buf[p:], aad)
				if !bytes.Equal(sealed[:p], prefix) || !bytes.Equal(sealed[p:], want) {
					t.Fatalf("n=%d prefix=%d: in-place Seal differs from Seal into a fresh buffer", n, p)
				}
				if !sameArray(sealed, buf) {
					t.Errorf("n=%d prefix=%d: in-place Seal did not write in place", n, p)
				}
				g.check(t, len(sealed))

				ct := sealed[p:]
				opened, err := a.Open(ct[:0], nonce, ct, aad)
				if err != nil || !bytes.Equal(opened, pt) {
					t.Fatalf("n=%d prefix=%d: in-place Open = %v; want the plaintext", n, p, err)
				}
				if n > 0 && !sameArray(opened, ct) {
					t.Errorf("n=%d prefix=%d: in-place Open did not write in place", n, p)
				}
				if !bytes.Equal(sealed[:p], prefix) || !bytes.Equal(ct[n:], want[n:]) {
					t.Errorf("n=%d prefix=%d: in-place Open wrote outside the plaintext", n, p)
				}
				g.check(t, len(sealed))
			}
		}
	})
}

// TestAEADOverlapPanics checks that an output overlapping the input at any
// offset other than zero panics, for Seal and for Open.
func TestAEADOverlapPanics(t *testing.T) {
	forEachImplOf(t, KindAEAD, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		c := im.Cipher()
		a := mustAEAD(t, im, r.bytes(c.KeySize()))
		for _, n := range []int{1, 15, 16, 17, 64, 100} {
			nonce, pt := r.bytes(a.NonceSize()), r.bytes(n)
			sealed := a.Seal(nil, nonce, pt, nil)
			for _, s := range []int{1, 2, 7, 15, 16, 17, n} {
				if s >= n+a.Overhead() {
					continue
				}
				buf := make([]byte, 2*(n+a.Overhead())+32)
				// Output starts s bytes after the input.
				copy(buf, pt)
				if s < n && !panics(func() { a.Seal(buf[s:s], nonce, buf[:n], nil) }) {
					t.Errorf("n=%d: Seal with the output %d bytes after the input did not panic", n, s)
				}
				copy(buf, sealed)
				if s < n && !panics(func() { _, _ = a.Open(buf[s:s], nonce, buf[:len(sealed)], nil) }) {
					t.Errorf("n=%d: Open with the output %d bytes after the input did not panic", n, s)
				}
				// Output starts s bytes before the input.
				copy(buf[s:], pt)
				if !panics(func() { a.Seal(buf[:0], nonce, buf[s:s+n], nil) }) {
					t.Errorf("n=%d: Seal with the output %d bytes before the input did not panic", n, s)
				}
				copy(buf[s:], sealed)
				if s < n && !panics(func() { _, _ = a.Open(buf[:0], nonce, buf[s:s+len(sealed)], nil) }) {
					t.Errorf("n=%d: Open with the output %d bytes before the input did not panic", n, s)
				}
			}
		}
	})
}

// TestAEADNilAndEmpty checks that nil and empty plaintexts and additional data
// are interchangeable.
func TestAEADNilAndEmpty(t *testing.T) {
	forEachImplOf(t, KindAEAD, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		a := mustAEAD(t, im, r.bytes(im.Cipher().KeySize()))
		nonce := r.bytes(a.NonceSize())
		want := a.Seal(nil, nonce, nil, nil)
		if len(want) != a.Overhead() {
			t.Fatalf("Seal of nothing returned %d bytes, want %d", len(want), a.Overhead())
		}
		if got := a.Seal(nil, nonce, []byte{}, []byte{}); !bytes.Equal(got, want) {
			t.Errorf("Seal with empty slices != Seal with nil")
		}
		for _, aad := range [][]byte{nil, {}} {
			if pt, err := a.Open(nil, nonce, want, aad); err != nil || len(pt) != 0 {
				t.Errorf("Open of an empty message (aad %#v) = %x, %v", aad, pt, err)
			}
		}
		pt := r.bytes(33)
		sealed := a.Seal(nil, nonce, pt, []byte{})
		if got, err := a.Open(nil, nonce, sealed, nil); err != nil || !bytes.Equal(got, pt) {
			t.Errorf("Open with nil additional data of a message sealed with empty additional data = %v", err)
		}
	})
}
