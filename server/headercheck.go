package server

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// fasthttp reads a request's headers, then, with StreamRequestBody, up to
// 8 KiB of its body under the request timeout, and only then
// runs the handler. checkHeaders runs in between (fasthttp's HeaderReceived
// hook), on the headers alone, and decides these from them and the row the
// route table matches for the request's target (origin or absolute form,
// matched as front matches it):
//
//   - a header name that is not an RFC 9110 token (fasthttp accepts a space
//     inside one) or an obsolete line folding: the request is refused (400);
//   - a Content-Length over the row's limit (on a row that takes no
//     body, over the 8 KiB read-ahead): refused (413, or 415 for a type the
//     row does not take) at once, with none of the body read, rather than
//     after 8 KiB arrive or the request timeout passes; with Expect:
//     100-continue no 100 Continue is sent;
//   - a ?verify=full stream whose Content-Length no plaintext within the
//     row's verifyFull could have: refused (413) the same way;
//   - a stream body (application/octet-stream on a streaming row): its
//     first byte may take the stream idle timeout to come, like every later
//     one (idleReader), instead of the request timeout, and fasthttp reads
//     ahead one byte of it rather than 8 KiB, so that a stream that starts
//     slowly is not cut while it moves.
//
// The hook sees the header alone, not the request it belongs to: the header
// is what carries its verdict to the handler. A refused request's headers
// are changed so that fasthttp reads no body (Content-Length 0, no Expect)
// and carry the verdict in headerVerdict; the app's handler (refuseVerdict)
// answers it without running a row, and the connection is closed, as the
// body's bytes are still on it unread.

// headerVerdict is the header that carries checkHeaders' verdict to the
// handler. Its name has a space in it, which makes it a name no request
// that passes checkHeaders can carry: a client cannot forge a verdict, and
// checkHeaders overwrites one a client sent along with its refusal.
const headerVerdict = "Cipherd Verdict"

// The verdicts. The row is matched again when the verdict is answered.
const (
	verdictBadHeader    = "bad-header"
	verdictTooLarge     = "too-large"
	verdictBadType      = "bad-type"
	verdictVerifyLarge  = "verify-too-large"
	verdictTwoTypes     = "two-content-types"
	verdictStreamLong   = "stream-too-long"
	verdictNoCredential = "no-credential"
)

// guardHeaders installs checkHeaders and readError, which check requests
// against app's route table tab, in app's fasthttp server, and in front of
// fiber's handler the answer to the requests they refuse.
func (s *Server) guardHeaders(app *fiber.App, tab *routeTable) {
	srv := app.Server()
	srv.HeaderReceived = func(h *fasthttp.RequestHeader) fasthttp.RequestConfig { return s.checkHeaders(h, tab) }
	srv.ErrorHandler = s.readError
	next := srv.Handler
	srv.Handler = func(fctx *fasthttp.RequestCtx) {
		if !s.refuseVerdict(fctx, tab) && !s.refuseMethod(fctx, app, tab) {
			next(fctx)
		}
	}
}

// refuseMethod answers a request whose method fiber does not route (it
// would answer a plain-text 400 itself), and reports whether it was one:
// as any method the route does not take, 405 with Allow on a route, 404
// elsewhere.
func (s *Server) refuseMethod(fctx *fasthttp.RequestCtx, app *fiber.App, tab *routeTable) bool {
	switch string(fctx.Method()) {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodDelete,
		fiber.MethodConnect, fiber.MethodOptions, fiber.MethodTrace, fiber.MethodPatch:
		return false
	}
	err := apiError(api.CodeRouteNotFound, "no such route")
	c := app.AcquireCtx(fctx)
	allow := tab.allow(routePath(c, app))
	app.ReleaseCtx(c)
	if allow != "" {
		fctx.Response.Header.Set(fiber.HeaderAllow, allow)
		err = apiError(api.CodeMethodNotAllowed, "method not allowed on this route")
	}
	s.refuse(fctx, err, nil, fctx.Time())
	return true
}

