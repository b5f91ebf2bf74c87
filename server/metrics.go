package server

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cipherd/cipherd/internal/buildinfo"
)

// Metrics are counted with atomics on label sets created once: a request
// costs one lookup in an immutable map, two atomic adds and one clock read.
// GET /metrics renders them in the Prometheus text exposition format
// (version 0.0.4), with no client library.
//
// Labels are bounded: route is the route pattern ("/v1/encrypt/:key", never
// the path with the key name), or "unmatched"; method is one of the HTTP
// methods or "OTHER"; code is the status sent.

// latencyBuckets are the upper bounds of the request latency histogram, from
// the cost of a small JSON request to a long stream's first byte.
var latencyBuckets = [...]time.Duration{
	25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
	250 * time.Microsecond, 500 * time.Microsecond,
	1 * time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	1 * time.Second, 2500 * time.Millisecond, 10 * time.Second,
}

// routeUnmatched is the route label of requests that matched no route.
const routeUnmatched = "unmatched"

type httpKey struct {
	route, method string
	code          int
}

// httpSeries is the latency histogram of one route, method and code; its
// count is also the request counter.
type httpSeries struct {
	route, method, code string
	buckets             [len(latencyBuckets) + 1]atomic.Uint64 // not cumulative; the last is +Inf
	sumNanos            atomic.Int64
}

func (h *httpSeries) observe(d time.Duration) {
	i := 0
	for i < len(latencyBuckets) && d > latencyBuckets[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNanos.Add(int64(d))
}

type bytesKey struct{ op, aead string }

type bytesSeries struct {
	op, aead string
	n        atomic.Int64
}

// seriesMap maps label values to their series. Readers load an immutable map
// without locking; a new label set copies the map under the mutex. Label sets
// are few and made once, so copying is cheaper than locking every read.
type seriesMap[K comparable, V any] struct {
	cur atomic.Pointer[map[K]*V]
	mu  sync.Mutex
}

func (m *seriesMap[K, V]) get(k K, newV func() *V) *V {
	if p := m.cur.Load(); p != nil {
		if v, ok := (*p)[k]; ok {
			return v
		}
	}
	return m.add(k, newV)
}

func (m *seriesMap[K, V]) add(k K, newV func() *V) *V {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.cur.Load()
	var next map[K]*V
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
		next = make(map[K]*V, len(*old)+1)
		for k, v := range *old {
			next[k] = v
		}
	} else {
		next = map[K]*V{}
	}
	v := newV()
	next[k] = v
	m.cur.Store(&next)
	return v
}

func (m *seriesMap[K, V]) all() []*V {
	p := m.cur.Load()
	if p == nil {
		return nil
	}
	out := make([]*V, 0, len(*p))
	for _, v := range *p {
		out = append(out, v)
	}
	return out
}

// metrics counts what /metrics exposes.
type metrics struct {
	authFailures    atomic.Int64
	decryptFailures atomic.Int64
	activeStreams   atomic.Int64
	http            seriesMap[httpKey, httpSeries]
	bytesByAEAD     seriesMap[bytesKey, bytesSeries]

	bodyRoutesOnce sync.Once
	bodyRoutes     map[string]bool // "METHOD /path" of the routes that read a body
}

// logErrors is where a failed write of an access line is reported, as a
// zap.Logger reports it by default.
var logErrors = zapcore.Lock(os.Stderr)

func newMetrics() *metrics { return &metrics{} }

func (m *metrics) authFailure()    { m.authFailures.Add(1) }
func (m *metrics) decryptFailure() { m.decryptFailures.Add(1) }
func (m *metrics) streamStart()    { m.activeStreams.Add(1) }
func (m *metrics) streamEnd()      { m.activeStreams.Add(-1) }

// bytes records n bytes processed by op with aead. op and aead must be
// constants (operation and cipher names), never request data.
func (m *metrics) bytes(op, aead string, n int64) {
	if n <= 0 {
		return
	}
	m.bytesByAEAD.get(bytesKey{op, aead}, func() *bytesSeries {
		return &bytesSeries{op: op, aead: aead}
	}).n.Add(n)
}

// request records one request. route and method must be stable strings (a
// route pattern and a canonical method), not views into request buffers.
func (m *metrics) request(route, method string, code int, d time.Duration) {
	m.http.get(httpKey{route, method, code}, func() *httpSeries {
		return &httpSeries{route: route, method: method, code: strconv.Itoa(code)}
	}).observe(d)
}

