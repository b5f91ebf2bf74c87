package server

import (
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/cipherd/cipherd/api"
)

// front is the handler of app, whose route table is tab: it gives the request its ID and state,
// finds its row in the route table and runs it (serve), recovers a
// handler's panic as an internal error, runs the app's error handler
// itself, so that it sees the status sent, and counts, times and logs every
// request. A streamed response is still being written when the handler
// returns: its line says stream=true, its latency is the time to the
// response headers, and the audit line at the stream's end has the bytes
// and the outcome.
func (s *Server) front(c *fiber.Ctx, app *fiber.App, tab *routeTable) error {
	st := newRequest(c)
	// fasthttp read the clock when the request was parsed, just before the
	// handler: one clock read per request is left, at the end.
	start := c.Context().Time()
	if start.IsZero() { // a RequestCtx not from a fasthttp server
		start = time.Now()
	}
	path := routePath(c, app)
	row, args, pathKnown := tab.match(c.Request().Header.Method(), path)
	defer func() {
		if r := recover(); r != nil {
			err, ok := r.(error)
			if !ok {
				err = fmt.Errorf("%v", r)
			}
			if herr := s.errorHandler(c, err); herr != nil {
				c.Status(fiber.StatusInternalServerError)
			}
			s.record(c, row, start, fiber.StatusInternalServerError, true)
		}
	}()
	var err error
	switch {
	case row != nil:
		err = s.serve(c, st, row, args)
	case pathKnown:
		c.Set(fiber.HeaderAllow, tab.allow(path))
		err = apiError(api.CodeMethodNotAllowed, "method not allowed on this route")
	default:
		err = apiError(api.CodeRouteNotFound, "no such route")
	}
	// The records go to the audit trail before the answer: a request it
	// cannot record fails rather than go unrecorded.
	if aerr := s.commitAudit(st); aerr != nil {
		err = aerr
	}
	if err != nil {
		if herr := s.errorHandler(c, err); herr != nil {
			c.Status(fiber.StatusInternalServerError)
		}
	}
	s.record(c, row, start, c.Response().StatusCode(), false)
	recycleScratch(c, st)
	return nil
}

// routePath is the path the route table matches for the request: its
// target's, as checkHeaders sees it, less the path app is mounted at in a
// host app.
func routePath(c *fiber.Ctx, app *fiber.App) []byte {
	p := requestPath(c.Request().Header.RequestURI())
	if mp := strings.TrimSuffix(app.MountPath(), "/"); mp != "" {
		if len(p) < len(mp) || !strings.EqualFold(string(p[:len(mp)]), mp) {
			return nil
		}
		p = p[len(mp):]
	}
	return p
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
// a successful handler of a row with a body limit reads it to its end;
// anything else with a large or chunked body closes. A request with neither
// Content-Length nor chunks has no body (RFC 9112 section 6.3), and keeps
// its connection like one with Content-Length: 0. row is nil for a request
// no row ran for.
func (s *Server) closeIfUnread(c *fiber.Ctx, row *route, status int) {
	if c.Response().IsBodyStream() {
		return
	}
	if cl := c.Request().Header.ContentLength(); cl == -2 || cl >= 0 && cl <= prefetchedBody {
		return
	}
	if status < 300 && row != nil && row.maxBody > 0 {
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
