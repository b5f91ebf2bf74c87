//go:build amd64 && gc && !purego

package kernels

import (
	"bytes"
	"testing"
)

// The short-message keystream kernels (chachaKeystream2AVX512VL,
// chachaKeystream4AVX512) against x/crypto's ChaCha20, from random block
// counters and the last ones before 2³².
func TestChaChaPolyShortKeystreams(t *testing.T) {
	skipWithoutStitched(t)
	r := newRand(t)
	kernels := []struct {
		name string
		n    int
		fn   func(state *[16]uint32, ks []byte)
	}{
		{"2AVX512VL", 2, func(state *[16]uint32, ks []byte) { chachaKeystream2AVX512VL(state, (*[128]byte)(ks)) }},
		{"4AVX512", 4, func(state *[16]uint32, ks []byte) { chachaKeystream4AVX512(state, (*[256]byte)(ks)) }},
	}
	for _, k := range kernels {
		for i := range 200 {
			key, nonce := r.bytes(32), r.bytes(12)
			counter := randomCounter(r, 64*k.n)
			if i == 0 {
				counter = uint32(1<<32 - k.n)
			}
			kw, nw := chachaWords(key, nonce)
			state := chachaState(kw, nw, counter)
			saved := state
			got := make([]byte, 64*k.n)
			k.fn(&state, got)
			if state != saved {
				t.Fatalf("%s: the kernel changed its input state", k.name)
			}
			if want := xcryptoXOR(t, key, nonce, counter, make([]byte, 64*k.n)); !bytes.Equal(got, want) {
				t.Fatalf("%s, counter %#x:\n got %x\nwant %x", k.name, counter, got, want)
			}
		}
	}
}
