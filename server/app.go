package server

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"time"
	"unsafe"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

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

// localsKey is the type of the keys of cipherd's values in a request's
// locals: a small integer compares faster than a string, and no other
// package's key can equal one.
type localsKey uint8

const (
	localsRequest  localsKey = iota // *reqState
	localsIdentity                  // *identity
)

// reqState is what the middleware and the handlers of one request share: its
// ID, and the audit record of its one cryptographic operation, which goes
// out on the request's access line instead of a line of its own.
type reqState struct {
	id      string
	batch   bool         // the handler audits several items: each gets its own line
	audit   auditRecord  // the request's operation, to be logged on its access line; zero if none
	line    accessLine   // the access line, written when the request ends
	fields  [1]zap.Field // the line as the one field of its entry
	scratch *reqScratch  // taken on first use (scratchSpace)
	idText  [24]byte     // a generated ID's text, which id points to
}

// newRequest starts a request's state: its ID, the caller's X-Request-Id
// when it is short and plain, or a new one, echoed on the response.
func newRequest(c *fiber.Ctx) *reqState {
	st := new(reqState)
	if id := c.Request().Header.Peek(api.HeaderRequestID); plainID(id) {
		st.id = string(id) // a copy: the header is in a buffer fasthttp reuses
	} else {
		// 96 random bits from the runtime's ChaCha8 generator (seeded by the
		// OS): an ID needs to be unique, not secret, and crypto/rand cost a
		// getrandom per request. Its text lives in the state, which is never
		// recycled: one allocation for both.
		var b [12]byte
		binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
		binary.LittleEndian.PutUint32(b[8:], rand.Uint32())
		hex.Encode(st.idText[:], b[:])
		st.id = unsafe.String(&st.idText[0], len(st.idText))
	}
	c.Locals(localsRequest, st)
	c.Response().Header.SetCanonical(headerRequestID, unsafe.Slice(unsafe.StringData(st.id), len(st.id)))
	return st
}

// headerRequestID is api.HeaderRequestID as fasthttp normalizes it, so that
// setting it on a response skips that step.
var headerRequestID = []byte(api.HeaderRequestID)

// recycleScratch hands the request's scratch space back for the next
// request, unless a streamed response, written after the handlers return,
// may still read it.
func recycleScratch(c *fiber.Ctx, st *reqState) {
	if sc := st.scratch; sc != nil && !c.Response().IsBodyStream() {
		st.scratch = nil
		clear(sc.body[:sc.bodyUsed])
		clear(sc.data[:sc.dataUsed])
		sc.bodyUsed, sc.dataUsed = 0, 0
		scratches.Put(sc)
	}
}

// reqScratch is room for a small JSON body and the base64 data it carries,
// so that the commonest requests allocate neither. It holds request data:
// it is cleared before it is recycled. The request's state is not recycled
// itself: a logger's core may keep the access line it points to.
type reqScratch struct {
	body [1024]byte
	data [768]byte
	// How much of each may hold data: what recycling clears.
	bodyUsed, dataUsed int
}

var scratches = sync.Pool{New: func() any { return new(reqScratch) }}

// scratchSpace returns the request's scratch space, or nil for a context
// that did not pass through the front middleware.
func scratchSpace(c *fiber.Ctx) *reqScratch {
	st := state(c)
	if st == nil {
		return nil
	}
	if st.scratch == nil {
		st.scratch = scratches.Get().(*reqScratch)
	}
	return st.scratch
}

func plainID(id []byte) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			return false
		}
	}
	return true
}

// state returns the request's shared state; nil for a context that did not
// pass through the front middleware.
func state(c *fiber.Ctx) *reqState {
	st, _ := c.Locals(localsRequest).(*reqState)
	return st
}

func requestID(c *fiber.Ctx) string {
	if st := state(c); st != nil {
		return st.id
	}
	return ""
}
