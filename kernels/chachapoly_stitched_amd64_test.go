//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"fmt"
	"testing"
)

// Tests of the stitched ChaCha20-Poly1305 kernels (chachaPolyHeadAVX512,
// chachaPolySealAVX512IFMA, chachaPolyOpenAVX512IFMA): the kernels on their own, against x/crypto's
// ChaCha20 and the MULX Poly1305 kernel, and the avx512 AEAD around every
// boundary of their 1024-byte groups, against x/crypto's AEAD.

type stitchedKernel func(dst, src *byte, groups int, state *[16]uint32, st *[5]uint64, tbl *[80]uint64)

func skipWithoutStitched(t testing.TB) {
	t.Helper()
	im, err := Lookup(ChaCha20Poly1305, "avx512")
	if err != nil {
		t.Fatal(err)
	}
	if !im.Available() {
		t.Skipf("%s is not available on this host", im)
	}
}

// The kernels over 1–4 and 17 groups, from random and last-possible block
// counters, in place and into another buffer, starting from a random
// accumulator: the output must be x/crypto's keystream XOR the input, and
// the accumulator, once finished, must give the tag that the MULX kernel
// gives over the ciphertext.
func TestChaChaPolyStitchedKernels(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	// The seal kernel authenticates the buffer mac one group behind: dst
	// when sealing, src when opening into another buffer ("open-lagged").
	lagged := func(macIsSrc bool) stitchedKernel {
		return func(dst, src *byte, groups int, state *[16]uint32, st *[5]uint64, tbl *[80]uint64) {
			mac := dst
			if macIsSrc {
				mac = src
			}
			chachaPolySealAVX512IFMA(dst, src, mac, groups, state, st, tbl)
		}
	}
	for _, name := range []string{"seal", "open-lagged", "open"} {
		seal, head := name == "seal", name != "open"
		kernel := lagged(name == "open-lagged")
		if name == "open" {
			kernel = chachaPolyOpenAVX512IFMA
		}
		for _, groups := range []int{1, 2, 3, 4, 17} {
			for _, inPlace := range []bool{false, true} {
				if inPlace && name == "open-lagged" {
					continue
				}
				n := 1024 * groups
				key, nonce, src, prefix := r.bytes(32), r.bytes(12), r.bytes(n), r.bytes(48)
				if groups == 3 {
					// Every limb of the input at its largest, and of r
					// below: where the input is authenticated, this tries
					// the bounds of the IFMA steps and of the handoff of
					// the general-purpose accumulator.
					src = bytes.Repeat([]byte{0xff}, n)
				}
				counter := randomCounter(r, n)
				kw, nw := chachaWords(key, nonce)
				want := xcryptoXOR(t, key, nonce, counter, src)

				var macKey [32]byte
				copy(macKey[:], r.bytes(32))
				if groups == 3 {
					copy(macKey[:], bytes.Repeat([]byte{0xff}, 32)) // r at its largest too
				}
				var ref, got poly1305MAC
				ref.init(&macKey)
				poly1305BlocksMULX(&ref.st, prefix, 1) // an accumulator that is not 0
				got = ref
				var tbl poly1305Powers

				in, dst := src, make([]byte, n)
				if inPlace {
					in = bytes.Clone(src)
					dst = in
				}
				state := chachaState(kw, nw, counter)
				if head {
					// The seal kernel takes its first group XORed
					// (by chachaPolyHeadAVX512) and the state of the second.
					copy(dst[:1024], want[:1024])
					state[12] += 16
				}
				kernel(&dst[0], &in[0], groups, &state, &got.st, got.powersTable(&tbl))
				if !bytes.Equal(dst, want) {
					t.Fatalf("%s, %d groups, in place %v, counter %#x: output differs from x/crypto", name, groups, inPlace, counter)
				}
				authenticated := want // the ciphertext: the output when sealing, the input when opening
				if !seal {
					authenticated = src
				}
				poly1305BlocksMULX(&ref.st, authenticated, 1)
				var wantTag, gotTag [16]byte
				ref.sum(&wantTag)
				got.sum(&gotTag)
				if wantTag != gotTag {
					t.Fatalf("%s, %d groups, in place %v: Poly1305 state differs from the MULX kernel's", name, groups, inPlace)
				}
			}
		}
	}
}

// chachaPolyHeadAVX512 from random and last-possible block counters, in
// place and into another buffer: the Poly1305 key (the first 32 bytes of
// the key block) and the 1024 bytes after the key block must be x/crypto's
// keystream (XOR the input), the table r's powers,
// nothing past them written, and key and nonce left as they were.
func TestChaChaPolyHeadKernel(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	for i := range 200 {
		inPlace := i%2 == 1
		key, nonce, src := r.bytes(32), r.bytes(12), r.bytes(1024)
		counter := randomCounter(r, 1088)
		if i < 4 {
			counter = [4]uint32{0, 0, 1<<32 - 17, 1<<32 - 17}[i]
		}
		kw, nw := chachaWords(key, nonce)
		want := xcryptoXOR(t, key, nonce, counter, append(make([]byte, 64), src...))
		buf := bytes.Clone(src)
		buf = append(buf, 0xa5, 0xa5, 0xa5, 0xa5)
		in, dst := buf[:1024], make([]byte, 1024, 1028)
		dst = append(dst, 0xa5, 0xa5, 0xa5, 0xa5)[:1024]
		if inPlace {
			dst = in
		}
		savedK, savedN := *kw, *nw
		var ks [32]byte
		var tbl [80]uint64
		chachaPolyHeadAVX512(&dst[0], &in[0], kw, nw, counter, &ks, &tbl)
		if !bytes.Equal(ks[:], want[:32]) {
			t.Fatalf("counter %#x: Poly1305 key differs from x/crypto's keystream", counter)
		}
		checkPowers(t, fmt.Sprintf("counter %#x", counter), tbl[:], clampedR(ks[:]), poly1305TableExps)
		if !bytes.Equal(dst, want[64:]) {
			t.Fatalf("counter %#x, in place %v: output differs from x/crypto", counter, inPlace)
		}
		if !bytes.Equal(dst[1024:1028], []byte{0xa5, 0xa5, 0xa5, 0xa5}) {
			t.Fatalf("counter %#x, in place %v: wrote past 1024 bytes", counter, inPlace)
		}
		if *kw != savedK || *nw != savedN {
			t.Fatalf("counter %#x: key or nonce changed", counter)
		}
	}
}

