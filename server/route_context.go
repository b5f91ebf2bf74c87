package server

import (
	"context"
	"sync"
	"time"
)

// reqContext is the context of a request's handler (c.UserContext()): its
// route's deadline over the context the request came with. Its Done channel
// and timer are made only when something asks for them, which a seal or an
// open, reading memory only, never does; context.WithTimeout would make a
// timer and three other objects for every request, which shows in
// BenchmarkHandleEncryptJSON's CPU time and allocations per request. It
// lives in the request's state, so that it costs no allocation of its own.
type reqContext struct {
	parent   context.Context
	deadline time.Time

	mu     sync.Mutex
	inner  context.Context // with the deadline; made on demand
	cancel context.CancelFunc
	ended  bool // the handler returned
}

var _ context.Context = (*reqContext)(nil)

// closedChan is the Done channel of a context that ended before anything
// asked for its channel.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// start sets the context up for a handler that may run until deadline.
func (x *reqContext) start(parent context.Context, deadline time.Time) {
	x.parent, x.deadline = parent, deadline
}

// end cancels the context when the handler returns, as the cancel function
// of context.WithTimeout would.
func (x *reqContext) end() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.ended = true
	if x.cancel != nil {
		x.cancel()
	}
}

func (x *reqContext) Deadline() (time.Time, bool) { return x.deadline, true }

func (x *reqContext) Value(key any) any { return x.parent.Value(key) }

func (x *reqContext) Done() <-chan struct{} {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.inner == nil && x.ended {
		return closedChan
	}
	return x.ctx().Done()
}

func (x *reqContext) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case x.inner != nil:
		return x.inner.Err()
	case x.ended:
		return context.Canceled
	case x.parent.Err() == nil && time.Now().Before(x.deadline):
		return nil // and Done, once made, is not closed yet either
	}
	return x.ctx().Err()
}

// ctx returns the context with the deadline, made on first use. The caller
// holds x.mu.
func (x *reqContext) ctx() context.Context {
	if x.inner == nil {
		x.inner, x.cancel = context.WithDeadline(x.parent, x.deadline)
	}
	return x.inner
}
