package server

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"unicode"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// readJSON decodes the request body into v: Content-Type JSON, at most the
// row's limit (413 beyond), no unknown fields, nothing after the value.
func readJSON(c *fiber.Ctx, q *call, v any, optional bool) error {
	b, err := readJSONBody(c, q, optional)
	if err != nil || b == nil {
		return err
	}
	return decodeJSON(b, v)
}

// readJSONBody checks a JSON request's type and size and reads its body,
// within the row's limit. It returns nil (and no error) for an empty body
// when the body is optional.
func readJSONBody(c *fiber.Ctx, q *call, optional bool) ([]byte, error) {
	limit := int(q.row.maxBody)
	if !isJSON(c) && !(optional && c.Request().Header.ContentLength() == 0) {
		return nil, apiError(api.CodeUnsupportedMedia, "send Content-Type: application/json (or application/octet-stream on streaming routes)")
	}
	if cl := c.Request().Header.ContentLength(); cl > limit {
		return nil, apiError(api.CodeTooLarge, fmt.Sprintf("request body over %d bytes", limit))
	}
	var b []byte
	if bs := c.Context().RequestBodyStream(); bs != nil {
		var err error
		if cl := c.Request().Header.ContentLength(); cl >= 0 {
			// The length is known (and within the limit): one read into a
			// buffer of that size, rather than ReadAll's growing one.
			if sc := q.st.scratchSpace(); cl <= len(sc.body) {
				b = sc.body[:cl]
				sc.bodyUsed = max(sc.bodyUsed, cl)
			} else {
				b = make([]byte, cl)
			}
			_, err = io.ReadFull(bs, b)
		} else {
			b, err = io.ReadAll(io.LimitReader(bs, int64(limit)+1))
		}
		if err != nil {
			return nil, bodyReadError(c, err)
		}
	} else {
		b = c.Body() // a host app without StreamRequestBody read it whole
	}
	if len(b) > limit {
		return nil, apiError(api.CodeTooLarge, fmt.Sprintf("request body over %d bytes", limit))
	}
	if optional && len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	return b, nil
}

// dataScratch returns room for the data decoded from the base64 strings of
// the JSON body b: as much as b's length in base64 would decode to, in the
// request's scratch space when it fits.
func dataScratch(st *reqState, b []byte) []byte {
	n := base64.StdEncoding.DecodedLen(len(b))
	if sc := st.scratchSpace(); n <= len(sc.data) {
		sc.dataUsed = max(sc.dataUsed, n)
		return sc.data[:n]
	}
	return make([]byte, n) // one buffer for every item of a batch
}

// decodeJSON decodes exactly one JSON object into v, refusing unknown
// fields, anything after the value, and what strictJSON refuses.
func decodeJSON(b []byte, v any) error {
	if err := strictJSON(b, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiError(api.CodeBadRequest, "invalid JSON: "+jsonErrorText(err))
	}
	if dec.More() {
		return apiError(api.CodeBadRequest, "invalid JSON: data after the value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return apiError(api.CodeBadRequest, "invalid JSON: data after the value")
	}
	return nil
}

// bodyReadError answers a request whose body could not be read: 408 when it
// stopped arriving, 400 when it was cut short or badly framed. The rest of the
// body is unread, so the connection is closed rather than reused.
func bodyReadError(c *fiber.Ctx, err error) error {
	c.Context().SetConnectionClose()
	if timedOut(err) {
		return apiError(api.CodeTimeout, "the request body stopped arriving")
	}
	return apiError(api.CodeBadRequest, "reading the request body failed")
}

// timedOut reports whether err is a read that hit its deadline. A chunked
// body's error comes as fasthttp.ErrBrokenChunk, which embeds its cause as
// an error interface: the cause's Unwrap is not promoted, so errors.As
// cannot reach the net.Error, and only the text, which ends with the
// cause's, tells a stalled chunked body from a broken one.
func timedOut(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return ne.Timeout()
	}
	var bc fasthttp.ErrBrokenChunk
	return errors.As(err, &bc) && strings.HasSuffix(bc.Error(), os.ErrDeadlineExceeded.Error())
}

