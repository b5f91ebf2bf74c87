package cryptosvc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cipherd/cipherd/kernels"
)

// Every available implementation of every sealed-format AEAD gets every
// known answer right, and each example checks the message and the
// intermediate values the specification gives.
func TestKnownAnswers(t *testing.T) {
	for _, c := range SealAEADs {
		for _, im := range kernels.Available(c) {
			answers, err := KnownAnswers(im)
			if err != nil {
				t.Fatalf("%s: %v", im, err)
			}
			names := map[string]bool{}
			for _, a := range answers {
				names[a.Name] = true
				if !bytes.Equal(a.Got, a.Want) {
					t.Errorf("%s: %s = %x, want %x", im, a.Name, a.Got, a.Want)
				}
			}
			if !names["sealed message"] || !names["opened plaintext"] {
				t.Errorf("%s: answers %v lack the message or the plaintext", im, names)
			}
			// Two HKDF outputs, the message, the plaintext, and in direct
			// mode the body key derived in each lane of the four-lane
			// derivation where the host has it.
			want := 4
			for _, e := range selfExamples {
				if e.aead == c && e.mode == ModeDirect && kernels.SHA512x4Available() {
					want += aheadLanes
				}
			}
			if c != kernels.ChaCha20Poly1305 && len(answers) != want {
				t.Errorf("%s: %d answers, want %d", im, len(answers), want)
			}
			if err := SelfTest(im); err != nil {
				t.Errorf("SelfTest(%s) = %v", im, err)
			}
		}
	}
}

func TestKnownAnswersNotSealedAEAD(t *testing.T) {
	im := kernels.Available(kernels.XChaCha20Poly1305)[0]
	if _, err := KnownAnswers(im); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("KnownAnswers(%s) = %v, want ErrUnsupported", im, err)
	}
}

// New fails closed when an implementation it would use gets a known answer
// wrong: here the answer is made wrong, one bit of the expected message, so
// that the real implementation disagrees with it.
func TestNewRefusesFailedSelfTest(t *testing.T) {
	for i := range selfExamples {
		e := &selfExamples[i]
		t.Run(e.aead.String(), func(t *testing.T) {
			saved := e.message
			e.message = bytes.Clone(saved)
			e.message[len(e.message)/2] ^= 0x01
			selfTested.Clear()
			defer func() { e.message = saved; selfTested.Clear() }()

			_, err := New(Config{Keystore: NewMemStore()})
			if !errors.Is(err, ErrSelfTest) {
				t.Fatalf("New with a wrong answer for %s: err = %v, want ErrSelfTest", e.aead, err)
			}
			// Turning the failing AEAD off is the way to run without it.
			cfg := Config{Keystore: NewMemStore(), AEAD: firstOther(e.aead), Implementation: func(c kernels.Cipher) *kernels.Implementation {
				if c == e.aead {
					return nil
				}
				return kernels.Available(c)[0]
			}}
			if _, err := New(cfg); err != nil {
				t.Fatalf("New without %s: %v", e.aead, err)
			}
		})
	}
}

func firstOther(c kernels.Cipher) kernels.Cipher {
	for _, o := range SealAEADs {
		if o != c {
			return o
		}
	}
	return 0
}

// The derived intermediate values are checked too: a wrong one fails New
// even though the message itself would still match.
func TestNewRefusesWrongIntermediate(t *testing.T) {
	e := &selfExamples[0]
	saved := e.inputKey
	e.inputKey = bytes.Clone(saved)
	e.inputKey[0] ^= 0x80
	selfTested.Clear()
	defer func() { e.inputKey = saved; selfTested.Clear() }()
	if _, err := New(Config{Keystore: NewMemStore()}); !errors.Is(err, ErrSelfTest) {
		t.Fatalf("err = %v, want ErrSelfTest", err)
	}
}

func BenchmarkNewSelfTest(b *testing.B) {
	im := kernels.Available(kernels.AES256GCM)[0]
	for b.Loop() {
		if err := SelfTest(im); err != nil {
			b.Fatal(err)
		}
	}
}
