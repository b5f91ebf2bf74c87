package api

import "time"

// EncryptRequest is the body of POST /v1/encrypt/{key}: one item, or a batch
// in Items (then the other fields must be empty).
type EncryptRequest struct {
	EncryptItem
	Items []EncryptItem `json:"items,omitempty"`
}

// EncryptItem is one message to seal.
type EncryptItem struct {
	Plaintext []byte `json:"plaintext"`
	Context   []byte `json:"context,omitempty"`
	Reference string `json:"reference,omitempty"` // echoed back in a batch
}

// EncryptResult is the result of sealing one item.
type EncryptResult struct {
	Ciphertext []byte `json:"ciphertext,omitzero"` // absent only on a failed item
	KeyVersion uint32 `json:"key_version,omitempty"`
	AEAD       string `json:"aead,omitempty"`
	Reference  string `json:"reference,omitempty"`
	Error      *Error `json:"error,omitempty"` // batch items only
}

// DecryptRequest is the body of POST /v1/decrypt/{key}, one item or a batch.
type DecryptRequest struct {
	DecryptItem
	Items []DecryptItem `json:"items,omitempty"`
}

// DecryptItem is one ciphertext to open.
type DecryptItem struct {
	Ciphertext []byte `json:"ciphertext"`
	Context    []byte `json:"context,omitempty"`
	Reference  string `json:"reference,omitempty"`
}

// DecryptResult is the result of opening one item.
type DecryptResult struct {
	// Plaintext is "" for an empty message; absent only on a failed item.
	Plaintext  []byte `json:"plaintext,omitzero"`
	KeyVersion uint32 `json:"key_version,omitempty"`
	Reference  string `json:"reference,omitempty"`
	Error      *Error `json:"error,omitempty"`
}

// RewrapRequest is the body of POST /v1/rewrap/{key}: ciphertexts moved to the
// key's latest version. A stream's header alone may be sent.
type RewrapRequest = DecryptRequest

// RewrapResult is the result of rewrapping one item.
type RewrapResult = EncryptResult

// BatchResponse wraps the results of a batch, in request order.
type BatchResponse[T any] struct {
	Items []T `json:"items"`
}

// DataKeyRequest is the body of POST /v1/datakey/{key}.
type DataKeyRequest struct {
	// Bytes is the data key's length: 16, 24, 32 (default) or 64.
	Bytes int `json:"bytes,omitempty"`
	// Context is bound to the wrapped copy.
	Context []byte `json:"context,omitempty"`
	// WrappedOnly omits the plaintext key from the response.
	WrappedOnly bool `json:"wrapped_only,omitempty"`
}

// DataKeyResponse carries a fresh data key.
type DataKeyResponse struct {
	Plaintext  []byte `json:"plaintext,omitempty"`
	Wrapped    []byte `json:"wrapped"`
	KeyVersion uint32 `json:"key_version"`
	AEAD       string `json:"aead"`
}

// SealingKeyResponse is the answer of POST /v1/sealkey/{key}: a fresh data
// key and the envelope-mode header that carries it wrapped, for a client
// to seal messages with itself (docs/API.md, Local sealing), within Limits.
type SealingKeyResponse struct {
	Header     []byte      `json:"header"`
	DataKey    []byte      `json:"data_key"`
	KeyVersion uint32      `json:"key_version"`
	AEAD       string      `json:"aead"`
	Limits     LocalLimits `json:"limits"`
}

// LocalLimits bound the use of one sealing key, as the service's operator
// set them: a client seals with it for at most MaxAge, MaxMessages
// messages and MaxBytes of plaintext, whichever comes first.
type LocalLimits struct {
	MaxAge      string `json:"max_age"` // a Go duration, such as "5m0s"
	MaxMessages int64  `json:"max_messages"`
	MaxBytes    int64  `json:"max_bytes"`
}

// MessageKeyRequest is the body of POST /v1/messagekey/{key}, or one item
// of a batch ({"items": [...]}).
type MessageKeyRequest struct {
	// Start is the message's header, salt and commitment.
	Start     []byte `json:"start"`
	Context   []byte `json:"context,omitempty"`
	Reference string `json:"reference,omitempty"`
}

// MessageKeyResult is the key of one message's body: its AEAD key and
// base nonce, which open that message's chunks and no other's.
type MessageKeyResult struct {
	Key        []byte `json:"key,omitempty"`
	Nonce      []byte `json:"nonce,omitempty"`
	KeyVersion uint32 `json:"key_version,omitempty"`
	AEAD       string `json:"aead,omitempty"`
	Reference  string `json:"reference,omitempty"`
	Error      *Error `json:"error,omitempty"`
}

