package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// The audit trail (Config.AuditLog) holds one JSON record per audited
// operation, apart from the access log: a single operation, a batch, a
// stream, a key change. A request's records are collected while its
// handler runs and written together when it returns, before the answer
// goes out (front); a stream's record is written when its source ends,
// before its last piece goes out (responseStream.finish). internal/auditlog
// syncs them in groups, so one sync serves every request that waits.
//
// A record that cannot be written fails its request with 503
// audit_unavailable, or with Config.AuditFailOpen is counted and logged at
// error level while the request is answered.

// auditRec builds one record. Values are never data, keys, nonces or
// context.
type auditRec struct{ b []byte }

func (l *auditRec) str(key, v string) {
	l.b = append(l.b, ',', '"')
	l.b = append(l.b, key...)
	l.b = appendJSONString(append(l.b, '"', ':'), v)
}

func (l *auditRec) num(key string, v int64) {
	l.b = append(l.b, ',', '"')
	l.b = append(l.b, key...)
	l.b = append(l.b, '"', ':')
	l.b = strconv.AppendInt(l.b, v, 10)
}

// startAudit appends the start of a record to b (a newline first when b
// holds records already): the time, the request and the caller.
func startAudit(b []byte, c *fiber.Ctx, id, identity string) auditRec {
	if len(b) > 0 {
		b = append(b, '\n')
	} else if cap(b) == 0 {
		b = auditBufs.Get().(*[auditBufSize]byte)[:0]
	}
	b = append(b, `{"time":"`...)
	b = appendRecordTime(b, time.Now())
	b = append(b, '"')
	l := auditRec{b: b}
	l.str("request_id", id)
	l.str("identity", identity)
	if c != nil {
		// An address's text needs no escaping: it goes in as it is
		// written, with no string made of it.
		l.b = appendIP(append(l.b, `,"remote_ip":"`...), c.Context().RemoteIP())
		l.b = append(l.b, '"')
	}
	return l
}

// appendRecordTime appends t in UTC in RFC 3339 with nine digits of
// fraction, always: records sort by their text, which time.RFC3339Nano,
// dropping trailing zeros, does not give; and it takes 540 instructions
// where AppendFormat took 825 (valgrind --tool=callgrind of
// BenchmarkHandleEncryptJSON).
func appendRecordTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	if y < 0 || y > 9999 { // outside RFC 3339's years
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+mo/10), byte('0'+mo%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':',
		byte('0'+s/10), byte('0'+s%10), '.')
	var frac [9]byte
	for i, ns := 8, t.Nanosecond(); i >= 0; i-- {
		frac[i] = byte('0' + ns%10)
		ns /= 10
	}
	return append(append(b, frac[:]...), 'Z')
}

// end appends the outcome, "ok" or "error" with the error's code, and
// closes the record.
func (l *auditRec) end(code string) []byte {
	if code == "" || code == "ok" {
		l.str("outcome", "ok")
	} else {
		l.str("outcome", "error")
		l.str("code", code)
	}
	l.b = append(l.b, '}')
	return l.b
}

// appendAuditRecord appends the record of one operation, on msg (nil:
// none) under context.
func (s *Server) appendAuditRecord(b []byte, c *fiber.Ctx, id, identity string, a *auditRecord, context, msg []byte) []byte {
	l := startAudit(b, c, id, identity)
	l.str("op", string(a.op))
	if a.action != "" {
		l.str("action", a.action)
	}
	l.str("key", a.key)
	l.num("key_version", int64(a.version))
	l.num("bytes", int64(a.bytes))
	s.appendMACs(&l, cryptosvc.MessageSalt(msg), context)
	if a.stream {
		l.b = append(l.b, `,"stream":true`...)
	}
	return l.end(a.outcome)
}

// appendMACs appends the HMACs of a message's salt and of its context
// (nil: none), with the audit key's generation, to a record of an
// operation on one message: a JSON request's or a stream's, alike.
func (s *Server) appendMACs(l *auditRec, salt, context []byte) {
	m := s.amac
	if m == nil {
		return
	}
	if salt != nil || len(context) > 0 {
		l.num("audit_key", int64(m.gen))
	}
	if salt != nil {
		l.b = m.appendMAC(append(l.b, `,"salt_hmac":"`...), macSalt, salt)
		l.b = append(l.b, '"')
	}
	if len(context) > 0 {
		l.b = m.appendMAC(append(l.b, `,"context_hmac":"`...), macContext, context)
		l.b = append(l.b, '"')
	}
}

