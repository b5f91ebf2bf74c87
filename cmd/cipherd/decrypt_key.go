package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/cryptosvc"
)

// A sealed stream's header names its key (docs/FORMAT.md), so decrypt
// takes the key from there when --key is not given. The header is read
// before anything is sent: a --key that names another key is refused
// without a request, as the service would refuse it (key_mismatch) after
// one.

// errKeyMismatch is a --key that is not the key the header names: a usage
// error.
var errKeyMismatch = errors.New("key mismatch")

// peekKey reads the header at the start of r and returns the key it
// names and the bytes it read, which the caller sends on before the rest
// of r.
func peekKey(r io.Reader) (name string, read []byte, err error) {
	var buf bytes.Buffer
	h, _, err := cryptosvc.ReadHeader(io.TeeReader(r, &buf))
	return h.KeyName, buf.Bytes(), err
}

// decryptKey returns the key to decrypt under: given, the value of --key,
// or when it is empty the key the header names (named, or the error of
// reading the header). A given key that differs from the header's is
// errKeyMismatch. With a given key, a header that does not parse goes to
// the service all the same, which answers with what is wrong with it.
func decryptKey(given, named string, hdrErr error) (string, error) {
	badHeader := errors.Is(hdrErr, cryptosvc.ErrTruncated) || errors.Is(hdrErr, cryptosvc.ErrMalformed) || errors.Is(hdrErr, cryptosvc.ErrUnsupported)
	switch {
	case hdrErr == nil && given != "" && given != named:
		return "", fmt.Errorf("%w: --key is %s, but the input is sealed under the key %s", errKeyMismatch, given, named)
	case hdrErr == nil:
		return named, nil
	case badHeader && given != "":
		return given, nil
	case errors.Is(hdrErr, cryptosvc.ErrTruncated):
		return "", &client.Error{API: api.Error{Code: api.CodeTruncated, Message: "the input ends inside the header that names its key"}}
	case badHeader:
		return "", &client.Error{API: api.Error{Code: api.CodeMalformed, Message: "no key name: the input is not a cipherd sealed stream (" + hdrErr.Error() + ")"}}
	}
	return "", fmt.Errorf("reading the input: %w", hdrErr)
}
