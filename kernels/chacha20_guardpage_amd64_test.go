//go:build amd64 && gc && !purego && linux

package kernels

import (
	"bytes"
	"syscall"
	"testing"
)

// guardPaged returns a buffer of n bytes that ends where an inaccessible
// page begins, so that a kernel reading or writing one byte past it faults.
// The canaries of the other tests catch stray writes only; this also catches
// reads past the end of src.
func guardPaged(t *testing.T, n int) []byte {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n+page-1)/page*page + page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[size-page:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return mem[size-page-n : size-page : size-page]
}

func TestChaCha20KernelsGuardPage(t *testing.T) {
	forEachChaChaFunc(t, func(t *testing.T, fn chachaFunc) {
		r := newRand(t)
		for _, n := range []int{1, 15, 63, 64, 65, 127, 200, 511, 512, 513, 1000, 1023, 1024, 1025, 1535, 4095, 4097, 16385} {
			key, nonce := r.bytes(32), r.bytes(12)
			kw, nw := chachaWords(key, nonce)
			src := guardPaged(t, n)
			copy(src, r.bytes(n))
			want := xcryptoXOR(t, key, nonce, 5, src)

			dst := guardPaged(t, n)
			fn(dst, src, kw, nw, 5)
			if !bytes.Equal(dst, want) {
				t.Fatalf("len %d: differs from x/crypto", n)
			}
			fn(src, src, kw, nw, 5) // in place
			if !bytes.Equal(src, want) {
				t.Fatalf("len %d: in place differs from x/crypto", n)
			}
		}
	})
}
