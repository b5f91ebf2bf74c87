package kernels

import (
	"bytes"
	"crypto/aes"
	"encoding/hex"
	"testing"
)

// The cipher.BlockMode contract, checked for every available implementation of
// every block-mode cipher (AES-CBC, AES-IGE), and the OpenSSL IGE vectors.

func TestBlockModeParameters(t *testing.T) {
	forEachImplOf(t, KindBlockMode, func(t *testing.T, im *Implementation) {
		c := im.Cipher()
		key, iv := make([]byte, c.KeySize()), make([]byte, c.IVSize())
		for _, decrypt := range []bool{false, true} {
			if bs := mustMode(t, im, key, iv, decrypt).BlockSize(); bs != 16 || bs != c.BlockSize() {
				t.Errorf("decrypt=%v: BlockSize() = %d, want 16", decrypt, bs)
			}
		}
		for _, n := range []int{0, 1, 15, 16, 17, 24, 31, 32, 33, 64} {
			if n == c.KeySize() {
				continue
			}
			if m, err := im.NewEncrypter(make([]byte, n), iv); err == nil || m != nil {
				t.Errorf("NewEncrypter with a %d-byte key = %v, %v; want an error", n, m, err)
			}
			if m, err := im.NewDecrypter(make([]byte, n), iv); err == nil || m != nil {
				t.Errorf("NewDecrypter with a %d-byte key = %v, %v; want an error", n, m, err)
			}
		}
		for _, n := range []int{0, 1, 12, 15, 16, 17, 31, 32, 33, 48} {
			if n == c.IVSize() {
				continue
			}
			if m, err := im.NewEncrypter(key, make([]byte, n)); err == nil || m != nil {
				t.Errorf("NewEncrypter with a %d-byte IV = %v, %v; want an error", n, m, err)
			}
			if m, err := im.NewDecrypter(key, make([]byte, n)); err == nil || m != nil {
				t.Errorf("NewDecrypter with a %d-byte IV = %v, %v; want an error", n, m, err)
			}
		}
	})
}

// TestBlockModeRoundTrip checks decrypt(encrypt(p)) = p, that encryption and
// decryption over random block-aligned splits equal one call, in-place
// operation, and canaries around unaligned buffers.
func TestBlockModeRoundTrip(t *testing.T) {
	forEachImplOf(t, KindBlockMode, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		c := im.Cipher()
		for i := range iterations(200) {
			n := 16 * r.IntN(70)
			if i == 0 {
				n = 4096
			}
			key, iv, pt := r.bytes(c.KeySize()), r.bytes(c.IVSize()), r.bytes(n)
			ct := make([]byte, n)
			mustMode(t, im, key, iv, false).CryptBlocks(ct, pt)
			if n > 0 && bytes.Equal(ct, pt) {
				t.Fatalf("len %d: encryption is the identity", n)
			}
			back := make([]byte, n)
			mustMode(t, im, key, iv, true).CryptBlocks(back, ct)
			if !bytes.Equal(back, pt) {
				t.Fatalf("len %d: decrypt(encrypt(p)) != p", n)
			}

			for _, decrypt := range []bool{false, true} {
				src, want := pt, ct
				if decrypt {
					src, want = ct, pt
				}
				// Chunked, into unaligned dst slices longer than src.
				m := mustMode(t, im, key, iv, decrypt)
				g := newGuarded(1+r.IntN(15), n, 48)
				off := 0
				for _, k := range r.chunks(n, 16) {
					m.CryptBlocks(g.full[g.off+off:], src[off:off+k])
					off += k
					g.check(t, off)
				}
				if !bytes.Equal(g.window(n), want) {
					t.Fatalf("len %d decrypt=%v: chunked CryptBlocks differs from one call", n, decrypt)
				}
				// In place, in two block-aligned halves.
				g = newGuarded(1+r.IntN(15), n, 48)
				buf := g.window(n)
				copy(buf, src)
				m = mustMode(t, im, key, iv, decrypt)
				h := 16 * r.IntN(n/16+1)
				m.CryptBlocks(buf[:h], buf[:h])
				m.CryptBlocks(buf[h:], buf[h:])
				if !bytes.Equal(buf, want) {
					t.Fatalf("len %d decrypt=%v: in-place CryptBlocks differs", n, decrypt)
				}
				g.check(t, n)
			}
		}
	})
}