// canonicalMethod returns method as a constant string: fiber's method string
// may point into the request buffer, which is reused.
func canonicalMethod(method string) string {
	switch method {
	case fiber.MethodGet:
		return fiber.MethodGet
	case fiber.MethodPost:
		return fiber.MethodPost
	case fiber.MethodPut:
		return fiber.MethodPut
	case fiber.MethodDelete:
		return fiber.MethodDelete
	case fiber.MethodHead:
		return fiber.MethodHead
	case fiber.MethodPatch:
		return fiber.MethodPatch
	case fiber.MethodOptions:
		return fiber.MethodOptions
	case fiber.MethodConnect:
		return fiber.MethodConnect
	case fiber.MethodTrace:
		return fiber.MethodTrace
	}
	return "OTHER"
}

// front is the middleware in front of every route: it gives the request
// its ID and state, recovers a handler's panic as an internal error, runs the
// app's error handler itself, so that it sees the status sent, and counts,
// times and logs every request. One middleware instead of three: each
// route fiber steps through costs a lookup and a match. A streamed response
// is still being written when the handler returns: its line says
// stream=true, its latency is the time to the response headers, and the
// audit line at the stream's end has the bytes and the outcome.
func (s *Server) front(c *fiber.Ctx) error {
	st := newRequest(c)
	// fasthttp read the clock when the request was parsed, just before the
	// handler chain: one clock read per request is left, at the end.
	start := c.Context().Time()
	if start.IsZero() { // a RequestCtx not from a fasthttp server
		start = time.Now()
	}
	self := c.Route() // still the current route after Next if none matched
	defer func() {
		if r := recover(); r != nil {
			err, ok := r.(error)
			if !ok {
				err = fmt.Errorf("%v", r)
			}
			if herr := s.errorHandler(c, err); herr != nil {
				c.Status(fiber.StatusInternalServerError)
			}
			s.record(c, self, start, fiber.StatusInternalServerError, true)
		}
	}()
	if err := c.Next(); err != nil {
		if herr := s.errorHandler(c, err); herr != nil {
			c.Status(fiber.StatusInternalServerError)
		}
	}
	s.record(c, self, start, c.Response().StatusCode(), false)
	recycleScratch(c, st)
	return nil
}

// prefetchedBody is how much of a request body fasthttp reads with the
// headers when it streams request bodies; the rest of a larger or chunked
// body stays on the connection until a handler reads it.
const prefetchedBody = 8 << 10

// closeIfUnread ends the connection after this response when part of the
// request body may still be unread on it. fasthttp does not drain a streamed
// body the handler left: its bytes would be parsed as the next request on the
// connection, a desync that a proxy sharing backend connections turns into
// request smuggling. A streamed response reads the body to its end or aborts
// the connection, and a successful handler of a route with a body reads it to
// its end; anything else with a large or chunked body closes.
func (s *Server) closeIfUnread(c *fiber.Ctx, route string, status int) {
	if c.Response().IsBodyStream() {
		return
	}
	if cl := c.Request().Header.ContentLength(); cl >= 0 && cl <= prefetchedBody {
		return
	}
	if status < 300 && s.readsBody(c.Method(), route) {
		return
	}
	c.Context().SetConnectionClose()
}

// readsBody reports whether the route's handler reads the request body (its
// route table entry has a body limit).
func (s *Server) readsBody(method, route string) bool {
	m := s.met
	m.bodyRoutesOnce.Do(func() {
		m.bodyRoutes = map[string]bool{}
		for _, r := range s.routes() {
			if r.maxBody > 0 {
				m.bodyRoutes[r.method+" "+r.path] = true
			}
		}
	})
	if s.app != nil {
		route = strings.TrimPrefix(route, strings.TrimSuffix(s.app.MountPath(), "/"))
	}
	return m.bodyRoutes[method+" "+route]
}

