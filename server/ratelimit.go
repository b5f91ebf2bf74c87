package server

import (
	"math"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/cipherd/cipherd/api"
)

// rateLimiter is a token bucket per identity (golang.org/x/time/rate): each
// holds up to burst tokens and refills at rate tokens per second; a request
// takes its route's cost (route.cost). Limiting by identity rather than by
// address keeps working behind load balancers and NAT, where many clients
// share one address.
//
// The buckets are made once, one per configured identity, so memory is
// bounded by the configuration and lookups need no lock. Unauthenticated
// requests never reach a bucket: they are answered 401 first.
type rateLimiter struct {
	rate    float64 // tokens per second
	burst   int
	now     func() time.Time
	buckets map[string]*rate.Limiter
}

// maxRetryAfter bounds the wait reported for very low rates.
const maxRetryAfter = 24 * time.Hour

// newRateLimiter returns a limiter for the named identities, or nil (no
// limit) when rate is not positive. burst below 1 means 1. now is the
// buckets' clock; nil means time.Now.
func newRateLimiter(r float64, burst int, names map[string]bool, now func() time.Time) *rateLimiter {
	if !(r > 0) || math.IsInf(r, 1) {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	l := &rateLimiter{rate: r, burst: max(burst, 1), now: now, buckets: make(map[string]*rate.Limiter, len(names))}
	for name := range names {
		l.buckets[name] = rate.NewLimiter(rate.Limit(r), l.burst)
	}
	return l
}

// take takes cost tokens from name's bucket; a cost over the burst takes the
// whole burst, so that every route stays reachable. When there are too few,
// it takes none and reports how long until there will be enough.
func (l *rateLimiter) take(name string, cost int) (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	return l.takeFrom(l.buckets[name], cost)
}

// takeFrom is take on bucket b: a configured identity's, or a service
// token's own (tokens.go).
func (l *rateLimiter) takeFrom(b *rate.Limiter, cost int) (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	if b == nil {
		return true, 0 // every identity has a bucket; nothing else reaches here
	}
	n := min(max(cost, 1), l.burst)
	now := l.now()
	if b.AllowN(now, n) {
		return true, 0
	}
	missing := float64(n) - b.TokensAt(now)
	secs := min(missing/l.rate, maxRetryAfter.Seconds())
	return false, max(time.Duration(secs*float64(time.Second)), time.Nanosecond)
}

// retryAfter is the Retry-After value for a wait: whole seconds, rounded up,
// at least 1.
func retryAfter(wait time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(wait.Seconds()))), 10)
}

// rateLimit answers 429 with Retry-After when id is over its rate.
func (s *Server) rateLimit(c *fiber.Ctx, id *identity, cost int) error {
	var ok bool
	var wait time.Duration
	if id.token != nil {
		ok, wait = s.auth().limits.takeFrom(id.token.bucket, cost)
	} else {
		ok, wait = s.auth().limits.take(id.name, cost)
	}
	if ok {
		return nil
	}
	s.met.ops.rateLimited.inc(id.name)
	ra := retryAfter(wait)
	if ce := s.log.Check(zap.DebugLevel, "rate limited"); ce != nil {
		ce.Write(zap.String("request_id", requestID(c)), zap.String("identity", id.name), zap.String("retry_after", ra))
	}
	c.Set(fiber.HeaderRetryAfter, ra)
	return apiError(api.CodeRateLimited, "too many requests for this identity; retry after Retry-After seconds")
}
