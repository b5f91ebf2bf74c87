package server

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/zaplog"
	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logErrors is where a failed write of an access line is reported, as a
// zap.Logger reports it by default.
var logErrors = zapcore.Lock(os.Stderr)

// record counts one request and writes its access line: who, what route,
// the outcome, sizes and time. Never bodies, paths (they may carry data on a
// mistyped route), query strings, headers or context. A request that did one
// cryptographic operation gets one line for both: the access fields plus the
// audit record (op, key, key_version, bytes, outcome), with the message
// "audit" and the audit's level, so that the common case costs one log entry.
// row is the request's row in the route table; nil when none ran for it.
func (s *Server) record(c *fiber.Ctx, row *route, start time.Time, status int, panicked bool) {
	now := time.Now()
	d := now.Sub(start)
	method := canonicalMethod(c.Method())
	route := routeUnmatched
	if row != nil {
		route = row.path
	}
	s.met.request(route, method, status, d)
	s.closeIfUnread(c, row, status)

	msg, level := "access", zap.InfoLevel
	st := state(c)
	if st != nil && st.call.id != nil {
		s.met.ops.requests.inc(st.call.id.name)
	}
	audited := st != nil && st.audit.op != ""
	if audited {
		msg, level = "audit", max(level, st.audit.level)
	}
	// The access line goes to the logger's core without the logger around
	// it: the entry takes the time the latency was measured at instead of
	// reading the clock again, and a caller or a stack would say nothing.
	ce := s.log.Core().Check(zapcore.Entry{LoggerName: s.log.Name(), Time: now, Level: level, Message: msg}, nil)
	if ce == nil {
		return
	}
	ce.ErrorOutput = logErrors
	resp := c.Response()
	var line *accessLine
	if st != nil {
		line = &st.line // no allocation: the request's state is on the heap already
	} else {
		line = new(accessLine)
	}
	*line = accessLine{
		id:       requestID(c),
		identity: callerName(c),
		method:   method,
		route:    route,
		status:   status,
		bytesIn:  requestLen(c),
		bytesOut: -1, // not known yet for a stream
		latency:  d,
		remote:   c.Context().RemoteIP(),
		stream:   resp.IsBodyStream(),
		panic:    panicked,
	}
	if !line.stream {
		line.bytesOut = len(resp.Body())
	}
	if audited {
		line.audit = &st.audit
	}
	if st != nil {
		st.fields[0] = zap.Inline(line)
		ce.Write(st.fields[:]...)
		return
	}
	ce.Write(zap.Inline(line))
}

// requestLen is the request body's length for the access line: its
// Content-Length, -1 when chunked, and 0 when it has neither header (an
// HTTP/1.1 request without them has no body, RFC 9112, 6.3), which fasthttp
// reports as -2.
func requestLen(c *fiber.Ctx) int {
	switch n := c.Request().Header.ContentLength(); {
	case n == -2:
		return 0
	case n < 0:
		return -1
	default:
		return n
	}
}

// accessLine is the fields of one access line (an audit line when it carries
// the request's operation), encoded straight into the log entry: building
// them as a slice of zap.Field cost a kilobyte of garbage per request.
type accessLine struct {
	id, identity, method, route string
	status, bytesIn, bytesOut   int
	latency                     time.Duration
	remote                      net.IP
	stream, panic               bool
	audit                       *auditRecord // nil: no operation to audit
	ipText                      [64]byte     // room to format remote
}

var _ zaplog.Line = (*accessLine)(nil)

func (l *accessLine) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", l.id)
	enc.AddString("identity", l.identity)
	enc.AddString("method", l.method)
	enc.AddString("route", l.route)
	enc.AddInt64("status", int64(l.status))
	enc.AddInt64("bytes_in", int64(l.bytesIn))
	enc.AddInt64("bytes_out", int64(l.bytesOut))
	enc.AddInt64("latency_us", l.latency.Microseconds())
	enc.AddByteString("remote_ip", appendIP(l.ipText[:0], l.remote))
	if l.stream {
		enc.AddBool("stream", true)
	}
	if l.panic {
		enc.AddBool("panic", true)
	}
	if l.audit != nil {
		l.audit.addTo(enc)
	}
	return nil
}

// appendIP appends ip as net.IP.String writes it, without its allocation.
func appendIP(b []byte, ip net.IP) []byte {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return append(b, ip.String()...)
	}
	return a.Unmap().AppendTo(b)
}

// auditRecord is one cryptographic operation: which key and version, what,
// how many bytes, and the outcome. Never data, keys or context.
type auditRecord struct {
	op      Op
	action  string // key administration: what the change was (actionRotate, …); "" otherwise
	key     string
	version uint32
	bytes   int
	outcome string
	level   zapcore.Level
	stream  bool // a streaming request's, refused before its stream began
}