// record counts one request and writes its access line: who, what route,
// the outcome, sizes and time. Never bodies, paths (they may carry data on a
// mistyped route), query strings, headers or context. A request that did one
// cryptographic operation gets one line for both: the access fields plus the
// audit record (op, key, key_version, bytes, outcome), with the message
// "audit" and the audit's level, so that the common case costs one log entry.
func (s *Server) record(c *fiber.Ctx, self *fiber.Route, start time.Time, status int, panicked bool) {
	now := time.Now()
	d := now.Sub(start)
	r := c.Route()
	route := r.Path
	if r == self { // only middleware ran: no route matched
		route = routeUnmatched
	}
	method := canonicalMethod(c.Method())
	s.met.request(route, method, status, d)
	s.closeIfUnread(c, route, status)

	msg, level := "access", zap.InfoLevel
	st := state(c)
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
		bytesIn:  max(c.Request().Header.ContentLength(), -1), // -1: streamed or chunked
		bytesOut: -1,                                          // not known yet for a stream
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

// handleMetrics serves the Prometheus text exposition format.
func (s *Server) handleMetrics(c *fiber.Ctx) error {
	var w expo
	s.writeMetrics(&w)
	c.Set(fiber.HeaderContentType, "text/plain; version=0.0.4; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Send(w.b.Bytes())
}

func (s *Server) writeMetrics(w *expo) {
	m := s.met

	// Requests: one snapshot of every histogram, so that the counter, the
	// buckets and the count agree within the scrape.
	type snap struct {
		*httpSeries
		b     [len(latencyBuckets) + 1]uint64
		count uint64
	}
	series := m.http.all()
	snaps := make([]snap, len(series))
	for i, h := range series {
		snaps[i].httpSeries = h
		for j := range h.buckets {
			snaps[i].b[j] = h.buckets[j].Load()
			snaps[i].count += snaps[i].b[j]
		}
	}
	slices.SortFunc(snaps, func(a, b snap) int {
		return cmpLabels(a.route, b.route, a.method, b.method, a.code, b.code)
	})
	w.family("cipherd_http_requests_total", "counter", "HTTP requests by route pattern, method and status code.")
	for i := range snaps {
		sn := &snaps[i]
		w.sample("cipherd_http_requests_total", float64(sn.count), "route", sn.route, "method", sn.method, "code", sn.code)
	}
	const dur = "cipherd_http_request_duration_seconds"
	w.family(dur, "histogram", "Time from the request's headers being read to the handler's return; for a streamed response, to the start of the response.")
	for i := range snaps {
		sn := &snaps[i]
		var cum uint64
		for j, le := range latencyBuckets {
			cum += sn.b[j]
			w.sample(dur+"_bucket", float64(cum), "route", sn.route, "method", sn.method, "code", sn.code, "le", formatFloat(le.Seconds()))
		}
		w.sample(dur+"_bucket", float64(sn.count), "route", sn.route, "method", sn.method, "code", sn.code, "le", "+Inf")
		w.sample(dur+"_sum", time.Duration(sn.sumNanos.Load()).Seconds(), "route", sn.route, "method", sn.method, "code", sn.code)
		w.sample(dur+"_count", float64(sn.count), "route", sn.route, "method", sn.method, "code", sn.code)
	}

	bs := m.bytesByAEAD.all()
	slices.SortFunc(bs, func(a, b *bytesSeries) int { return cmpLabels(a.op, b.op, a.aead, b.aead) })
	w.family("cipherd_bytes_total", "counter", "Bytes processed by operation and AEAD (JSON: message bytes; streams: response bytes); rate() is the throughput.")
	for _, b := range bs {
		w.sample("cipherd_bytes_total", float64(b.n.Load()), "op", b.op, "aead", b.aead)
	}

	w.family("cipherd_auth_failures_total", "counter", "Requests refused for a missing or invalid token or client certificate.")
	w.sample("cipherd_auth_failures_total", float64(m.authFailures.Load()))
	w.family("cipherd_decrypt_failures_total", "counter", "Ciphertexts that failed authentication (wrong key, context or bytes).")
	w.sample("cipherd_decrypt_failures_total", float64(m.decryptFailures.Load()))
	w.family("cipherd_active_streams", "gauge", "Streamed responses being written.")
	w.sample("cipherd_active_streams", float64(m.activeStreams.Load()))

	s.writeSpeedMetrics(w)

	b := buildinfo.Get()
	w.family("cipherd_build_info", "gauge", "The running binary; always 1.")
	w.sample("cipherd_build_info", 1, "version", b.Version, "goversion", b.GoVersion, "platform", b.Platform, "revision", b.Revision)
	w.family("cipherd_ready", "gauge", "1 when /readyz answers 200.")
	ready := 0.0
	if s.Ready() {
		ready = 1
	}
	w.sample("cipherd_ready", ready)
	w.family("cipherd_uptime_seconds", "gauge", "Seconds since the server started.")
	w.sample("cipherd_uptime_seconds", time.Since(s.started).Seconds())
	w.family("process_start_time_seconds", "gauge", "Start time of the server since the Unix epoch, in seconds.")
	w.sample("process_start_time_seconds", float64(s.started.UnixNano())/1e9)
	w.family("go_goroutines", "gauge", "Goroutines that currently exist.")
	w.sample("go_goroutines", float64(runtime.NumGoroutine()))
	w.family("go_gc_heap_live_bytes", "gauge", "Heap memory occupied by live objects, as of the last garbage collection.")
	w.sample("go_gc_heap_live_bytes", heapLive())
}

// heapLive is the runtime's live heap after the last collection: the figure
// that grows with a leak, where RSS also follows buffers in use and memory
// not yet returned to the system.
func heapLive() float64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return math.NaN()
	}
	return float64(s[0].Value.Uint64())
}

