package cryptosvc

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// One-shot messages go to their size class's implementation, and what one
// implementation seals any other opens: the classes change speed, not the
// format.
func TestSizeClasses(t *testing.T) {
	ctx := context.Background()
	impls := kernels.Available(kernels.AES256GCM)
	if len(impls) < 2 {
		t.Skip("one implementation of AES-256-GCM on this host")
	}
	small, large := impls[len(impls)-1], impls[0]
	store := NewMemStore()
	classed, err := New(Config{Keystore: store, SizeClasses: func(c kernels.Cipher) []SizeClass {
		if c == kernels.AES256GCM {
			return []SizeClass{{MaxSize: 16, Impl: small}, {MaxSize: 64, Impl: large}}
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New(Config{Keystore: store})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]*kernels.Implementation{0: small, 16: small, 17: large, 64: large, 65: large, 1 << 20: large} {
		if got := classed.forSize(kernels.AES256GCM, large, n); got != want {
			t.Errorf("forSize(%d) = %s, want %s", n, got, want)
		}
	}
	if got := classed.forSize(kernels.ChaCha20Poly1305, nil, 1); got != nil {
		t.Errorf("an AEAD without classes got %s", got)
	}
	if _, err := classed.CreateKey(ctx, "k", KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 5, 16, 17, 100, 20000} {
		msg := bytes.Repeat([]byte{byte(n)}, n)
		for _, pair := range [][2]*Service{{classed, plain}, {plain, classed}, {classed, classed}} {
			ct, _, err := pair[0].Seal(ctx, "k", msg, []byte("ctx"))
			if err != nil {
				t.Fatal(err)
			}
			pt, _, err := pair[1].Open(ctx, "k", ct, []byte("ctx"))
			if err != nil || !bytes.Equal(pt, msg) {
				t.Fatalf("%d bytes: %v", n, err)
			}
		}
	}
}

func TestSizeClassesRejected(t *testing.T) {
	impls := kernels.Available(kernels.AES256GCM)
	other := kernels.Available(kernels.AES128GCM)[0]
	for name, classes := range map[string][]SizeClass{
		"wrong cipher":   {{MaxSize: 16, Impl: other}},
		"nil":            {{MaxSize: 16}},
		"not ascending":  {{MaxSize: 64, Impl: impls[0]}, {MaxSize: 16, Impl: impls[0]}},
		"negative bound": {{MaxSize: -1, Impl: impls[0]}},
	} {
		_, err := New(Config{Keystore: NewMemStore(), SizeClasses: func(c kernels.Cipher) []SizeClass {
			if c == kernels.AES256GCM {
				return classes
			}
			return nil
		}})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}
