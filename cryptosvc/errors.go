package cryptosvc

import "errors"

// Errors returned by cryptosvc, for use with errors.Is. Every failure to
// authenticate a ciphertext, whatever its cause (wrong key, wrong context,
// modified bytes, reordered chunks), is ErrAuthFailed and reads the same.
var (
	// ErrAuthFailed: the ciphertext did not authenticate under the key and
	// context given.
	ErrAuthFailed = errors.New("cryptosvc: message authentication failed")
	// ErrTruncated: the ciphertext ends before its final chunk, or its
	// header is incomplete.
	ErrTruncated = errors.New("cryptosvc: ciphertext truncated")
	// ErrMalformed: the header does not follow the sealed format.
	ErrMalformed = errors.New("cryptosvc: malformed ciphertext header")
	// ErrUnsupported: a format version or AEAD this build does not know, or
	// an operation the key's configuration does not allow.
	ErrUnsupported = errors.New("cryptosvc: unsupported")
	// ErrRangeNotSatisfiable: a range decrypt's range starts at or past the
	// end of the plaintext.
	ErrRangeNotSatisfiable = errors.New("cryptosvc: range starts past the end of the plaintext")
	// ErrRangeMismatch: a range decrypt's input holds chunks past those
	// that cover the range.
	ErrRangeMismatch = errors.New("cryptosvc: more chunks than the range covers")
	// ErrTooLarge: the message exceeds the format's 2^38 chunks, or a limit
	// the caller set.
	ErrTooLarge = errors.New("cryptosvc: message too large")

	// ErrKeyNotFound: no key of that name, or no such version.
	ErrKeyNotFound = errors.New("cryptosvc: key not found")
	// ErrKeyExists: a key of that name already exists.
	ErrKeyExists = errors.New("cryptosvc: key already exists")
	// ErrKeyMismatch: the ciphertext names another key than the one given.
	ErrKeyMismatch = errors.New("cryptosvc: ciphertext belongs to another key")
	// ErrVersionRetired: the key version is below the key's minimum
	// decryption version.
	ErrVersionRetired = errors.New("cryptosvc: key version retired")
	// ErrDeletionNotAllowed: the key's configuration forbids deleting it.
	ErrDeletionNotAllowed = errors.New("cryptosvc: key deletion not allowed")
	// ErrKeyPendingDeletion: the key's deletion is scheduled
	// (ScheduleKeyDeletion): until it is cancelled the key neither seals
	// nor opens, nor changes. The errors that wrap it are
	// *PendingDeletionError, which say when the key goes.
	ErrKeyPendingDeletion = errors.New("cryptosvc: key pending deletion")
	// ErrKeyNotPendingDeletion: a cancel of a deletion that is not
	// scheduled.
	ErrKeyNotPendingDeletion = errors.New("cryptosvc: key not pending deletion")
	// ErrVersionDisabled: the key version is disabled: it neither seals
	// nor opens until it is enabled again. The errors that wrap it are
	// *VersionError.
	ErrVersionDisabled = errors.New("cryptosvc: key version disabled")
	// ErrVersionDestroyed: a trim destroyed the key version's material
	// for good. The errors that wrap it are *VersionError.
	ErrVersionDestroyed = errors.New("cryptosvc: key version destroyed")
	// ErrTrimAboveMinDecryption: a trim would destroy a version at or
	// above the key's min_decryption_version, one that still opens.
	ErrTrimAboveMinDecryption = errors.New("cryptosvc: trim above the minimum decryption version")
	// ErrNotExportable: the key was not created exportable, so it is
	// never backed up (BackupKey).
	ErrNotExportable = errors.New("cryptosvc: key not exportable")
	// ErrBackupKeyNotConfigured: a backup sealed, or to be sealed, under a
	// backup key, where the service has none (Config.BackupKey).
	ErrBackupKeyNotConfigured = errors.New("cryptosvc: no backup key configured")
	// ErrInvalidBackup: a key backup does not open: sealed under another
	// key, modified, truncated, or of an unknown format version. It says
	// no more, whatever the cause.
	ErrInvalidBackup = errors.New("cryptosvc: invalid key backup")
	// ErrInvalidKeyName: names are 1 to 128 bytes of A-Z a-z 0-9 . _ - and
	// do not start with a dot or dash.
	ErrInvalidKeyName = errors.New("cryptosvc: invalid key name")
	// ErrInvalidConfig: a key configuration or Config value is invalid.
	ErrInvalidConfig = errors.New("cryptosvc: invalid configuration")

	// ErrTokenNotFound: no service token of that id.
	ErrTokenNotFound = errors.New("cryptosvc: service token not found")
	// ErrTokenExists: a service token of that id already exists.
	ErrTokenExists = errors.New("cryptosvc: service token already exists")

	// ErrReadOnly: the keystore cannot be written (a mounted keyring).
	ErrReadOnly = errors.New("cryptosvc: keystore is read-only")
	// ErrLocked: another process holds the keystore directory.
	ErrLocked = errors.New("cryptosvc: keystore locked by another process")
	// ErrRootKey: the root key is missing, malformed, or does not decrypt
	// the keystore.
	ErrRootKey = errors.New("cryptosvc: root key missing or wrong")
	// ErrConflict: the key changed since it was read (another writer,
	// possibly another replica, won): read it again and retry.
	ErrConflict = errors.New("cryptosvc: key changed concurrently")
	// ErrUnavailable: the keystore's backing database cannot be reached.
	// Keys already in memory keep serving data; writes and lookups of
	// keys not in memory fail until it is back.
	ErrUnavailable = errors.New("cryptosvc: keystore unavailable")
	// ErrClosed: the writer or reader was closed.
	ErrClosed = errors.New("cryptosvc: closed")
)
