package kernels

import (
	"crypto/cipher"
	"errors"
	"fmt"
	"slices"
)

// An Implementation is one code path for one cipher. Its constructors always
// use that path: they never fall back to another implementation.
type Implementation struct {
	name      string
	cipher    Cipher
	priority  int // higher is preferred when the benchmark has not decided
	available bool

	// requires lists the CPU features the implementation needs, spelled as
	// avo spells them in the "// Requires:" line of generated assembly
	// ("AVX512F", "VAES", …); available is cpuHas(requires...). asmFuncs names
	// the assembly functions it calls, so that a test can check each
	// function's Requires line against this gate.
	requires []string
	asmFuncs []string

	// codeAt, when set, names the implementation whose code this one runs
	// for a message of n bytes (CodeAt); nil means its own at every size.
	codeAt func(n int) string

	newAEAD   func(key []byte) (cipher.AEAD, error)
	newStream func(key, iv []byte) (cipher.Stream, error)
	newMode   func(key, iv []byte, decrypt bool) (cipher.BlockMode, error)
}

// Name returns the implementation's name, unique within its cipher: "stdlib",
// "xcrypto", "generic", or the name of an instruction-set kernel.
func (im *Implementation) Name() string { return im.name }

// Cipher returns the cipher the implementation computes.
func (im *Implementation) Cipher() Cipher { return im.cipher }

// Available reports whether this host can run the implementation.
func (im *Implementation) Available() bool { return im.available }

// Requires returns the CPU features the implementation needs (avo's names,
// such as "AVX512F" or "VAES"); nil for portable code and for code that
// dispatches internally, like the standard library's.
func (im *Implementation) Requires() []string { return slices.Clone(im.requires) }

// CodeAt returns the name of the implementation whose code im runs to seal
// or open a message of n bytes with no additional data: im's own, or that
// of the implementation of the same cipher to which im hands such messages
// because its code is the faster there. Two implementations with the same
// CodeAt at a size differ there by noise alone, which a benchmark has
// nothing to choose from (selftest's size classes).
func (im *Implementation) CodeAt(n int) string {
	if im.codeAt == nil {
		return im.name
	}
	return im.codeAt(n)
}

// String returns "cipher/name", such as "aes-128-gcm/stdlib".
func (im *Implementation) String() string { return im.cipher.String() + "/" + im.name }

// ErrUnavailable is returned by the constructors of an implementation this host
// cannot run.
var ErrUnavailable = errors.New("kernels: implementation not available on this CPU")

func (im *Implementation) check(want Kind, key, iv []byte) error {
	switch {
	case im.cipher.Kind() != want:
		return fmt.Errorf("kernels: %s is a %s cipher, not %s", im.cipher, im.cipher.Kind(), want)
	case !im.available:
		return fmt.Errorf("%w: %s", ErrUnavailable, im)
	case len(key) != im.cipher.KeySize():
		return fmt.Errorf("kernels: %s takes a %d-byte key, got %d bytes", im.cipher, im.cipher.KeySize(), len(key))
	case want != KindAEAD && len(iv) != im.cipher.IVSize():
		return fmt.Errorf("kernels: %s takes a %d-byte IV, got %d bytes", im.cipher, im.cipher.IVSize(), len(iv))
	}
	return nil
}

// NewAEAD returns the AEAD for key. The cipher must be of KindAEAD.
func (im *Implementation) NewAEAD(key []byte) (cipher.AEAD, error) {
	if err := im.check(KindAEAD, key, nil); err != nil {
		return nil, err
	}
	return im.newAEAD(key)
}

// NewStream returns the keystream for key and iv. The cipher must be of
// KindStream. For AES-CTR the IV is the initial 128-bit big-endian counter
// block. For ChaCha20 it is laid out as OpenSSL's EVP_chacha20 takes it: the
// 32-bit initial block counter, little-endian, then the 96-bit RFC 8439 nonce;
// unlike OpenSSL, which carries into the nonce, a ChaCha20 stream panics when
// its 32-bit block counter would wrap (RFC 8439 limits a nonce to 2^32 blocks).
func (im *Implementation) NewStream(key, iv []byte) (cipher.Stream, error) {
	if err := im.check(KindStream, key, iv); err != nil {
		return nil, err
	}
	return im.newStream(key, iv)
}

// NewEncrypter returns the encrypting block mode for key and iv. The cipher
// must be of KindBlockMode.
func (im *Implementation) NewEncrypter(key, iv []byte) (cipher.BlockMode, error) {
	if err := im.check(KindBlockMode, key, iv); err != nil {
		return nil, err
	}
	return im.newMode(key, iv, false)
}

// NewDecrypter returns the decrypting block mode for key and iv. The cipher
// must be of KindBlockMode.
func (im *Implementation) NewDecrypter(key, iv []byte) (cipher.BlockMode, error) {
	if err := im.check(KindBlockMode, key, iv); err != nil {
		return nil, err
	}
	return im.newMode(key, iv, true)
}

// registry holds every implementation of every cipher, most preferred first.
var registry [numCiphers][]*Implementation

// register adds an implementation. It is called from init functions only.
// An implementation that lists its required CPU features is available exactly
// when the host has all of them.
func register(im *Implementation) {
	if im.requires != nil {
		im.available = cpuHas(im.requires...)
	}
	switch {
	case len(im.asmFuncs) > 0 && im.requires == nil:
		panic("kernels: register: " + im.String() + " calls assembly but names no CPU features")
	case !im.cipher.Valid():
		panic("kernels: register: invalid cipher")
	case im.cipher.Kind() == KindAEAD && im.newAEAD == nil,
		im.cipher.Kind() == KindStream && im.newStream == nil,
		im.cipher.Kind() == KindBlockMode && im.newMode == nil:
		panic("kernels: register: " + im.String() + " lacks the constructor for its kind")
	case im.codeAt != nil && im.cipher.Kind() != KindAEAD:
		panic("kernels: register: " + im.String() + " hands messages on but is not an AEAD")
	}
	list := registry[im.cipher]
	for _, other := range list {
		if other.name == im.name {
			panic("kernels: register: duplicate implementation " + im.String())
		}
	}
	list = append(list, im)
	slices.SortStableFunc(list, func(a, b *Implementation) int { return b.priority - a.priority })
	registry[im.cipher] = list
}

// Implementations returns every implementation of c, available or not, most
// preferred first. The slice is a copy; the implementations are shared.
func Implementations(c Cipher) []*Implementation {
	if !c.Valid() {
		return nil
	}
	return slices.Clone(registry[c])
}

// Available returns the implementations of c that this host can run, most
// preferred first.
func Available(c Cipher) []*Implementation {
	var out []*Implementation
	for _, im := range Implementations(c) {
		if im.available {
			out = append(out, im)
		}
	}
	return out
}

// Lookup returns the implementation of c called name.
func Lookup(c Cipher, name string) (*Implementation, error) {
	for _, im := range Implementations(c) {
		if im.name == name {
			return im, nil
		}
	}
	return nil, fmt.Errorf("kernels: %s has no implementation %q", c, name)
}
