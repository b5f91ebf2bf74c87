package server

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"
)

// jwtCache remembers the JWTs verified, so that a client that sends the
// same token on every request (as a Kubernetes workload does until the
// kubelet renews it) pays for its verification once. Verifying a token
// (its signature, and go-jose's parsing of its header and claims) took
// 150–200 µs of CPU per request on the project's 2-core Zen 3 machine
// against 14 µs for a whole request with a static token, medians of
// BenchmarkAuthJWTUncached and BenchmarkAuthStaticToken; a remembered
// token took 1.4 µs more than a static one (BenchmarkAuthJWT), of which
// about 0.9 µs is its lookup (BenchmarkIdentifyBearer). docs/BENCHMARKS.md
// has the table.
//
// An entry is keyed by the token's SHA-256, which the static tokens'
// lookup has computed already; the token itself is never kept. It serves
// until the token's exp (never the clock skew past it) and only while
// the issuer still holds the key that verified it, so a key rotated away
// ends its tokens at the refresh that drops it. The cache belongs to the
// credentials in service: a reload starts an empty one, since its
// identities and policies may differ.
type jwtCache struct {
	m   sync.Map // [sha256.Size]byte → *jwtCached
	n   atomic.Int64
	max int64
	mu  sync.Mutex // serializes evictions
}

// jwtCacheSize bounds the tokens remembered: about 150 bytes each.
const jwtCacheSize = 10000

// jwtCached is a verified token's outcome.
type jwtCached struct {
	id  *identity
	src *jwksSource
	key *jwk  // the key that verified it
	exp int64 // its exp, in Unix seconds
}

func newJWTCache(max int) *jwtCache { return &jwtCache{max: int64(max)} }

// valid reports whether e still identifies its token's bearer at now.
func (e *jwtCached) valid(now time.Time) bool {
	return now.Unix() < e.exp && e.src.keys.Load().holds(e.key)
}

// get returns the identity of the token whose SHA-256 is sum, if it was
// verified and is still valid at now. A nil cache holds nothing
// (BenchmarkAuthJWTUncached).
func (c *jwtCache) get(sum [sha256.Size]byte, now time.Time) *identity {
	if c == nil {
		return nil
	}
	v, ok := c.m.Load(sum)
	if !ok {
		return nil
	}
	e := v.(*jwtCached)
	if !e.valid(now) {
		if c.m.CompareAndDelete(sum, v) {
			c.n.Add(-1)
		}
		return nil
	}
	return e.id
}

// put remembers a token verified at now. When the cache is full, it
// drops the entries no longer valid, then arbitrary ones, down to 90 %.
func (c *jwtCache) put(sum [sha256.Size]byte, e *jwtCached, now time.Time) {
	if c == nil || !e.valid(now) {
		return // accepted within the clock skew past its exp
	}
	if c.n.Load() >= c.max {
		c.evict(now)
	}
	if _, loaded := c.m.Swap(sum, e); !loaded {
		c.n.Add(1)
	}
}

func (c *jwtCache) evict(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n.Load() < c.max {
		return
	}
	target := c.max * 9 / 10
	for _, expiredOnly := range []bool{true, false} {
		c.m.Range(func(k, v any) bool {
			if (!expiredOnly || !v.(*jwtCached).valid(now)) && c.m.CompareAndDelete(k, v) {
				c.n.Add(-1)
			}
			return expiredOnly || c.n.Load() > target
		})
		if c.n.Load() <= target {
			return
		}
	}
}
