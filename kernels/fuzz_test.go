package kernels

import (
	"bytes"
	"crypto/aes"
	"math/rand/v2"
	"testing"
)

// Native fuzz targets, one per kind. The first argument picks the cipher (modulo
// the number of ciphers of the kind); keys, nonces and IVs are cut or
// zero-padded to size. Every target compares every available implementation
// with the reference and checks the kind's own relations. Under plain
// `go test` only the seeds run.

// fit returns b cut or zero-padded to n bytes.
func fit(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}

// maxFuzzLen bounds the message length so that one input stays fast.
const maxFuzzLen = 1 << 16

func FuzzAEAD(f *testing.F) {
	aeads := ciphersOf(KindAEAD)
	for i := range aeads {
		sel := uint8(i)
		f.Add(sel, []byte{}, []byte{}, []byte{}, []byte{}, uint16(0))
		f.Add(sel, []byte("0123456789abcdef0123456789abcdef"), []byte("nonce-nonce-nonce-nonce-"), []byte("additional data"), []byte("plaintext"), uint16(3))
		f.Add(sel, bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 24), []byte{}, make([]byte, 16), uint16(130))
		f.Add(sel, []byte{1}, []byte{2}, make([]byte, 17), make([]byte, 255), uint16(2000))
		f.Add(sel, []byte{7, 7, 7}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, bytes.Repeat([]byte("a"), 64), bytes.Repeat([]byte("p"), 513), uint16(65535))
	}
	f.Fuzz(func(t *testing.T, sel uint8, key, nonce, aad, pt []byte, flip uint16) {
		if len(pt) > maxFuzzLen || len(aad) > maxFuzzLen {
			t.Skip()
		}
		c := aeads[int(sel)%len(aeads)]
		key, nonce = fit(key, c.KeySize()), fit(nonce, c.IVSize())
		want := mustAEAD(t, reference(t, c), key).Seal(nil, nonce, pt, aad)
		checkAEADParts(t, c, key, nonce, pt, aad, want)

		bad := bytes.Clone(want)
		bit := int(flip) % (8 * len(bad))
		bad[bit/8] ^= 1 << (bit % 8)
		for _, im := range Available(c) {
			a := mustAEAD(t, im, key)
			got := a.Seal(nil, nonce, pt, aad)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: Seal differs from the reference", im)
			}
			opened, err := a.Open(nil, nonce, got, aad)
			if err != nil || !bytes.Equal(opened, pt) {
				t.Fatalf("%s: Open(Seal(x)) = %v; want x", im, err)
			}
			if opened, err := a.Open(nil, nonce, bad, aad); err == nil || opened != nil {
				t.Fatalf("%s: Open accepted the message with bit %d flipped", im, bit)
			}
		}
	})
}

func FuzzStream(f *testing.F) {
	streams := ciphersOf(KindStream)
	for i := range streams {
		sel := uint8(i)
		f.Add(sel, []byte{}, []byte{}, []byte{}, uint64(0))
		f.Add(sel, []byte("0123456789abcdef0123456789abcdef"), []byte("0123456789abcdef"), []byte("some data"), uint64(1))
		f.Add(sel, []byte{9}, bytes.Repeat([]byte{0xff}, 16), make([]byte, 16*9+1), uint64(2))
		f.Add(sel, []byte{1, 2, 3}, []byte{0xff, 0xff, 0xff, 0x7f, 1}, make([]byte, 1000), uint64(3))
	}
	f.Fuzz(func(t *testing.T, sel uint8, key, iv, src []byte, seed uint64) {
		if len(src) > maxFuzzLen {
			t.Skip()
		}
		c := streams[int(sel)%len(streams)]
		key, iv = fit(key, c.KeySize()), fit(iv, c.IVSize())
		safeChaChaCounter(c, iv)
		want := make([]byte, len(src))
		mustStream(t, reference(t, c), key, iv).XORKeyStream(want, src)
		if c == AES128CTR || c == AES256CTR {
			b, err := aes.NewCipher(key)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, ctrByDefinition(b, iv, src)) {
				t.Fatalf("reference differs from CTR by definition")
			}
		}
		r := rand.New(rand.NewPCG(seed, 0))
		for _, im := range Available(c) {
			got := make([]byte, len(src))
			mustStream(t, im, key, iv).XORKeyStream(got, src)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: XORKeyStream differs from the reference", im)
			}
			buf := bytes.Clone(src)
			s, off := mustStream(t, im, key, iv), 0
			for off < len(buf) {
				k := min(r.IntN(200), len(buf)-off)
				s.XORKeyStream(buf[off:off+k], buf[off:off+k])
				off += k
			}
			if !bytes.Equal(buf, want) {
				t.Fatalf("%s: chunked in-place XORKeyStream differs from the reference", im)
			}
		}
	})
}

func FuzzBlockMode(f *testing.F) {
	modes := ciphersOf(KindBlockMode)
	for i := range modes {
		sel := uint8(i)
		f.Add(sel, []byte{}, []byte{}, []byte{}, uint64(0))
		f.Add(sel, []byte("0123456789abcdef0123456789abcdef"), []byte("0123456789abcdef0123456789abcdef"), make([]byte, 64), uint64(1))
		f.Add(sel, []byte{5}, bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte("block"), 100), uint64(2))
	}
	f.Fuzz(func(t *testing.T, sel uint8, key, iv, data []byte, seed uint64) {
		if len(data) > maxFuzzLen {
			t.Skip()
		}
		c := modes[int(sel)%len(modes)]
		key, iv = fit(key, c.KeySize()), fit(iv, c.IVSize())
		data = data[:len(data)&^15]
		ref := reference(t, c)
		ct := make([]byte, len(data))
		mustMode(t, ref, key, iv, false).CryptBlocks(ct, data)
		if !bytes.Equal(ct, encryptByDefinition(t, c, key, iv, data)) {
			t.Fatalf("reference differs from %s by definition", c)
		}
		pt := make([]byte, len(data)) // data taken as a ciphertext
		mustMode(t, ref, key, iv, true).CryptBlocks(pt, data)

		r := rand.New(rand.NewPCG(seed, 0))
		for _, im := range Available(c) {
			for _, tc := range []struct {
				decrypt   bool
				src, want []byte
			}{{false, data, ct}, {true, ct, data}, {true, data, pt}} {
				got := make([]byte, len(tc.src))
				mustMode(t, im, key, iv, tc.decrypt).CryptBlocks(got, tc.src)
				if !bytes.Equal(got, tc.want) {
					t.Fatalf("%s decrypt=%v: CryptBlocks differs from the reference", im, tc.decrypt)
				}
				buf := bytes.Clone(tc.src)
				m, off := mustMode(t, im, key, iv, tc.decrypt), 0
				for off < len(buf) {
					k := min(16*r.IntN(10), len(buf)-off)
					m.CryptBlocks(buf[off:off+k], buf[off:off+k])
					off += k
				}
				if !bytes.Equal(buf, tc.want) {
					t.Fatalf("%s decrypt=%v: chunked in-place CryptBlocks differs from the reference", im, tc.decrypt)
				}
			}
		}
	})
}
