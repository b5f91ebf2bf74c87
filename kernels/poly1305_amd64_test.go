//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"
	"testing"

	//lint:ignore SA1019 deprecated for general use; here it is the reference the kernels are checked against.
	"golang.org/x/crypto/poly1305"
)

// poly1305Variants are the kernel choices of poly1305MAC this host can run:
// MULX alone, and MULX with IFMA for long inputs.
func poly1305Variants(t testing.TB) []bool {
	t.Helper()
	if !cpuHas("BMI2") {
		t.Skip("no BMI2: the Poly1305 kernels cannot run")
	}
	v := []bool{false}
	if cpuHas("AVX512F", "AVX512IFMA") {
		v = append(v, true)
	}
	return v
}

// powersFor returns a table for the IFMA kernel, or nil for MULX alone.
func powersFor(ifma bool) *poly1305Powers {
	if ifma {
		return new(poly1305Powers)
	}
	return nil
}

func poly1305Name(ifma bool) string {
	if ifma {
		return "ifma"
	}
	return "mulx"
}

// poly1305Tag runs poly1305MAC over msg in the given pieces.
func poly1305Tag(key *[32]byte, msg []byte, pieces []int, ifma bool) [16]byte {
	var m poly1305MAC
	m.init(key)
	tbl := powersFor(ifma)
	for _, k := range pieces {
		m.update(msg[:k], tbl)
		msg = msg[k:]
	}
	m.update(msg, tbl)
	var tag [16]byte
	m.sum(&tag)
	return tag
}

// Every length 0…2000 (every residue of the 8-block IFMA loop and of the
// 16-byte block, on both sides of the IFMA threshold), in one call and in
// random pieces, against x/crypto.
func TestPoly1305AgainstXCrypto(t *testing.T) {
	for _, ifma := range poly1305Variants(t) {
		t.Run(poly1305Name(ifma), func(t *testing.T) {
			r := newRand(t)
			for n := 0; n <= 2000; n++ {
				var key [32]byte
				copy(key[:], r.bytes(32))
				msg := r.bytes(n)
				var want [16]byte
				poly1305.Sum(&want, msg, &key)
				if got := poly1305Tag(&key, msg, nil, ifma); got != want {
					t.Fatalf("len %d: tag %x, x/crypto %x", n, got, want)
				}
				pieces := r.chunks(n, 1)
				if got := poly1305Tag(&key, msg, pieces, ifma); got != want {
					t.Fatalf("len %d in pieces %v: tag %x, x/crypto %x", n, pieces, got, want)
				}
			}
		})
	}
}

// RFC 8439 §2.5.2.
func TestPoly1305RFC8439(t *testing.T) {
	key := (*[32]byte)(unhex("85d6be7857556d337f4452fe42d506a80103808afb0db2fd4abff6af4149f51b"))
	msg := []byte("Cryptographic Forum Research Group")
	want := unhex("a8061dc1305136c6c22b8baf0c0127a9")
	for _, ifma := range poly1305Variants(t) {
		if got := poly1305Tag(key, msg, nil, ifma); !bytes.Equal(got[:], want) {
			t.Errorf("%s: tag %x, want %x", poly1305Name(ifma), got, want)
		}
	}
}

