package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// front is the middleware in front of every route: it gives the request
// its ID and state, recovers a handler's panic as an internal error, runs the
// app's error handler itself, so that it sees the status sent, and counts,
// times and logs every request. One middleware instead of three: each
// route fiber steps through costs a lookup and a match. A streamed response
// is still being written when the handler returns: its line says
// stream=true, its latency is the time to the response headers, and the
// audit line at the stream's end has the bytes and the outcome.
func (s *Server) front(c *fiber.Ctx) error {
	st := newRequest(c)
	// fasthttp read the clock when the request was parsed, just before the
	// handler chain: one clock read per request is left, at the end.
	start := c.Context().Time()
	if start.IsZero() { // a RequestCtx not from a fasthttp server
		start = time.Now()
	}
	self := c.Route() // still the current route after Next if none matched
	defer func() {
		if r := recover(); r != nil {
			err, ok := r.(error)
			if !ok {
				err = fmt.Errorf("%v", r)
			}
			if herr := s.errorHandler(c, err); herr != nil {
				c.Status(fiber.StatusInternalServerError)
			}
			s.record(c, self, start, fiber.StatusInternalServerError, true)
		}
	}()
	if err := c.Next(); err != nil {
		if herr := s.errorHandler(c, err); herr != nil {
			c.Status(fiber.StatusInternalServerError)
		}
	}
	s.record(c, self, start, c.Response().StatusCode(), false)
	recycleScratch(c, st)
	return nil
}

// prefetchedBody is how much of a JSON request body fasthttp reads with the
// headers when it streams request bodies (of a stream body it reads one
// byte: checkHeaders). A body up to this size that a handler left unread,
// fasthttp reads and discards after the response, keeping the connection;
// the rest of a larger or chunked body stays on the connection.
const prefetchedBody = 8 << 10

// closeIfUnread ends the connection after this response when part of the
// request body may still be unread on it. Left on the connection, its bytes
// would be parsed as the next request, a desync that a proxy sharing backend
// connections turns into request smuggling; fasthttp would read and discard
// up to 256 KiB of it first, reading a refused upload for nothing. A
// streamed response reads the body to its end or aborts the connection, and
// a successful handler of a route with a body reads it to its end; anything
// else with a large or chunked body closes. A request with neither
// Content-Length nor chunks has no body (RFC 9112 section 6.3), and keeps
// its connection like one with Content-Length: 0.
func (s *Server) closeIfUnread(c *fiber.Ctx, route string, status int) {
	if c.Response().IsBodyStream() {
		return
	}
	if cl := c.Request().Header.ContentLength(); cl == -2 || cl >= 0 && cl <= prefetchedBody {
		return
	}
	if status < 300 && s.readsBody(c.Method(), route) {
		return
	}
	closeUnread(c.Context(), status)
}

// closeUnread ends the connection after this response, which leaves part of
// the request body unread, lingering first (lingerOnClose) unless the client
// timed out and so is not sending.
func closeUnread(fctx *fasthttp.RequestCtx, status int) {
	fctx.SetConnectionClose()
	if status != fiber.StatusRequestTimeout {
		lingerOnClose(fctx.Conn())
	}
}

// readsBody reports whether the route's handler reads the request body (its
// route table entry has a body limit).
func (s *Server) readsBody(method, route string) bool {
	m := s.met
	m.bodyRoutesOnce.Do(func() {
		m.bodyRoutes = map[string]bool{}
		for _, r := range s.table {
			if r.maxBody > 0 {
				m.bodyRoutes[r.method+" "+r.path] = true
			}
		}
	})
	if s.app != nil {
		route = strings.TrimPrefix(route, strings.TrimSuffix(s.app.MountPath(), "/"))
	}
	return m.bodyRoutes[method+" "+route]
}
