package server

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/cipherd/cipherd/api"
)

// Failed authentications are limited per client address, before any
// credential is looked at: a client that sends forged JWTs naming a real
// key makes the server verify a signature for each (BenchmarkAuthJWT), and
// one that guesses tokens costs a hash and a lookup each. Each address
// that failed has a token bucket (golang.org/x/time/rate) that holds
// Config.AuthFailureBurst failures and refills at Config.AuthFailureRate
// a second; a failure takes one, and while its bucket holds less than one
// every request from the address is answered 429 auth_rate_limited with
// Retry-After, whatever credential it carries: a credential that would
// succeed is refused too, so that a guess that hits cannot be told from
// one that misses. Successful authentications take nothing.
//
// An address is an IPv4 address, or the /64 of an IPv6 one, which one
// host commonly holds whole. Behind a proxy or NAT the address is the
// proxy's, shared by every client behind it (docs/OPERATIONS.md).
//
// Memory is bounded: an address is dropped once its bucket is full again,
// since a full bucket is what an address never seen has (the periodic
// sweep waits, besides, for its last log line to be authFailLogInterval
// old), and at most maxAddrs are held. When the table is full of addresses still
// failing, failures from new addresses are not limited until some of them
// refill; those held stay limited, so that a client that keeps failing
// cannot be pushed out by failures from many addresses.
type authFailLimiter struct {
	limit    rate.Limit
	burst    int
	maxAddrs int
	log      *zap.Logger

	// n is len(addrs), read without the lock: while no address is
	// failing, as is usual, a request costs one atomic load here.
	n  atomic.Int64
	mu sync.Mutex
	// addrs holds the addresses that failed lately.
	addrs map[netip.Addr]*authFailAddr
	// sweptAt is when the table was last swept for room; fullLogged when
	// it was last logged as full.
	sweptAt, fullLogged time.Time
}

// authFailAddr is an address's bucket of failures, and what the log said
// of it.
type authFailAddr struct {
	bucket  *rate.Limiter
	refused int64     // requests refused since the last log line about it
	logged  time.Time // the last log line about it; zero: none
}

const (
	// defaultAuthFailMaxAddrs is how many addresses the limiter holds at
	// most.
	defaultAuthFailMaxAddrs = 65536
	// authFailLogInterval is the least time between two log lines about
	// one address, or about the table being full.
	authFailLogInterval = time.Minute
	// authFailSweepInterval is the least time between two sweeps of a full
	// table for room: a sweep reads every address, and failures from new
	// addresses must not make it run on each one.
	authFailSweepInterval = time.Second
)

// newAuthFailLimiter returns the limiter of r failures a second with burst,
// or nil (no limit) when r is negative.
func newAuthFailLimiter(r float64, burst, maxAddrs int, log *zap.Logger) *authFailLimiter {
	if r < 0 {
		return nil
	}
	return &authFailLimiter{limit: rate.Limit(r), burst: max(burst, 1), maxAddrs: maxAddrs, log: log, addrs: map[netip.Addr]*authFailAddr{}}
}

// authFailKey is the address failures are counted under: ip itself, or its
// /64 for IPv6.
func authFailKey(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// refused reports whether requests from key are refused at now, and for
// how long: while its bucket holds less than one failure.
func (l *authFailLimiter) refused(key netip.Addr, now time.Time) (wait time.Duration, ok bool) {
	if l == nil || l.n.Load() == 0 {
		return 0, false
	}
	l.mu.Lock()
	a := l.addrs[key]
	if a == nil {
		l.mu.Unlock()
		return 0, false
	}
	tokens := a.bucket.TokensAt(now)
	if tokens >= 1 {
		l.mu.Unlock()
		return 0, false
	}
	a.refused++
	var logRefused int64 // > 0: log, outside the lock
	if now.Sub(a.logged) >= authFailLogInterval {
		logRefused, a.refused, a.logged = a.refused, 0, now
	}
	l.mu.Unlock()
	if logRefused > 0 {
		l.log.Warn("failed authentications over the limit: refusing the address's requests",
			zap.String("remote", key.String()), zap.Int64("refused", logRefused),
			zap.Float64("auth_failure_rate", float64(l.limit)), zap.Int("auth_failure_burst", l.burst))
	}
	secs := min((1-tokens)/float64(l.limit), maxRetryAfter.Seconds())
	return max(time.Duration(secs*float64(time.Second)), time.Nanosecond), true
}

// failed counts a failed authentication from key at now. It reports false
// when the table is full of addresses still failing and key is not among
// them: the failure is then not counted.
func (l *authFailLimiter) failed(key netip.Addr, now time.Time) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.addrs[key]
	if a == nil {
		if len(l.addrs) >= l.maxAddrs && now.Sub(l.sweptAt) >= authFailSweepInterval {
			l.sweptAt = now
			l.sweepLocked(now, true)
		}
		if len(l.addrs) >= l.maxAddrs {
			if now.Sub(l.fullLogged) >= authFailLogInterval {
				l.fullLogged = now
				// Under the lock, but once a minute at most.
				l.log.Warn("failed authentications: the table of failing addresses is full; failures from new addresses are not limited",
					zap.Int("addresses", len(l.addrs)))
			}
			return false
		}
		a = &authFailAddr{bucket: rate.NewLimiter(l.limit, l.burst)}
		l.addrs[key] = a
		l.n.Store(int64(len(l.addrs)))
	}
	a.bucket.AllowN(now, 1)
	return true
}

// sweep drops the addresses whose buckets are full again, and whose last
// log line is older than authFailLogInterval, so that one address is not
// logged more often than that.
func (l *authFailLimiter) sweep(now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now, false)
}

// sweepLocked is sweep; forRoom drops every address whose bucket is full,
// logged lately or not.
func (l *authFailLimiter) sweepLocked(now time.Time, forRoom bool) {
	for k, a := range l.addrs {
		if a.bucket.TokensAt(now) >= float64(l.burst) && (forRoom || now.Sub(a.logged) >= authFailLogInterval) {
			delete(l.addrs, k)
		}
	}
	l.n.Store(int64(len(l.addrs)))
}

// errAuthRateLimited refuses a request from an address over its limit.
var errAuthRateLimited = apiError(api.CodeAuthRateLimited, "too many failed authentications from this address; retry after Retry-After seconds")

// checkAuthFailures refuses, with 429 and Retry-After, a request from an
// address over its limit of failed authentications.
func (s *Server) checkAuthFailures(c *fiber.Ctx, key netip.Addr) error {
	wait, refused := s.authFails.refused(key, time.Now())
	if !refused {
		return nil
	}
	s.met.authRateLimited.Add(1)
	c.Set(fiber.HeaderRetryAfter, retryAfter(wait))
	return errAuthRateLimited
}
