package server

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// The route table (routes, in app.go) is the contract of the HTTP API: each
// row says what a route takes and what it may do. It is compiled once
// (table.go), and every place that needs a row finds it there. serve applies
// the row before the handler runs, in this order:
//
//  1. the query string: only the row's parameters, each once, each with one
//     of its values (400 invalid_parameter);
//  2. on a row with an operation: the failed authentications of the
//     client's address (429, before the credential is looked at), the
//     caller's identity (401), its rate limit at the row's cost (429), the
//     key name of the path (400), and the policy check of the operation on
//     that key (403);
//  3. the body: an announced JSON body over the row's limit is refused
//     before a byte of it is read (413);
//  4. the deadline: the handler's context (c.UserContext()) ends after the
//     row's timeout, and whatever the handler blocks on honours it (408).
//
// The handler gets the row and what serve established as a call, and reads
// its limits (the body, the items of a batch, ?verify=full's plaintext)
// from the row. Handlers do the domain work only. GET /v1/api and the
// OpenAPI document are made from the same rows (openapi.go), so what is
// advertised is what is enforced; TestRouteTable* walk every row.

// route is one row of the route table.
type route struct {
	method, path string
	// op is the policy operation the caller needs, on the path's key when
	// the path has one; "" for the unauthenticated routes.
	op Op
	// orOp, when set, may stand in for op: the handler then checks which of
	// the two the request needs (a data key with or without its plaintext
	// depends on the body).
	orOp Op
	// lists: the path has no key and the handler shows only the keys the
	// caller may op on; the caller needs op on some key.
	lists bool
	// maxBody is the largest body the route reads whole (JSON); 0 means the
	// route takes no body.
	maxBody int64
	// stream: the route also takes application/octet-stream bodies of any
	// size, read and written as they flow, each read and write within
	// Config.StreamIdleTimeout; timeout does not apply to them.
	stream bool
	// items is the most items of a batch; 0 for routes without batches.
	items int
	// verifyFull is the most plaintext ?verify=full buffers; 0 where the
	// route has no ?verify.
	verifyFull int64
	// query lists the query parameters the route takes.
	query []queryParam
	// timeout bounds the request once its headers are in: the handler's
	// context ends then.
	timeout time.Duration
	// cost is the tokens a request takes from its caller's rate limit.
	cost int

	handler handlerFunc

	segments  [][]byte // the path's segments, nil for a parameter (set by prepare)
	keySeg    int      // the index of the :key segment, -1 for none (set by prepare)
	keyed     bool     // the path has a :key parameter (set by prepare)
	queryHelp string   // what the query may hold, for the 400 (set by prepare)
}

// handlerFunc is a row's handler: the domain work of a request that passed
// the row's checks.
type handlerFunc func(c *fiber.Ctx, q *call) error

// call is one request to a row, as serve hands it to the row's handler.
type call struct {
	row   *route
	key   string    // the path's key name, checked; "" on a row without one
	param string    // the path's other parameter (a token id, a version), unchecked; "" on a row without one
	id    *identity // the caller; nil on a row without an operation
	st    *reqState // the request's state
}

// queryParam is a query parameter a route takes, and its values.
type queryParam struct {
	name   string
	values []string
	// valid, when set, takes the place of values for a parameter whose
	// values are not a list (a byte range); pattern says what it accepts,
	// to people, and regex to the OpenAPI document.
	valid   func(string) bool
	pattern string
	regex   string
	example string // a value valid takes
	doc     string // for /v1/api and the OpenAPI document
}

// accepts reports whether v is one of the parameter's values.
func (q *queryParam) accepts(v string) bool {
	if q.valid != nil {
		return q.valid(v)
	}
	return slices.Contains(q.values, v)
}

// prepare fills in what the table and serve derive from the row.
func (r *route) prepare() {
	r.segments, r.keySeg = splitPattern(r.path)
	r.keyed = r.keySeg >= 0
	if len(r.query) == 0 {
		r.queryHelp = "this route takes no query parameters"
		return
	}
	var b strings.Builder
	b.WriteString("this route takes")
	for i, q := range r.query {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s=%s", q.name, q.form())
	}
	r.queryHelp = b.String()
}

// form is what the parameter takes, to people: its pattern or its values.
func (q *queryParam) form() string {
	if q.pattern != "" {
		return q.pattern
	}
	return strings.Join(q.values, "|")
}

