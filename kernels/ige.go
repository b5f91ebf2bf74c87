package kernels

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
)

// AES-IGE (Infinite Garble Extension) exists here only so that `cipherd speed`
// can be set beside published `openssl speed aes-256-ige` reports. It is not an
// authenticated mode and never reaches the service's API.
//
// With c₀ and p₀ the two halves of the 32-byte IV:
//
//	encrypt: cᵢ = E(pᵢ ⊕ cᵢ₋₁) ⊕ pᵢ₋₁
//	decrypt: pᵢ = D(cᵢ ⊕ pᵢ₋₁) ⊕ cᵢ₋₁

func init() {
	register(&Implementation{name: "generic", cipher: AES256IGE, priority: 0, available: true, newMode: genericAESIGE})
}

func genericAESIGE(key, iv []byte, decrypt bool) (cipher.BlockMode, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return newIGE(b, iv, decrypt), nil
}

type ige struct {
	b       cipher.Block
	prevC   [16]byte // cᵢ₋₁
	prevP   [16]byte // pᵢ₋₁
	in, t   [16]byte // scratch, kept here so that CryptBlocks does not allocate
	decrypt bool
}

// newIGE returns IGE over a 16-byte block cipher; iv holds c₀ then p₀.
func newIGE(b cipher.Block, iv []byte, decrypt bool) cipher.BlockMode {
	if b.BlockSize() != 16 || len(iv) != 32 {
		panic("kernels: IGE needs a 16-byte block cipher and a 32-byte IV")
	}
	m := &ige{b: b, decrypt: decrypt}
	copy(m.prevC[:], iv[:16])
	copy(m.prevP[:], iv[16:])
	return m
}

func (m *ige) BlockSize() int { return 16 }

func (m *ige) CryptBlocks(dst, src []byte) {
	if len(src)%16 != 0 {
		panic("kernels: IGE input not full blocks")
	}
	if len(dst) < len(src) {
		panic("kernels: IGE output smaller than input")
	}
	dst = dst[:len(src)]
	if inexactOverlap(dst, src) {
		panic("kernels: invalid buffer overlap")
	}
	in, t := &m.in, &m.t
	for len(src) > 0 {
		copy(in[:], src[:16]) // src may alias dst
		if m.decrypt {
			subtle.XORBytes(t[:], in[:], m.prevP[:])
			m.b.Decrypt(t[:], t[:])
			subtle.XORBytes(dst[:16], t[:], m.prevC[:])
			m.prevC = *in
			copy(m.prevP[:], dst[:16])
		} else {
			subtle.XORBytes(t[:], in[:], m.prevC[:])
			m.b.Encrypt(t[:], t[:])
			subtle.XORBytes(dst[:16], t[:], m.prevP[:])
			m.prevP = *in
			copy(m.prevC[:], dst[:16])
		}
		src, dst = src[16:], dst[16:]
	}
}