// stitchedLengths are every length 0…2100 (every residue modulo 1024 on
// both sides of the first two group boundaries), those around 3 and 16
// groups, and 64 KiB.
func stitchedLengths() []int {
	var ls []int
	for n := 0; n <= 2100; n++ {
		ls = append(ls, n)
	}
	for _, b := range []int{3 << 10, 16 << 10} {
		for d := -65; d <= 65; d++ {
			ls = append(ls, b+d)
		}
	}
	return append(ls, 65535, 65536, 65537)
}

// The avx512 AEAD against x/crypto at every length of stitchedLengths, with
// additional data of several lengths, sealing in place and into another
// buffer, opening x/crypto's output in place and into another buffer, and
// refusing a flipped bit in the tag and in the ciphertext.
func TestChaChaPolyStitchedAEAD(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	aadLens := []int{0, 1, 13, 16, 255, 256, 1023, 1024, 1500}
	for _, c := range []Cipher{ChaCha20Poly1305, XChaCha20Poly1305} {
		im, err := Lookup(c, "avx512")
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range stitchedLengths() {
			aadLen := aadLens[i%len(aadLens)]
			key, nonce, pt, aad := r.bytes(32), r.bytes(c.IVSize()), r.bytes(n), r.bytes(aadLen)
			want := xcryptoSeal(t, c, key, nonce, pt, aad)
			a := mustAEAD(t, im, key)
			if got := a.Seal(nil, nonce, pt, aad); !bytes.Equal(got, want) {
				t.Fatalf("%s: len %d, aad %d: Seal differs from x/crypto", c, n, aadLen)
			}
			buf := make([]byte, n, n+16)
			copy(buf, pt)
			if got := a.Seal(buf[:0], nonce, buf, aad); !bytes.Equal(got, want) {
				t.Fatalf("%s: len %d, aad %d: in-place Seal differs from x/crypto", c, n, aadLen)
			}
			if got, err := a.Open(nil, nonce, want, aad); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s: len %d, aad %d: Open of x/crypto's output = %v", c, n, aadLen, err)
			}
			ct := bytes.Clone(want)
			if got, err := a.Open(ct[:0], nonce, ct, aad); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("%s: len %d, aad %d: in-place Open of x/crypto's output = %v", c, n, aadLen, err)
			}
			for _, bit := range []int{8*n + r.IntN(128), r.IntN(8*n + 1)} {
				bad := bytes.Clone(want)
				bad[bit/8] ^= 1 << (bit % 8)
				if got, err := a.Open(nil, nonce, bad, aad); err == nil || got != nil {
					t.Fatalf("%s: len %d, aad %d: Open accepted bit %d flipped", c, n, aadLen, bit)
				}
			}
		}
	}
}

// chachaPolyWholeAVX512IFMA on its own against x/crypto's AEAD: 1–3 and 17
// groups, every length of additional data up to 255 bytes (every residue of
// its blocks, the partial one read with a masked load at the end of its
// buffer), sealing in place and into another buffer and opening into another
// buffer, with random input and with every byte 0xff.
func TestChaChaPolyWholeKernel(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	for _, groups := range []int{1, 2, 3, 17} {
		for aadLen := 0; aadLen <= chachaPolyWholeAAD; aadLen++ {
			if groups > 3 && aadLen%17 != 0 {
				continue
			}
			n := 1024 * groups
			key, nonce, pt, aad := r.bytes(32), r.bytes(12), r.bytes(n), r.bytes(aadLen)
			if aadLen%2 == 1 {
				pt = bytes.Repeat([]byte{0xff}, n)
				aad = bytes.Repeat([]byte{0xff}, aadLen)
			}
			// The additional data at the very end of its allocation, so
			// that reading past it would be caught by the race detector
			// and, with the guard-page tests' layout, fault.
			aad = append(make([]byte, 0, aadLen), aad...)
			want := xcryptoSeal(t, ChaCha20Poly1305, key, nonce, pt, aad)
			kw, _ := chachaWords(key, nonce)
			for _, mode := range []string{"seal", "seal-in-place", "open"} {
				in, dst := pt, make([]byte, n)
				mac := &dst[0]
				switch mode {
				case "seal-in-place":
					in = bytes.Clone(pt)
					dst, mac = in, &in[0]
				case "open":
					in = bytes.Clone(want[:n])
					mac = &in[0]
				}
				var tag [16]byte
				chachaPolyWholeAVX512IFMA(&dst[0], &in[0], mac, groups, kw, (*[12]byte)(nonce), firstByte(aad), len(aad), &tag)
				wantOut := want[:n]
				if mode == "open" {
					wantOut = pt
				}
				if !bytes.Equal(dst, wantOut) {
					t.Fatalf("%s, %d groups, aad %d: output differs from x/crypto", mode, groups, aadLen)
				}
				if !bytes.Equal(tag[:], want[n:]) {
					t.Fatalf("%s, %d groups, aad %d: tag differs from x/crypto", mode, groups, aadLen)
				}
			}
		}
	}
}
