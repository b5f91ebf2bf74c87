//go:build amd64 && gc && !purego

package kernels

import (
	"encoding/binary"
	"math/bits"
)

// poly1305MAC is Poly1305 (RFC 8439 §2.5) over the kernels of
// poly1305_amd64.s: 64-bit limbs with MULX one block at a time, and, when
// ifma is set, AVX-512 IFMA eight blocks per step (one 8-lane accumulator)
// for long inputs.
//
// ChaCha20-Poly1305 feeds it whole blocks (blocks, padded); update and
// sum also take any split of a message, as a plain MAC does. It is a value
// type meant to live on the caller's stack: its key is used for one message.
type poly1305MAC struct {
	st     [5]uint64 // h0, h1, h2 (accumulator, h2 < 8), r0, r1 (clamped)
	s      [2]uint64 // added to the accumulator at the end
	powers bool      // the caller's table holds r's powers
	n      int       // bytes buffered in buf by update
	buf    [16]byte
}

// poly1305Powers is the table of powers of r poly1305BlocksIFMA multiplies
// by. The methods that absorb input take it as an argument, nil for MULX
// alone: kept apart from poly1305MAC (and not pointed to from it, which
// would move it to the heap), it costs a caller that will not use IFMA, such
// as a short message, nothing to clear.
type poly1305Powers [80]uint64

// poly1305IFMAMin is the shortest input the IFMA kernel takes: below it,
// computing r's powers and summing the lanes cost more than they save.
const poly1305IFMAMin = 256

// poly1305MULXFuncs and poly1305IFMAFuncs are the assembly functions behind
// poly1305MAC without and with ifma, for the asmFuncs of implementations.
var (
	poly1305MULXFuncs = []string{"poly1305BlocksMULX"}
	poly1305IFMAFuncs = []string{"poly1305BlocksMULX", "poly1305PowersIFMA", "poly1305PowersMULX", "poly1305BlocksIFMA"}
)

// init keys the MAC: r is key[:16] clamped, s is key[16:].
func (m *poly1305MAC) init(key *[32]byte) {
	m.st = [5]uint64{
		3: binary.LittleEndian.Uint64(key[0:8]) & 0x0ffffffc0fffffff,
		4: binary.LittleEndian.Uint64(key[8:16]) & 0x0ffffffc0ffffffc,
	}
	m.s = [2]uint64{binary.LittleEndian.Uint64(key[16:24]), binary.LittleEndian.Uint64(key[24:32])}
	m.powers, m.n = false, 0
}

// blocks absorbs the whole 16-byte blocks of p and ignores the rest. With
// a non-nil tbl, inputs of poly1305IFMAMin bytes or more go through the IFMA
// kernel, with r's powers in tbl (written on first use; the same tbl for
// every call on one key).
func (m *poly1305MAC) blocks(p []byte, tbl *poly1305Powers) {
	if tbl != nil && len(p) >= poly1305IFMAMin {
		k := len(p) &^ 127
		poly1305BlocksIFMA(&m.st, m.powersTable(tbl), p[:k])
		p = p[k:]
	}
	if len(p) >= 16 {
		poly1305BlocksMULX(&m.st, p, 1)
	}
}

// powersTable returns tbl for the IFMA kernels, with r's powers written to
// it on first use (the same tbl for every call on one key).
func (m *poly1305MAC) powersTable(tbl *poly1305Powers) *[80]uint64 {
	if !m.powers {
		poly1305PowersIFMA(&m.st, (*[80]uint64)(tbl))
		m.powers = true
	}
	return (*[80]uint64)(tbl)
}

// padded absorbs p zero-padded to a multiple of 16 bytes, as RFC 8439 §2.8
// pads the additional data and the ciphertext.
func (m *poly1305MAC) padded(p []byte, tbl *poly1305Powers) {
	m.blocks(p, tbl)
	if r := len(p) % 16; r != 0 {
		var b [16]byte
		copy(b[:], p[len(p)-r:])
		poly1305BlocksMULX(&m.st, b[:], 1)
	}
}

// lengths absorbs the block of both lengths, little-endian, that ends
// ChaCha20-Poly1305's MAC input.
func (m *poly1305MAC) lengths(aad, ct int) {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(aad))
	binary.LittleEndian.PutUint64(b[8:], uint64(ct))
	poly1305BlocksMULX(&m.st, b[:], 1)
}

// update absorbs p, which may end inside a block: the remainder waits in buf.
func (m *poly1305MAC) update(p []byte, tbl *poly1305Powers) {
	if m.n > 0 {
		k := copy(m.buf[m.n:], p)
		m.n += k
		p = p[k:]
		if m.n < 16 {
			return
		}
		poly1305BlocksMULX(&m.st, m.buf[:], 1)
		m.n = 0
	}
	m.blocks(p, tbl)
	m.n = copy(m.buf[:], p[len(p)&^15:])
}

// sum writes the tag: a final partial block from update is padded with a 1
// byte and zeros and absorbed without 2¹²⁸; then h is reduced modulo
// 2¹³⁰−5, in constant time, and s added modulo 2¹²⁸.
func (m *poly1305MAC) sum(out *[16]byte) {
	if m.n > 0 {
		var b [16]byte
		copy(b[:], m.buf[:m.n])
		b[m.n] = 1
		poly1305BlocksMULX(&m.st, b[:], 0)
		m.n = 0
	}
	h0, h1, h2 := m.st[0], m.st[1], m.st[2]
	// h < 2¹³¹−10 = 2p, so one conditional subtraction of p reduces it:
	// h − p = h + 5 − 2¹³⁰, taken when h + 5 reaches 2¹³⁰.
	t0, c := bits.Add64(h0, 5, 0)
	t1, c := bits.Add64(h1, 0, c)
	t2 := h2 + c
	use := -(t2 >> 2)
	h0 = h0&^use | t0&use
	h1 = h1&^use | t1&use
	h0, c = bits.Add64(h0, m.s[0], 0)
	h1, _ = bits.Add64(h1, m.s[1], c)
	binary.LittleEndian.PutUint64(out[:8], h0)
	binary.LittleEndian.PutUint64(out[8:], h1)
}

// wipe clears the key material, the accumulator and tbl if it was used.
func (m *poly1305MAC) wipe(tbl *poly1305Powers) {
	clear(m.st[:])
	clear(m.s[:])
	if m.powers {
		clear(tbl[:])
		m.powers = false
	}
	clear(m.buf[:])
}