func TestBlockModePanics(t *testing.T) {
	forEachImplOf(t, KindBlockMode, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		c := im.Cipher()
		key, iv := r.bytes(c.KeySize()), r.bytes(c.IVSize())
		for _, decrypt := range []bool{false, true} {
			m := func() interface{ CryptBlocks(dst, src []byte) } { return mustMode(t, im, key, iv, decrypt) }
			buf := make([]byte, 256)
			for _, n := range []int{1, 15, 17, 31, 33} {
				if !panics(func() { m().CryptBlocks(buf[128:], buf[:n]) }) {
					t.Errorf("decrypt=%v: %d bytes, not a whole number of blocks, did not panic", decrypt, n)
				}
			}
			for _, n := range []int{16, 32, 64} {
				if !panics(func() { m().CryptBlocks(buf[128:128+n-1], buf[:n]) }) {
					t.Errorf("decrypt=%v: %d bytes into a dst one byte short did not panic", decrypt, n)
				}
				for _, s := range []int{1, 8, 16, n - 1} {
					if s >= n {
						continue
					}
					if !panics(func() { m().CryptBlocks(buf[s:s+n], buf[:n]) }) {
						t.Errorf("decrypt=%v: %d bytes, output %d bytes after the input, did not panic", decrypt, n, s)
					}
					if !panics(func() { m().CryptBlocks(buf[:n], buf[s:s+n]) }) {
						t.Errorf("decrypt=%v: %d bytes, output %d bytes before the input, did not panic", decrypt, n, s)
					}
				}
			}
			// Empty input is fine.
			m().CryptBlocks(nil, nil)
		}
	})
}

// TestBlockModeDefinition checks every implementation against the modes'
// definitions, computed here one block at a time with crypto/aes:
//
//	CBC: cᵢ = E(pᵢ ⊕ cᵢ₋₁), c₀ = IV
//	IGE: cᵢ = E(pᵢ ⊕ cᵢ₋₁) ⊕ pᵢ₋₁, with IV = c₀ ‖ p₀
func TestBlockModeDefinition(t *testing.T) {
	forEachImplOf(t, KindBlockMode, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		c := im.Cipher()
		for range iterations(100) {
			key, iv, pt := r.bytes(c.KeySize()), r.bytes(c.IVSize()), r.bytes(16*r.IntN(40))
			want := encryptByDefinition(t, c, key, iv, pt)
			got := make([]byte, len(pt))
			mustMode(t, im, key, iv, false).CryptBlocks(got, pt)
			if !bytes.Equal(got, want) {
				t.Fatalf("len %d: encryption differs from the definition", len(pt))
			}
			mustMode(t, im, key, iv, true).CryptBlocks(got, want)
			if !bytes.Equal(got, pt) {
				t.Fatalf("len %d: decryption differs from the definition", len(pt))
			}
		}
	})
}

// encryptByDefinition encrypts pt with AES-CBC or AES-IGE one block at a
// time, as the modes are defined.
func encryptByDefinition(t testing.TB, c Cipher, key, iv, pt []byte) []byte {
	t.Helper()
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(pt))
	prevC, prevP := bytes.Clone(iv[:16]), make([]byte, 16)
	if c == AES256IGE {
		prevP = bytes.Clone(iv[16:])
	}
	for i := 0; i < len(pt); i += 16 {
		blk := xorBytes(pt[i:i+16], prevC)
		b.Encrypt(blk, blk)
		copy(out[i:], xorBytes(blk, prevP))
		prevC = out[i : i+16]
		if c == AES256IGE {
			prevP = pt[i : i+16]
		}
	}
	return out
}

// TestIGEKnownAnswer runs the two vectors of OpenSSL's test/igetest.c (AES-128,
// IV = c₀ ‖ p₀) through newIGE, in both directions and in place. Vector 0 is
// an encryption, vector 1 a decryption; each is also checked the other way.
func TestIGEKnownAnswer(t *testing.T) {
	h := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i, v := range []struct{ key, iv, plaintext, ciphertext []byte }{
		{
			key:        h("000102030405060708090a0b0c0d0e0f"),
			iv:         h("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"),
			plaintext:  make([]byte, 32),
			ciphertext: h("1a8519a6557be652e9da8e43da4ef4453cf456b4ca488aa383c79c98b34797cb"),
		},
		{
			key:        []byte("This is an imple"),
			iv:         []byte("mentation of IGE mode for OpenSS"),
			plaintext:  h("99706487a1cde613bc6de0b6f24b1c7aa448c8b9c3403e3467a8cad89340f53b"),
			ciphertext: []byte("L. Let's hope Ben got it right!\n"),
		},
	} {
		b, err := aes.NewCipher(v.key)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 32)
		newIGE(b, v.iv, false).CryptBlocks(got, v.plaintext)
		if !bytes.Equal(got, v.ciphertext) {
			t.Errorf("vector %d: encrypt = %x, want %x", i, got, v.ciphertext)
		}
		newIGE(b, v.iv, true).CryptBlocks(got, v.ciphertext)
		if !bytes.Equal(got, v.plaintext) {
			t.Errorf("vector %d: decrypt = %x, want %x", i, got, v.plaintext)
		}
		copy(got, v.plaintext)
		newIGE(b, v.iv, false).CryptBlocks(got, got)
		if !bytes.Equal(got, v.ciphertext) {
			t.Errorf("vector %d: in-place encrypt = %x, want %x", i, got, v.ciphertext)
		}
		newIGE(b, v.iv, true).CryptBlocks(got, got)
		if !bytes.Equal(got, v.plaintext) {
			t.Errorf("vector %d: in-place decrypt = %x, want %x", i, got, v.plaintext)
		}
	}
	// newIGE refuses what it cannot run.
	b, _ := aes.NewCipher(make([]byte, 16))
	if !panics(func() { newIGE(b, make([]byte, 16), false) }) {
		t.Error("newIGE with a 16-byte IV did not panic")
	}
}