// checkHeaders is fasthttp's HeaderReceived hook; see above.
func (s *Server) checkHeaders(h *fasthttp.RequestHeader, tab *routeTable) fasthttp.RequestConfig {
	ok, types := scanHeaderNames(h.RawHeaders())
	if !ok {
		s.refuseBody(h, verdictBadHeader)
		return fasthttp.RequestConfig{}
	}
	if types > 1 {
		// fasthttp keeps the last; a proxy in front may have judged the
		// request by the first.
		s.refuseBody(h, verdictTwoTypes)
		return fasthttp.RequestConfig{}
	}
	if len(h.Peek(fasthttp.HeaderExpect)) > 0 && len(h.Peek(fasthttp.HeaderAuthorization)) == 0 && len(s.auth().certs) == 0 {
		// A request that asks before it sends its body (Expect:
		// 100-continue) and can carry no credential: no token, and no
		// identity is a certificate. If its row wants one, the 401 is
		// the answer, rather than 100 Continue and an upload only to be
		// refused.
		if r, _, _ := tab.match(h.Method(), requestPath(h.RequestURI())); r != nil && r.op != "" {
			s.refuseBody(h, verdictNoCredential)
			return fasthttp.RequestConfig{}
		}
	}
	cl := h.ContentLength()
	if cl <= 0 {
		// No body (0, or -2: neither a length nor chunks), or chunks
		// (-1), which fasthttp does not read ahead: handlers read them
		// as they come, within the row's limits.
		return fasthttp.RequestConfig{}
	}
	ct := h.ContentType()
	if int64(cl) <= min(tab.minJSONBody, prefetchedBody) && hasMediaTypeBytes(ct, api.ContentTypeJSON) {
		// The common case, without a lookup: a JSON body within every
		// row's limit, which fasthttp reads ahead whole, and a row that
		// takes none refuses once it is read.
		return fasthttp.RequestConfig{}
	}
	target := h.RequestURI()
	r, _, _ := tab.match(h.Method(), requestPath(target))
	if r == nil {
		return fasthttp.RequestConfig{} // 404 or 405: front answers, reading no more than usual
	}
	if r.stream && hasMediaTypeBytes(ct, api.ContentTypeStream) {
		if r.op == OpEncrypt && int64(cl) > cryptosvc.MaxPlaintextLen {
			s.refuseBody(h, verdictStreamLong)
			return fasthttp.RequestConfig{}
		}
		if r.verifyFull > 0 && int64(cl) > cryptosvc.MaxSealedLen(r.verifyFull) && verifyFullAsked(target) {
			s.refuseBody(h, verdictVerifyLarge)
			return fasthttp.RequestConfig{}
		}
		return fasthttp.RequestConfig{ReadTimeout: s.cfg.StreamIdleTimeout, MaxRequestBodySize: 1}
	}
	switch {
	case r.maxBody == 0:
		// A row that takes no body leaves one unread, and its
		// connection is closed after the answer (closeIfUnread): one
		// fasthttp's read-ahead holds costs nothing, a larger one is
		// refused rather than waited for.
		if cl > prefetchedBody {
			s.refuseBody(h, verdictTooLarge)
		}
	case int64(cl) > r.maxBody:
		// What the row would answer: 415 for a type it does not take,
		// else 413.
		if !hasMediaTypeBytes(ct, api.ContentTypeJSON) {
			s.refuseBody(h, verdictBadType)
		} else {
			s.refuseBody(h, verdictTooLarge)
		}
	}
	return fasthttp.RequestConfig{}
}

