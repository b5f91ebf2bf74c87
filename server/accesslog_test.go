package server

import (
	"net"
	"testing"
	"time"

	"github.com/cipherd/cipherd/internal/zaplog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TestLogEncoderMatchesZap checks that zaplog.NewEncoder writes every access line
// exactly as zap's own JSON encoder does, through its fast path and around
// it: strings that need escaping, a stack trace, context fields from
// Logger.With, other fields, other encoder settings.
func TestLogEncoderMatchesZap(t *testing.T) {
	audit := &auditRecord{op: OpEncrypt, key: "payments/v2", version: 7, bytes: 64, outcome: "ok"}
	lines := map[string]accessLine{
		"plain": {id: "0123456789abcdef01234567", identity: "admin", method: "POST", route: "/v1/encrypt/:key",
			status: 200, bytesIn: 110, bytesOut: 198, latency: 1234567 * time.Nanosecond, remote: net.IPv4(127, 0, 0, 1)},
		"audited": {id: "req-1", identity: "svc", method: "POST", route: "/v1/decrypt/:key", status: 400,
			bytesIn: -1, bytesOut: -1, remote: net.ParseIP("2001:db8::1"), stream: true, audit: audit},
		"panic":           {id: "x", method: "GET", route: "/boom", status: 500, bytesIn: -1, remote: net.IPv4(10, 1, 2, 3), panic: true},
		"empty":           {},
		"mapped v4":       {remote: net.ParseIP("::ffff:192.0.2.1")},
		"quote":           {identity: `a"b`, remote: net.IPv4(127, 0, 0, 1)},
		"backslash":       {route: `/a\b`},
		"control":         {id: "a\nb"},
		"unicode":         {identity: "ünïcode"},
		"del":             {identity: "a\x7fb"},
		"invalid utf-8":   {identity: "a\xffb"},
		"escaped key":     {audit: &auditRecord{op: OpDecrypt, key: "k\"1", outcome: "auth_failed"}},
		"escaped outcome": {audit: &auditRecord{op: OpDecrypt, key: "k", outcome: "bad\tcode"}},
	}
	configs := map[string]zapcore.EncoderConfig{
		"production":  zap.NewProductionEncoderConfig(),
		"development": zap.NewDevelopmentEncoderConfig(),
		"crlf":        func() zapcore.EncoderConfig { c := zap.NewProductionEncoderConfig(); c.LineEnding = "\r\n"; return c }(),
		"no keys":     {}, // nothing but the fields
	}
	ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Unix(1796026737, 844751000), Message: "access", LoggerName: "cipherd",
		Caller: zapcore.NewEntryCaller(0, "server/metrics.go", 42, true)}
	stack := ent
	stack.Stack = "goroutine 1 [running]:\nmain.main()"
	// As the server logs them: no logger name, no caller.
	bare := zapcore.Entry{Level: zapcore.WarnLevel, Time: ent.Time, Message: "audit"}
	noTime := zapcore.Entry{Level: zapcore.InfoLevel, Message: "access"}
	escapedMsg := zapcore.Entry{Level: zapcore.InfoLevel, Time: ent.Time, Message: "a\"b"}
	for cname, cfg := range configs {
		for lname, line := range lines {
			for ename, e := range map[string]zapcore.Entry{"entry": ent, "stack": stack, "bare": bare, "no time": noTime, "escaped message": escapedMsg} {
				fields := []zapcore.Field{zap.Inline(&line)}
				check := func(what string, fast, want zapcore.Encoder, fields []zapcore.Field) {
					t.Helper()
					got, err := fast.EncodeEntry(e, fields)
					if err != nil {
						t.Fatal(err)
					}
					w, err := want.EncodeEntry(e, fields)
					if err != nil {
						t.Fatal(err)
					}
					if got.String() != w.String() {
						t.Errorf("%s, %s line, %s, %s:\n got %s\nwant %s", cname, lname, ename, what, got, w)
					}
				}
				check("no context", zaplog.NewEncoder(cfg), zapcore.NewJSONEncoder(cfg), fields)
				check("other fields", zaplog.NewEncoder(cfg), zapcore.NewJSONEncoder(cfg), append(fields, zap.Int("n", 1)))
				// A clone with context, as Logger.With makes, namespace included.
				fast, want := zaplog.NewEncoder(cfg).Clone(), zapcore.NewJSONEncoder(cfg).Clone()
				for _, enc := range []zapcore.Encoder{fast, want} {
					enc.AddString("component", "cipherd")
					enc.OpenNamespace("ns")
				}
				check("context", fast, want, fields)
			}
		}
	}
}

// TestAccessLinePlain checks that a plain access line is one the
// encoder's fast path writes, so that the comparison above tests it.
func TestAccessLinePlain(t *testing.T) {
	l := &accessLine{id: "id", identity: "admin", method: "POST", route: "/v1/encrypt/:key", audit: &auditRecord{op: OpEncrypt, key: "default", outcome: "ok"}}
	if !l.Plain() {
		t.Error("a plain access line is not plain")
	}
	l.identity = "ä"
	if l.Plain() {
		t.Error("a line that needs escaping is plain")
	}
	l.identity, l.audit.key = "admin", "k\"1"
	if l.Plain() {
		t.Error("a line whose audit key needs escaping is plain")
	}
}

// BenchmarkLogEncoder compares the access line through zaplog.NewEncoder and
// through zap's JSON encoder.
func BenchmarkLogEncoder(b *testing.B) {
	l := &accessLine{id: "0123456789abcdef01234567", identity: "admin", method: "POST", route: "/v1/encrypt/:key",
		status: 200, bytesIn: 110, bytesOut: 198, latency: 12 * time.Microsecond, remote: net.IPv4(127, 0, 0, 1),
		audit: &auditRecord{op: OpEncrypt, key: "default", version: 1, bytes: 64, outcome: "ok"}}
	ent := zapcore.Entry{Level: zapcore.InfoLevel, Time: time.Now(), Message: "audit"}
	for name, enc := range map[string]zapcore.Encoder{
		"cipherd": zaplog.NewEncoder(zap.NewProductionEncoderConfig()),
		"zap":     zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf, err := enc.EncodeEntry(ent, []zapcore.Field{zap.Inline(l)})
				if err != nil {
					b.Fatal(err)
				}
				buf.Free()
			}
		})
	}
}
