package api

import "fmt"

// Error is the body of every error response, and the error of a failed batch
// item. Code is stable; Message is for people and may change.
type Error struct {
	Code      Code   `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Code is a stable error code.
type Code string

// Error codes and the HTTP status each is sent with.
const (
	CodeBadRequest          Code = "bad_request"           // 400: malformed JSON, bad base64, wrong types, bad parameters
	CodeInvalidKeyName      Code = "invalid_key_name"      // 400
	CodeInvalidConfig       Code = "invalid_config"        // 400
	CodeInvalidParameter    Code = "invalid_parameter"     // 400: a query parameter or value the route does not take, or one given twice
	CodeMalformed           Code = "malformed_ciphertext"  // 400: not a cipherd ciphertext, or a bad header
	CodeTruncated           Code = "truncated_ciphertext"  // 400
	CodeUnsupported         Code = "unsupported"           // 400: unknown format version or AEAD, AEAD off on this host
	CodeDecryptFailed       Code = "decryption_failed"     // 400: authentication failed (wrong key, context or bytes)
	CodeKeyMismatch         Code = "key_mismatch"          // 400: ciphertext under another key
	CodeAmbiguousAuth       Code = "ambiguous_credentials" // 400: two credentials: Authorization or a forwarded certificate twice, or both
	CodeRangeMismatch       Code = "range_mismatch"        // 400: a range decrypt's body holds chunks past those that cover the range
	CodeInvalidToken        Code = "invalid_token_request" // 400: a service token's name, policies or ttl is invalid
	CodeUnauthenticated     Code = "unauthenticated"       // 401
	CodeForbidden           Code = "forbidden"             // 403
	CodeKeyNotFound         Code = "key_not_found"         // 404
	CodeRouteNotFound       Code = "not_found"             // 404
	CodeTokenNotFound       Code = "token_not_found"       // 404: no live service token of that id
	CodeMethodNotAllowed    Code = "method_not_allowed"    // 405
	CodeKeyExists           Code = "key_exists"            // 409
	CodeBusy                Code = "busy"                  // 409: a speed run is already in progress
	CodeDeletionNotAllowed  Code = "deletion_not_allowed"  // 409
	CodeReadOnly            Code = "keystore_read_only"    // 409
	CodeConflict            Code = "conflict"              // 409: the key kept changing under this write; retry
	CodeTokensUnsupported   Code = "tokens_unsupported"    // 409: the keystore keeps no service tokens (a keyring)
	CodeVersionRetired      Code = "key_version_retired"   // 410
	CodeTooLarge            Code = "too_large"             // 413: body, item or batch over its limit
	CodeUnsupportedMedia    Code = "unsupported_media"     // 415
	CodeRangeNotSatisfiable Code = "range_not_satisfiable" // 416: a range decrypt's range starts at or past the plaintext's end
	CodeHeadersTooLarge     Code = "headers_too_large"     // 431: the request line and headers over the read buffer
	CodeRateLimited         Code = "rate_limited"          // 429 with Retry-After
	CodeAuthRateLimited     Code = "auth_rate_limited"     // 429 with Retry-After: too many failed authentications from the client's address
	CodeTooManyStreams      Code = "too_many_streams"      // 429 with Retry-After: the identity has max_streams_per_identity streams in flight
	CodeInternal            Code = "internal"              // 500: details are logged, never sent
	CodeNotReady            Code = "not_ready"             // 503
	CodeVerifyBusy          Code = "verify_full_busy"      // 503 with Retry-After: ?verify=full buffers fill verify_full_budget
	// CodeKeystoreUnavailable: the shared keystore's database cannot be
	// reached. Key administration waits for it; encryption and decryption
	// with the keys the replica holds go on. Retry later.
	CodeKeystoreUnavailable Code = "keystore_unavailable" // 503
	CodeTimeout             Code = "timeout"              // 408
	// CodeAuditUnavailable: the audit trail cannot record the operation
	// (a full disk, a read-only file), so the service refuses it rather
	// than answer without a record. Retry later.
	CodeAuditUnavailable Code = "audit_unavailable" // 503

	// The key lifecycle (docs/API.md, Key lifecycle).
	CodeInvalidDeletionWait Code = "invalid_deletion_wait" // 400: a deletion's ?wait below key_deletion_min_wait
	CodeTrimNotConfirmed    Code = "trim_not_confirmed"    // 400: a trim's confirm is not the key's name
	// CodeImmediateDeletionDisallowed: DELETE with ?wait=0 where the
	// server's configuration does not allow immediate deletion.
	CodeImmediateDeletionDisallowed Code = "immediate_deletion_disallowed" // 403
	// CodeKeyPendingDeletion: the key's deletion is scheduled; the
	// message says when. Until then the key is refused to every
	// operation but a description and a cancel.
	CodeKeyPendingDeletion     Code = "key_pending_deletion"      // 409
	CodeKeyNotPendingDeletion  Code = "key_not_pending_deletion"  // 409: a cancel of a deletion not scheduled
	CodeVersionDisabled        Code = "key_version_disabled"      // 409: the version, which the message names, is disabled
	CodeVersionDestroyed       Code = "key_version_destroyed"     // 409: a trim destroyed the version
	CodeTrimAboveMinDecryption Code = "trim_above_min_decryption" // 409: a trim would destroy a version not retired

	// Key backups (docs/API.md, Key backups).
	CodeKeyNotExportable       Code = "key_not_exportable"        // 409: the key was not created exportable
	CodeBackupKeyNotConfigured Code = "backup_key_not_configured" // 400: under=backup_key, or a backup sealed under one, where the server has none
	// CodeInvalidBackup: the backup does not open here: another key
	// sealed it, or it was modified, cut short, or is of an unknown
	// format version. Which of these is not said.
	CodeInvalidBackup Code = "invalid_backup" // 400
)

// Status returns the HTTP status a code is sent with.
func (c Code) Status() int {
	switch c {
	case CodeUnauthenticated:
		return 401
	case CodeForbidden, CodeImmediateDeletionDisallowed:
		return 403
	case CodeKeyNotFound, CodeRouteNotFound, CodeTokenNotFound:
		return 404
	case CodeMethodNotAllowed:
		return 405
	case CodeTimeout:
		return 408
	case CodeKeyExists, CodeDeletionNotAllowed, CodeReadOnly, CodeBusy, CodeConflict, CodeTokensUnsupported,
		CodeKeyPendingDeletion, CodeKeyNotPendingDeletion, CodeVersionDisabled, CodeVersionDestroyed, CodeTrimAboveMinDecryption, CodeKeyNotExportable:
		return 409
	case CodeVersionRetired:
		return 410
	case CodeTooLarge:
		return 413
	case CodeUnsupportedMedia:
		return 415
	case CodeRangeNotSatisfiable:
		return 416
	case CodeHeadersTooLarge:
		return 431
	case CodeRateLimited, CodeAuthRateLimited, CodeTooManyStreams:
		return 429
	case CodeInternal:
		return 500
	case CodeNotReady, CodeVerifyBusy, CodeKeystoreUnavailable, CodeAuditUnavailable:
		return 503
	}
	return 400
}

// BatchStatus is the HTTP status of a batch response: 200 when every item
// succeeded, 207 (Multi-Status) when some failed, and the status of the first
// item's error when all failed.
const BatchStatusPartial = 207
