package server

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/cipherd/cipherd/api"
)

// fasthttp reads a request's headers, then, with StreamRequestBody, up to
// 8 KiB of its body under the request timeout, and only then
// runs the handler. checkHeaders runs in between (fasthttp's HeaderReceived
// hook), on the headers alone, and decides three things from them and the
// route table:
//
//   - a header name that is not an RFC 9110 token (fasthttp accepts a space
//     inside one) or an obsolete line folding: the request is refused (400);
//   - a Content-Length over the route's limit (on a route that takes no
//     body, over the 8 KiB read-ahead): refused (413, or 415 for a type the
//     route does not take) at once, with none of the body read, rather than
//     after 8 KiB arrive or the request timeout passes; with Expect:
//     100-continue no 100 Continue is sent;
//   - a stream body (application/octet-stream on a streaming route): its
//     first byte may take the stream idle timeout to come, like every later
//     one (idleReader), instead of the request timeout, and fasthttp reads
//     ahead one byte of it rather than 8 KiB, so that a stream that starts
//     slowly is not cut while it moves.
//
// A refused request's headers are changed so that fasthttp reads no body
// (Content-Length 0, no Expect) and carry the verdict in headerVerdict; the
// app's handler (refuseVerdict) answers it without running a route, and the
// connection is closed, as the body's bytes are still on it unread.

// headerVerdict is the header that carries checkHeaders' verdict to the
// handler. Its name has a space in it, which makes it a name no request
// that passes checkHeaders can carry: a client cannot forge a verdict, and
// checkHeaders overwrites one a client sent along with its refusal.
const headerVerdict = "Cipherd Verdict"

// The verdicts. A too-large or bad-type verdict is followed by the index of
// the row in the route table, for the access line's route label.
const (
	verdictBadHeader = "bad-header"
	verdictTooLarge  = "too-large "
	verdictBadType   = "bad-type "
)

// headerRoute is a route table row as checkHeaders matches it.
type headerRoute struct {
	method   string
	segments [][]byte // nil (a ":name" parameter) matches any one non-empty segment
	path     string   // the pattern, for the access line
	maxBody  int64    // the largest JSON body; 0: the route takes none
	stream   bool     // also takes application/octet-stream bodies, unlimited
}

// newHeaderRoutes prepares the route table for checkHeaders.
func newHeaderRoutes(rows []route) []headerRoute {
	out := make([]headerRoute, 0, len(rows))
	for _, r := range rows {
		var segs [][]byte
		for _, seg := range strings.Split(strings.Trim(r.path, "/"), "/") {
			if strings.HasPrefix(seg, ":") {
				segs = append(segs, nil)
			} else {
				segs = append(segs, []byte(seg))
			}
		}
		out = append(out, headerRoute{
			method:   r.method,
			segments: segs,
			path:     r.path,
			maxBody:  r.maxBody,
			stream:   r.stream,
		})
	}
	return out
}

// minJSONBody returns the smallest JSON body limit of the routes that take
// one.
func minJSONBody(rows []headerRoute) int64 {
	m := int64(0)
	for _, r := range rows {
		if r.maxBody > 0 && (m == 0 || r.maxBody < m) {
			m = r.maxBody
		}
	}
	return m
}

