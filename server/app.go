package server

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/server/speedview"
)

// Rate-limit costs: what a request takes from its caller's bucket, by how
// much it loads the server. A key change (and a token's issue or
// revocation) writes the keystore (a file with
// fsync, or a row every replica hears of); a speed run holds a core for up
// to a minute.
const (
	costRead      = 1
	costKeyChange = 5
	costSpeedRun  = 10
)

// speedRunTimeout bounds POST /speed/run: the longest run it takes
// (runMaxTotal of cells) with the known-answer tests, the set-up of each cell
// and a margin for a shared machine.
const speedRunTimeout = 5 * time.Minute

// routes is the route table: see route.go for what each field means and how
// serve applies it.
func (s *Server) routes() []route {
	j, to, items, cost := int64(s.cfg.MaxJSONBody), s.cfg.RequestTimeout, s.cfg.MaxBatchItems, costRead
	const small = 64 << 10 // the JSON body of the other routes
	decrypt := []queryParam{{name: "verify", values: []string{"full"},
		doc: "Streaming decrypt: `full` buffers the plaintext (up to max_verify_full) and answers only after every chunk authenticated."},
		{name: "range", valid: validRange, pattern: "A-B|A-", regex: "^[0-9]+-[0-9]*$", example: "1048576-2097151",
			doc: "Streaming decrypt of a range: bytes A to B (inclusive) of the plaintext, or A to the end. The body is the stream's header, salt and commitment followed by only the chunks that cover the range, from chunk floor(A/16384); see docs/FORMAT.md, Ranges."}}
	deleteWait := []queryParam{{name: "wait", valid: validWait, pattern: "DURATION", regex: `^(0|([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+)$`, example: "720h",
		doc: "How long before the key is deleted, a Go duration of at least key_deletion_min_wait (default key_deletion_default_wait); `0` deletes it at once, where allow_immediate_key_deletion is set."}}
	under := []queryParam{{name: "under", values: []string{api.SealedUnderBackupKey, api.SealedUnderRoot},
		doc: "What seals the backup: `backup_key`, the server's backup_key_file (restores on any server given the same backup key), or `root`, the keystore's root key (restores under the same root key). Default `backup_key` when the server has one, else `root`."}}
	format := []queryParam{{name: "format", values: []string{speedview.FormatJSON, speedview.FormatText, speedview.FormatMR, speedview.FormatHTML},
		doc: "The response format; without it, HTML for a browser (Accept: text/html), else JSON."}}
	// The routes that describe the service and its hosts: open to anyone,
	// or, with protect_info_routes, to callers allowed info-read.
	var info Op
	if s.cfg.ProtectInfoRoutes {
		info = OpInfoRead
	}
	return []route{
		{method: "POST", path: api.RouteEncrypt, op: OpEncrypt, maxBody: j, stream: true, items: items, timeout: to, cost: cost, handler: s.handleEncrypt},
		{method: "POST", path: api.RouteDecrypt, op: OpDecrypt, maxBody: j, stream: true, items: items, verifyFull: s.cfg.MaxVerifyFull, query: decrypt, timeout: to, cost: cost, handler: s.handleDecrypt},
		{method: "POST", path: api.RouteRewrap, op: OpRewrap, maxBody: j, stream: true, items: items, timeout: to, cost: cost, handler: s.handleRewrap},
		{method: "POST", path: api.RouteSealKey, op: OpEncryptLocal, maxBody: small, timeout: to, cost: cost, handler: s.handleSealKey},
		{method: "POST", path: api.RouteMessageKey, op: OpDecryptLocal, maxBody: j, items: items, timeout: to, cost: cost, handler: s.handleMessageKey},
		{method: "POST", path: api.RouteDataKey, op: OpDataKey, orOp: OpDataKeyPlaintext, maxBody: small, timeout: to, cost: cost, handler: s.handleDataKey},
		{method: "GET", path: api.RouteKeys, op: OpKeysRead, lists: true, timeout: to, cost: cost, handler: s.handleListKeys},
		{method: "GET", path: api.RouteKey, op: OpKeysRead, timeout: to, cost: cost, handler: s.handleDescribeKey},
		{method: "POST", path: api.RouteKey, op: OpKeysAdmin, maxBody: small, timeout: to, cost: costKeyChange, handler: s.handleCreateKey},
		{method: "DELETE", path: api.RouteKey, op: OpKeysAdmin, query: deleteWait, timeout: to, cost: costKeyChange, handler: s.handleDeleteKey},
		{method: "POST", path: api.RouteKeyRotate, op: OpKeysAdmin, maxBody: small, timeout: to, cost: costKeyChange, handler: s.handleRotateKey},
		{method: "PUT", path: api.RouteKeyConfig, op: OpKeysAdmin, maxBody: small, timeout: to, cost: costKeyChange, handler: s.handleConfigureKey},
		{method: "POST", path: api.RouteKeyCancelDeletion, op: OpKeysAdmin, timeout: to, cost: costKeyChange, handler: s.handleCancelDeletion},
		{method: "POST", path: api.RouteKeyVersionDisable, op: OpKeysAdmin, timeout: to, cost: costKeyChange, handler: s.handleDisableVersion},
		{method: "POST", path: api.RouteKeyVersionEnable, op: OpKeysAdmin, timeout: to, cost: costKeyChange, handler: s.handleEnableVersion},
		{method: "POST", path: api.RouteKeyTrim, op: OpKeysAdmin, maxBody: small, timeout: to, cost: costKeyChange, handler: s.handleTrimKey},
		{method: "POST", path: api.RouteKeyBackup, op: OpKeysBackup, query: under, timeout: to, cost: costKeyChange, handler: s.handleBackupKey},
		{method: "POST", path: api.RouteKeyRestore, op: OpKeysBackup, maxBody: j, timeout: to, cost: costKeyChange, handler: s.handleRestoreKey},
		{method: "POST", path: api.RouteTokens, op: OpTokensAdmin, maxBody: small, timeout: to, cost: costKeyChange, handler: s.handleCreateToken},
		{method: "GET", path: api.RouteTokens, op: OpTokensAdmin, timeout: to, cost: cost, handler: s.handleListTokens},
		{method: "DELETE", path: api.RouteToken, op: OpTokensAdmin, timeout: to, cost: costKeyChange, handler: s.handleRevokeToken},
		{method: "POST", path: api.RouteSpeedRun, op: OpSpeedRun, maxBody: runMaxBody, timeout: speedRunTimeout, cost: costSpeedRun, handler: s.handleSpeedRun},
		{method: "GET", path: api.RouteSpeed, op: info, query: format, timeout: to, handler: s.handleSpeed},
		{method: "GET", path: api.RouteSpeedFleet, op: info, query: format, timeout: to, handler: s.handleSpeedFleet},
		{method: "GET", path: api.RouteHealthz, timeout: to, handler: s.handleHealthz},
		{method: "GET", path: api.RouteReadyz, timeout: to, handler: s.handleReadyz},
		{method: "GET", path: api.RouteMetrics, op: info, timeout: to, handler: s.handleMetrics},
		{method: "GET", path: api.RouteVersion, op: info, timeout: to, handler: s.handleVersion},
		{method: "GET", path: api.RouteAPI, op: info, timeout: to, handler: s.handleAPI},
		{method: "GET", path: api.RouteOpenAPI, op: info, timeout: to, handler: s.handleOpenAPI},
	}
}

