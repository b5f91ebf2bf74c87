package kernels

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"flag"
	"math/rand/v2"
	"testing"
	"time"
)

// Helpers shared by the tests: iteration over the registry, a seeded random
// source, guarded buffers with canary bytes, and panic detection.

var seedFlag = flag.Uint64("kernels.seed", 0, "seed for the random tests; 0 picks one from the clock (each test logs the seed it used)")

// testRand is a seeded generator that can also fill byte slices.
type testRand struct {
	*rand.Rand
	src *rand.ChaCha8
}

// newRand returns a generator for one test and logs its seed, so that a failure
// can be replayed with -kernels.seed.
func newRand(t testing.TB) testRand {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("random seed %d (replay with -kernels.seed=%d)", seed, seed)
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	src := rand.NewChaCha8(s)
	return testRand{rand.New(src), src}
}

// bytes returns n random bytes.
func (r testRand) bytes(n int) []byte {
	b := make([]byte, n)
	r.src.Read(b)
	return b
}

// chunks splits n into random piece sizes that sum to n: empty pieces, pieces
// shorter than a vector register and pieces of many blocks, so that calls start
// and end at every offset within a block. Each piece is a multiple of unit (1
// for streams, 16 for block modes).
func (r testRand) chunks(n, unit int) []int {
	var out []int
	for n > 0 {
		var k int
		switch r.IntN(4) {
		case 0:
			k = 0
		case 1:
			k = r.IntN(3) * unit
		case 2:
			k = r.IntN(20) * unit
		default:
			k = r.IntN(300) * unit
		}
		k = min(k, n)
		out = append(out, k)
		n -= k
	}
	return out
}

// iterations scales a random test's iteration count: all of it normally, a
// quarter under -short, an eighth under the race detector, which is slower
// and whose point is the concurrency of the code, not its coverage.
func iterations(full int) int {
	switch {
	case raceEnabled:
		return max(1, full/8)
	case testing.Short():
		return max(1, full/4)
	}
	return full
}

// ciphersOf returns the ciphers of kind k.
func ciphersOf(k Kind) []Cipher {
	var out []Cipher
	for _, c := range Ciphers() {
		if c.Kind() == k {
			out = append(out, c)
		}
	}
	return out
}

// forEachImpl runs f as a subtest named after each available implementation of
// c. It fails if c has none, so that a registry mistake cannot turn every
// per-implementation test into a silent pass.
func forEachImpl(t *testing.T, c Cipher, f func(t *testing.T, im *Implementation)) {
	t.Helper()
	ims := Available(c)
	if len(ims) == 0 {
		t.Fatalf("%s has no available implementation", c)
	}
	for _, im := range ims {
		t.Run(im.String(), func(t *testing.T) { f(t, im) })
	}
}

// forEachImplOf runs forEachImpl for every cipher of kind k.
func forEachImplOf(t *testing.T, k Kind, f func(t *testing.T, im *Implementation)) {
	t.Helper()
	for _, c := range ciphersOf(k) {
		forEachImpl(t, c, f)
	}
}

// referenceImpl names, per cipher, the oracle every implementation is compared
// with in the differential tests: the standard library or x/crypto where they
// carry the cipher, the portable Go code for IGE, which neither carries. The
// registry sorts by priority, so registration order is not observable; naming
// the oracle keeps it fixed when faster kernels are registered later. The
// oracles themselves are anchored by the Wycheproof and known-answer tests.
var referenceImpl = map[Cipher]string{
	AES128GCM:         "stdlib",
	AES256GCM:         "stdlib",
	AES128CTR:         "stdlib",
	AES256CTR:         "stdlib",
	ChaCha20:          "xcrypto",
	ChaCha20Poly1305:  "xcrypto",
	XChaCha20Poly1305: "xcrypto",
	AES128CBC:         "stdlib",
	AES256CBC:         "stdlib",
	AES256IGE:         "generic",
}

func reference(t testing.TB, c Cipher) *Implementation {
	t.Helper()
	im, err := Lookup(c, referenceImpl[c])
	if err != nil {
		t.Fatalf("reference implementation: %v", err)
	}
	if !im.Available() {
		t.Fatalf("reference implementation %s is not available", im)
	}
	return im
}

func mustAEAD(t testing.TB, im *Implementation, key []byte) cipher.AEAD {
	t.Helper()
	a, err := im.NewAEAD(key)
	if err != nil {
		t.Fatalf("%s: NewAEAD: %v", im, err)
	}
	return a
}

func mustStream(t testing.TB, im *Implementation, key, iv []byte) cipher.Stream {
	t.Helper()
	s, err := im.NewStream(key, iv)
	if err != nil {
		t.Fatalf("%s: NewStream: %v", im, err)
	}
	return s
}

func mustMode(t testing.TB, im *Implementation, key, iv []byte, decrypt bool) cipher.BlockMode {
	t.Helper()
	newMode := im.NewEncrypter
	if decrypt {
		newMode = im.NewDecrypter
	}
	m, err := newMode(key, iv)
	if err != nil {
		t.Fatalf("%s: new block mode (decrypt=%v): %v", im, decrypt, err)
	}
	return m
}

// panics reports whether f panics.
func panics(f func()) (panicked bool) {
	defer func() {
		if recover() != nil {
			panicked = true
		}
	}()
	f()
	return false
}

// canaryByte is the pattern written around and past the window of a guarded
// buffer. It varies with the position so that a shifted copy is noticed too.
func canaryByte(i int) byte { return byte(i*0x9d + 0x5a) }

// guarded is a window into a larger buffer. Every byte of the buffer outside the
// window (a few bytes before it, and all the capacity past its length) holds the
// canary pattern, so writes before the window or past what an operation may
// touch are caught. Assembly that stores whole vectors is the usual culprit.
type guarded struct {
	full []byte
	off  int
}

// newGuarded returns a guarded window of length n starting off bytes into the
// buffer, with spare bytes of capacity past its length. The window holds the
// canary pattern too until the caller fills it.
func newGuarded(off, n, spare int) *guarded {
	full := make([]byte, off+n+spare)
	for i := range full {
		full[i] = canaryByte(i)
	}
	return &guarded{full: full, off: off}
}

// window returns the guarded slice: length n, capacity n+spare.
func (g *guarded) window(n int) []byte { return g.full[g.off : g.off+n] }

// check reports an error if any byte outside full[off:off+written] differs from
// the canary pattern.
func (g *guarded) check(t testing.TB, written int) {
	t.Helper()
	for i := range g.off {
		if g.full[i] != canaryByte(i) {
			t.Errorf("byte %d before dst was overwritten", g.off-i)
			return
		}
	}
	for i := g.off + written; i < len(g.full); i++ {
		if g.full[i] != canaryByte(i) {
			t.Errorf("canary byte %d past the %d written bytes was overwritten", i-g.off-written, written)
			return
		}
	}
}

// sameArray reports whether a and b start at the same address.
func sameArray(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// xorBytes returns a ⊕ b; they must be of equal length.
func xorBytes(a, b []byte) []byte {
	if len(a) != len(b) {
		panic("xorBytes: length mismatch")
	}
	out := make([]byte, len(a))
	for i := range a {
		out[i] = a[i] ^ b[i]
	}
	return out
}

// isZero reports whether every byte of b is zero.
func isZero(b []byte) bool { return bytes.Count(b, []byte{0}) == len(b) }