// Values at the edges of the arithmetic: all-ones keys (largest r and s),
// all-ones messages (the accumulator near its bound before each multiply),
// zero keys and messages, and messages that drive h to p = 2¹³⁰−5 and just
// past it, so that the final conditional subtraction is exercised both ways.
func TestPoly1305Edges(t *testing.T) {
	keys := map[string][32]byte{}
	var k [32]byte
	keys["zero"] = k
	for i := range k {
		k[i] = 0xff
	}
	keys["ones"] = k
	copy(k[16:], make([]byte, 16))
	keys["ones-r"] = k
	k = [32]byte{}
	k[0] = 1 // r = 1: the tag is the sum of the blocks mod p, plus s
	keys["r=1"] = k
	for i := 16; i < 32; i++ {
		k[i] = 0xff
	}
	keys["r=1,s=ones"] = k

	msgs := map[string][]byte{}
	lengths := []int{0, 1, 15, 16, 17, 127, 128, 129, 255, 256, 257, 383, 384, 1023, 1024, 1025, 4096, 4111}
	for _, n := range lengths {
		msgs[fmt.Sprintf("ones/%d", n)] = bytes.Repeat([]byte{0xff}, n)
		msgs[fmt.Sprintf("zeros/%d", n)] = make([]byte, n)
	}
	// With r = 1 a single full block m gives h = m + 2¹²⁸: blocks ending
	// in 03 ff…ff bring it to 2¹³⁰−1, 2¹³⁰−5 and thereabouts.
	for _, low := range []byte{0xf9, 0xfa, 0xfb, 0xfc, 0xff} {
		b := bytes.Repeat([]byte{0xff}, 16)
		b[0] = low
		msgs[fmt.Sprintf("near-p/%02x", low)] = b
	}
	for _, ifma := range poly1305Variants(t) {
		for kn, key := range keys {
			for mn, msg := range msgs {
				var want [16]byte
				poly1305.Sum(&want, msg, &key)
				if got := poly1305Tag(&key, msg, nil, ifma); got != want {
					t.Errorf("%s: key %s, msg %s: tag %x, x/crypto %x", poly1305Name(ifma), kn, mn, got, want)
				}
				// The first 3 blocks through MULX, so that the IFMA kernel
				// starts from a large accumulator (l2 up to 2⁴³, the bound
				// mulReduce's proof assumes).
				if len(msg) > 48 {
					if got := poly1305Tag(&key, msg, []int{48}, ifma); got != want {
						t.Errorf("%s: key %s, msg %s in pieces 48, rest: tag %x, x/crypto %x", poly1305Name(ifma), kn, mn, got, want)
					}
				}
				if got := [16]byte(poly1305ByDefinition(key, msg)); got != want {
					t.Errorf("key %s, msg %s: x/crypto differs from the definition", kn, mn)
				}
			}
		}
	}
}

// The AEAD entry points: blocks, padded and lengths compose to the RFC 8439
// MAC input, checked against the definition.
func TestPoly1305Padded(t *testing.T) {
	for _, ifma := range poly1305Variants(t) {
		r := newRand(t)
		for _, n := range []int{0, 1, 16, 31, 255, 256, 257, 1000, 4099} {
			var key [32]byte
			copy(key[:], r.bytes(32))
			aad, ct := r.bytes(r.IntN(300)), r.bytes(n)
			var m poly1305MAC
			m.init(&key)
			tbl := powersFor(ifma)
			m.padded(aad, tbl)
			m.padded(ct, tbl)
			m.lengths(len(aad), len(ct))
			var got [16]byte
			m.sum(&got)
			if want := poly1305ByDefinition(key, poly1305Input(aad, ct)); !bytes.Equal(got[:], want) {
				t.Fatalf("%s: aad %d, ct %d: tag differs from the definition", poly1305Name(ifma), len(aad), n)
			}
		}
	}
}

func FuzzPoly1305AgainstXCrypto(f *testing.F) {
	f.Add([]byte{}, []byte{}, uint64(0))
	f.Add(bytes.Repeat([]byte{0xff}, 32), bytes.Repeat([]byte{0xff}, 1024), uint64(1))
	f.Add([]byte("0123456789abcdef0123456789abcdef"), bytes.Repeat([]byte("m"), 383), uint64(2))
	f.Fuzz(func(t *testing.T, key, msg []byte, seed uint64) {
		if len(msg) > maxFuzzLen {
			t.Skip()
		}
		k := [32]byte(fit(key, 32))
		var want [16]byte
		poly1305.Sum(&want, msg, &k)
		// Split msg at points taken from seed.
		var pieces []int
		for s, rest := seed, len(msg); s != 0 && rest > 0; s >>= 8 {
			p := int(s&0xff) * 7 % (rest + 1)
			pieces = append(pieces, p)
			rest -= p
		}
		for _, ifma := range poly1305Variants(t) {
			if got := poly1305Tag(&k, msg, nil, ifma); got != want {
				t.Fatalf("%s: tag %x, x/crypto %x", poly1305Name(ifma), got, want)
			}
			if got := poly1305Tag(&k, msg, pieces, ifma); got != want {
				t.Fatalf("%s in pieces %v: tag %x, x/crypto %x", poly1305Name(ifma), pieces, got, want)
			}
		}
	})
}

