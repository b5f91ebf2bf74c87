package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

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
	case errors.Is(err, cryptosvc.ErrKeyPendingDeletion):
		return pendingDeletionError(err)
	case errors.Is(err, cryptosvc.ErrKeyNotPendingDeletion):
		return apiError(api.CodeKeyNotPendingDeletion, "the key's deletion is not scheduled")
	case errors.Is(err, cryptosvc.ErrVersionDisabled), errors.Is(err, cryptosvc.ErrVersionDestroyed):
		return versionError(err)
	case errors.Is(err, cryptosvc.ErrTrimAboveMinDecryption):
		return apiError(api.CodeTrimAboveMinDecryption, "a trim destroys retired versions only: min_available_version must be at most min_decryption_version")
	case errors.Is(err, cryptosvc.ErrNotExportable):
		return apiError(api.CodeKeyNotExportable, "the key was not created exportable: it is never backed up")
	case errors.Is(err, cryptosvc.ErrBackupKeyNotConfigured):
		return apiError(api.CodeBackupKeyNotConfigured, "this server has no backup key (backup_key_file)")
	case errors.Is(err, cryptosvc.ErrInvalidBackup):
		return apiError(api.CodeInvalidBackup, "the backup does not open here")
	case errors.Is(err, cryptosvc.ErrDeletionNotAllowed):
		return apiError(api.CodeDeletionNotAllowed, "the key's configuration does not allow deletion")
	case errors.Is(err, cryptosvc.ErrInvalidKeyName):
		return apiError(api.CodeInvalidKeyName, "key names are 1-128 characters of A-Z a-z 0-9 . _ - not starting with . or -")
	case errors.Is(err, cryptosvc.ErrInvalidConfig):
		return apiError(api.CodeInvalidConfig, configProblem(err))
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

// configProblem is what an ErrInvalidConfig says is wrong, without the
// packages' prefixes, which the code already says: "min_decryption_version
// 9 is above the latest version 1", not "cryptosvc: invalid
// configuration: min_decryption_version 9 ...".
func configProblem(err error) string {
	msg := err.Error()
	if _, detail, ok := strings.Cut(msg, cryptosvc.ErrInvalidConfig.Error()+": "); ok && detail != "" {
		return detail
	}
	return msg
}

// pendingDeletionError says when the key goes: the time is the key's, not
// the request's.
func pendingDeletionError(err error) *api.Error {
	msg := "the key's deletion is scheduled"
	if pe, ok := errors.AsType[*cryptosvc.PendingDeletionError](err); ok {
		msg += " for " + pe.DeleteAt.UTC().Format(time.RFC3339Nano)
	}
	return apiError(api.CodeKeyPendingDeletion, msg+"; until then the key is refused, and POST /v1/keys/{key}/cancel-deletion restores it")
}

// versionError names the version that is disabled or destroyed: a number
// the service parsed (from a ciphertext's header, or the key's latest),
// never request bytes.
func versionError(err error) *api.Error {
	code, state := api.CodeVersionDisabled, "is disabled"
	if errors.Is(err, cryptosvc.ErrVersionDestroyed) {
		code, state = api.CodeVersionDestroyed, "was destroyed by a trim"
	}
	if ve, ok := errors.AsType[*cryptosvc.VersionError](err); ok {
		return apiError(code, "key version "+strconv.FormatUint(uint64(ve.Version), 10)+" "+state)
	}
	return apiError(code, "the key version "+state)
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
