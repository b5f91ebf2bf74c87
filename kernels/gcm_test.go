package kernels

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"unsafe"
)

// AES-GCM tests beyond the generic AEAD suites: every implementation of
// AES-128-GCM and AES-256-GCM against crypto/cipher's GCM, built here rather
// than taken from the registry, at every length up to 1100 bytes and around
// 8 KiB and 64 KiB, with every additional-data length up to 70 and large
// additional data; and every single-bit change to messages long enough for
// the wide code paths.

// gcmLengths returns the message lengths of the differential test: every
// length to 1100 (all residues of the 16-block and 4-block loops and their
// tails), and the lengths around 8 KiB and 64 KiB.
func gcmLengths() []int {
	var ns []int
	for n := 0; n <= 1100; n++ {
		ns = append(ns, n)
	}
	return append(ns, 8191, 8192, 8193, 65535, 65536, 65537)
}

// stdlibGCMFor returns crypto/cipher's GCM for key.
func stdlibGCMFor(t testing.TB, key []byte) cipher.AEAD {
	t.Helper()
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// atOffset returns a copy of b that starts off bytes into a fresh array and
// ends where the array does, so that wide loads meet every alignment.
func atOffset(b []byte, off int) []byte {
	buf := make([]byte, off+len(b))
	return append(buf[off:off], b...)
}

func TestGCMAgainstStdlib(t *testing.T) {
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			var a, std cipher.AEAD
			step := 1
			if raceEnabled || testing.Short() {
				step = 7
			}
			ns := gcmLengths()
			for i := 0; i < len(ns); i += step {
				n := ns[i]
				if i%64 == 0 { // a new key now and then
					key := r.bytes(c.KeySize())
					a, std = mustAEAD(t, im, key), stdlibGCMFor(t, key)
				}
				aadLen := n % 71
				if n%50 == 0 || n > 1100 {
					aadLen = 5000 + n%300
				}
				checkGCMCase(t, r, a, std, n, aadLen)
			}
		})
	}
}

// checkGCMCase seals and opens one random message of n bytes with aadLen
// bytes of additional data, all at unaligned addresses, into guarded buffers
// and in place, and compares with the standard library.
func checkGCMCase(t *testing.T, r testRand, a, std cipher.AEAD, n, aadLen int) {
	t.Helper()
	nonce := atOffset(r.bytes(12), r.IntN(16))
	pt := atOffset(r.bytes(n), r.IntN(64))
	aad := atOffset(r.bytes(aadLen), r.IntN(64))
	want := std.Seal(nil, nonce, pt, aad)
	what := fmt.Sprintf("len %d, aad %d", n, aadLen)

	// Seal and Open into dst behind a prefix, at an odd offset, with
	// canaries around and past the output.
	p := r.IntN(20)
	g := newGuarded(1+r.IntN(63), p, len(want)+r.IntN(2)*33)
	dst := g.window(p)
	prefix := bytes.Clone(dst)
	got := a.Seal(dst, nonce, pt, aad)
	if !bytes.Equal(got[:p], prefix) || !bytes.Equal(got[p:], want) {
		t.Fatalf("%s: Seal differs from crypto/cipher", what)
	}
	if sameArray(got, dst) {
		g.check(t, len(got))
	}
	g = newGuarded(1+r.IntN(63), p, n+r.IntN(2)*33)
	dst = g.window(p)
	copy(dst, prefix)
	opened, err := a.Open(dst, nonce, atOffset(want, r.IntN(64)), aad)
	if err != nil || !bytes.Equal(opened[:p], prefix) || !bytes.Equal(opened[p:], pt) {
		t.Fatalf("%s: Open(Seal(x)) = %v; want x", what, err)
	}
	if sameArray(opened, dst) {
		g.check(t, len(opened))
	}

	// In place, the buffer holding exactly the message and the tag, then
	// canaries.
	g = newGuarded(1+r.IntN(63), n, 16+32)
	buf := g.window(n)
	copy(buf, pt)
	sealed := a.Seal(buf[:0], nonce, buf, aad)
	if !bytes.Equal(sealed, want) || !sameArray(sealed, buf) {
		t.Fatalf("%s: in-place Seal differs from crypto/cipher", what)
	}
	g.check(t, len(sealed))
	opened, err = a.Open(sealed[:0], nonce, sealed, aad)
	if err != nil || !bytes.Equal(opened, pt) {
		t.Fatalf("%s: in-place Open = %v; want the plaintext", what, err)
	}
	if !bytes.Equal(g.window(n + 16)[n:], want[n:]) {
		t.Fatalf("%s: in-place Open modified the tag", what)
	}
	g.check(t, n+16)
}

