package server

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cipherd/cipherd/cryptosvc"
)

// Metrics for operators' alerts: the keystore's state, refusals and
// requests by identity, configuration reloads, the TLS certificate's
// expiry, the audit trail's write latency, key usage flushes.
// docs/OPERATIONS.md (Metrics and alerts) gives an alert rule for each.

// maxIdentityLabels bounds the identity label of the per-identity
// counters: service tokens are identities too, and an API can issue any
// number of them. The first identities seen since start get their name;
// every later one is counted under otherIdentity.
const maxIdentityLabels = 100

// otherIdentity is the identity label past maxIdentityLabels.
const otherIdentity = "other"

// identityCounters are counters by identity name with a bounded label:
// reads take no lock (an immutable map), a new name copies the map.
type identityCounters struct {
	cur atomic.Pointer[map[string]*atomic.Int64]
	mu  sync.Mutex
}

// inc counts one for name, a stable string (an identity's name).
func (c *identityCounters) inc(name string) {
	if p := c.cur.Load(); p != nil {
		if v := (*p)[name]; v != nil {
			v.Add(1)
			return
		}
		// Once the named labels are all taken (and "other" added), an
		// identity past them counts there without the lock.
		if v := (*p)[otherIdentity]; v != nil && len(*p) > maxIdentityLabels {
			v.Add(1)
			return
		}
	}
	c.add(name).Add(1)
}

func (c *identityCounters) add(name string) *atomic.Int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := map[string]*atomic.Int64{}
	if p := c.cur.Load(); p != nil {
		old = *p
	}
	if v := old[name]; v != nil {
		return v
	}
	named := len(old)
	if old[otherIdentity] != nil {
		named--
	}
	if named >= maxIdentityLabels {
		name = otherIdentity
		if v := old[name]; v != nil {
			return v
		}
	}
	next := make(map[string]*atomic.Int64, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	v := new(atomic.Int64)
	next[name] = v
	c.cur.Store(&next)
	return v
}

// write writes one sample per identity, sorted.
func (c *identityCounters) write(w *expo, name string) {
	p := c.cur.Load()
	if p == nil {
		return
	}
	ids := make([]string, 0, len(*p))
	for id := range *p {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w.sample(name, float64((*p)[id].Load()), "identity", id)
	}
}

// auditBuckets are the upper bounds of the audit write histogram: from a
// write to a page cache with a fast sync to a disk that stalls.
var auditBuckets = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond,
	500 * time.Microsecond, 1 * time.Millisecond, 2500 * time.Microsecond,
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, 1 * time.Second, 2500 * time.Millisecond, 10 * time.Second,
}

// durationHistogram is a histogram over auditBuckets.
type durationHistogram struct {
	buckets  [len(auditBuckets) + 1]atomic.Uint64 // not cumulative; the last is +Inf
	sumNanos atomic.Int64
}

// observe records one group's write and sync (auditlog.Config.Observe).
func (h *durationHistogram) observe(d time.Duration, _ error) {
	i := 0
	for i < len(auditBuckets) && d > auditBuckets[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNanos.Add(int64(d))
}

func (h *durationHistogram) write(w *expo, name string) {
	var b [len(auditBuckets) + 1]uint64
	var count uint64
	for i := range h.buckets {
		b[i] = h.buckets[i].Load()
		count += b[i]
	}
	var cum uint64
	for i, le := range auditBuckets {
		cum += b[i]
		w.sample(name+"_bucket", float64(cum), "le", formatFloat(le.Seconds()))
	}
	w.sample(name+"_bucket", float64(count), "le", "+Inf")
	w.sample(name+"_sum", time.Duration(h.sumNanos.Load()).Seconds())
	w.sample(name+"_count", float64(count))
}

// opsMetrics are the counters behind writeOpsMetrics.
type opsMetrics struct {
	rateLimited identityCounters // 429 rate_limited, by identity
	requests    identityCounters // authenticated requests, by identity
	reloadsOK   atomic.Int64
	reloadsBad  atomic.Int64
	auditWrite  durationHistogram
}

// reloaded counts a configuration reload.
func (m *opsMetrics) reloaded(ok bool) {
	if ok {
		m.reloadsOK.Add(1)
	} else {
		m.reloadsBad.Add(1)
	}
}

// CountReloadFailure counts a configuration reload that failed before it
// reached Reload (a file that does not parse), in
// cipherd_config_reloads_total{result="failure"}; Reload counts its own
// outcomes. cipherd serve calls it.
func (s *Server) CountReloadFailure() { s.met.ops.reloaded(false) }

// writeOpsMetrics publishes the operators' metrics.
func (s *Server) writeOpsMetrics(w *expo) {
	m := s.met
	s.writeKeystoreMetrics(w)
	w.family("cipherd_key_usage_flush_failures_total", "counter", "Flushes of the usage counted per key version to the keystore that failed; the counts are kept for the next flush.")
	w.sample("cipherd_key_usage_flush_failures_total", float64(m.usageFlushFailures.Load()))

	w.family("cipherd_rate_limited_total", "counter", "Requests refused 429 rate_limited, by identity; the first 100 identities seen get their name, later ones \"other\".")
	m.ops.rateLimited.write(w, "cipherd_rate_limited_total")
	w.family("cipherd_requests_by_identity_total", "counter", "Authenticated requests, by identity; the first 100 identities seen get their name, later ones \"other\".")
	m.ops.requests.write(w, "cipherd_requests_by_identity_total")

	w.family("cipherd_config_reloads_total", "counter", "Configuration reloads (SIGHUP, a changed file) by result: success, or failure (the configuration in service stayed).")
	w.sample("cipherd_config_reloads_total", float64(m.ops.reloadsBad.Load()), "result", "failure")
	w.sample("cipherd_config_reloads_total", float64(m.ops.reloadsOK.Load()), "result", "success")

	if s.tls != nil {
		if c := s.tls.cert.Load(); c != nil && c.Leaf != nil {
			w.family("cipherd_tls_cert_expiry_seconds", "gauge", "Seconds until the serving TLS certificate's NotAfter; negative once expired. Follows reloads.")
			w.sample("cipherd_tls_cert_expiry_seconds", time.Until(c.Leaf.NotAfter).Seconds())
		}
	}

	if s.audits != nil {
		w.family("cipherd_audit_write_seconds", "histogram", "Time of each write and sync of a group of audit records, which every request of the group waits on.")
		m.ops.auditWrite.write(w, "cipherd_audit_write_seconds")
	}
}

// writeKeystoreMetrics publishes whether the keystore's backing store is
// reachable and how stale memory may be.
func (s *Server) writeKeystoreMetrics(w *expo) {
	up := 1.0
	if h, ok := s.store.(cryptosvc.HealthReporter); ok && h.Health() != nil {
		up = 0
	}
	w.family("cipherd_keystore_up", "gauge", "1 while the keystore's backing store is reachable (always for the file keystore); 0 while a PostgreSQL keystore's database is not: data operations go on from memory, key administration fails.")
	w.sample("cipherd_keystore_up", up)
	age := 0.0
	if r, ok := s.store.(cryptosvc.SyncReporter); ok {
		age = max(time.Since(r.LastSync()).Seconds(), 0)
	}
	w.family("cipherd_keystore_last_sync_age_seconds", "gauge", "Seconds since memory was last known to hold what a shared keystore holds (a catch-up, notification, read, or listener ping every 10s; a keyring: a check of its file); 0 for stores only this process writes.")
	w.sample("cipherd_keystore_last_sync_age_seconds", age)
}
