//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// TestGCMAsmCounterWrap drives the assembly with pre-counter blocks
// whose 32-bit counter is about to wrap, which a 96-bit nonce never gives
// (it starts at 2 and stops at 2^32-1), and checks the result against SP
// 800-38D's definition: the counter after J0 is inc32, which wraps to zero
// and leaves the nonce alone, and the tag is E(K, J0) ⊕ GHASH(H, A, C). The
// wrap falls on every block of a 4-block vector, in the 16-block loop and in
// the tail. Starting counters with every last byte put the carries out of
// the counter's last byte at every place of the main loops.
func TestGCMAsmCounterWrap(t *testing.T) {
	forEachGCMAsm(t, []string{"vaes512", "vaes256"}, testGCMAsmCounterWrap)
}

// forEachGCMAsm runs f for AES-128-GCM and AES-256-GCM with each of the
// named assembly implementations, skipping those the host cannot run.
func forEachGCMAsm(t *testing.T, names []string, f func(t *testing.T, c Cipher, im *Implementation)) {
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		for _, name := range names {
			im, err := Lookup(c, name)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(im.String(), func(t *testing.T) {
				if !im.Available() {
					t.Skipf("%s is not available on this host", im)
				}
				f(t, c, im)
			})
		}
	}
}

func testGCMAsmCounterWrap(t *testing.T, c Cipher, im *Implementation) {
	{
		r := newRand(t)
		key := r.bytes(c.KeySize())
		g := mustAEAD(t, im, key).(*gcmAsm)
		// The whole table, so that each message can go either way
		// through the main loops: two blocks per reduction or one.
		if g.zmm {
			g.prepare(gcmGroupMin)
		}
		groups := false
		type table = *gcmTable
		aadFn := func(t table, acc *[16]byte, aad []byte) { gcmAADVAES512(t, acc, aad) }
		seal := func(rk *[15][16]byte, rounds int, t table, acc *[16]byte, dst, src []byte, nonce *[12]byte, ctr uint32, aadLen int, tag *[16]byte) {
			gcmSealVAES512(rk, rounds, t, acc, dst, src, nonce, ctr, aadLen, tag, groups)
		}
		open := func(rk *[15][16]byte, rounds int, t table, acc *[16]byte, dst, src []byte, nonce *[12]byte, ctr uint32, aadLen int, tag *[16]byte) {
			gcmOpenVAES512(rk, rounds, t, acc, dst, src, nonce, ctr, aadLen, tag, groups)
		}
		if !g.zmm {
			aadFn = func(t table, acc *[16]byte, aad []byte) { gcmAADVAES256(table256(t), acc, aad) }
			seal = func(rk *[15][16]byte, rounds int, t table, acc *[16]byte, dst, src []byte, nonce *[12]byte, ctr uint32, aadLen int, tag *[16]byte) {
				gcmSealVAES256(rk, rounds, table256(t), acc, dst, src, nonce, ctr, aadLen, tag)
			}
			open = func(rk *[15][16]byte, rounds int, t table, acc *[16]byte, dst, src []byte, nonce *[12]byte, ctr uint32, aadLen int, tag *[16]byte) {
				gcmOpenVAES256(rk, rounds, table256(t), acc, dst, src, nonce, ctr, aadLen, tag)
			}
		}
		b, err := aes.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		var h [16]byte
		b.Encrypt(h[:], h[:])
		check := func(n int, ctr uint32) {
			for _, groups = range []bool{false, true} {
				var nonce [12]byte
				copy(nonce[:], r.bytes(12))
				pt, aad := r.bytes(n), r.bytes(r.IntN(40))
				var j0 [16]byte
				copy(j0[:], nonce[:])
				binary.BigEndian.PutUint32(j0[12:], ctr)
				wantCT := ctr32ByDefinition(b, j0, pt)
				wantTag := ghash(h, aad, wantCT)
				b.Encrypt(j0[:], j0[:])
				for i := range wantTag {
					wantTag[i] ^= j0[i]
				}

				var acc, tag [16]byte
				aadFn(g.table(), &acc, aad)
				accAAD := acc
				ct := make([]byte, n)
				seal(&g.rk, g.rounds, g.table(), &acc, ct, pt, &nonce, ctr, len(aad), &tag)
				if !bytes.Equal(ct, wantCT) {
					t.Fatalf("%s n=%d counter %#x groups %v: ciphertext differs from inc32 CTR", c, n, ctr, groups)
				}
				if tag != wantTag {
					t.Fatalf("%s n=%d counter %#x groups %v: tag %x, want %x", c, n, ctr, groups, tag, wantTag)
				}
				acc, tag = accAAD, [16]byte{}
				got := make([]byte, n)
				open(&g.rk, g.rounds, g.table(), &acc, got, ct, &nonce, ctr, len(aad), &tag)
				if !bytes.Equal(got, pt) || tag != wantTag {
					t.Fatalf("%s n=%d counter %#x groups %v: open differs", c, n, ctr, groups)
				}
			}
		}
		for _, n := range []int{1, 17, 64, 127, 128, 129, 255, 256, 257, 511, 512, 513, 16*40 + 5, 1024 + 48, 1536 + 496} {
			for k := range 20 {
				check(n, uint32(0xffffffff-k))
			}
		}
		// Every last byte of the first counter, so that the carries out
		// of the last byte fall at every place in the main loops.
		for k := range 256 {
			check(1536+496, 0x01020300+uint32(k))
		}
	}
}