// BenchmarkPoly1305 is a whole MAC per operation (key, message, tag), for
// x/crypto and for poly1305MAC with MULX alone and with IFMA; it reports the
// fastest burst as well (see BenchmarkChaCha20Poly1305Fastest).
func BenchmarkPoly1305(b *testing.B) {
	var key [32]byte
	for _, size := range benchSizes {
		msg := make([]byte, size)
		b.Run(fmt.Sprintf("xcrypto/%d", size), func(b *testing.B) {
			b.SetBytes(int64(size))
			var tag [16]byte
			loopFastest(b, func() { poly1305.Sum(&tag, msg, &key) })
		})
		for _, ifma := range poly1305Variants(b) {
			b.Run(fmt.Sprintf("%s/%d", poly1305Name(ifma), size), func(b *testing.B) {
				b.SetBytes(int64(size))
				var tag [16]byte
				tbl := powersFor(ifma)
				loopFastest(b, func() {
					var m poly1305MAC
					m.init(&key)
					m.update(msg, tbl)
					m.sum(&tag)
				})
			})
		}
	}
}

// checkPowers checks the multipliers in tbl against r by definition: the
// five rows of each (l0, l1, l2, 20·l1, 20·l2 in radix 2⁴⁴) hold, lane by
// lane, a power of r mod 2¹³⁰−5 within the limb bounds the IFMA steps'
// proof assumes (l0 < 2⁴⁴, l1 < 2⁴⁴+2⁷, l2 < 2⁴²). exps[m][j] is the power
// that lane j of multiplier m must hold.
func checkPowers(t *testing.T, name string, tbl []uint64, r *big.Int, exps [][8]int) {
	t.Helper()
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 130), big.NewInt(5))
	for m, lanes := range exps {
		for j, e := range lanes {
			l := func(i int) uint64 { return tbl[40*m+8*i+j] }
			if l(0) >= 1<<44 || l(1) >= 1<<44+1<<7 || l(2) >= 1<<42 {
				t.Fatalf("%s: multiplier %d lane %d: limbs %#x %#x %#x out of bounds", name, m, j, l(0), l(1), l(2))
			}
			if l(3) != 20*l(1) || l(4) != 20*l(2) {
				t.Fatalf("%s: multiplier %d lane %d: 20× limbs %#x %#x, want %#x %#x", name, m, j, l(3), l(4), 20*l(1), 20*l(2))
			}
			v := new(big.Int).SetUint64(l(2))
			v.Lsh(v, 44).Add(v, new(big.Int).SetUint64(l(1)))
			v.Lsh(v, 44).Add(v, new(big.Int).SetUint64(l(0)))
			want := new(big.Int).Exp(r, big.NewInt(int64(e)), p)
			if v.Mod(v, p).Cmp(want) != 0 {
				t.Fatalf("%s: multiplier %d lane %d: not r^%d", name, m, j, e)
			}
		}
	}
}

// poly1305TableExps are the powers poly1305PowersIFMA writes: r⁸ r⁴ r⁷ r³
// r⁶ r² r⁵ r¹ by lane, then r⁸ in every lane.
var poly1305TableExps = [][8]int{{8, 4, 7, 3, 6, 2, 5, 1}, {8, 8, 8, 8, 8, 8, 8, 8}}

// clampedR is r = key[:16] clamped, as an integer.
func clampedR(key []byte) *big.Int {
	lo := binary.LittleEndian.Uint64(key[0:]) & 0x0ffffffc0fffffff
	hi := binary.LittleEndian.Uint64(key[8:]) & 0x0ffffffc0ffffffc
	r := new(big.Int).SetUint64(hi)
	return r.Lsh(r, 64).Or(r, new(big.Int).SetUint64(lo))
}

// Both kernels that write the table, poly1305PowersIFMA and
// poly1305PowersMULX, for the largest clamped r, small ones and random
// ones.
func TestPoly1305Powers(t *testing.T) {
	if !cpuHas("BMI2", "AVX512F", "AVX512IFMA") {
		t.Skip("no IFMA: the tables are not used")
	}
	r := newRand(t)
	keys := [][]byte{bytes.Repeat([]byte{0xff}, 32), make([]byte, 32), append([]byte{1}, make([]byte, 31)...), append([]byte{2}, make([]byte, 31)...)}
	for range 200 {
		keys = append(keys, r.bytes(32))
	}
	for _, key := range keys {
		var m poly1305MAC
		m.init((*[32]byte)(key))
		for _, k := range []struct {
			name   string
			kernel func(*[5]uint64, *[80]uint64)
		}{{"ifma", poly1305PowersIFMA}, {"mulx", poly1305PowersMULX}} {
			var tbl [80]uint64
			k.kernel(&m.st, &tbl)
			checkPowers(t, fmt.Sprintf("%s, key %x", k.name, key), tbl[:], clampedR(key), poly1305TableExps)
		}
	}
}