// verifyFullAsked reports whether the query of target asks for
// ?verify=full, decoded as the handler's c.Query decodes it.
func verifyFullAsked(target []byte) bool {
	_, query, ok := bytes.Cut(target, []byte("?"))
	if !ok {
		return false
	}
	query, _, _ = bytes.Cut(query, []byte("#"))
	args := fasthttp.AcquireArgs()
	defer fasthttp.ReleaseArgs(args)
	args.ParseBytes(query)
	return string(args.Peek("verify")) == "full"
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

// scanHeaderNames reports whether every line of a request's raw header
// block has a token for a name, and counts its Content-Type lines. A line
// that starts with a space or a tab (an obsolete line folding, RFC 9112
// section 5.2) fails too. One pass over the names, one search for each
// line's end.
func scanHeaderNames(raw []byte) (ok bool, contentTypes int) {
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
			return false, contentTypes
		}
		if j-i == len(fasthttp.HeaderContentType) && bytes.EqualFold(raw[i:j], []byte(fasthttp.HeaderContentType)) {
			contentTypes++
		}
		end := bytes.IndexByte(raw[j:], '\n')
		if end < 0 {
			return true, contentTypes
		}
		i = j + end + 1
	}
	return true, contentTypes
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
func (s *Server) refuseVerdict(fctx *fasthttp.RequestCtx, tab *routeTable) bool {
	v := fctx.Request.Header.Peek(headerVerdict)
	if len(v) == 0 {
		return false
	}
	h := &fctx.Request.Header
	r, _, _ := tab.match(h.Method(), requestPath(h.RequestURI()))
	if string(v) == verdictNoCredential && r != nil {
		// The answer authenticate gives a request without a credential:
		// its 401, header and counts, or the 429 of an address over
		// auth_failure_rate.
		s.refuseWith(fctx, r, fctx.Time(), func(c *fiber.Ctx) error {
			if _, err := s.authenticate(c); err != nil {
				return err
			}
			return errNoCredentialAuthenticated
		})
		return true
	}
	var err error
	switch {
	case string(v) == verdictTwoTypes:
		err = apiError(api.CodeBadRequest, "send one Content-Type header line")
	case string(v) == verdictBadHeader || r == nil:
		r = nil
		err = apiError(api.CodeBadRequest, "malformed request: a header name that is not a token")
	case string(v) == verdictStreamLong:
		err = errStreamTooLong
	case string(v) == verdictVerifyLarge:
		err = errVerifyTooLarge(r.verifyFull)
	case string(v) == verdictBadType:
		err = apiError(api.CodeUnsupportedMedia, "send Content-Type: application/json (or application/octet-stream on streaming routes)")
	case r.maxBody == 0:
		err = apiError(api.CodeTooLarge, "this route takes no request body")
	default:
		err = apiError(api.CodeTooLarge, "request body over "+strconv.FormatInt(r.maxBody, 10)+" bytes")
	}
	s.refuse(fctx, err, r, fctx.Time())
	return true
}

// refuse answers a request that no route runs for: one fasthttp could not
// read, or that checkHeaders refused. It gets a request ID, the error
// shape and an access line like any other, and its connection is closed.
// start is when its headers were in, or zero when unknown.
func (s *Server) refuse(fctx *fasthttp.RequestCtx, err error, row *route, start time.Time) {
	s.refuseWith(fctx, row, start, func(*fiber.Ctx) error { return err })
}

// errNoCredentialAuthenticated: checkHeaders found no credential, yet
// authenticate found one. It cannot happen while both read the same
// headers; were they to part, the request is refused, not run.
var errNoCredentialAuthenticated = errors.New("server: a request without a credential authenticated")

// refuseWith is refuse with the error that why returns for the request's
// fiber context.
func (s *Server) refuseWith(fctx *fasthttp.RequestCtx, row *route, start time.Time, why func(*fiber.Ctx) error) {
	c := s.app.AcquireCtx(fctx)
	defer s.app.ReleaseCtx(c)
	if start.IsZero() {
		start = time.Now()
	}
	newRequest(c)
	if herr := s.errorHandler(c, why(c)); herr != nil {
		c.Status(fiber.StatusInternalServerError)
	}
	closeUnread(fctx, fctx.Response.StatusCode())
	s.record(c, row, start, fctx.Response.StatusCode(), false)
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
	s.refuse(fctx, err, nil, time.Time{})
}
