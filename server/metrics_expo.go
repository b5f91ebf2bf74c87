package server

import (
	"bytes"
	"math"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cipherd/cipherd/internal/buildinfo"
	"github.com/gofiber/fiber/v2"
)

// handleMetrics serves the Prometheus text exposition format.
func (s *Server) handleMetrics(c *fiber.Ctx, q *call) error {
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
	w.family("cipherd_auth_rate_limited_total", "counter", "Requests refused 429 auth_rate_limited, before their credential was looked at, from addresses over auth_failure_rate.")
	w.sample("cipherd_auth_rate_limited_total", float64(m.authRateLimited.Load()))
	s.writeJWTMetrics(w)
	w.family("cipherd_decrypt_failures_total", "counter", "Ciphertexts that failed authentication (wrong key, context or bytes).")
	w.sample("cipherd_decrypt_failures_total", float64(m.decryptFailures.Load()))
	w.family("cipherd_audit_failures_total", "counter", "Audit records the audit trail failed to write; with audit_fail_open the operations were answered anyway.")
	w.sample("cipherd_audit_failures_total", float64(m.auditFailures.Load()))
	if s.audits != nil {
		records, groups := s.audits.Stats()
		w.family("cipherd_audit_records_total", "counter", "Audit records written to the audit trail.")
		w.sample("cipherd_audit_records_total", float64(records))
		w.family("cipherd_audit_syncs_total", "counter", "Writes to the audit trail, each followed by one sync (of a file); records over syncs is how many requests one sync served.")
		w.sample("cipherd_audit_syncs_total", float64(groups))
	}
	w.family("cipherd_keys_pending_deletion", "gauge", "Keys whose deletion is scheduled, as this replica's keystore holds them.")
	w.sample("cipherd_keys_pending_deletion", float64(s.keysPendingDeletion()))
	w.family("cipherd_active_streams", "gauge", "Streamed responses being written.")
	w.sample("cipherd_active_streams", float64(m.activeStreams.Load()))
	w.family("cipherd_open_connections", "gauge", "Client connections open, idle ones included.")
	open := 0.0
	if s.app != nil {
		if srv := s.app.Server(); srv != nil {
			open = float64(srv.GetOpenConnectionsCount())
		}
	}
	w.sample("cipherd_open_connections", open)
	if s.cfg.MaxConnections > 0 {
		w.family("cipherd_max_connections", "gauge", "The most connections the server holds open at once (max_connections).")
		w.sample("cipherd_max_connections", float64(s.cfg.MaxConnections))
	}

	s.writeOpsMetrics(w)
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

// writeJWTMetrics publishes, when JWT issuers are configured, the JWTs
// refused by reason and, for each issuer, the keys held and the failed
// loads of its keys.
func (s *Server) writeJWTMetrics(w *expo) {
	a := s.auth()
	if a == nil || a.jwt == nil {
		return
	}
	w.family("cipherd_jwt_failures_total", "counter", "Bearer JWTs refused, by reason: malformed, algorithm (not RS256, PS256, ES256, ES384 or EdDSA), issuer, unknown_key, signature, expired (or no exp), not_yet_valid, audience, no_identity (none or several match).")
	for r := jwtReason(1); r < numJWTReasons; r++ {
		w.sample("cipherd_jwt_failures_total", float64(s.met.jwtFailures[r].Load()), "reason", r.String())
	}
	j := a.jwt
	names := make([]string, 0, len(j.issuers))
	for name := range j.issuers {
		names = append(names, name)
	}
	slices.Sort(names)
	w.family("cipherd_jwks_keys", "gauge", "Signing keys held for each JWT issuer; 0 until its keys first load.")
	for _, name := range names {
		n := 0
		if set := j.issuers[name].src.keys.Load(); set != nil {
			n = set.n
		}
		w.sample("cipherd_jwks_keys", float64(n), "issuer", name)
	}
	w.family("cipherd_jwks_fetch_failures_total", "counter", "Loads of a JWT issuer's keys (discovery, JWKS URL or file) that failed; the keys held stayed in use.")
	for _, name := range names {
		w.sample("cipherd_jwks_fetch_failures_total", float64(s.met.jwksFailures.get(name, func() *atomic.Int64 { return new(atomic.Int64) }).Load()), "issuer", name)
	}
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
		if t := s.speed.table.Load(); t != nil && t.Result != nil {
			op := "encrypt"
			if t.Result.Decrypt {
				op = "decrypt"
			}
			for _, row := range t.Result.Rows {
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