// KeyConfig is a key's configurable metadata.
type KeyConfig struct {
	MinDecryptionVersion uint32   `json:"min_decryption_version,omitempty"`
	AllowedAEADs         []string `json:"allowed_aeads,omitempty"`
	AEAD                 string   `json:"aead,omitempty"`
	DeletionAllowed      bool     `json:"deletion_allowed,omitempty"`
	RotationPeriod       string   `json:"rotation_period,omitempty"` // e.g. "720h"
	// Exportable lets the key be backed up with its material (POST
	// /v1/keys/{key}/backup). Only a key's creation can set it; a
	// change may clear it, for good.
	Exportable bool `json:"exportable,omitempty"`
}

// CreateKeyRequest is the body of POST /v1/keys/{key} (may be empty).
type CreateKeyRequest struct {
	KeyConfig
	// Import, when set, is the material of version 1 (32 bytes) instead of a
	// random secret.
	Import []byte `json:"import,omitempty"`
}

// RotateKeyRequest is the body of POST /v1/keys/{key}/rotate (may be empty).
type RotateKeyRequest struct {
	// Import, when set, is the material of the new version (32 bytes)
	// instead of a random secret.
	Import []byte `json:"import,omitempty"`
}

// KeyVersion is one version's public metadata.
type KeyVersion struct {
	Version uint32    `json:"version"`
	Created time.Time `json:"created"`
}

// Key describes a key; material is never included.
type Key struct {
	Name          string       `json:"name"`
	Created       time.Time    `json:"created"`
	LatestVersion uint32       `json:"latest_version"`
	Versions      []KeyVersion `json:"versions"`
	KeyConfig
	// Usage is the use of each version, by version, on GET
	// /v1/keys/{key} only; absent when the keystore's backend could
	// not be read (never an empty stand-in).
	Usage []KeyVersionUsage `json:"usage,omitempty"`
	// MinAvailableVersion is the lowest version the key holds: a trim
	// destroyed those below it. 1 for a key never trimmed.
	MinAvailableVersion uint32 `json:"min_available_version"`
	// DisabledVersions are the versions that neither seal nor open,
	// ascending; absent when none is.
	DisabledVersions []uint32 `json:"disabled_versions,omitempty"`
	// Deletion is the key's scheduled deletion; absent when none is.
	Deletion *KeyDeletion `json:"deletion,omitempty"`
}

// KeyVersionUsage is the use of one key version since the key was created,
// summed over every replica that shares the keystore (docs/API.md, Keys).
type KeyVersionUsage struct {
	Version uint32 `json:"version"`
	// Sealed counts messages sealed: one-shot, batch items, data keys,
	// streams, and rewraps to this version.
	Sealed uint64 `json:"sealed"`
	// Opened counts messages opened: one-shot, streams and ranges,
	// message keys for local opening, and rewraps from this version.
	Opened uint64 `json:"opened"`
	// LocalSealKeys counts sealing keys handed out for local sealing.
	LocalSealKeys uint64 `json:"local_seal_keys"`
	// LastUsed is when a use was last counted, to within the servers'
	// usage_flush_interval; absent when never.
	LastUsed *time.Time `json:"last_used,omitempty"`
}

// KeyDeletion is a key's scheduled deletion (DELETE /v1/keys/{key}).
type KeyDeletion struct {
	// Scheduled is when the deletion was asked for.
	Scheduled time.Time `json:"scheduled"`
	// DeleteAt is when the key is deleted, unless the deletion is
	// cancelled before (POST /v1/keys/{key}/cancel-deletion).
	DeleteAt time.Time `json:"delete_at"`
}

// TrimKeyRequest is the body of POST /v1/keys/{key}/trim: the versions
// below MinAvailableVersion are destroyed for good. Confirm must be the
// key's name.
type TrimKeyRequest struct {
	MinAvailableVersion uint32 `json:"min_available_version"`
	Confirm             string `json:"confirm"`
}

// KeyBackup is the answer to POST /v1/keys/{key}/backup.
type KeyBackup struct {
	// Backup is the sealed backup (docs/FORMAT.md, Key backups), to give
	// to POST /v1/keys/{key}/restore. It holds the key's material: keep
	// it as the key itself is kept.
	Backup []byte `json:"backup"`
	// SealedUnder is what seals it: "backup_key" (restores where the same
	// backup key is configured) or "root" (restores under the same root
	// key).
	SealedUnder string `json:"sealed_under"`
	// Key is the name of the key it holds.
	Key string `json:"key"`
	// Versions are the version numbers it holds, ascending.
	Versions []uint32 `json:"versions"`
}