func (a *auditRecord) addTo(enc zapcore.ObjectEncoder) {
	enc.AddString("op", string(a.op))
	enc.AddString("key", a.key)
	enc.AddUint32("key_version", a.version)
	enc.AddInt64("bytes", int64(a.bytes))
	enc.AddString("outcome", a.outcome)
}

// auditLine is a batch item's own audit line.
type auditLine struct {
	id, identity string
	rec          *auditRecord
}

func (l *auditLine) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", l.id)
	enc.AddString("identity", l.identity)
	l.rec.addTo(enc)
	return nil
}

// audit logs one cryptographic operation with the caller's identity. The
// single operation of a request rides on its access line, which then reads
// "audit" (see record); the items of a batch get a line each.
func (s *Server) audit(c *fiber.Ctx, op Op, key string, info cryptosvc.Info, n int, err error) {
	s.auditMsg(c, op, key, info, n, err, nil, nil)
}

// auditMsg is audit for an operation on one message: msg (a ciphertext, or
// its start) and its context, whose HMACs its record carries.
func (s *Server) auditMsg(c *fiber.Ctx, op Op, key string, info cryptosvc.Info, n int, err error, context, msg []byte) {
	s.auditRec(c, auditRecord{op: op, key: key, version: info.Version, bytes: n}, err, context, msg)
}

// auditStream is auditMsg for a streaming request answered without a
// stream: one that failed before its stream began, or a ?verify=full
// decrypt. Its record says "stream":true, as the stream's would.
func (s *Server) auditStream(c *fiber.Ctx, op Op, key string, info cryptosvc.Info, n int, err error, context, msg []byte) {
	s.auditRec(c, auditRecord{op: op, key: key, version: info.Version, bytes: n, stream: true}, err, context, msg)
}

// auditAdmin is audit for a key change: action says which, version is the
// version it made or concerned (0 for none).
func (s *Server) auditAdmin(c *fiber.Ctx, action, key string, version uint32, err error) {
	s.auditRec(c, auditRecord{op: OpKeysAdmin, action: action, key: key, version: version}, err, nil, nil)
}

// auditRec records a (op, action, key, version and bytes set) with the
// outcome of err.
func (s *Server) auditRec(c *fiber.Ctx, a auditRecord, err error, context, msg []byte) {
	a.outcome, a.level = "ok", zap.InfoLevel
	if err != nil {
		a.level = zap.WarnLevel
		a.outcome = string(toAPIError(err).Code)
	}
	st := state(c)
	if st == nil { // not through front: nothing writes it later
		rec := s.appendAuditRecord(nil, c, requestID(c), callerName(c), &a, context, msg)
		err := s.auditFailed(s.audits.Append(rec))
		putAuditBuf(rec)
		if err != nil {
			s.log.Error("audit record not written", zap.Error(err))
		}
	} else {
		st.audits = s.appendAuditRecord(st.audits, c, st.id, callerName(c), &a, context, msg)
	}
	if st != nil && !st.batch && st.audit.op == "" {
		st.audit = a
		return
	}
	if ce := s.log.Check(a.level, "audit"); ce != nil {
		rec := a // a copy, so that a escapes only on this path
		ce.Write(zap.Inline(&auditLine{id: requestID(c), identity: callerName(c), rec: &rec}))
	}
}

// Plain reports whether every string of the line is one zap's JSON encoder
// writes unescaped.
func (l *accessLine) Plain() bool {
	ok := zaplog.PlainJSON(l.id) && zaplog.PlainJSON(l.identity) && zaplog.PlainJSON(l.method) && zaplog.PlainJSON(l.route)
	if a := l.audit; a != nil {
		ok = ok && zaplog.PlainJSON(string(a.op)) && zaplog.PlainJSON(a.key) && zaplog.PlainJSON(a.outcome)
	}
	return ok
}

// AppendJSON appends the line's fields to b, an entry's object not yet
// closed, in MarshalLogObject's order and zap's form.
func (l *accessLine) AppendJSON(b []byte) []byte {
	sep := len(b) > 0 && b[len(b)-1] != '{'
	str := func(key, v string) {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":"`...)
		b = append(b, v...)
		b = append(b, '"')
	}
	num := func(key string, v int64) {
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, v, 10)
	}
	str("request_id", l.id)
	str("identity", l.identity)
	str("method", l.method)
	str("route", l.route)
	num("status", int64(l.status))
	num("bytes_in", int64(l.bytesIn))
	num("bytes_out", int64(l.bytesOut))
	num("latency_us", l.latency.Microseconds())
	str("remote_ip", string(appendIP(l.ipText[:0], l.remote)))
	if l.stream {
		b = append(b, `,"stream":true`...)
	}
	if l.panic {
		b = append(b, `,"panic":true`...)
	}
	if a := l.audit; a != nil {
		str("op", string(a.op))
		str("key", a.key)
		num("key_version", int64(a.version))
		num("bytes", int64(a.bytes))
		str("outcome", a.outcome)
	}
	return b
}