// matchRoute returns the index of the row that method and path (without its
// query) match, as fiber matches them (case-insensitive, a trailing slash
// ignored), or -1.
func matchRoute(rows []headerRoute, method, path []byte) int {
	path = bytes.TrimSuffix(path, []byte("/"))
	if len(path) == 0 || path[0] != '/' {
		return -1
	}
	path = path[1:]
	for i := range rows {
		r := &rows[i]
		if string(method) != r.method {
			continue
		}
		rest, ok := path, true
		for j, seg := range r.segments {
			var part []byte
			part, rest, _ = bytes.Cut(rest, []byte("/"))
			last := j == len(r.segments)-1
			switch {
			case last && len(rest) > 0,
				seg == nil && len(part) == 0,
				seg != nil && !bytes.EqualFold(part, seg):
				ok = false
			}
			if !ok {
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

// guardHeaders installs checkHeaders and readError, which check requests
// against the served route table (s.table), in app's fasthttp
// server, and in front of fiber's handler the answer to the requests they
// refuse.
func (s *Server) guardHeaders(app *fiber.App) {
	s.headerRoutes = newHeaderRoutes(s.table)
	s.minJSONBody = minJSONBody(s.headerRoutes)
	srv := app.Server()
	srv.HeaderReceived = s.checkHeaders
	srv.ErrorHandler = s.readError
	next := srv.Handler
	srv.Handler = func(fctx *fasthttp.RequestCtx) {
		if !s.refuseVerdict(fctx) && !s.refuseMethod(fctx) {
			next(fctx)
		}
	}
}

// refuseMethod answers a request whose method fiber does not route (it
// would answer a plain-text 400 itself), and reports whether it was one.
func (s *Server) refuseMethod(fctx *fasthttp.RequestCtx) bool {
	switch string(fctx.Method()) {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodDelete,
		fiber.MethodConnect, fiber.MethodOptions, fiber.MethodTrace, fiber.MethodPatch:
		return false
	}
	s.refuse(fctx, apiError(api.CodeBadRequest, "malformed request: unknown method"), routeUnmatched, fctx.Time())
	return true
}

// checkHeaders is fasthttp's HeaderReceived hook; see above.
func (s *Server) checkHeaders(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if !validHeaderNames(h.RawHeaders()) {
		s.refuseBody(h, verdictBadHeader)
		return fasthttp.RequestConfig{}
	}
	cl := h.ContentLength()
	if cl <= 0 {
		// No body (0, or -2: neither a length nor chunks), or chunks
		// (-1), which fasthttp does not read ahead: handlers read them
		// as they come, within the route's limits.
		return fasthttp.RequestConfig{}
	}
	ct := h.ContentType()
	if int64(cl) <= min(s.minJSONBody, prefetchedBody) && hasMediaTypeBytes(ct, api.ContentTypeJSON) {
		// The common case, without a lookup: a JSON body within every
		// route's limit, which fasthttp reads ahead whole, and a route
		// that takes none refuses once it is read.
		return fasthttp.RequestConfig{}
	}
	uri := h.RequestURI()
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	i := matchRoute(s.headerRoutes, h.Method(), uri)
	if i < 0 {
		return fasthttp.RequestConfig{} // 404 or 405: fiber answers, reading no more than usual
	}
	r := &s.headerRoutes[i]
	if r.stream && hasMediaTypeBytes(ct, api.ContentTypeStream) {
		return fasthttp.RequestConfig{ReadTimeout: s.cfg.StreamIdleTimeout, MaxRequestBodySize: 1}
	}
	switch {
	case r.maxBody == 0:
		// A route that takes no body leaves one unread, and its
		// connection is closed after the answer (closeIfUnread): one
		// fasthttp's read-ahead holds costs nothing, a larger one is
		// refused rather than waited for.
		if cl > prefetchedBody {
			s.refuseBody(h, verdictTooLarge+strconv.Itoa(i))
		}
	case int64(cl) > r.maxBody:
		// What the route would answer: 415 for a type it does not take,
		// else 413.
		if !hasMediaTypeBytes(ct, api.ContentTypeJSON) {
			s.refuseBody(h, verdictBadType+strconv.Itoa(i))
		} else {
			s.refuseBody(h, verdictTooLarge+strconv.Itoa(i))
		}
	}
	return fasthttp.RequestConfig{}
}

// refuseBody marks the request refused and makes fasthttp read none of its
// body.
func (s *Server) refuseBody(h *fasthttp.RequestHeader, verdict string) {
	h.Set(headerVerdict, verdict)
	h.Del(fiber.HeaderExpect)
	if cl := h.ContentLength(); cl != 0 && cl != -2 {
		h.SetContentLength(0)
	}
}

// tchar is the set of RFC 9110 token characters, which header names are
// made of.
var tchar = func() (t [256]bool) {
	for _, c := range []byte("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") {
		t[c] = true
	}
	return t
}()

// validHeaderNames reports whether every line of a request's raw header
// block has a token for a name. A line that starts with a space or a tab
// (an obsolete line folding, RFC 9112 section 5.2) fails too. One pass over
// the names, one search for each line's end.
func validHeaderNames(raw []byte) bool {
	for i := 0; i < len(raw); {
		if c := raw[i]; c == '\r' || c == '\n' {
			i++ // the blank line that ends the block
			continue
		}
		j := i
		for j < len(raw) && tchar[raw[j]] {
			j++
		}
		if j == i || j == len(raw) || raw[j] != ':' {
			return false
		}
		end := bytes.IndexByte(raw[j:], '\n')
		if end < 0 {
			return true
		}
		i = j + end + 1
	}
	return true
}

// hasMediaTypeBytes reports whether Content-Type ct, without its
// parameters, is want (lower case), in any case.
func hasMediaTypeBytes(ct []byte, want string) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return bytes.EqualFold(bytes.TrimSpace(ct), []byte(want))
}

// refuseVerdict answers a request that checkHeaders refused, if it is one,
// and reports whether it was.
func (s *Server) refuseVerdict(fctx *fasthttp.RequestCtx) bool {
	v := fctx.Request.Header.Peek(headerVerdict)
	if len(v) == 0 {
		return false
	}
	route := routeUnmatched
	var err error
	if i, ok := bytes.CutPrefix(v, []byte(verdictTooLarge)); ok {
		r := &s.headerRoutes[atoi(i)]
		route = r.path
		if r.maxBody == 0 {
			err = apiError(api.CodeTooLarge, "this route takes no request body")
		} else {
			err = apiError(api.CodeTooLarge, "request body over "+strconv.FormatInt(r.maxBody, 10)+" bytes")
		}
	} else if i, ok := bytes.CutPrefix(v, []byte(verdictBadType)); ok {
		route = s.headerRoutes[atoi(i)].path
		err = apiError(api.CodeUnsupportedMedia, "send Content-Type: application/json (or application/octet-stream on streaming routes)")
	} else {
		err = apiError(api.CodeBadRequest, "malformed request: a header name that is not a token")
	}
	s.refuse(fctx, err, route, fctx.Time())
	return true
}

// atoi is strconv.Atoi for the row indexes checkHeaders writes.
func atoi(b []byte) int {
	n, _ := strconv.Atoi(string(b))
	return n
}

// refuse answers a request that no route runs for: one fasthttp could not
// read, or that checkHeaders refused. It gets a request ID, the error
// shape and an access line like any other, and its connection is closed.
// start is when its headers were in, or zero when unknown.
func (s *Server) refuse(fctx *fasthttp.RequestCtx, err error, route string, start time.Time) {
	c := s.app.AcquireCtx(fctx)
	defer s.app.ReleaseCtx(c)
	if start.IsZero() {
		start = time.Now()
	}
	newRequest(c)
	if herr := s.errorHandler(c, err); herr != nil {
		c.Status(fiber.StatusInternalServerError)
	}
	closeUnread(fctx, fctx.Response.StatusCode())
	s.recordAs(c, route, start, fctx.Response.StatusCode(), false)
}

// readError is fasthttp's ErrorHandler: a request it could not read (a
// malformed request line or header, a timeout before the headers were in)
// is refused with the status fiber would give it.
func (s *Server) readError(fctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne interface{ Timeout() bool }
	switch {
	case errors.As(err, &small):
		err = fiber.ErrRequestHeaderFieldsTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		err = fiber.ErrRequestTimeout
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		err = fiber.ErrRequestEntityTooLarge
	default:
		err = fiber.ErrBadRequest
	}
	// No start: fasthttp stamps a request's time only once it is read, and
	// the context's is a previous request's.
	s.refuse(fctx, err, routeUnmatched, time.Time{})
}
