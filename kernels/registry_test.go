package kernels

import (
	"bytes"
	"crypto/cipher"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestRegistry checks the registry that every other test iterates: if it were
// empty or inconsistent, the per-implementation tests would pass vacuously.
func TestRegistry(t *testing.T) {
	if got, want := len(Ciphers()), int(numCiphers)-1; got != want {
		t.Fatalf("Ciphers() returned %d ciphers, want %d", got, want)
	}
	for _, c := range Ciphers() {
		if !c.Valid() || c.Kind() == 0 || c.KeySize() == 0 || c.IVSize() == 0 {
			t.Errorf("%s: incomplete cipher info %+v", c, c.info())
		}
		if (c.Kind() == KindAEAD) != (c.Overhead() > 0) {
			t.Errorf("%s: kind %s with overhead %d", c, c.Kind(), c.Overhead())
		}
		if p, err := ParseCipher(c.String()); err != nil || p != c {
			t.Errorf("ParseCipher(%q) = %v, %v", c.String(), p, err)
		}
		if p, err := ParseCipher(strings.ToUpper(c.String())); err != nil || p != c {
			t.Errorf("ParseCipher(%q) = %v, %v", strings.ToUpper(c.String()), p, err)
		}
		if _, ok := referenceImpl[c]; !ok {
			t.Errorf("%s has no entry in referenceImpl", c)
		}
		if len(Available(c)) == 0 {
			t.Errorf("%s has no available implementation", c)
		}
		seen := map[string]bool{}
		for _, im := range Implementations(c) {
			if im.Cipher() != c {
				t.Errorf("%s listed under %s", im, c)
			}
			if im.String() != c.String()+"/"+im.Name() {
				t.Errorf("%s: String() = %q", im.Name(), im.String())
			}
			if seen[im.Name()] {
				t.Errorf("%s registered twice", im)
			}
			seen[im.Name()] = true
			if got, err := Lookup(c, im.Name()); err != nil || got != im {
				t.Errorf("Lookup(%s, %q) = %v, %v", c, im.Name(), got, err)
			}
			checkCodeAt(t, im)
		}
	}
	if Implementations(0) != nil || Implementations(numCiphers) != nil {
		t.Error("Implementations of an invalid cipher is not nil")
	}
	if _, err := ParseCipher("aes-192-gcm"); err == nil {
		t.Error("ParseCipher accepted an unknown cipher")
	}
}

// checkCodeAt checks that every size im hands on goes to an implementation
// of its cipher that runs its own code there and is available wherever im
// is: one that needs no CPU feature im does not.
func checkCodeAt(t *testing.T, im *Implementation) {
	t.Helper()
	for _, n := range []int{0, 1, 15, 16, 17, 32, 33, 48, 64, 256, 1024, 16384, 1 << 20} {
		name := im.CodeAt(n)
		if name == im.Name() {
			continue
		}
		to, err := Lookup(im.Cipher(), name)
		if err != nil {
			t.Errorf("%s: CodeAt(%d): %v", im, n, err)
			continue
		}
		if to.CodeAt(n) != to.Name() {
			t.Errorf("%s: CodeAt(%d) = %s, which hands it on to %s", im, n, to, to.CodeAt(n))
		}
		for _, f := range to.Requires() {
			if !slices.Contains(im.Requires(), f) {
				t.Errorf("%s: CodeAt(%d) = %s, which needs %s", im, n, to, f)
			}
		}
	}
}

// TestConstructorsCheckKind checks that every constructor but the one for the
// cipher's kind fails, even with well-sized arguments.
func TestConstructorsCheckKind(t *testing.T) {
	for _, c := range Ciphers() {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			key, iv := make([]byte, c.KeySize()), make([]byte, c.IVSize())
			if c.Kind() != KindAEAD {
				if a, err := im.NewAEAD(key); err == nil || a != nil {
					t.Errorf("NewAEAD on a %s cipher = %v, %v; want an error", c.Kind(), a, err)
				}
			}
			if c.Kind() != KindStream {
				if s, err := im.NewStream(key, iv); err == nil || s != nil {
					t.Errorf("NewStream on a %s cipher = %v, %v; want an error", c.Kind(), s, err)
				}
			}
			if c.Kind() != KindBlockMode {
				if m, err := im.NewEncrypter(key, iv); err == nil || m != nil {
					t.Errorf("NewEncrypter on a %s cipher = %v, %v; want an error", c.Kind(), m, err)
				}
				if m, err := im.NewDecrypter(key, iv); err == nil || m != nil {
					t.Errorf("NewDecrypter on a %s cipher = %v, %v; want an error", c.Kind(), m, err)
				}
			}
		})
	}
}

// TestUnavailable checks that an implementation this host cannot run refuses to
// construct, with ErrUnavailable, rather than running its code.
func TestUnavailable(t *testing.T) {
	im := &Implementation{name: "test-unavailable", cipher: AES128GCM, available: false,
		newAEAD: func([]byte) (cipher.AEAD, error) {
			t.Fatal("constructor of an unavailable implementation was called")
			return nil, nil
		}}
	if a, err := im.NewAEAD(make([]byte, 16)); !errors.Is(err, ErrUnavailable) || a != nil {
		t.Errorf("NewAEAD = %v, %v; want ErrUnavailable", a, err)
	}
}

// TestConstructorsCopyArguments checks that no constructor keeps a reference
// to the caller's key or IV: overwriting them after construction must not
// change the output. (Callers such as the benchmark reuse those buffers.)
func TestConstructorsCopyArguments(t *testing.T) {
	for _, c := range Ciphers() {
		forEachImpl(t, c, func(t *testing.T, im *Implementation) {
			r := newRand(t)
			key, iv, msg := r.bytes(c.KeySize()), r.bytes(c.IVSize()), r.bytes(160)
			safeChaChaCounter(c, iv)
			// run builds the cipher, scribbles over key and IV, and uses it.
			run := func(key, iv []byte) []byte {
				out := make([]byte, len(msg)+c.Overhead())
				switch c.Kind() {
				case KindAEAD:
					a := mustAEAD(t, im, key)
					clear(key)
					out = a.Seal(out[:0], iv, msg, nil)
				case KindStream:
					s := mustStream(t, im, key, iv)
					clear(key)
					clear(iv)
					s.XORKeyStream(out, msg)
				case KindBlockMode:
					m := mustMode(t, im, key, iv, false)
					clear(key)
					clear(iv)
					m.CryptBlocks(out, msg)
				}
				return out
			}
			want := run(bytes.Clone(key), bytes.Clone(iv))
			fresh := make([]byte, len(want))
			switch c.Kind() {
			case KindAEAD:
				fresh = mustAEAD(t, im, key).Seal(fresh[:0], iv, msg, nil)
			case KindStream:
				mustStream(t, im, key, iv).XORKeyStream(fresh, msg)
			case KindBlockMode:
				mustMode(t, im, key, iv, false).CryptBlocks(fresh, msg)
			}
			if !bytes.Equal(want, fresh) {
				t.Error("output changed when the key or IV buffer was overwritten after construction")
			}
		})
	}
}