// appendBatchRecord appends the record of a batch.
func appendBatchRecord(b []byte, c *fiber.Ctx, a *batchAudit) []byte {
	l := startAudit(b, c, a.id, a.identity)
	l.str("op", string(a.op))
	l.str("key", a.key)
	l.b = append(l.b, `,"key_versions":[`...)
	for i, v := range a.versions {
		if i > 0 {
			l.b = append(l.b, ',')
		}
		l.b = strconv.AppendUint(l.b, uint64(v), 10)
	}
	l.b = append(l.b, ']')
	l.num("items", int64(a.items))
	l.num("failed", int64(a.failed))
	l.num("bytes", a.bytes)
	if len(a.salts) > 0 {
		l.num("audit_key", int64(a.macGen))
		l.b = append(l.b, `,"salt_hmacs":[`...)
		l.b = append(l.b, a.salts...)
		l.b = append(l.b, ']')
	}
	return l.end(string(a.first))
}

// commitAudit writes the records the request's handler collected.
func (s *Server) commitAudit(st *reqState) error {
	if st == nil || len(st.audits) == 0 {
		return nil
	}
	err := s.audits.Append(st.audits)
	putAuditBuf(st.audits)
	st.audits = nil
	return s.auditFailed(err)
}

// A request's records are built in a pooled buffer, which the log has
// copied once Append returns: a new buffer grown to a record's size cost
// six allocations per request (BenchmarkHandleEncryptJSON's allocs/op).
const auditBufSize = 1 << 10

var auditBufs = sync.Pool{New: func() any { return new([auditBufSize]byte) }}

// putAuditBuf recycles b if it is still a buffer of auditBufs.
func putAuditBuf(b []byte) {
	if cap(b) == auditBufSize {
		auditBufs.Put((*[auditBufSize]byte)(b[:auditBufSize]))
	}
}

// auditFailed turns a failed write of the audit trail into the request's
// error, or, with AuditFailOpen, into a count and a log line.
func (s *Server) auditFailed(err error) error {
	if err == nil {
		return nil
	}
	s.met.auditFailures.Add(1)
	if s.cfg.AuditFailOpen {
		s.log.Error("audit record lost: answering without it (audit_fail_open)", zap.String("audit_log", s.audits.Path()), zap.Error(err))
		return nil
	}
	s.log.Error("audit record not written: refusing the request", zap.String("audit_log", s.audits.Path()), zap.Error(err))
	return apiError(api.CodeAuditUnavailable, "the audit trail cannot record this operation; retry later")
}

// ReopenAuditLog closes the audit trail's file and opens its path again,
// after log rotation renamed it (cipherd serve does it on SIGHUP).
func (s *Server) ReopenAuditLog() error { return s.audits.Reopen() }

// auditMAC computes the HMACs the records carry of a message's salt and of
// its context, under the audit key (cryptosvc.AuditKeySource). The first
// 16 bytes of HMAC-SHA-256, in hex, each over a label and the value.
type auditMAC struct {
	gen  uint32
	pool sync.Pool // of *macState (HMAC-SHA-256 under the key)
}

func newAuditMAC(key []byte, gen uint32) *auditMAC {
	m := &auditMAC{gen: gen}
	m.pool.New = func() any { return &macState{h: hmac.New(sha256.New, key), prefix: make([]byte, 0, 16)} }
	return m
}

// macState is an HMAC with room for its input's prefix and its sum, so
// that a MAC allocates nothing: the hash is an interface, and what is
// passed to it escapes.
type macState struct {
	h      hash.Hash
	prefix []byte
	sum    [sha256.Size]byte
}

// appendMAC appends hex(HMAC(label || 0 || v)[:16]) to b.
func (m *auditMAC) appendMAC(b []byte, label string, v []byte) []byte {
	st := m.pool.Get().(*macState)
	st.h.Reset()
	st.prefix = append(append(st.prefix[:0], label...), 0)
	st.h.Write(st.prefix)
	st.h.Write(v)
	b = hex.AppendEncode(b, st.h.Sum(st.sum[:0])[:16])
	m.pool.Put(st)
	return b
}

// Labels of the values the audit records hash.
const (
	macSalt    = "salt"
	macContext = "context"
)

// openAuditMAC sets up the records' HMACs when the keystore has an audit
// key; without one the records carry none.
func (s *Server) openAuditMAC() {
	src, ok := s.cfg.Keystore.(cryptosvc.AuditKeySource)
	if !ok {
		s.log.Info("audit records carry no HMACs: the keystore derives no audit key")
		return
	}
	key, gen, err := src.AuditKey()
	if err != nil {
		s.log.Info("audit records carry no HMACs", zap.Error(err))
		return
	}
	s.amac = newAuditMAC(key, gen)
}
