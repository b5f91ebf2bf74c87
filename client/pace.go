package client

import (
	"sync"
	"time"
)

// A stream's upload that runs far ahead of its answer costs the service
// more than the bytes it carries. A client that writes as fast as its
// socket takes data, to a service that is the slower end, fills the
// service's receive queue to its limit (megabytes, since the kernel grows
// it for a fast reader), so the service reads every byte long after it
// arrived and out of cache, and the window closes and reopens thousands of
// times per GiB. With the service on a core of its own, it then spends
// more system time per GiB on the client's connection than on curl's, whose
// upload happens to keep pace with its download (the clients' rounds of
// scripts/loadbench.sh, BENCHMARKS.md). So a stream whose request and
// answer lengths are both known keeps its upload within a window of the
// answer, counted in request bytes, as flow control would.
//
// The window is what paceRate needs over the connection's smallest
// round-trip time, and at least paceWindow: on loopback and in a data
// centre, paceWindow. A connection too distant for paceMaxWindow, a
// service (or proxy) that holds more than the window before it answers,
// and a transport that is not the client's own all stream unpaced.
const (
	paceWindow    = 1 << 20
	paceRate      = 4 << 30 // bytes per second
	paceMaxWindow = 64 << 20
)

// paceSilence is how long an upload waits for an answer that does not
// move before it goes on unpaced. (A variable for the tests.)
var paceSilence = 50 * time.Millisecond

// pacer holds an upload back while it is more than window request bytes
// ahead of the answer. wait is called by the goroutine that uploads, the
// other methods by any.
type pacer struct {
	kick    chan struct{} // a token when the answer grows or pacing ends
	silence time.Duration
	timer   *time.Timer // the uploader's

	mu       sync.Mutex
	on       bool
	window   int64   // request bytes the upload may be ahead by
	scale    float64 // request bytes per answer byte
	sent     int64   // request bytes read from the source
	answered int64   // answer bytes written to dst
}

func newPacer() *pacer {
	return &pacer{kick: make(chan struct{}, 1), silence: paceSilence, on: canPace, window: paceWindow, scale: 1}
}

// ahead reports whether the upload is past its window. p.mu is held.
func (p *pacer) ahead() bool {
	return p.on && float64(p.sent)-float64(p.answered)*p.scale > float64(p.window)
}

// wait returns once the upload may read more of its source: it is within
// its window, pacing has ended, done is closed, or the answer has not moved
// for p.silence, which ends pacing.
func (p *pacer) wait(done <-chan struct{}) {
	for {
		p.mu.Lock()
		if !p.ahead() {
			p.mu.Unlock()
			return
		}
		seen := p.answered
		p.mu.Unlock()
		if p.timer == nil {
			p.timer = time.NewTimer(p.silence)
		} else {
			p.timer.Reset(p.silence)
		}
		select {
		case <-p.kick:
			p.timer.Stop()
		case <-done:
			p.timer.Stop()
			p.stop()
		case <-p.timer.C:
			p.mu.Lock()
			if p.answered == seen {
				p.on = false
			}
			p.mu.Unlock()
		}
	}
}

// read counts n request bytes read from the source.
func (p *pacer) read(n int) {
	p.mu.Lock()
	p.sent += int64(n)
	p.mu.Unlock()
}

// answer counts n answer bytes written to dst.
func (p *pacer) answer(n int) {
	p.mu.Lock()
	p.answered += int64(n)
	p.mu.Unlock()
	p.wake()
}

// arm sets the window once the answer's headers have come: reqLen and
// respLen are the request's and the answer's lengths, and rtt the
// connection's smallest round-trip time; ok is false when one of them is
// unknown, which ends pacing.
func (p *pacer) arm(reqLen, respLen int64, rtt time.Duration, ok bool) {
	w := max(paceWindow, int64(rtt.Seconds()*paceRate))
	p.mu.Lock()
	if !ok || reqLen <= 0 || respLen <= 0 || w > paceMaxWindow {
		p.on = false
	} else {
		p.window, p.scale = w, float64(reqLen)/float64(respLen)
	}
	p.mu.Unlock()
	p.wake()
}

// stop ends pacing: the upload goes on as fast as the connection takes it.
func (p *pacer) stop() {
	p.mu.Lock()
	p.on = false
	p.mu.Unlock()
	p.wake()
}

func (p *pacer) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}
