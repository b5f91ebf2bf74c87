package kernels

import (
	"fmt"
	"strings"
)

// Cipher names one algorithm together with its key size.
type Cipher uint8

// The ciphers cipherd carries. AES-128-CBC, AES-256-CBC and AES-256-IGE exist only
// so that `cipherd speed` can be compared with published `openssl speed` reports;
// they never appear in the service's API.
const (
	AES128GCM Cipher = iota + 1
	AES256GCM
	AES128CTR
	AES256CTR
	ChaCha20
	ChaCha20Poly1305
	XChaCha20Poly1305
	AES128CBC
	AES256CBC
	AES256IGE

	numCiphers = iota + 1 // one past the last cipher
)

// Kind says which crypto/cipher interface a cipher's constructors return.
type Kind uint8

const (
	// KindAEAD ciphers construct a cipher.AEAD with Implementation.NewAEAD.
	KindAEAD Kind = iota + 1
	// KindStream ciphers construct a cipher.Stream with Implementation.NewStream.
	KindStream
	// KindBlockMode ciphers construct a cipher.BlockMode with
	// Implementation.NewEncrypter and Implementation.NewDecrypter.
	KindBlockMode
)

func (k Kind) String() string {
	switch k {
	case KindAEAD:
		return "aead"
	case KindStream:
		return "stream"
	case KindBlockMode:
		return "block-mode"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

type cipherInfo struct {
	name     string // lower-case EVP name, as `openssl speed -evp` takes it
	display  string // the name `openssl speed` prints in its table
	kind     Kind
	keySize  int
	ivSize   int // nonce for AEADs, IV for streams and block modes
	overhead int // AEAD tag size
}

var cipherInfos = [numCiphers]cipherInfo{
	AES128GCM:         {"aes-128-gcm", "AES-128-GCM", KindAEAD, 16, 12, 16},
	AES256GCM:         {"aes-256-gcm", "AES-256-GCM", KindAEAD, 32, 12, 16},
	AES128CTR:         {"aes-128-ctr", "AES-128-CTR", KindStream, 16, 16, 0},
	AES256CTR:         {"aes-256-ctr", "AES-256-CTR", KindStream, 32, 16, 0},
	ChaCha20:          {"chacha20", "ChaCha20", KindStream, 32, 16, 0},
	ChaCha20Poly1305:  {"chacha20-poly1305", "ChaCha20-Poly1305", KindAEAD, 32, 12, 16},
	XChaCha20Poly1305: {"xchacha20-poly1305", "XChaCha20-Poly1305", KindAEAD, 32, 24, 16},
	AES128CBC:         {"aes-128-cbc", "AES-128-CBC", KindBlockMode, 16, 16, 0},
	AES256CBC:         {"aes-256-cbc", "AES-256-CBC", KindBlockMode, 32, 16, 0},
	AES256IGE:         {"aes-256-ige", "AES-256-IGE", KindBlockMode, 32, 32, 0},
}

func (c Cipher) info() cipherInfo {
	if c == 0 || int(c) >= len(cipherInfos) {
		return cipherInfo{}
	}
	return cipherInfos[c]
}

// Valid reports whether c names a known cipher.
func (c Cipher) Valid() bool { return c.info().kind != 0 }

// String returns the lower-case name that `openssl speed -evp` accepts, such as
// "aes-128-gcm".
func (c Cipher) String() string {
	if !c.Valid() {
		return fmt.Sprintf("Cipher(%d)", uint8(c))
	}
	return c.info().name
}

// DisplayName returns the name `openssl speed` prints, such as "AES-128-GCM".
func (c Cipher) DisplayName() string {
	if !c.Valid() {
		return c.String()
	}
	return c.info().display
}

// Kind returns the interface the cipher's constructors return.
func (c Cipher) Kind() Kind { return c.info().kind }

// KeySize returns the key length in bytes.
func (c Cipher) KeySize() int { return c.info().keySize }

// IVSize returns the nonce length for AEADs and the IV length for streams and
// block modes (32 bytes for IGE, which chains two blocks).
func (c Cipher) IVSize() int { return c.info().ivSize }

// Overhead returns the AEAD tag length, 0 for other kinds.
func (c Cipher) Overhead() int { return c.info().overhead }

// BlockSize returns the granularity of the cipher's input: 16 for block modes,
// 1 for AEADs and streams.
func (c Cipher) BlockSize() int {
	if c.Kind() == KindBlockMode {
		return 16
	}
	return 1
}

// SpeedOnly reports whether the cipher exists only for benchmark comparisons
// (AES-CBC, AES-IGE) and must never be offered by the service.
func (c Cipher) SpeedOnly() bool { return c.Kind() == KindBlockMode }

// Ciphers returns every known cipher in a fixed order.
func Ciphers() []Cipher {
	cs := make([]Cipher, 0, numCiphers-1)
	for c := Cipher(1); c < numCiphers; c++ {
		cs = append(cs, c)
	}
	return cs
}

// ParseCipher returns the cipher named s, ignoring case: either the EVP name
// ("aes-128-gcm") or the display name ("AES-128-GCM").
func ParseCipher(s string) (Cipher, error) {
	for c := Cipher(1); c < numCiphers; c++ {
		if strings.EqualFold(s, c.info().name) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("kernels: unknown cipher %q", s)
}
