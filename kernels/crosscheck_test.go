package kernels

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"math/big"
	"slices"
	"testing"

	"golang.org/x/crypto/chacha20"
)

// Cross-checks between primitives. They need no second implementation of the
// same cipher: each AEAD is rebuilt from its parts (a stream cipher from the
// registry and a MAC computed here from its definition), so they bite even
// while a cipher has only one implementation.

// TestGCMFromParts checks every AES-GCM implementation against GCM's
// definition with a 96-bit nonce (see checkGCMParts).
func TestGCMFromParts(t *testing.T) {
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			for _, n := range crossLengths(r) {
				key, nonce, pt, aad := r.bytes(c.KeySize()), r.bytes(12), r.bytes(n), r.bytes(r.IntN(70))
				checkGCMParts(t, key, nonce, pt, aad, mustAEAD(t, im, key).Seal(nil, nonce, pt, aad))
			}
		})
	}
}

// checkGCMParts checks sealed = AES-GCM(key, nonce, pt, aad) against NIST SP
// 800-38D: the ciphertext is the keystream of every available AES-CTR
// implementation in the registry from counter block nonce‖00000002 XOR the
// plaintext, and the tag is E(K, nonce‖00000001) XOR GHASH(H, A, C) with
// H = E(K, 0¹²⁸), GHASH computed bit by bit here.
func checkGCMParts(t testing.TB, key, nonce, pt, aad, sealed []byte) {
	t.Helper()
	ctrCipher := AES128CTR
	if len(key) == 32 {
		ctrCipher = AES256CTR
	}
	n := len(pt)
	ct, tag := sealed[:n], sealed[n:]
	ctr := make([]byte, 16)
	copy(ctr, nonce)
	ctr[15] = 2
	for _, s := range Available(ctrCipher) {
		ks := make([]byte, n)
		mustStream(t, s, key, ctr).XORKeyStream(ks, pt)
		if !bytes.Equal(ct, ks) {
			t.Fatalf("len %d: ciphertext differs from %s from counter nonce‖00000002", n, s)
		}
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	var h, j0 [16]byte
	b.Encrypt(h[:], h[:])
	copy(j0[:], nonce)
	j0[15] = 1
	b.Encrypt(j0[:], j0[:])
	want := ghash(h, aad, ct)
	for i := range want {
		want[i] ^= j0[i]
	}
	if !bytes.Equal(tag, want[:]) {
		t.Fatalf("len %d, aad %d: tag %x, want E(J0) ⊕ GHASH = %x", n, len(aad), tag, want)
	}
}

// ghash is GHASH_H(A, C) of SP 800-38D, multiplying in GF(2¹²⁸) one bit at a
// time (Algorithm 1): slow, short and independent of any table or
// carry-less-multiply trick a fast implementation uses.
func ghash(h [16]byte, aad, ct []byte) [16]byte {
	hh, hl := binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:])
	var xh, xl uint64
	absorb := func(data []byte) {
		for len(data) > 0 {
			var blk [16]byte
			data = data[copy(blk[:], data):]
			xh ^= binary.BigEndian.Uint64(blk[:8])
			xl ^= binary.BigEndian.Uint64(blk[8:])
			// X = X · H
			var zh, zl uint64
			vh, vl := hh, hl
			for i := range 128 {
				var bit uint64
				if i < 64 {
					bit = xh >> (63 - i) & 1
				} else {
					bit = xl >> (127 - i) & 1
				}
				zh ^= vh & -bit
				zl ^= vl & -bit
				lsb := vl & 1
				vl = vl>>1 | vh<<63
				vh = vh>>1 ^ 0xe1<<56&-lsb
			}
			xh, xl = zh, zl
		}
	}
	absorb(aad)
	absorb(ct)
	var lens [16]byte
	binary.BigEndian.PutUint64(lens[:8], uint64(len(aad))*8)
	binary.BigEndian.PutUint64(lens[8:], uint64(len(ct))*8)
	absorb(lens[:])
	var out [16]byte
	binary.BigEndian.PutUint64(out[:8], xh)
	binary.BigEndian.PutUint64(out[8:], xl)
	return out
}

// TestChaCha20Poly1305FromParts checks every ChaCha20-Poly1305 implementation
// against RFC 8439 (see checkChaChaPolyParts).
func TestChaCha20Poly1305FromParts(t *testing.T) {
	forEachImpl(t, ChaCha20Poly1305, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		for _, n := range crossLengths(r) {
			key, nonce, pt, aad := r.bytes(32), r.bytes(12), r.bytes(n), r.bytes(r.IntN(70))
			checkChaChaPolyParts(t, key, nonce, pt, aad, mustAEAD(t, im, key).Seal(nil, nonce, pt, aad))
		}
	})
}