// Backup sealings: the values of KeyBackup.SealedUnder and of the
// backup's ?under=.
const (
	SealedUnderBackupKey = "backup_key"
	SealedUnderRoot      = "root"
)

// RestoreKeyRequest is the body of POST /v1/keys/{key}/restore.
type RestoreKeyRequest struct {
	// Backup is a backup from POST /v1/keys/{key}/backup.
	Backup []byte `json:"backup"`
}

// KeyList is the body of GET /v1/keys.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// CreateTokenRequest is the body of POST /v1/tokens.
type CreateTokenRequest struct {
	// Name labels the token for people: 1–64 characters of A–Z a–z 0–9 . _ -.
	Name string `json:"name"`
	// Policies name the server's policies the token holds (1–64).
	Policies []string `json:"policies"`
	// TTL is the token's lifetime, a Go duration such as "24h"; empty
	// means 24h (or max_token_ttl if shorter). At least 1m, at most
	// max_token_ttl.
	TTL string `json:"ttl,omitempty"`
}

// Token describes a service token: never its secret or its hash.
type Token struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Policies  []string  `json:"policies"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// CreatedToken is the answer of POST /v1/tokens: the token's description
// and, this once, the token itself, to send as "Authorization: Bearer".
type CreatedToken struct {
	Token
	Secret string `json:"token"`
}

// TokenList is the body of GET /v1/tokens: the live tokens, by creation.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// Version is the body of GET /version.
type Version struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	Revision  string `json:"revision,omitempty"`
	BuildID   string `json:"build_id,omitempty"`
}

// Route describes one route in GET /v1/api: what it takes, and every limit
// the server applies to it.
type Route struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Auth is the policy operation checked, on the path's key when it has
	// one, or "none"; AuthOr, when set, is an operation that may stand in
	// for it (a data key without its plaintext).
	Auth   string `json:"auth"`
	AuthOr string `json:"auth_or,omitempty"`
	// MaxBody is the largest JSON body in bytes; 0: the route takes no body.
	MaxBody int64 `json:"max_body"`
	// Timeout is how long a request may take once its headers are in, e.g.
	// "15s" (streams: see StreamIdleTimeout).
	Timeout string `json:"timeout"`
	// Query lists the query parameters the route takes; any other, any
	// other value, or one given twice is 400 invalid_parameter.
	Query []QueryParam `json:"query,omitempty"`
	// RateCost is what a request takes from its caller's rate limit;
	// absent on unauthenticated routes.
	RateCost int `json:"rate_cost,omitempty"`
	// MaxItems is the most items of a batch.
	MaxItems int `json:"max_items,omitempty"`
	// Streaming routes also take application/octet-stream bodies of any
	// size; StreamIdleTimeout is the most time between two reads or writes
	// of such a stream, which has no total timeout.
	Streaming         bool   `json:"streaming,omitempty"`
	StreamIdleTimeout string `json:"stream_idle_timeout,omitempty"`
	// MaxStreamsPerIdentity is how many streams of this server one
	// identity may have in flight (all streaming routes together); absent:
	// no limit.
	MaxStreamsPerIdentity int `json:"max_streams_per_identity,omitempty"`
	// MaxVerifyFull is the most plaintext ?verify=full buffers, and
	// VerifyFullBudget what all ?verify=full requests together may.
	MaxVerifyFull    int64 `json:"max_verify_full,omitempty"`
	VerifyFullBudget int64 `json:"verify_full_budget,omitempty"`
}

// QueryParam is a query parameter a route takes.
type QueryParam struct {
	Name string `json:"name"`
	// Values lists the values the parameter takes; a parameter that takes
	// a form of value (a byte range) has Pattern instead.
	Values      []string `json:"values,omitempty"`
	Pattern     string   `json:"pattern,omitempty"`
	Description string   `json:"description"`
}

// RateLimit is the rate limit of every identity: a token bucket refilled at
// PerSecond tokens a second, holding at most Burst.
type RateLimit struct {
	PerSecond float64 `json:"per_second"`
	Burst     int     `json:"burst"`
}

// APIDescription is the body of GET /v1/api.
type APIDescription struct {
	Routes []Route `json:"routes"`
	// RateLimit is absent when requests are not rate limited.
	RateLimit *RateLimit `json:"rate_limit,omitempty"`
}