// serve runs the row r for the request: the checks of the row, then the
// row's handler. args are the path's parameters as the table matched them.
func (s *Server) serve(c *fiber.Ctx, st *reqState, r *route, args pathArgs) error {
	st.call = call{row: r, st: st}
	q := &st.call
	if err := r.checkQuery(c); err != nil {
		return err
	}
	if r.op != "" {
		id, err := s.authenticate(c)
		if err != nil {
			return err
		}
		q.id = id
		if err := s.rateLimit(c, id, r.cost); err != nil {
			return err
		}
	}
	if r.keyed {
		if err := cryptosvc.ValidateKeyName(string(args.key)); err != nil {
			return err
		}
		q.key = string(args.key) // a copy: the path is in a buffer fasthttp reuses
	}
	if args.param != nil {
		q.param = string(args.param)
	}
	if r.op != "" && !r.allowed(q.id, q.key) {
		return forbidden(r.op, q.key)
	}
	if err := r.checkBody(c); err != nil {
		return err
	}
	streamed := r.stream && isStream(c)
	if !streamed && len(c.Request().Header.PeekAll(api.HeaderContext)) > 0 {
		// Ignored, the header would leave a JSON request's message bound
		// to no context while its caller believed it bound.
		return apiError(api.CodeBadRequest, api.HeaderContext+" gives a streamed body's context; a JSON request gives it in its body's \"context\" field")
	}
	if r.timeout > 0 && !streamed {
		// fasthttp read the clock when the request was parsed.
		st.ctx.start(c.UserContext(), c.Context().Time().Add(r.timeout))
		defer st.ctx.end()
		c.SetUserContext(&st.ctx)
	}
	return r.handler(c, q)
}

// checkQuery refuses a query string with a parameter the row does not
// take, a value it does not list, or a parameter twice. The message names
// what the row takes, never what was sent.
func (r *route) checkQuery(c *fiber.Ctx) error {
	if len(c.Request().URI().QueryString()) == 0 {
		return nil
	}
	var seen uint64 // bit i: r.query[i] was given
	for k, v := range c.Context().QueryArgs().All() {
		// The messages name the parameter only once it is one of the
		// row's, and never repeat the value.
		i := slices.IndexFunc(r.query, func(q queryParam) bool { return q.name == string(k) })
		switch {
		case i < 0 && len(r.query) == 0:
			return apiError(api.CodeInvalidParameter, r.queryHelp)
		case i < 0:
			return apiError(api.CodeInvalidParameter, "unknown query parameter; "+r.queryHelp)
		case seen&(1<<i) != 0:
			return apiError(api.CodeInvalidParameter, fmt.Sprintf("query parameter %s given twice; %s", r.query[i].name, r.queryHelp))
		case !r.query[i].accepts(string(v)):
			q := &r.query[i]
			msg := fmt.Sprintf("query parameter %s takes %s", q.name, q.form())
			if q.example != "" {
				msg += ", for example " + q.name + "=" + q.example
			}
			return apiError(api.CodeInvalidParameter, msg)
		}
		seen |= 1 << i
	}
	return nil
}

// checkBody refuses a JSON body whose announced length is over the row's
// limit, before reading it (the front middleware then closes the
// connection, whose unread body could not be told from the next request). A
// chunked body has no announced length: the handler reads at most the limit
// of it (readJSONBody). A route without a body limit reads no body: one sent
// is left unread, and the connection closed after the answer.
func (r *route) checkBody(c *fiber.Ctx) error {
	// A route without a limit reads no body; one that is not JSON the
	// handler refuses (415).
	if cl := int64(c.Request().Header.ContentLength()); cl > r.maxBody && r.maxBody > 0 && isJSON(c) {
		return apiError(api.CodeTooLarge, fmt.Sprintf("request body over %d bytes", r.maxBody))
	}
	return nil
}

// allowed reports whether id may do the row's operation: on the path's key,
// on some key for a listing, or with no key.
func (r *route) allowed(id *identity, key string) bool {
	switch {
	case r.keyed:
		return id.allowed(r.op, key) || r.orOp != "" && id.allowed(r.orOp, key)
	case r.lists:
		return id.allowedSome(r.op)
	}
	return id.allowed(r.op, "")
}

// forbidden is the 403 of op: it names the operation, which the route table
// publishes, and not the key, which is the caller's.
func forbidden(op Op, key string) error {
	if key == "" {
		return apiError(api.CodeForbidden, "not allowed to "+string(op))
	}
	return apiError(api.CodeForbidden, "not allowed to "+string(op)+" with this key")
}