// checkChaChaPolyParts checks sealed = ChaCha20-Poly1305(key, nonce, pt, aad)
// against RFC 8439 §2.8, built from every available ChaCha20 in the registry
// (IV = LE32(1)‖nonce for the ciphertext, block 0 for the one-time Poly1305
// key) and Poly1305 computed here with math/big. With x/crypto's AEAD (AVX2
// assembly) and ChaCha20 (portable Go) this compares two different code paths.
func checkChaChaPolyParts(t testing.TB, key, nonce, pt, aad, sealed []byte) {
	t.Helper()
	n := len(pt)
	ct, tag := sealed[:n], sealed[n:]
	for _, s := range Available(ChaCha20) {
		ks := make([]byte, n)
		mustStream(t, s, key, chachaIV(1, nonce)).XORKeyStream(ks, pt)
		if !bytes.Equal(ct, ks) {
			t.Fatalf("len %d: ciphertext differs from %s with counter 1", n, s)
		}
		var otk [32]byte
		mustStream(t, s, key, chachaIV(0, nonce)).XORKeyStream(otk[:], otk[:])
		if want := poly1305ByDefinition(otk, poly1305Input(aad, ct)); !bytes.Equal(tag, want) {
			t.Fatalf("len %d, aad %d: tag differs from Poly1305 keyed by %s block 0", n, len(aad), s)
		}
	}
}

// chachaIV returns OpenSSL's ChaCha20 IV: the block counter, little-endian,
// then the 96-bit nonce.
func chachaIV(counter uint32, nonce []byte) []byte {
	return append(binary.LittleEndian.AppendUint32(make([]byte, 0, 16), counter), nonce...)
}

// poly1305Input is RFC 8439's MAC input: the additional data and the
// ciphertext, each zero-padded to 16 bytes, then both lengths, little-endian.
func poly1305Input(aad, ct []byte) []byte {
	pad := func(b []byte) []byte { return make([]byte, (16-len(b)%16)%16) }
	m := slices.Concat(aad, pad(aad), ct, pad(ct))
	m = binary.LittleEndian.AppendUint64(m, uint64(len(aad)))
	return binary.LittleEndian.AppendUint64(m, uint64(len(ct)))
}

// poly1305ByDefinition is Poly1305 as RFC 8439 §2.5 defines it, with math/big:
// each 16-byte chunk, with a 1 byte appended and read little-endian, is added to
// the accumulator, which is then multiplied by the clamped r modulo 2¹³⁰−5;
// the tag is the accumulator plus s, modulo 2¹²⁸.
func poly1305ByDefinition(key [32]byte, msg []byte) []byte {
	le := func(b []byte) *big.Int { // little-endian bytes to an integer
		be := slices.Clone(b)
		slices.Reverse(be)
		return new(big.Int).SetBytes(be)
	}
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 130), big.NewInt(5))
	r := le(key[:16])
	r.And(r, le(unhex("ffffff0ffcffff0ffcffff0ffcffff0f")))
	acc := new(big.Int)
	for len(msg) > 0 {
		n := min(16, len(msg))
		acc.Add(acc, le(append(slices.Clone(msg[:n]), 1)))
		acc.Mul(acc, r)
		acc.Mod(acc, p)
		msg = msg[n:]
	}
	acc.Add(acc, le(key[16:]))
	tag := acc.FillBytes(make([]byte, 17))[1:] // acc < 2¹³¹; keep the low 128 bits
	slices.Reverse(tag)
	return tag
}

// TestXChaCha20Poly1305FromParts checks every XChaCha20-Poly1305
// implementation against draft-irtf-cfrg-xchacha (see checkXChaChaParts).
func TestXChaCha20Poly1305FromParts(t *testing.T) {
	forEachImpl(t, XChaCha20Poly1305, func(t *testing.T, im *Implementation) {
		r := newRand(t)
		for _, n := range crossLengths(r) {
			key, nonce, pt, aad := r.bytes(32), r.bytes(24), r.bytes(n), r.bytes(r.IntN(70))
			checkXChaChaParts(t, key, nonce, pt, aad, mustAEAD(t, im, key).Seal(nil, nonce, pt, aad))
		}
	})
}