// ctr32ByDefinition encrypts src with the counters that follow j0, each
// incremented in its last 32 bits modulo 2^32 (SP 800-38D's inc32).
func ctr32ByDefinition(b cipher.Block, j0 [16]byte, src []byte) []byte {
	ctr := j0
	out := make([]byte, len(src))
	var ks [16]byte
	for i := 0; i < len(src); i += 16 {
		binary.BigEndian.PutUint32(ctr[12:], binary.BigEndian.Uint32(ctr[12:])+1)
		b.Encrypt(ks[:], ctr[:])
		for j := i; j < len(src) && j < i+16; j++ {
			out[j] = src[j] ^ ks[j-i]
		}
	}
	return out
}

// gcmKeyTimesY multiplies by y: a shift left by one bit, with the reduction
// by y^128 + y^127 + y^126 + y^121 + 1 when a bit falls out.
func TestGCMKeyTimesY(t *testing.T) {
	// h as a big-endian integer, the result little-endian (low qword first).
	for _, tc := range []struct {
		hHi, hLo, wantHi, wantLo uint64
	}{
		{0, 1, 0, 2},
		{1 << 62, 0, 1 << 63, 0},
		{0, 1 << 63, 1, 0},
		{1 << 63, 0, 0xc200000000000000, 1},
		{1<<63 | 1, 1 << 63, 0xc200000000000000 ^ 3, 1},
	} {
		var h [16]byte
		binary.BigEndian.PutUint64(h[:8], tc.hHi)
		binary.BigEndian.PutUint64(h[8:], tc.hLo)
		k := gcmKeyTimesY(&h)
		gotLo, gotHi := binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:])
		if gotHi != tc.wantHi || gotLo != tc.wantLo {
			t.Errorf("gcmKeyTimesY(%016x%016x) = %016x%016x, want %016x%016x", tc.hHi, tc.hLo, gotHi, gotLo, tc.wantHi, tc.wantLo)
		}
	}
}

