package server

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/cipherd/cipherd/cryptosvc"
)

// Usage per key version is counted by the cryptosvc.Service in memory and
// added to the keystore's backend by flushUsage every usage_flush_interval,
// and once more when Shutdown has drained the requests, so that a replica
// that stops loses none of its counts. GET /v1/keys/{key} shows them
// (handleDescribeKey).

// minUsageFlush is the shortest usage_flush_interval: each flush is a
// write to the keystore's backend, from every replica.
const minUsageFlush = 100 * time.Millisecond

// flushUsage flushes every interval until ctx ends.
func (s *Server) flushUsage(ctx context.Context) {
	t := time.NewTicker(s.cfg.UsageFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.flushUsageOnce(ctx)
		}
	}
}

// flushUsageOnce adds the counts to the keystore's backend. A failure
// keeps them for the next flush; it is counted and logged, at warn while
// the keystore is unavailable (/readyz and the keystore metrics say so
// already), else at error.
func (s *Server) flushUsageOnce(ctx context.Context) {
	err := s.svc.FlushUsage(ctx)
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	s.met.usageFlushFailures.Add(1)
	level := zap.ErrorLevel
	if errors.Is(err, cryptosvc.ErrUnavailable) {
		level = zap.WarnLevel
	}
	if ce := s.log.Check(level, "key usage not flushed to the keystore; kept for the next flush"); ce != nil {
		ce.Write(zap.Error(err))
	}
}
