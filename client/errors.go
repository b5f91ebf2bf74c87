package client

import (
	"errors"
	"fmt"

	"github.com/cipherd/cipherd/api"
)

// Error is an error answered by the service: the HTTP status and the body's
// stable code. It unwraps to the *api.Error it was sent as, so both
//
//	var ce *client.Error; errors.As(err, &ce)
//	var ae *api.Error;    errors.As(err, &ae)
//
// work, and errors.Is(err, client.ErrUnauthenticated) (and the other
// sentinels) compares codes.
type Error struct {
	// Status is the HTTP status of the response; 0 for an error found before
	// sending (an invalid key name).
	Status int
	// API is the error body: code, message and the request id to quote to
	// the service's operators.
	API api.Error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cipherd: %s: %s", e.API.Code, e.API.Message)
	if e.Status != 0 {
		s = fmt.Sprintf("cipherd: %d %s: %s", e.Status, e.API.Code, e.API.Message)
	}
	if e.API.RequestID != "" {
		s += " (request " + e.API.RequestID + ")"
	}
	return s
}

// Code returns the error's stable code.
func (e *Error) Code() api.Code { return e.API.Code }

// Unwrap returns the error body as an *api.Error.
func (e *Error) Unwrap() error { return &e.API }

// Is reports whether target is an *Error with the same code; the sentinels
// below carry only a code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.API.Code != "" && t.API.Code == e.API.Code
}

func sentinel(c api.Code) *Error { return &Error{API: api.Error{Code: c, Message: string(c)}} }

// Sentinels for errors.Is, one per common code. IsCode covers every code.
var (
	ErrUnauthenticated = sentinel(api.CodeUnauthenticated)
	ErrForbidden       = sentinel(api.CodeForbidden)
	ErrKeyNotFound     = sentinel(api.CodeKeyNotFound)
	ErrKeyExists       = sentinel(api.CodeKeyExists)
	ErrDecryptFailed   = sentinel(api.CodeDecryptFailed)
	ErrTruncated       = sentinel(api.CodeTruncated)
	ErrMalformed       = sentinel(api.CodeMalformed)
	ErrTooLarge        = sentinel(api.CodeTooLarge)
	ErrRateLimited     = sentinel(api.CodeRateLimited)
	ErrNotReady        = sentinel(api.CodeNotReady)
)

// ErrIncompleteStream is returned by DecryptStream when the response did not
// end with the success trailer: the stream was cut or a chunk failed to
// authenticate. Whatever was written to dst must be discarded.
var ErrIncompleteStream = errors.New("cipherd: the decrypted stream did not complete (cut, truncated or failed to authenticate); discard the output")

// IsCode reports whether err (a *Error, an *api.Error, or a batch item's
// error) carries code.
func IsCode(err error, code api.Code) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Code == code
}