// TestGCMTamperWide flips every bit of the ciphertext, the tag and the
// additional data of messages that take the wide paths (a 16-block loop,
// its tail, additional data over 256 bytes): Open must fail each time and
// honour the failure contract (see checkOpenFails).
func TestGCMTamperWide(t *testing.T) {
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			a := mustAEAD(t, im, r.bytes(c.KeySize()))
			messages := map[string]bool{}
			sizes := []struct{ n, aad int }{{255, 0}, {256, 300}, {257, 17}, {600, 0}, {1000, 513}}
			if raceEnabled || testing.Short() {
				sizes = sizes[1:3]
			}
			for _, size := range sizes {
				nonce, pt, aad := r.bytes(12), r.bytes(size.n), r.bytes(size.aad)
				sealed := a.Seal(nil, nonce, pt, aad)
				for i := range 8 * len(sealed) {
					bad := bytes.Clone(sealed)
					bad[i/8] ^= 1 << (i % 8)
					if msg, ok := checkOpenFails(t, r, "ciphertext/tag bit flip", a, nonce, bad, aad); ok {
						messages[msg] = true
					}
				}
				for i := range 8 * len(aad) {
					bad := bytes.Clone(aad)
					bad[i/8] ^= 1 << (i % 8)
					if msg, ok := checkOpenFails(t, r, "additional data bit flip", a, nonce, sealed, bad); ok {
						messages[msg] = true
					}
				}
				if got, err := a.Open(nil, nonce, sealed, aad); err != nil || !bytes.Equal(got, pt) {
					t.Fatalf("n=%d: Open of the untampered message = %v", size.n, err)
				}
			}
			if len(messages) != 1 {
				t.Errorf("failed Opens returned %d different errors, want one: %q", len(messages), slices.Sorted(maps.Keys(messages)))
			}
		})
	}
}

// FuzzGCMAgainstStdlib compares every available AES-GCM implementation with
// crypto/cipher's GCM: the sealed message, Open of it, and Open of it with
// one bit flipped.
func FuzzGCMAgainstStdlib(f *testing.F) {
	f.Add(false, []byte{}, []byte{}, []byte{}, []byte{}, uint16(0))
	f.Add(true, []byte("0123456789abcdef0123456789abcdef"), []byte("nonce-nonce-"), []byte("additional data"), []byte("plaintext"), uint16(3))
	f.Add(false, bytes.Repeat([]byte{0xff}, 16), bytes.Repeat([]byte{0xff}, 12), make([]byte, 300), make([]byte, 255), uint16(130))
	f.Add(true, []byte{1}, []byte{2}, make([]byte, 17), make([]byte, 257), uint16(2000))
	f.Add(false, []byte{7}, []byte{9}, bytes.Repeat([]byte("a"), 64), bytes.Repeat([]byte("p"), 4099), uint16(65535))
	f.Fuzz(func(t *testing.T, aes256 bool, key, nonce, aad, pt []byte, flip uint16) {
		if len(pt) > maxFuzzLen || len(aad) > maxFuzzLen {
			t.Skip()
		}
		c := AES128GCM
		if aes256 {
			c = AES256GCM
		}
		key, nonce = fit(key, c.KeySize()), fit(nonce, 12)
		want := stdlibGCMFor(t, key).Seal(nil, nonce, pt, aad)
		bad := bytes.Clone(want)
		bit := int(flip) % (8 * len(bad))
		bad[bit/8] ^= 1 << (bit % 8)
		for _, im := range Available(c) {
			a := mustAEAD(t, im, key)
			got := a.Seal(nil, nonce, pt, aad)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: Seal differs from crypto/cipher", im)
			}
			opened, err := a.Open(nil, nonce, want, aad)
			if err != nil || !bytes.Equal(opened, pt) {
				t.Fatalf("%s: Open = %v; want the plaintext", im, err)
			}
			if opened, err := a.Open(nil, nonce, bad, aad); err == nil || opened != nil {
				t.Fatalf("%s: Open accepted the message with bit %d flipped", im, bit)
			}
		}
	})
}

// TestGCMMessageTooLarge checks GCM's length limit, 2^36 - 32 bytes of
// plaintext: Seal panics and Open fails on anything longer, before reading
// it, as crypto/cipher does. The oversized slices point at a small buffer and
// are never read, which is why the race detector's pointer checks (which
// reject such slices) skip the test.
func TestGCMMessageTooLarge(t *testing.T) {
	if raceEnabled {
		t.Skip("checkptr rejects slices longer than their allocation")
	}
	limit := uint64(1<<36 - 32)
	if uint64(math.MaxInt) < limit+17 {
		t.Skip("no slice can be that long on this platform")
	}
	buf := make([]byte, 64)
	huge := func(n uint64) []byte { return unsafe.Slice(&buf[0], int(n)) }
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			a := mustAEAD(t, im, make([]byte, c.KeySize()))
			nonce := make([]byte, 12)
			if !panics(func() { a.Seal(nil, nonce, huge(limit+1), nil) }) {
				t.Errorf("Seal of %d bytes did not panic", limit+1)
			}
			if out, err := a.Open(nil, nonce, huge(limit+16+1), nil); err == nil || out != nil {
				t.Errorf("Open of %d bytes = %d bytes, %v; want an error", limit+17, len(out), err)
			}
		})
	}
}