// connIdleTimeout closes a keep-alive connection that sends no request for
// this long.
const connIdleTimeout = 2 * time.Minute

// newApp builds the app of the server's route table.
func (s *Server) newApp() *fiber.App { return s.buildApp(s.routes()) }

// buildApp compiles rows into the route table, which GET /v1/api and the
// OpenAPI document then describe, and builds a fiber app whose one handler,
// front, runs the row the table matches for each request through serve.
// fiber's own router has no route of cipherd's: a second compilation of the
// paths could match differently from the first.
func (s *Server) buildApp(rows []route) *fiber.App {
	tab := compileTable(rows)
	s.tab = tab
	s.openAPIMu.Lock()
	s.openAPIDoc = nil
	s.openAPIMu.Unlock()
	app := fiber.New(fiber.Config{
		AppName:               "cipherd",
		ErrorHandler:          s.errorHandler,
		DisableStartupMessage: true,
		// Bodies over this size are streamed to the handler instead of read
		// whole; JSON handlers read at most their route's limit from the
		// stream.
		StreamRequestBody: true,
		BodyLimit:         64 << 10,
		// Headers and JSON bodies must arrive within RequestTimeout; streaming
		// handlers extend the deadline read by read (StreamIdleTimeout).
		ReadTimeout:     s.cfg.RequestTimeout,
		IdleTimeout:     connIdleTimeout,
		ReadBufferSize:  s.readBufferSize(),
		WriteBufferSize: s.cfg.IOBufferSize,
		// Streamed responses must not be cut by a whole-response deadline;
		// streaming handlers set write deadlines per chunk.
		WriteTimeout: 0,
	})
	s.guardHeaders(app, tab)
	app.Use(func(c *fiber.Ctx) error { return s.front(c, app, tab) })
	return app
}

// readBufferSize is each connection's read buffer: IOBufferSize, but at
// least 16 KiB, as the request line and headers must fit in it.
func (s *Server) readBufferSize() int { return max(s.cfg.IOBufferSize, 16<<10) }
