package server

import (
	"sync"

	"golang.org/x/sync/semaphore"
)

// streamLimiter bounds the streaming requests (octet-stream bodies, with or
// without ?verify=full) each identity has in flight, so that one caller
// cannot hold every connection and buffer the server has
// (Config.MaxStreamsPerIdentity). A stream holds its place from the handler
// until its response ends. Identities are the configured ones, so the map
// is bounded by the configuration.
type streamLimiter struct {
	max int64 // 0: no limit
	mu  sync.Mutex
	per map[string]*semaphore.Weighted
}

func newStreamLimiter(max int) *streamLimiter {
	return &streamLimiter{max: int64(max), per: map[string]*semaphore.Weighted{}}
}

// acquire takes a place for identity name. It returns the function that
// gives it back (to be called once), or nil when name is at its limit.
func (l *streamLimiter) acquire(name string) func() {
	if l == nil || l.max <= 0 {
		return func() {}
	}
	l.mu.Lock()
	sem := l.per[name]
	if sem == nil {
		sem = semaphore.NewWeighted(l.max)
		l.per[name] = sem
	}
	l.mu.Unlock()
	if !sem.TryAcquire(1) {
		return nil
	}
	var once sync.Once
	return func() { once.Do(func() { sem.Release(1) }) }
}
