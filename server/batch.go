package server

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// A batch answers every item, in order: a result, or the item's error (an
// item that was valid JSON but wrong fails alone; see fastjson_request.go).
// The status is 200 when every item succeeded, 207 when some failed, and the
// first failure's status when all failed. A batch is audited by one line
// (batchAudit), not a line per item: at 100 items of 64 bytes the per-item
// lines cost as much as the sealing (BenchmarkHandleEncryptBatch).

// batchAudit sums up a batch's items for its one audit line: the operation,
// the key, the key versions used, how many items and bytes, how many failed
// and the first failure's code. Never data, references or context.
type batchAudit struct {
	id, identity string
	op           Op
	key          string
	versions     []uint32 // distinct, in order of first use
	items        int
	failed       int
	bytes        int64
	first        api.Code // the first failure's code
	salts        []byte   // the HMACs of the messages' salts, as JSON array elements
	macGen       uint32   // the audit key's generation
}

// addSalt adds the HMAC of msg's salt (a message or its start) under m.
func (a *batchAudit) addSalt(m *auditMAC, msg []byte) {
	salt := cryptosvc.MessageSalt(msg)
	if m == nil || salt == nil {
		return
	}
	if len(a.salts) > 0 {
		a.salts = append(a.salts, ',')
	}
	a.macGen = m.gen
	a.salts = append(m.appendMAC(append(a.salts, '"'), macSalt, salt), '"')
}

// add counts one item: n bytes under info, or its failure.
func (a *batchAudit) add(info cryptosvc.Info, n int, ae *api.Error) {
	a.items++
	if ae != nil {
		a.failed++
		if a.first == "" {
			a.first = ae.Code
		}
		return
	}
	a.bytes += int64(n)
	for _, v := range a.versions {
		if v == info.Version {
			return
		}
	}
	a.versions = append(a.versions, info.Version)
}

// status is the batch's HTTP status.
func (a *batchAudit) status() int {
	switch {
	case a.failed == 0:
		return fiber.StatusOK
	case a.failed < a.items:
		return api.BatchStatusPartial
	}
	return a.first.Status()
}

func (a *batchAudit) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", a.id)
	enc.AddString("identity", a.identity)
	enc.AddString("op", string(a.op))
	enc.AddString("key", a.key)
	enc.AddArray("key_versions", zapcore.ArrayMarshalerFunc(func(ae zapcore.ArrayEncoder) error {
		for _, v := range a.versions {
			ae.AppendUint32(v)
		}
		return nil
	}))
	enc.AddInt64("items", int64(a.items))
	enc.AddInt64("failed", int64(a.failed))
	enc.AddInt64("bytes", a.bytes)
	outcome := "ok"
	if a.first != "" {
		outcome = string(a.first)
	}
	enc.AddString("outcome", outcome)
	return nil
}

// write logs the batch's audit line, at warn when an item failed, and
// counts its bytes under aead.
func (s *Server) writeBatchAudit(c *fiber.Ctx, a *batchAudit, aead string) {
	if a.bytes > 0 && aead != "" {
		s.met.bytes(string(a.op), aead, a.bytes)
	}
	level := zap.InfoLevel
	if a.failed > 0 {
		level = zap.WarnLevel
	}
	a.id, a.identity = requestID(c), callerName(c)
	if st := state(c); st != nil {
		st.audits = appendBatchRecord(st.audits, c, a)
	}
	if ce := s.log.Check(level, "audit"); ce != nil {
		ce.Write(zap.Inline(a))
	}
}

// encryptBatch seals a batch under the key's latest version, resolved once,
// and writes the response straight into the response's buffer.
func (s *Server) encryptBatch(c *fiber.Ctx, key string, items []dataItem) error {
	z, zerr := s.svc.BatchSealer(c.UserContext(), key)
	a := batchAudit{op: OpEncrypt, key: key}
	var version uint32
	var aead string
	if zerr == nil {
		version, aead = z.Info().Version, z.Info().AEAD.String()
	}
	resp := c.Response()
	body := append(resp.SwapBody(nil)[:0], `{"items":[`...)
	if zerr == nil { // room for every result: one allocation, no copies
		n := 16
		for i := range items {
			n += base64.StdEncoding.EncodedLen(z.SealedLen(len(items[i].data))) + len(items[i].reference) + 64
		}
		body = slices.Grow(body, n)
	}
	var ct []byte // one item's ciphertext, before its base64
	for i := range items {
		it := &items[i]
		if i > 0 {
			body = append(body, ',')
		}
		ae := it.err
		if ae == nil {
			var err error
			switch {
			case it.data == nil:
				err = errPlaintextRequired
			case zerr != nil:
				err = zerr
			default:
				ct, err = z.AppendSeal(ct[:0], it.data, it.context)
			}
			if err != nil {
				ae = toAPIError(err)
			}
		}
		if ae != nil {
			a.add(cryptosvc.Info{}, 0, ae)
			body = appendItemError(body, it.reference, ae)
			continue
		}
		a.add(z.Info(), len(it.data), nil)
		a.addSalt(s.amac, ct)
		body = append(body, `{"ciphertext":"`...)
		body = base64.StdEncoding.AppendEncode(body, ct)
		body = strconv.AppendUint(append(body, `","key_version":`...), uint64(version), 10)
		body = appendJSONString(append(body, `,"aead":`...), aead)
		if it.reference != "" {
			body = appendJSONString(append(body, `,"reference":`...), it.reference)
		}
		body = append(body, '}')
	}
	resp.SwapBody(append(body, "]}"...))
	resp.Header.SetContentType(fiber.MIMEApplicationJSON)
	c.Status(a.status())
	s.writeBatchAudit(c, &a, aead)
	return nil
}

var errPlaintextRequired = apiError(api.CodeBadRequest, "plaintext is required (base64; \"\" for an empty message)")

// appendItemError appends a failed item's result: its reference and error,
// as encoding/json writes an api.EncryptResult or api.DecryptResult that
// has only those.
func appendItemError(b []byte, ref string, ae *api.Error) []byte {
	b = append(b, '{')
	if ref != "" {
		b = append(appendJSONString(append(b, `"reference":`...), ref), ',')
	}
	b = appendJSONString(append(b, `"error":{"code":`...), string(ae.Code))
	b = appendJSONString(append(b, `,"message":`...), ae.Message)
	return append(b, "}}"...)
}

// appendJSONString appends s as encoding/json writes a string.
func appendJSONString(b []byte, s string) []byte {
	if plainASCII(s) {
		return append(append(append(b, '"'), s...), '"')
	}
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// respondBatch answers a batch of a route without a writer of its own: do
// processes one item, failed builds a failed item's result; the response is
// encoded by encoding/json.
func respondBatch[R any](s *Server, c *fiber.Ctx, op Op, key string, items []dataItem, do func(dataItem) (R, cryptosvc.Info, int, error), failed func(dataItem, *api.Error) R) error {
	a := batchAudit{op: op, key: key}
	out := api.BatchResponse[R]{Items: make([]R, len(items))}
	for i, it := range items {
		ae := it.err
		var res R
		if ae == nil {
			var info cryptosvc.Info
			var n int
			var err error
			res, info, n, err = do(it)
			if err != nil {
				ae = toAPIError(err)
			} else {
				a.add(info, n, nil)
				a.addSalt(s.amac, it.data)
			}
		}
		if ae != nil {
			a.add(cryptosvc.Info{}, 0, ae)
			res = failed(it, ae)
		}
		out.Items[i] = res
	}
	c.Status(a.status())
	s.writeBatchAudit(c, &a, "") // do counted the bytes, by AEAD
	return c.JSON(&out)
}