// checkXChaChaParts checks sealed = XChaCha20-Poly1305(key, nonce, pt, aad)
// against draft-irtf-cfrg-xchacha §2.3: ChaCha20-Poly1305 (every available
// implementation) under the subkey HChaCha20(key, nonce[:16]) (x/crypto's)
// with nonce 00000000‖nonce[16:24] must seal to the same bytes and open them.
func checkXChaChaParts(t testing.TB, key, nonce, pt, aad, sealed []byte) {
	t.Helper()
	subkey, err := chacha20.HChaCha20(key, nonce[:16])
	if err != nil {
		t.Fatal(err)
	}
	n2 := append(make([]byte, 4, 12), nonce[16:]...)
	for _, c := range Available(ChaCha20Poly1305) {
		a := mustAEAD(t, c, subkey)
		if want := a.Seal(nil, n2, pt, aad); !bytes.Equal(sealed, want) {
			t.Fatalf("len %d: Seal differs from %s under the HChaCha20 subkey", len(pt), c)
		}
		if got, err := a.Open(nil, n2, sealed, aad); err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("len %d: %s under the HChaCha20 subkey does not open it: %v", len(pt), c, err)
		}
	}
}

// checkAEADParts runs the cross-check for c's construction.
func checkAEADParts(t testing.TB, c Cipher, key, nonce, pt, aad, sealed []byte) {
	t.Helper()
	switch c {
	case AES128GCM, AES256GCM:
		checkGCMParts(t, key, nonce, pt, aad, sealed)
	case ChaCha20Poly1305:
		checkChaChaPolyParts(t, key, nonce, pt, aad, sealed)
	case XChaCha20Poly1305:
		checkXChaChaParts(t, key, nonce, pt, aad, sealed)
	default:
		t.Fatalf("%s: no cross-check", c)
	}
}

// crossLengths returns the lengths the cross-checks run: all of 0…520, or a
// random third of them under -short or the race detector, and the long ones.
func crossLengths(r testRand) []int {
	thorough := iterations(3) == 3
	var ls []int
	for _, n := range diffLengths() {
		if n > 520 || thorough || r.IntN(3) == 0 {
			ls = append(ls, n)
		}
	}
	return ls
}

// TestCTRCounterWrap checks that AES-CTR increments the whole 128-bit
// big-endian counter block, as OpenSSL's EVP AES-CTR and crypto/cipher do:
// across the 32-bit, 64-bit and 128-bit boundaries, with the wrap falling on
// every block of an 8-block batch, in one call and in pieces. The expected
// keystream is computed here block by block with crypto/aes.
func TestCTRCounterWrap(t *testing.T) {
	for _, c := range []Cipher{AES128CTR, AES256CTR} {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			key := r.bytes(c.KeySize())
			b, err := aes.NewCipher(key)
			if err != nil {
				t.Fatal(err)
			}
			for _, ones := range []int{4, 8, 16} { // low bytes of the IV set to ff
				for k := range 10 { // the wrap happens after k+1 blocks
					iv := r.bytes(16)
					for i := 16 - ones; i < 16; i++ {
						iv[i] = 0xff
					}
					iv[15] -= byte(k)
					n := 16*20 + 5
					src := r.bytes(n)
					want := ctrByDefinition(b, iv, src)

					got := make([]byte, n)
					mustStream(t, im, key, iv).XORKeyStream(got, src)
					if !bytes.Equal(got, want) {
						t.Fatalf("IV %x: keystream differs from the 128-bit counter's", iv)
					}
					s, off := mustStream(t, im, key, iv), 0
					clear(got)
					for _, m := range r.chunks(n, 1) {
						s.XORKeyStream(got[off:off+m], src[off:off+m])
						off += m
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("IV %x: chunked keystream differs from the 128-bit counter's", iv)
					}
				}
			}
		})
	}
}

// ctrByDefinition encrypts src in CTR mode one block at a time.
func ctrByDefinition(b cipher.Block, iv, src []byte) []byte {
	ctr := bytes.Clone(iv)
	out := make([]byte, len(src))
	var ks [16]byte
	for i := 0; i < len(src); i += 16 {
		b.Encrypt(ks[:], ctr)
		for j := i; j < len(src) && j < i+16; j++ {
			out[j] = src[j] ^ ks[j-i]
		}
		for j := 15; j >= 0; j-- {
			ctr[j]++
			if ctr[j] != 0 {
				break
			}
		}
	}
	return out
}
