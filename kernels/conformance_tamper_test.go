package kernels

import (
	"bytes"
	"crypto/cipher"
	"maps"
	"slices"
	"testing"
)

// The failure half of the cipher.AEAD contract: Open must reject every change
// to what was sealed, and fail the same way each time, without exposing
// plaintext or writing outside its output.

// TestAEADTamper checks that Open rejects every single-bit change to the
// ciphertext, tag, nonce, additional data and key, and every truncation and
// extension, and that each failure honours the failure contract (see
// checkOpenFails). All failures must read the same.
func TestAEADTamper(t *testing.T) {
	forEachImplOf(t, KindAEAD, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		c := im.Cipher()
		key := r.bytes(c.KeySize())
		a := mustAEAD(t, im, key)
		messages := map[string]bool{}
		fail := func(what string, a cipher.AEAD, nonce, sealed, aad []byte) {
			t.Helper()
			if msg, ok := checkOpenFails(t, r, what, a, nonce, sealed, aad); ok {
				messages[msg] = true
			}
		}
		for _, size := range []struct{ n, aad int }{{0, 0}, {1, 1}, {16, 0}, {17, 13}, {64, 16}, {129, 31}} {
			nonce, pt, aad := r.bytes(a.NonceSize()), r.bytes(size.n), r.bytes(size.aad)
			sealed := a.Seal(nil, nonce, pt, aad)

			for i := range sealed {
				for bit := range 8 {
					bad := bytes.Clone(sealed)
					bad[i] ^= 1 << bit
					fail("ciphertext/tag bit flip", a, nonce, bad, aad)
				}
				bad := bytes.Clone(sealed)
				bad[i] ^= 1 << (i % 8)
				if msg, ok := checkOpenFailsInPlace(t, r, a, nonce, bad, aad); ok {
					messages[msg] = true
				}
			}
			for i := range nonce {
				for bit := range 8 {
					bad := bytes.Clone(nonce)
					bad[i] ^= 1 << bit
					fail("nonce bit flip", a, bad, sealed, aad)
				}
			}
			for i := range aad {
				for bit := range 8 {
					bad := bytes.Clone(aad)
					bad[i] ^= 1 << bit
					fail("additional data bit flip", a, nonce, sealed, bad)
				}
			}
			if len(aad) > 0 {
				fail("additional data truncated", a, nonce, sealed, aad[:len(aad)-1])
				fail("additional data dropped", a, nonce, sealed, nil)
			}
			fail("additional data extended", a, nonce, sealed, append(bytes.Clone(aad), 0))
			for n := range len(sealed) {
				fail("truncated", a, nonce, sealed[:n], aad)
				fail("front truncated", a, nonce, sealed[len(sealed)-n:], aad)
			}
			fail("extended by a zero byte", a, nonce, append(bytes.Clone(sealed), 0), aad)
			fail("extended by a block", a, nonce, append(bytes.Clone(sealed), make([]byte, 16)...), aad)
			fail("prefixed by a byte", a, nonce, append([]byte{0}, sealed...), aad)
			for i := range key {
				bad := bytes.Clone(key)
				bad[i] ^= 1 << (i % 8)
				fail("key bit flip", mustAEAD(t, im, bad), nonce, sealed, aad)
			}

			// Nothing sticks: the untouched message still opens.
			if got, err := a.Open(nil, nonce, sealed, aad); err != nil || !bytes.Equal(got, pt) {
				t.Errorf("n=%d: Open of the untampered message after failures = %v", size.n, err)
			}
		}
		if len(messages) != 1 {
			t.Errorf("failed Opens returned %d different errors, want one: %q", len(messages), slices.Sorted(maps.Keys(messages)))
		}
	})
}

// checkOpenFails opens sealed, which must not authenticate, into a guarded dst
// that already holds a prefix, and checks the failure contract:
//
//   - Open returns a nil slice and a non-nil error;
//   - it does not expose plaintext. DESIGN.md requires a failed Open to zero its
//     output, and both current implementations do so: crypto/cipher's GCM and
//     x/crypto's chacha20poly1305 clear dst[len(dst):len(dst)+len(sealed)-Overhead()]
//     on failure, whether or not they decrypted before comparing the tag. The
//     test demands exactly that: the output region all zero;
//   - the prefix (dst itself), everything past the output region and the inputs
//     are unchanged; a sealed message shorter than a tag writes nothing.
//
// It returns the error's message and whether Open failed.
func checkOpenFails(t *testing.T, r testRand, what string, a cipher.AEAD, nonce, sealed, aad []byte) (string, bool) {
	t.Helper()
	p := 7 * r.IntN(4)
	outLen := max(0, len(sealed)-a.Overhead())
	g := newGuarded(r.IntN(16), p, outLen+32)
	dst := g.window(p)
	prefix := bytes.Clone(dst)
	inputs := slices.Concat(nonce, sealed, aad)
	got, err := a.Open(dst, nonce, sealed, aad)
	if err == nil {
		t.Errorf("%s (len %d): Open succeeded", what, len(sealed))
		return "", false
	}
	if got != nil {
		t.Errorf("%s: failed Open returned %d bytes, want nil", what, len(got))
	}
	if len(sealed) >= a.Overhead() {
		if out := g.full[g.off+p : g.off+p+outLen]; !isZero(out) {
			t.Errorf("%s: failed Open left non-zero bytes in its output %x", what, out)
		}
		g.check(t, p+outLen)
	} else {
		g.check(t, p)
	}
	if !bytes.Equal(dst, prefix) {
		t.Errorf("%s: failed Open changed dst[:len(dst)]", what)
	}
	if !bytes.Equal(inputs, slices.Concat(nonce, sealed, aad)) {
		t.Errorf("%s: failed Open modified its inputs", what)
	}
	return err.Error(), true
}

// checkOpenFailsInPlace is checkOpenFails for an in-place Open: the ciphertext
// part is zeroed, the tag and everything past it are left alone.
func checkOpenFailsInPlace(t *testing.T, r testRand, a cipher.AEAD, nonce, sealed, aad []byte) (string, bool) {
	t.Helper()
	g := newGuarded(r.IntN(16), len(sealed), 32)
	buf := g.window(len(sealed))
	copy(buf, sealed)
	got, err := a.Open(buf[:0], nonce, buf, aad)
	if err == nil || got != nil {
		t.Errorf("in-place Open of a tampered message = %d bytes, %v; want nil and an error", len(got), err)
		return "", false
	}
	n := len(sealed) - a.Overhead()
	if !isZero(buf[:n]) {
		t.Errorf("failed in-place Open left non-zero bytes in its output")
	}
	if !bytes.Equal(buf[n:], sealed[n:]) {
		t.Errorf("failed in-place Open modified the tag")
	}
	g.check(t, len(sealed))
	return err.Error(), true
}
