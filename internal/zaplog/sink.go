package zaplog

import (
	"errors"
	"io"
	"sync"
	"syscall"
	"time"
)

// Sink is a zapcore.WriteSyncer for a busy server's logs: lines are
// gathered in memory and written to the destination by a goroutine of the
// sink's own, so that a request that logs never waits on the destination.
//
// zapcore.BufferedWriteSyncer writes a full buffer from inside the Write that
// fills it, holding its lock: when standard error is a pipe, as in a
// container, that write blocks until the reader has drained the pipe, and so
// does every request that logs meanwhile. scripts/loadbench.sh with PIN=0,
// the reader sharing the server's cores, measures the server CPU per request
// that logging costs.
//
// Memory is bounded: logSinkBuffers buffers of logSinkSize bytes. When all
// of them wait to be written, Write waits for the destination, as an
// unbuffered writer would; no line is dropped. Lines reach the destination
// in the order of the Write calls that returned, at the latest
// FlushInterval after they were written, and all of them by the time Sync or
// Stop returns.
type Sink struct {
	w        io.Writer
	interval time.Duration

	mu      sync.Mutex
	cur     []byte      // being filled, under mu; nil after Stop
	free    chan []byte // empty buffers
	queue   chan chunk  // for the writer, in order
	stopped chan struct{}

	// The writer takes errMu, never mu: a Write may hold mu while it waits
	// for the writer to free a buffer.
	errMu sync.Mutex
	err   error // the destination's first error not yet reported
}

// chunk is a buffer to write, and if done is not nil, a channel to close
// once it and everything before it is written.
type chunk struct {
	b    []byte
	done chan struct{}
}

const (
	logSinkSize    = 64 << 10 // the default pipe capacity on Linux
	logSinkBuffers = 4
)

// NewSink returns a sink that writes to w, at least every interval while
// it has lines to write (every second if interval ≤ 0). Stop it to flush it
// and end its goroutine.
func NewSink(w io.Writer, interval time.Duration) *Sink {
	if interval <= 0 {
		interval = time.Second
	}
	s := &Sink{
		w:        w,
		interval: interval,
		free:     make(chan []byte, logSinkBuffers),
		queue:    make(chan chunk, logSinkBuffers+1),
		stopped:  make(chan struct{}),
	}
	for range logSinkBuffers - 1 {
		s.free <- make([]byte, 0, logSinkSize)
	}
	s.cur = make([]byte, 0, logSinkSize)
	go s.run()
	return s
}

// Write copies p into the current buffer, handing the buffer to the writer
// when it is full. It returns the destination's first error since the last
// one reported, if any, so that zap reports it.
func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return s.w.Write(p)
	}
	s.cur = append(s.cur, p...)
	if len(s.cur) >= logSinkSize {
		s.handOff(nil)
	}
	return len(p), s.takeErr()
}

// takeErr returns the destination's first error since the last one
// reported, and forgets it.
func (s *Sink) takeErr() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	err := s.err
	s.err = nil
	return err
}

// handOff queues the current buffer, with done, and takes an empty one,
// waiting for the writer if there is none. Called with mu held.
func (s *Sink) handOff(done chan struct{}) {
	s.queue <- chunk{b: s.cur, done: done}
	s.cur = <-s.free
}

// run writes the queued buffers in order, and every interval queues the
// current one if it holds anything and a free buffer can replace it (if
// none can, every other buffer is queued and the current one is next).
func (s *Sink) run() {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case c, ok := <-s.queue:
			if !ok {
				close(s.stopped)
				return
			}
			s.write(c)
		case <-t.C:
			// Not Lock: a Write that holds mu may be waiting for this
			// goroutine to free a buffer. It is handing off a full one
			// anyway; the next tick looks again.
			if !s.mu.TryLock() {
				continue
			}
			if len(s.cur) > 0 {
				select {
				case b := <-s.free:
					s.queue <- chunk{b: s.cur}
					s.cur = b
				default:
				}
			}
			s.mu.Unlock()
		}
	}
}

// write writes one chunk and recycles its buffer.
func (s *Sink) write(c chunk) {
	if len(c.b) > 0 {
		if _, err := s.w.Write(c.b); err != nil {
			s.errMu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.errMu.Unlock()
		}
	}
	if c.done != nil {
		close(c.done)
	}
	if cap(c.b) > 2*logSinkSize { // grown by a huge line: do not keep it
		c.b = make([]byte, 0, logSinkSize)
	}
	s.free <- c.b[:0]
}

// Sync writes everything written so far, then syncs the destination if it
// can be synced (standard error on a pipe or a terminal cannot: that error is
// not reported).
func (s *Sink) Sync() error {
	s.mu.Lock()
	if s.cur == nil {
		s.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	s.handOff(done)
	s.mu.Unlock()
	<-done
	if err := s.takeErr(); err != nil {
		return err
	}
	if f, ok := s.w.(interface{ Sync() error }); ok {
		if err := f.Sync(); err != nil && !isUnsyncable(err) {
			return err
		}
	}
	return nil
}

// Stop writes everything written so far and ends the sink's goroutine;
// later writes go straight to the destination. It may be called more than
// once.
func (s *Sink) Stop() error {
	s.mu.Lock()
	if s.cur == nil {
		s.mu.Unlock()
		return nil
	}
	s.queue <- chunk{b: s.cur}
	s.cur = nil
	close(s.queue)
	s.mu.Unlock()
	<-s.stopped
	return s.takeErr()
}

// isUnsyncable reports whether err is a destination's way of saying that
// it cannot be synced, as pipes and terminals say.
func isUnsyncable(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.ENOTTY)
}
