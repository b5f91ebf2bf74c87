package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// apiError returns a client error with a stable code.
func apiError(code api.Code, msg string) *api.Error { return &api.Error{Code: code, Message: msg} }

// toAPIError maps an error to what the client is told. Internal errors keep
// their details in the log only.
func toAPIError(err error) *api.Error {
	var ae *api.Error
	var fe *fiber.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, cryptosvc.ErrAuthFailed):
		return apiError(api.CodeDecryptFailed, "the ciphertext does not authenticate under this key and context")
	case errors.Is(err, cryptosvc.ErrTruncated):
		return apiError(api.CodeTruncated, "the ciphertext is truncated")
	case errors.Is(err, cryptosvc.ErrMalformed):
		return apiError(api.CodeMalformed, "not a valid cipherd ciphertext")
	case errors.Is(err, cryptosvc.ErrUnsupported):
		return apiError(api.CodeUnsupported, "unsupported format version, AEAD or operation")
	case errors.Is(err, cryptosvc.ErrRangeNotSatisfiable):
		return apiError(api.CodeRangeNotSatisfiable, "the range starts at or past the end of the plaintext")
	case errors.Is(err, cryptosvc.ErrRangeMismatch):
		return apiError(api.CodeRangeMismatch, "the body holds chunks past those that cover the range")
	case errors.Is(err, cryptosvc.ErrTooLarge):
		return apiError(api.CodeTooLarge, "message too large")
	case errors.Is(err, cryptosvc.ErrKeyNotFound):
		return apiError(api.CodeKeyNotFound, "no such key or key version")
	case errors.Is(err, cryptosvc.ErrKeyExists):
		return apiError(api.CodeKeyExists, "a key of that name exists")
	case errors.Is(err, cryptosvc.ErrKeyMismatch):
		return apiError(api.CodeKeyMismatch, "the ciphertext belongs to another key")
	case errors.Is(err, cryptosvc.ErrVersionRetired):
		return apiError(api.CodeVersionRetired, "the key version is retired")
	case errors.Is(err, cryptosvc.ErrDeletionNotAllowed):
		return apiError(api.CodeDeletionNotAllowed, "the key's configuration does not allow deletion")
	case errors.Is(err, cryptosvc.ErrInvalidKeyName):
		return apiError(api.CodeInvalidKeyName, "key names are 1-128 characters of A-Z a-z 0-9 . _ - not starting with . or -")
	case errors.Is(err, cryptosvc.ErrInvalidConfig):
		return apiError(api.CodeInvalidConfig, err.Error())
	case errors.Is(err, cryptosvc.ErrTokenNotFound):
		return apiError(api.CodeTokenNotFound, "no such service token")
	case errors.Is(err, cryptosvc.ErrReadOnly):
		return apiError(api.CodeReadOnly, "keys are managed in a read-only keyring")
	case errors.Is(err, cryptosvc.ErrUnavailable):
		return apiError(api.CodeKeystoreUnavailable, "the keystore's database is unreachable; retry later")
	case errors.Is(err, cryptosvc.ErrConflict):
		return apiError(api.CodeConflict, "the key kept changing concurrently; retry")
	case errors.Is(err, context.DeadlineExceeded):
		return apiError(api.CodeTimeout, "request timed out")
	case errors.As(err, &fe):
		switch fe.Code {
		case fiber.StatusNotFound:
			return apiError(api.CodeRouteNotFound, "no such route")
		case fiber.StatusMethodNotAllowed:
			return apiError(api.CodeMethodNotAllowed, "method not allowed on this route")
		case fiber.StatusRequestEntityTooLarge:
			return apiError(api.CodeTooLarge, "request body too large")
		case fiber.StatusRequestTimeout:
			return apiError(api.CodeTimeout, "request timed out")
		case fiber.StatusUnsupportedMediaType:
			return apiError(api.CodeUnsupportedMedia, "unsupported Content-Type")
		case fiber.StatusRequestHeaderFieldsTooLarge:
			return apiError(api.CodeHeadersTooLarge, "request line and headers too large")
		}
		if fe.Code >= 400 && fe.Code < 500 {
			// fiber's message for a request fasthttp could not parse quotes
			// the request's bytes: never send it back.
			return apiError(api.CodeBadRequest, "malformed request: "+strings.ToLower(http.StatusText(fe.Code)))
		}
	}
	return apiError(api.CodeInternal, "internal error")
}

// errorHandler is the app's one error handler: every error becomes the JSON
// error shape with a stable code and the request id; internal errors are
// logged with that id and never sent.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	ae := toAPIError(err)
	out := *ae
	out.RequestID = requestID(c)
	if out.Code == api.CodeInternal {
		s.log.Error("internal error", zap.String("request_id", out.RequestID), zap.String("route", c.Route().Path), zap.Error(err))
	}
	if (out.Code == api.CodeRateLimited || out.Code == api.CodeAuthRateLimited || out.Code == api.CodeTooManyStreams || out.Code == api.CodeVerifyBusy) && c.GetRespHeader(fiber.HeaderRetryAfter) == "" {
		c.Set(fiber.HeaderRetryAfter, "1")
	}
	return c.Status(out.Code.Status()).JSON(&out)
}
