package server

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.uber.org/zap"

	"github.com/cipherd/cipherd/api"
)

// rateLimiter is a token bucket per identity: each holds up to burst tokens
// and refills at rate tokens per second; a request takes one. Limiting by
// identity rather than by address keeps working behind load balancers and
// NAT, where many clients share one address.
//
// The buckets are made once, one per configured identity, so memory is
// bounded by the configuration and lookups need no lock; each bucket has
// its own mutex. Unauthenticated requests never reach a bucket: they are
// answered 401 first.
type rateLimiter struct {
	rate    float64 // tokens per second
	burst   float64
	now     func() time.Time
	buckets map[string]*bucket
}

// maxRetryAfter bounds the wait reported for very low rates.
const maxRetryAfter = 24 * time.Hour

type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// newRateLimiter returns a limiter for the named identities, or nil (no
// limit) when rate is not positive. burst below 1 means 1.
func newRateLimiter(rate float64, burst int, names map[string]bool) *rateLimiter {
	if !(rate > 0) || math.IsInf(rate, 1) {
		return nil
	}
	l := &rateLimiter{rate: rate, burst: float64(max(burst, 1)), now: time.Now, buckets: make(map[string]*bucket, len(names))}
	now := l.now()
	for name := range names {
		l.buckets[name] = &bucket{tokens: l.burst, last: now}
	}
	return l
}

// take takes a token from name's bucket. When there is none, it reports how
// long until there will be one.
func (l *rateLimiter) take(name string) (ok bool, wait time.Duration) {
	if l == nil {
		return true, 0
	}
	b := l.buckets[name]
	if b == nil {
		return true, 0 // every identity has a bucket; nothing else reaches here
	}
	now := l.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(l.burst, b.tokens+elapsed.Seconds()*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	secs := min((1-b.tokens)/l.rate, maxRetryAfter.Seconds())
	return false, time.Duration(secs * float64(time.Second))
}

// retryAfter is the Retry-After value for a wait: whole seconds, rounded up,
// at least 1.
func retryAfter(wait time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(wait.Seconds()))), 10)
}

// rateLimit answers 429 with Retry-After when id is over its rate.
func (s *Server) rateLimit(c *fiber.Ctx, id *identity) error {
	ok, wait := s.auth().limits.take(id.name)
	if ok {
		return nil
	}
	ra := retryAfter(wait)
	if ce := s.log.Check(zap.DebugLevel, "rate limited"); ce != nil {
		ce.Write(zap.String("request_id", requestID(c)), zap.String("identity", id.name), zap.String("retry_after", ra))
	}
	c.Set(fiber.HeaderRetryAfter, ra)
	return apiError(api.CodeRateLimited, "too many requests for this identity; retry after Retry-After seconds")
}