// BenchmarkGCMNew measures the key setup of every AES-GCM implementation: the
// round keys and the table of hash-key powers, which cryptosvc pays once per
// message since every message has its own derived key.
func BenchmarkGCMNew(b *testing.B) {
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		for _, im := range Implementations(c) {
			if !im.Available() {
				continue
			}
			b.Run(c.String()+"/"+im.Name(), func(b *testing.B) {
				key := make([]byte, c.KeySize())
				b.ReportAllocs()
				for b.Loop() {
					if _, err := im.NewAEAD(key); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkGCMRekeySeal rekeys and seals one message per call, as cryptosvc
// does with its per-message keys: the table's lazily computed parts
// (gcmNeedsHigh, gcmGroupMin) are paid by every message that needs them.
func BenchmarkGCMRekeySeal(b *testing.B) {
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		im := Available(c)[0]
		for _, n := range []int{256, 1024, 2048, 4096, 8192, 16384} {
			b.Run(fmt.Sprintf("%s/%s/%d", c, im.Name(), n), func(b *testing.B) {
				a := mustAEAD(b, im, make([]byte, c.KeySize()))
				rk, ok := a.(interface{ Rekey([]byte) error })
				if !ok {
					b.Skipf("%s has no Rekey", im)
				}
				key, nonce, pt := make([]byte, c.KeySize()), make([]byte, c.IVSize()), make([]byte, n)
				buf := make([]byte, 0, n+c.Overhead())
				b.SetBytes(int64(n))
				for b.Loop() {
					key[0]++
					if err := rk.Rekey(key); err != nil {
						b.Fatal(err)
					}
					buf = a.Seal(buf[:0], nonce, pt, nil)
				}
			})
		}
	}
}

// TestGCMAsmRekey checks that Rekey leaves nothing of the old key's table:
// the VAES512 table's powers past K16, and those for two blocks per
// reduction, are computed only when a message needs them, so each key is
// used first with a long message and then, after Rekey, with short and long
// ones, all against crypto/cipher's AES-GCM.
func TestGCMAsmRekey(t *testing.T) {
	forEachGCMAsm(t, []string{"vaes512", "vaes256"}, func(t *testing.T, c Cipher, im *Implementation) {
		r := newRand(t)
		g := mustAEAD(t, im, r.bytes(c.KeySize())).(*gcmAsm)
		nonce := r.bytes(12)
		g.Seal(nil, nonce, r.bytes(gcmGroupMin+1000), r.bytes(300))
		for range 3 {
			key := r.bytes(c.KeySize())
			if err := g.Rekey(key); err != nil {
				t.Fatal(err)
			}
			ref := stdlibGCMFor(t, key)
			for _, n := range []int{16, 240, 241, 600, 2048, gcmGroupMin + 1000, 2048} {
				pt, aad := r.bytes(n), r.bytes(r.IntN(300))
				if got, want := g.Seal(nil, nonce, pt, aad), ref.Seal(nil, nonce, pt, aad); !bytes.Equal(got, want) {
					t.Fatalf("after Rekey, %d bytes with %d of additional data: Seal differs from crypto/cipher", n, len(aad))
				}
			}
		}
	})
}

// TestGCMTableAligned checks that every key's table starts on a 64-byte
// boundary, where the kernels' 64-byte loads of it never straddle two cache
// lines, whatever the allocator gives, and stays there through Rekey.
func TestGCMTableAligned(t *testing.T) {
	forEachGCMAsm(t, []string{"vaes512", "vaes256"}, func(t *testing.T, c Cipher, im *Implementation) {
		r := newRand(t)
		var keep []*gcmAsm
		for i := range 50 {
			// Allocations of other sizes in between move the next key
			// about in memory.
			_ = make([]byte, 8*(i+1))
			g := mustAEAD(t, im, r.bytes(c.KeySize())).(*gcmAsm)
			keep = append(keep, g)
			if off := uintptr(unsafe.Pointer(g.table())) % 64; off != 0 {
				t.Fatalf("key %d: table at %d bytes past a 64-byte boundary", i, off)
			}
			if err := g.Rekey(r.bytes(c.KeySize())); err != nil {
				t.Fatal(err)
			}
			if off := uintptr(unsafe.Pointer(g.table())) % 64; off != 0 {
				t.Fatalf("key %d after Rekey: table at %d bytes past a 64-byte boundary", i, off)
			}
		}
		runtime.KeepAlive(keep)
	})
}

// BenchmarkGCMTableAlignment seals 16 KiB with the VAES512 table moved the
// given number of bytes off its 64-byte boundary: the cost of the loads that
// straddle cache lines, which gcmAsm.tableMem avoids.
func BenchmarkGCMTableAlignment(b *testing.B) {
	for _, c := range []Cipher{AES128GCM, AES256GCM} {
		im, err := Lookup(c, "vaes512")
		if err != nil {
			b.Fatal(err)
		}
		if !im.Available() {
			b.Skipf("%s is not available on this host", im)
		}
		for _, off := range []int{0, 1, 16, 32} {
			b.Run(fmt.Sprintf("%s/%d", c, off), func(b *testing.B) {
				g := mustAEAD(b, im, make([]byte, c.KeySize())).(*gcmAsm)
				g.tableOff = uint8((int(g.tableOff) + off) % 64)
				if err := g.Rekey(make([]byte, c.KeySize())); err != nil {
					b.Fatal(err)
				}
				nonce, pt := make([]byte, 12), make([]byte, 16384)
				buf := make([]byte, 0, len(pt)+16)
				b.SetBytes(int64(len(pt)))
				for b.Loop() {
					buf = g.Seal(buf[:0], nonce, pt, nil)
				}
			})
		}
	}
}

// TestGCMShort256 seals and opens the messages that a VAES512 key hands to
// the VAES256 kernels (gcmShort256), and those around them, against
// crypto/cipher: fresh keys, whose table the VAES512 init wrote, before and
// after a long message completes it, and after Rekey.
func TestGCMShort256(t *testing.T) {
	forEachGCMAsm(t, []string{"vaes512"}, func(t *testing.T, c Cipher, im *Implementation) {
		r := newRand(t)
		for _, step := range []string{"fresh", "after a long message", "rekeyed"} {
			key := r.bytes(c.KeySize())
			g := mustAEAD(t, im, key).(*gcmAsm)
			switch step {
			case "after a long message":
				g.Seal(nil, r.bytes(12), r.bytes(4096), nil)
			case "rekeyed":
				g.Seal(nil, r.bytes(12), r.bytes(4096), r.bytes(600))
				key = r.bytes(c.KeySize())
				if err := g.Rekey(key); err != nil {
					t.Fatal(err)
				}
			}
			ref := stdlibGCMFor(t, key)
			for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 48} {
				for _, aadLen := range []int{0, 1, 16} {
					nonce, pt, aad := r.bytes(12), r.bytes(n), r.bytes(aadLen)
					want := ref.Seal(nil, nonce, pt, aad)
					got := g.Seal(nil, nonce, pt, aad)
					if !bytes.Equal(got, want) {
						t.Fatalf("%s: %d bytes, %d of additional data: Seal differs from crypto/cipher", step, n, aadLen)
					}
					opened, err := g.Open(nil, nonce, got, aad)
					if err != nil || !bytes.Equal(opened, pt) {
						t.Fatalf("%s: %d bytes, %d of additional data: Open = %v", step, n, aadLen, err)
					}
					got[len(got)-1] ^= 1
					if _, err := g.Open(nil, nonce, got, aad); err == nil {
						t.Fatalf("%s: %d bytes, %d of additional data: a forged tag opened", step, n, aadLen)
					}
				}
			}
		}
	})
}

// TestGCMCodeAt checks vaes512's CodeAt against the code that runs: with
// every byte of a VAES512 key's table outside the part the VAES256 kernels
// read (table256) overwritten, a message CodeAt gives to vaes256 still
// seals as crypto/cipher does, and every other one does not.
func TestGCMCodeAt(t *testing.T) {
	forEachGCMAsm(t, []string{"vaes512"}, func(t *testing.T, c Cipher, im *Implementation) {
		r := newRand(t)
		key := r.bytes(c.KeySize())
		g := mustAEAD(t, im, key).(*gcmAsm)
		// Complete the table first, so that no later message rewrites it.
		g.Seal(nil, r.bytes(12), r.bytes(2*gcmGroupMin), nil)
		tab := g.table()
		for i := range tab {
			if i < gcmAggBlocks-16 || i >= gcmAggBlocks+3 {
				tab[i] = [16]byte(r.bytes(16))
			}
		}
		ref := stdlibGCMFor(t, key)
		short := 0
		for n := 0; n <= 1040; n++ {
			nonce, pt := r.bytes(12), r.bytes(n)
			same := bytes.Equal(g.Seal(nil, nonce, pt, nil), ref.Seal(nil, nonce, pt, nil))
			switch code := im.CodeAt(n); {
			case code == "vaes256" && !same:
				t.Fatalf("%d bytes: CodeAt says vaes256, but the seal read the rest of the table", n)
			case code == "vaes512" && same:
				t.Fatalf("%d bytes: CodeAt says vaes512, but the seal read only table256", n)
			case code != "vaes256" && code != "vaes512":
				t.Fatalf("%d bytes: CodeAt = %q", n, code)
			case code == "vaes256":
				short++
			}
		}
		if short == 0 {
			t.Fatal("CodeAt hands no size to vaes256")
		}
	})
}