// jsonErrorText describes a decoding error without quoting the input.
func jsonErrorText(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var be base64.CorruptInputError
	switch {
	case errors.As(err, &be):
		return fmt.Sprintf("bad base64 at byte %d of a field (byte fields are standard base64)", int64(be))
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at offset %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", jsonFieldPath(te.Field), jsonKind(te.Type), te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of input"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field" // its name is request data: not repeated
	}
	return "malformed"
}

// jsonFieldPath is a field's path as the request spells it: encoding/json
// puts the Go names of embedded structs in it (KeyConfig.allowed_aeads),
// which the API's JSON names, all lower case, never are.
func jsonFieldPath(path string) string {
	var out []string
	for seg := range strings.SplitSeq(path, ".") {
		if seg != "" && !unicode.IsUpper(rune(seg[0])) {
			out = append(out, seg)
		}
	}
	return strings.Join(out, ".")
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// jsonKind names the JSON value a field of Go type t takes.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	if t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

func isJSON(c *fiber.Ctx) bool { return hasMediaType(c, api.ContentTypeJSON) }

func isStream(c *fiber.Ctx) bool { return hasMediaType(c, api.ContentTypeStream) }

// hasMediaType reports whether the request's Content-Type, without its
// parameters, is want (lower case), in any case. fasthttp keeps the header
// in a field of its own: no search, no copy.
func hasMediaType(c *fiber.Ctx, want string) bool {
	ct := c.Request().Header.ContentType()
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(string(bytes.TrimSpace(ct)), want)
}

// sendResult answers with one result as JSON, written straight into the
// response's buffer when the fast encoder takes it.
func sendResult[R any](c *fiber.Ctx, res *R) error {
	resp := c.Response()
	body := resp.SwapBody(nil)[:0]
	ok := false
	switch r := any(res).(type) {
	case *api.EncryptResult:
		body, ok = appendEncryptResult(body, r)
	case *api.DecryptResult:
		body, ok = appendDecryptResult(body, r)
	}
	resp.SwapBody(body)
	if !ok {
		// A copy, so that res stays off the heap on the fast path.
		v := *res
		return c.JSON(&v)
	}
	resp.Header.SetContentType(fiber.MIMEApplicationJSON)
	return nil
}

// readDataRequest reads and decodes the JSON body of a data route: one item,
// or a batch (then with no top-level field but items, and within the row's
// items).
func readDataRequest(c *fiber.Ctx, q *call, dataField string) (dataRequest, error) {
	b, err := readJSONBody(c, q, false)
	if err != nil {
		return dataRequest{}, err
	}
	req, derr := decodeDataRequest(b, dataField, dataScratch(q.st, b), q.row.items)
	if derr != nil {
		return dataRequest{}, derr
	}
	if req.items != nil {
		if req.topLevel {
			return dataRequest{}, apiError(api.CodeBadRequest, "a batch has only items")
		}
		q.st.batch = true
	}
	return req, nil
}

// respondItems answers a decoded data request: one item (audited on the
// request's access line), or a batch.
func respondItems[R any](s *Server, c *fiber.Ctx, op Op, key string, req *dataRequest, do func(dataItem) (R, cryptosvc.Info, int, error), failed func(dataItem, *api.Error) R) error {
	if req.items != nil {
		return respondBatch(s, c, op, key, req.items, do, failed)
	}
	res, info, n, err := do(req.single)
	if err != errCiphertextRequired && err != errStartRequired { // refused before any cryptography: not audited
		s.auditMsg(c, op, key, info, n, err, req.single.context, req.single.data)
	}
	if err != nil {
		return err
	}
	return sendResult(c, &res)
}

func (s *Server) handleEncrypt(c *fiber.Ctx, q *call) error {
	key := q.key
	if isStream(c) {
		return s.withStream(c, func(release func()) error { return s.streamEncrypt(c, key, release) })
	}
	req, err := readDataRequest(c, q, "plaintext")
	if err != nil {
		return err
	}
	if req.items != nil {
		return s.encryptBatch(c, key, req.items)
	}
	it := req.single
	if it.data == nil {
		return errPlaintextRequired
	}
	ct, info, err := s.svc.Seal(c.UserContext(), key, it.data, it.context)
	s.auditMsg(c, OpEncrypt, key, info, len(it.data), err, it.context, ct)
	if err != nil {
		return err
	}
	s.met.bytes(string(OpEncrypt), info.AEAD.String(), int64(len(it.data)))
	return sendResult(c, &api.EncryptResult{Ciphertext: ct, KeyVersion: info.Version, AEAD: info.AEAD.String(), Reference: it.reference})
}

var errCiphertextRequired = apiError(api.CodeBadRequest, "ciphertext is required (base64)")

func (s *Server) handleDecrypt(c *fiber.Ctx, q *call) error {
	key := q.key
	if isStream(c) {
		return s.withStream(c, func(release func()) error { return s.streamDecrypt(c, q, release) })
	}
	if _, ranged := queryRange(c); ranged {
		return apiError(api.CodeBadRequest, "?range decrypts part of a stream: send the stream's start and chunks as application/octet-stream")
	}
	req, err := readDataRequest(c, q, "ciphertext")
	if err != nil {
		return err
	}
	open := func(it dataItem) (api.DecryptResult, cryptosvc.Info, int, error) {
		if it.data == nil {
			return api.DecryptResult{}, cryptosvc.Info{}, 0, errCiphertextRequired
		}
		pt, info, err := s.svc.Open(c.UserContext(), key, it.data, it.context)
		if err != nil {
			if errors.Is(err, cryptosvc.ErrAuthFailed) {
				s.met.decryptFailure()
			}
			return api.DecryptResult{}, info, len(it.data), err
		}
		s.met.bytes(string(OpDecrypt), info.AEAD.String(), int64(len(pt)))
		if pt == nil {
			pt = []byte{}
		}
		return api.DecryptResult{Plaintext: pt, KeyVersion: info.Version, Reference: it.reference}, info, len(it.data), nil
	}
	return respondItems(s, c, OpDecrypt, key, &req, open, func(it dataItem, e *api.Error) api.DecryptResult {
		return api.DecryptResult{Reference: it.reference, Error: e}
	})
}

func (s *Server) handleRewrap(c *fiber.Ctx, q *call) error {
	key := q.key
	if isStream(c) {
		return s.withStream(c, func(release func()) error { return s.streamRewrap(c, key, release) })
	}
	req, err := readDataRequest(c, q, "ciphertext")
	if err != nil {
		return err
	}
	rewrap := func(it dataItem) (api.RewrapResult, cryptosvc.Info, int, error) {
		if it.data == nil {
			return api.RewrapResult{}, cryptosvc.Info{}, 0, errCiphertextRequired
		}
		ct, info, err := s.svc.Rewrap(c.UserContext(), key, it.data, it.context)
		if err != nil {
			return api.RewrapResult{}, info, len(it.data), err
		}
		return api.RewrapResult{Ciphertext: ct, KeyVersion: info.Version, AEAD: info.AEAD.String(), Reference: it.reference}, info, len(it.data), nil
	}
	return respondItems(s, c, OpRewrap, key, &req, rewrap, func(it dataItem, e *api.Error) api.RewrapResult {
		return api.RewrapResult{Reference: it.reference, Error: e}
	})
}

func (s *Server) handleDataKey(c *fiber.Ctx, q *call) error {
	key := q.key
	var req api.DataKeyRequest
	if err := readJSON(c, q, &req, true); err != nil {
		return err
	}
	op := OpDataKeyPlaintext
	if req.WrappedOnly {
		op = OpDataKey
	}
	if err := authorize(q, op); err != nil {
		return err
	}
	switch req.Bytes {
	case 0:
		req.Bytes = 32
	case 16, 24, 32, 64:
	default:
		return apiError(api.CodeBadRequest, "bytes must be 16, 24, 32 or 64")
	}
	dk, err := s.svc.NewDataKey(c.UserContext(), key, req.Bytes, req.Context, !req.WrappedOnly)
	s.audit(c, op, key, dk.Info, req.Bytes, err)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(&api.DataKeyResponse{Plaintext: dk.Plaintext, Wrapped: dk.Wrapped, KeyVersion: dk.Info.Version, AEAD: dk.Info.AEAD.String()})
}
