package server

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
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
	authRateLimited atomic.Int64 // refused for the address's failed authentications
	decryptFailures atomic.Int64
	auditFailures   atomic.Int64
	activeStreams   atomic.Int64
	http            seriesMap[httpKey, httpSeries]
	bytesByAEAD     seriesMap[bytesKey, bytesSeries]
	// jwtFailures counts the JWTs refused, by reason; jwksFailures the
	// failed loads of each issuer's keys (by issuer, from the
	// configuration: bounded).
	jwtFailures  [numJWTReasons]atomic.Int64
	jwksFailures seriesMap[string, atomic.Int64]
	// usageFlushFailures counts the flushes of key usage that failed
	// (usage.go).
	usageFlushFailures atomic.Int64
	ops                opsMetrics // by identity, reloads, audit latency (metrics_ops.go)
}

func newMetrics() *metrics { return &metrics{} }

func (m *metrics) authFailure()    { m.authFailures.Add(1) }
func (m *metrics) decryptFailure() { m.decryptFailures.Add(1) }
func (m *metrics) streamStart()    { m.activeStreams.Add(1) }
func (m *metrics) streamEnd()      { m.activeStreams.Add(-1) }

func (m *metrics) jwtFailure(r jwtReason) { m.jwtFailures[r].Add(1) }

// jwksFailure counts a failed load of issuer's keys; issuer is a
// configured issuer's name.
func (m *metrics) jwksFailure(issuer string) {
	m.jwksFailures.get(issuer, func() *atomic.Int64 { return new(atomic.Int64) }).Add(1)
}

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
