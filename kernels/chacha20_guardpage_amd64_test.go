//go:build amd64 && gc && !purego && linux

package kernels

import (
	"bytes"
	"os"
	"testing"
)

// guardPaged returns a buffer of n bytes (and no spare capacity) that ends
// where an inaccessible page begins.
func guardPaged(t *testing.T, n int) []byte {
	t.Helper()
	ps := os.Getpagesize()
	region := guardPages(t, max(1, (n+ps-1)/ps))
	return region[len(region)-n : len(region) : len(region)]
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
