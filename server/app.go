package server

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/api"
)

// route is one entry of the route table: the handler with its limits, which
// GET /v1/api publishes.
type route struct {
	method  string
	path    string
	op      Op // "" for unauthenticated routes
	maxBody int64
	timeout time.Duration
	stream  bool
	items   int
	handler fiber.Handler
}

func (s *Server) routes() []route {
	j, to := int64(s.cfg.MaxJSONBody), s.cfg.RequestTimeout
	return []route{
		{method: "POST", path: api.RouteEncrypt, op: OpEncrypt, maxBody: j, timeout: to, stream: true, items: s.cfg.MaxBatchItems, handler: s.handleEncrypt},
		{method: "POST", path: api.RouteDecrypt, op: OpDecrypt, maxBody: j, timeout: to, stream: true, items: s.cfg.MaxBatchItems, handler: s.handleDecrypt},
		{method: "POST", path: api.RouteRewrap, op: OpRewrap, maxBody: j, timeout: to, stream: true, items: s.cfg.MaxBatchItems, handler: s.handleRewrap},
		{method: "POST", path: api.RouteDataKey, op: OpDataKey, maxBody: 64 << 10, timeout: to, handler: s.handleDataKey},
		{method: "GET", path: api.RouteKeys, op: OpKeysRead, timeout: to, handler: s.handleListKeys},
		{method: "GET", path: api.RouteKey, op: OpKeysRead, timeout: to, handler: s.handleDescribeKey},
		{method: "POST", path: api.RouteKey, op: OpKeysAdmin, maxBody: 64 << 10, timeout: to, handler: s.handleCreateKey},
		{method: "DELETE", path: api.RouteKey, op: OpKeysAdmin, timeout: to, handler: s.handleDeleteKey},
		{method: "POST", path: api.RouteKeyRotate, op: OpKeysAdmin, timeout: to, handler: s.handleRotateKey},
		{method: "PUT", path: api.RouteKeyConfig, op: OpKeysAdmin, maxBody: 64 << 10, timeout: to, handler: s.handleConfigureKey},
		{method: "POST", path: api.RouteSpeedRun, op: OpSpeedRun, maxBody: 64 << 10, timeout: 5 * time.Minute, handler: s.handleSpeedRun},
		{method: "GET", path: api.RouteSpeed, timeout: to, handler: s.handleSpeed},
		{method: "GET", path: api.RouteHealthz, timeout: to, handler: s.handleHealthz},
		{method: "GET", path: api.RouteReadyz, timeout: to, handler: s.handleReadyz},
		{method: "GET", path: api.RouteMetrics, timeout: to, handler: s.handleMetrics},
		{method: "GET", path: api.RouteVersion, timeout: to, handler: s.handleVersion},
		{method: "GET", path: api.RouteAPI, timeout: to, handler: s.handleAPI},
		{method: "GET", path: api.RouteOpenAPI, timeout: to, handler: s.handleOpenAPI},
	}
}

// connIdleTimeout closes a keep-alive connection that sends no request for
// this long.
const connIdleTimeout = 2 * time.Minute

func (s *Server) newApp() *fiber.App {
	app := fiber.New(fiber.Config{
		AppName:               "cipherd",
		ErrorHandler:          s.errorHandler,
		DisableStartupMessage: true,
		// Bodies over this size are streamed to the handler instead of read
		// whole; JSON handlers read at most their own limit from the stream.
		StreamRequestBody: true,
		BodyLimit:         64 << 10,
		// Headers and JSON bodies must arrive within RequestTimeout; streaming
		// handlers extend the deadline read by read (StreamIdleTimeout).
		ReadTimeout:     s.cfg.RequestTimeout,
		IdleTimeout:     connIdleTimeout,
		ReadBufferSize:  max(s.cfg.IOBufferSize, 16<<10),
		WriteBufferSize: s.cfg.IOBufferSize,
		// Streamed responses must not be cut by a whole-response deadline;
		// streaming handlers set write deadlines per chunk.
		WriteTimeout: 0,
	})
	app.Use(s.front)
	for _, r := range s.routes() {
		h := []fiber.Handler{}
		if r.op != "" {
			h = append(h, s.authenticate)
		}
		h = append(h, r.handler)
		app.Add(r.method, r.path, h...)
	}
	return app
}
