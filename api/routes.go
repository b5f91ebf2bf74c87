package api

// Routes. {key} is a key name (1–128 bytes of A–Z a–z 0–9 . _ -).
const (
	RouteEncrypt = "/v1/encrypt/:key"
	RouteDecrypt = "/v1/decrypt/:key"
	RouteRewrap  = "/v1/rewrap/:key"
	RouteDataKey = "/v1/datakey/:key"

	// Local sealing and opening (client.LocalSealer, client.OpenLocal).
	RouteSealKey    = "/v1/sealkey/:key"
	RouteMessageKey = "/v1/messagekey/:key"

	RouteKeys      = "/v1/keys"
	RouteKey       = "/v1/keys/:key"
	RouteKeyRotate = "/v1/keys/:key/rotate"
	RouteKeyConfig = "/v1/keys/:key/config"

	// The key lifecycle: a scheduled deletion's cancel, versions disabled
	// and enabled ({version} is a version number), and the trim of retired
	// versions.
	RouteKeyCancelDeletion = "/v1/keys/:key/cancel-deletion"
	RouteKeyVersionDisable = "/v1/keys/:key/versions/:version/disable"
	RouteKeyVersionEnable  = "/v1/keys/:key/versions/:version/enable"
	RouteKeyTrim           = "/v1/keys/:key/trim"

	// Key backups: a backup of the key, and the restore of a backup as
	// the key ({key} the name it is restored under).
	RouteKeyBackup  = "/v1/keys/:key/backup"
	RouteKeyRestore = "/v1/keys/:key/restore"

	// Service tokens: {id} is a token's id (16 lowercase hex digits).
	RouteTokens = "/v1/tokens"
	RouteToken  = "/v1/tokens/:id"

	RouteSpeed      = "/speed"
	RouteSpeedRun   = "/speed/run"
	RouteSpeedFleet = "/speed/fleet"
	RouteHealthz    = "/healthz"
	RouteReadyz     = "/readyz"
	RouteMetrics    = "/metrics"
	RouteVersion    = "/version"
	RouteAPI        = "/v1/api"
	RouteOpenAPI    = "/v1/openapi.json"
)

// Headers of the streaming routes.
const (
	// HeaderContext carries the context (additional data) of a streaming
	// request, base64-encoded.
	HeaderContext = "Cipherd-Context"
	// HeaderKeyVersion and HeaderAEAD describe the sealed stream in the
	// response to a streaming encrypt.
	HeaderKeyVersion = "Cipherd-Key-Version"
	HeaderAEAD       = "Cipherd-Aead"
	// TrailerStatus ends a streaming decrypt: "ok" when every chunk
	// authenticated and the stream was complete. A failed stream is aborted
	// instead, without the terminating chunk, so it never reads as complete.
	TrailerStatus = "Cipherd-Status"
	// HeaderRequestID is echoed on every response.
	HeaderRequestID = "X-Request-Id"

	ContentTypeJSON   = "application/json"
	ContentTypeStream = "application/octet-stream"
)