// writeSpeedMetrics publishes the cipher selection and the measured speeds:
// the start-up profile (source="profile") and the full table (source="table").
func (s *Server) writeSpeedMetrics(w *expo) {
	sel := s.sel
	if sel != nil {
		w.family("cipherd_aead_info", "gauge", "The AEAD chosen for new data; always 1.")
		w.sample("cipherd_aead_info", 1, "aead", sel.AEADName)
		w.family("cipherd_implementation_info", "gauge", "The implementation chosen for each cipher; always 1.")
		for _, ch := range sel.Implementations {
			w.sample("cipherd_implementation_info", 1, "cipher", ch.Name, "impl", ch.Impl)
		}
	}
	const name = "cipherd_speed_bytes_per_second"
	w.family(name, "gauge", "Measured throughput by cipher, implementation, message size and operation; source is the start-up profile or the latest full table.")
	type cell struct {
		source, op, cipher, impl string
		size                     int
	}
	seen := map[cell]bool{} // a repeated row would make the exposition invalid
	emit := func(k cell, bps float64) {
		if seen[k] || math.IsNaN(bps) || math.IsInf(bps, 0) {
			return
		}
		seen[k] = true
		w.sample(name, bps, "source", k.source, "op", k.op, "cipher", k.cipher, "impl", k.impl, "size", strconv.Itoa(k.size))
	}
	if sel != nil {
		for _, p := range sel.Profile {
			emit(cell{"profile", "encrypt", p.Cipher, p.Impl, p.Size}, p.BytesPerSecond)
		}
	}
	if s.speed != nil {
		if t := s.speed.table.Load(); t != nil && t.result != nil {
			op := "encrypt"
			if t.result.Decrypt {
				op = "decrypt"
			}
			for _, row := range t.result.Rows {
				// The cipher's name as everywhere else ("aes-128-gcm"), not
				// openssl's display name ("AES-128-GCM").
				cipher := strings.ToLower(row.Name)
				if row.Cipher.Valid() {
					cipher = row.Cipher.String()
				}
				for _, c := range row.Cells {
					emit(cell{"table", op, cipher, row.Impl, c.Size}, c.BytesPerSecond())
				}
			}
		}
	}
}

func cmpLabels(pairs ...string) int {
	for i := 0; i+1 < len(pairs); i += 2 {
		if c := strings.Compare(pairs[i], pairs[i+1]); c != 0 {
			return c
		}
	}
	return 0
}

// expo writes the Prometheus text format.
type expo struct{ b bytes.Buffer }

func (w *expo) family(name, typ, help string) {
	w.b.WriteString("# HELP ")
	w.b.WriteString(name)
	w.b.WriteByte(' ')
	w.b.WriteString(strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(help))
	w.b.WriteString("\n# TYPE ")
	w.b.WriteString(name)
	w.b.WriteByte(' ')
	w.b.WriteString(typ)
	w.b.WriteByte('\n')
}

// sample writes one line; labels are name, value pairs.
func (w *expo) sample(name string, v float64, labels ...string) {
	w.b.WriteString(name)
	if len(labels) > 0 {
		w.b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.b.WriteByte(',')
			}
			w.b.WriteString(labels[i])
			w.b.WriteString(`="`)
			w.b.WriteString(labelEscaper.Replace(labels[i+1]))
			w.b.WriteByte('"')
		}
		w.b.WriteByte('}')
	}
	w.b.WriteByte(' ')
	w.b.WriteString(formatFloat(v))
	w.b.WriteByte('\n')
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
