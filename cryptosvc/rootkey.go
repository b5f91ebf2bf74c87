package cryptosvc

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
)

// Environment variables through which cipherd takes a static root key (see
// LoadRootKey). The file wins when both are set.
const (
	// EnvRootKey holds the root key itself: 32 bytes as base64 (standard,
	// padded, or URL-safe without padding) or as 64 hex digits.
	EnvRootKey = "CIPHERD_ROOT_KEY"
	// EnvRootKeyFile names a file holding the root key in the same text form
	// (surrounding whitespace, such as a final newline, is ignored).
	EnvRootKeyFile = "CIPHERD_ROOT_KEY_FILE"
)

// rkMaxFileSize bounds what LoadRootKey reads: a root key in text form is at
// most 64 characters plus whitespace.
const rkMaxFileSize = 4096

// ParseRootKey decodes a root key: 32 bytes written as base64 (standard
// alphabet with padding, or URL-safe alphabet without padding) or as 64 hex
// digits, with surrounding whitespace ignored. A key of 32 zero bytes is
// refused: it is a placeholder, not a key. Errors wrap ErrRootKey and never
// contain the value.
func ParseRootKey(s string) (Secret, error) { return rkParse([]byte(s)) }

// rkParse is ParseRootKey on bytes, so that LoadRootKey can clear its copy.
func rkParse(text []byte) (Secret, error) {
	text = bytes.TrimSpace(text)
	var buf [SecretSize + 2]byte // room for base64's decode slack
	defer clear(buf[:])
	var n int
	var err error
	switch len(text) {
	case hex.EncodedLen(SecretSize): // 64
		n, err = hex.Decode(buf[:], text)
	case base64.StdEncoding.EncodedLen(SecretSize): // 44
		n, err = base64.StdEncoding.Strict().Decode(buf[:], text)
	case base64.RawURLEncoding.EncodedLen(SecretSize): // 43
		n, err = base64.RawURLEncoding.Strict().Decode(buf[:], text)
	default:
		return Secret{}, fmt.Errorf("%w: a root key is 32 bytes as base64 (44 or 43 characters) or hex (64 characters); got %d characters", ErrRootKey, len(text))
	}
	if err != nil || n != SecretSize {
		// err quotes an offset or a byte of the value: it is not wrapped.
		return Secret{}, fmt.Errorf("%w: the root key is not valid base64 or hex", ErrRootKey)
	}
	sec, _ := NewSecret(buf[:SecretSize])
	var zero Secret
	if sec.Equal(&zero) {
		return Secret{}, fmt.Errorf("%w: the root key is all zeros", ErrRootKey)
	}
	return sec, nil
}

// LoadRootKey reads the root key from the file named file if file is not
// empty, and otherwise from the environment variable named env (for the
// server: LoadRootKey(os.Getenv(EnvRootKeyFile), EnvRootKey)). The value is
// parsed by ParseRootKey. Errors wrap ErrRootKey; they name the file or the
// variable, never the value.
func LoadRootKey(file, env string) (Secret, error) {
	var text []byte
	var source string
	switch {
	case file != "":
		source = "root key file " + file
		f, err := os.Open(file)
		if err != nil {
			return Secret{}, fmt.Errorf("%w: %v", ErrRootKey, err)
		}
		text, err = io.ReadAll(io.LimitReader(f, rkMaxFileSize+1))
		f.Close()
		if err != nil {
			return Secret{}, fmt.Errorf("%w: reading %s: %v", ErrRootKey, source, err)
		}
		if len(text) > rkMaxFileSize {
			clear(text)
			return Secret{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrRootKey, source, rkMaxFileSize)
		}
	case env != "":
		source = "environment variable " + env
		v, ok := os.LookupEnv(env)
		if !ok || strings.TrimSpace(v) == "" {
			return Secret{}, fmt.Errorf("%w: %s is not set", ErrRootKey, source)
		}
		text = []byte(v)
	default:
		return Secret{}, fmt.Errorf("%w: no root key file or environment variable given", ErrRootKey)
	}
	defer clear(text)
	sec, err := rkParse(text)
	if err != nil {
		return Secret{}, fmt.Errorf("%s: %w", source, err)
	}
	return sec, nil
}
