package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// readJSON decodes the request body into v: Content-Type JSON, at most the
// route's limit (413 beyond), no unknown fields, nothing after the value.
func (s *Server) readJSON(c *fiber.Ctx, v any, optional bool) error {
	b, err := s.readJSONBody(c, optional)
	if err != nil || b == nil {
		return err
	}
	return decodeJSON(b, v)
}

// readJSONBody checks a JSON request's type and size and reads its body. It
// returns nil (and no error) for an empty body when the body is optional.
func (s *Server) readJSONBody(c *fiber.Ctx, optional bool) ([]byte, error) {
	limit := s.jsonLimit(c)
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
			if sc := scratchSpace(c); sc != nil && cl <= len(sc.body) {
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

// dataScratch returns the request's room for the data decoded from the
// base64 strings of the JSON body b, or nil: at most as much as b's length
// in base64 would decode to.
func dataScratch(c *fiber.Ctx, b []byte) []byte {
	if sc := scratchSpace(c); sc != nil {
		n := min(len(sc.data), base64.StdEncoding.DecodedLen(len(b)))
		sc.dataUsed = max(sc.dataUsed, n)
		return sc.data[:n]
	}
	return nil
}

// decodeInto is decodeJSON into a fresh value that then replaces *v, so that
// v, which the fast path fills, stays off the heap.
func decodeInto[T any](b []byte, v *T) error {
	x := new(T)
	if err := decodeJSON(b, x); err != nil {
		return err
	}
	*v = *x
	return nil
}

// decodeJSON decodes exactly one JSON value into v, refusing unknown fields
// and anything after the value.
func decodeJSON(b []byte, v any) error {
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
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return apiError(api.CodeTimeout, "the request body stopped arriving")
	}
	return apiError(api.CodeBadRequest, "reading the request body failed")
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
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of input"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	return "malformed"
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

// keyParam returns the route's key name, checked: by serve, which keeps it
// in the request's state, or here.
func keyParam(c *fiber.Ctx) (string, error) {
	if st := state(c); st != nil && st.key != "" {
		return st.key, nil
	}
	k := c.Params("key")
	if err := cryptosvc.ValidateKeyName(k); err != nil {
		return "", err
	}
	return strings.Clone(k), nil
}

// batchStatus returns 200 when every item succeeded, 207 when some failed,
// and the first failure's status when all failed.
func batchStatus(errs []*api.Error) int {
	failed := 0
	for _, e := range errs {
		if e != nil {
			failed++
		}
	}
	switch {
	case failed == 0:
		return fiber.StatusOK
	case failed < len(errs):
		return api.BatchStatusPartial
	}
	return errs[0].Code.Status()
}

func (s *Server) checkBatch(n int) error {
	if n > s.cfg.MaxBatchItems {
		return apiError(api.CodeTooLarge, fmt.Sprintf("batch of %d items; at most %d", n, s.cfg.MaxBatchItems))
	}
	return nil
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

// respondItems answers a JSON data request: one item, or a batch in items
// (when the request's top-level fields are empty) with a result or an error
// per item, in order. do processes one item; failed builds a batch item's
// error result.
func respondItems[I, R any](s *Server, c *fiber.Ctx, single I, items []I, topLevelSet bool, do func(I) (R, error), failed func(I, *api.Error) R) error {
	if items == nil {
		res, err := do(single)
		if err != nil {
			return err
		}
		return sendResult(c, &res)
	}
	if topLevelSet {
		return apiError(api.CodeBadRequest, "a batch has only items")
	}
	if st := state(c); st != nil {
		st.batch = true
	}
	if err := s.checkBatch(len(items)); err != nil {
		return err
	}
	out := api.BatchResponse[R]{Items: make([]R, len(items))}
	errs := make([]*api.Error, len(items))
	for i := range items {
		res, err := do(items[i])
		if err != nil {
			errs[i] = toAPIError(err)
			res = failed(items[i], errs[i])
		}
		out.Items[i] = res
	}
	return c.Status(batchStatus(errs)).JSON(&out)
}

func (s *Server) handleEncrypt(c *fiber.Ctx) error {
	key, err := keyParam(c)
	if err != nil {
		return err
	}
	if isStream(c) {
		return s.streamEncrypt(c, key)
	}
	b, err := s.readJSONBody(c, false)
	if err != nil {
		return err
	}
	var req api.EncryptRequest
	var fast bool
	if req.Plaintext, req.Context, req.Reference, fast = decodeItem(b, "plaintext", dataScratch(c, b)); !fast {
		if err := decodeInto(b, &req); err != nil {
			return err
		}
	}
	seal := func(it api.EncryptItem) (api.EncryptResult, error) {
		if it.Plaintext == nil {
			return api.EncryptResult{}, apiError(api.CodeBadRequest, "plaintext is required (base64; \"\" for an empty message)")
		}
		ct, info, err := s.svc.Seal(c.UserContext(), key, it.Plaintext, it.Context)
		s.audit(c, OpEncrypt, key, info, len(it.Plaintext), err)
		if err != nil {
			return api.EncryptResult{}, err
		}
		s.met.bytes(string(OpEncrypt), info.AEAD.String(), int64(len(it.Plaintext)))
		return api.EncryptResult{Ciphertext: ct, KeyVersion: info.Version, AEAD: info.AEAD.String(), Reference: it.Reference}, nil
	}
	return respondItems(s, c, req.EncryptItem, req.Items, req.Plaintext != nil || req.Context != nil || req.Reference != "", seal,
		func(it api.EncryptItem, e *api.Error) api.EncryptResult {
			return api.EncryptResult{Reference: it.Reference, Error: e}
		})
}

func (s *Server) handleDecrypt(c *fiber.Ctx) error {
	key, err := keyParam(c)
	if err != nil {
		return err
	}
	if isStream(c) {
		return s.streamDecrypt(c, key)
	}
	b, err := s.readJSONBody(c, false)
	if err != nil {
		return err
	}
	var req api.DecryptRequest
	var fast bool
	if req.Ciphertext, req.Context, req.Reference, fast = decodeItem(b, "ciphertext", dataScratch(c, b)); !fast {
		if err := decodeInto(b, &req); err != nil {
			return err
		}
	}
	open := func(it api.DecryptItem) (api.DecryptResult, error) {
		if it.Ciphertext == nil {
			return api.DecryptResult{}, apiError(api.CodeBadRequest, "ciphertext is required (base64)")
		}
		pt, info, err := s.svc.Open(c.UserContext(), key, it.Ciphertext, it.Context)
		s.audit(c, OpDecrypt, key, info, len(it.Ciphertext), err)
		if err != nil {
			if errors.Is(err, cryptosvc.ErrAuthFailed) {
				s.met.decryptFailure()
			}
			return api.DecryptResult{}, err
		}
		s.met.bytes(string(OpDecrypt), info.AEAD.String(), int64(len(pt)))
		if pt == nil {
			pt = []byte{}
		}
		return api.DecryptResult{Plaintext: pt, KeyVersion: info.Version, Reference: it.Reference}, nil
	}
	return respondItems(s, c, req.DecryptItem, req.Items, req.Ciphertext != nil || req.Context != nil || req.Reference != "", open,
		func(it api.DecryptItem, e *api.Error) api.DecryptResult {
			return api.DecryptResult{Reference: it.Reference, Error: e}
		})
}

func (s *Server) handleRewrap(c *fiber.Ctx) error {
	key, err := keyParam(c)
	if err != nil {
		return err
	}
	if isStream(c) {
		return s.streamRewrap(c, key)
	}
	var req api.RewrapRequest
	if err := s.readJSON(c, &req, false); err != nil {
		return err
	}
	rewrap := func(it api.DecryptItem) (api.RewrapResult, error) {
		if it.Ciphertext == nil {
			return api.RewrapResult{}, apiError(api.CodeBadRequest, "ciphertext is required (base64)")
		}
		ct, info, err := s.svc.Rewrap(c.UserContext(), key, it.Ciphertext, it.Context)
		s.audit(c, OpRewrap, key, info, len(it.Ciphertext), err)
		if err != nil {
			return api.RewrapResult{}, err
		}
		return api.RewrapResult{Ciphertext: ct, KeyVersion: info.Version, AEAD: info.AEAD.String(), Reference: it.Reference}, nil
	}
	return respondItems(s, c, req.DecryptItem, req.Items, req.Ciphertext != nil || req.Context != nil || req.Reference != "", rewrap,
		func(it api.DecryptItem, e *api.Error) api.RewrapResult {
			return api.RewrapResult{Reference: it.Reference, Error: e}
		})
}

func (s *Server) handleDataKey(c *fiber.Ctx) error {
	key, err := keyParam(c)
	if err != nil {
		return err
	}
	var req api.DataKeyRequest
	if err := s.readJSON(c, &req, true); err != nil {
		return err
	}
	op := OpDataKeyPlaintext
	if req.WrappedOnly {
		op = OpDataKey
	}
	if err := s.authorize(c, op, key); err != nil {
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
