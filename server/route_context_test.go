package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type ctxKey struct{}

// TestReqContext: a request context behaves as context.WithDeadline's would,
// whether or not its Done channel was asked for before the deadline.
func TestReqContext(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")

	// Done asked for first: it closes at the deadline.
	var x reqContext
	x.start(parent, time.Now().Add(50*time.Millisecond))
	if x.Err() != nil || x.Value(ctxKey{}) != "v" {
		t.Fatalf("before the deadline: Err %v, Value %v", x.Err(), x.Value(ctxKey{}))
	}
	if d, ok := x.Deadline(); !ok || time.Until(d) > 50*time.Millisecond {
		t.Fatalf("Deadline %v %v", d, ok)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-x.Done():
			case <-time.After(5 * time.Second):
				t.Error("Done did not close at the deadline")
			}
		}()
	}
	wg.Wait()
	if !errors.Is(x.Err(), context.DeadlineExceeded) {
		t.Fatalf("after the deadline: Err %v", x.Err())
	}
	x.end()
	if !errors.Is(x.Err(), context.DeadlineExceeded) {
		t.Fatalf("ended after the deadline: Err %v", x.Err())
	}

	// Nothing asked before the deadline: Err still reports it, and Done is
	// closed when asked.
	var y reqContext
	y.start(parent, time.Now().Add(10*time.Millisecond))
	time.Sleep(20 * time.Millisecond)
	if !errors.Is(y.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err after an unobserved deadline: %v", y.Err())
	}
	select {
	case <-y.Done():
	default:
		t.Fatal("Done not closed after the deadline")
	}

	// Ended before the deadline: canceled, with or without a channel.
	for _, ask := range []bool{false, true} {
		var z reqContext
		z.start(parent, time.Now().Add(time.Hour))
		var done <-chan struct{}
		if ask {
			done = z.Done()
		}
		z.end()
		if !ask {
			done = z.Done()
		}
		select {
		case <-done:
		default:
			t.Fatalf("asked before end %v: Done not closed by end", ask)
		}
		if !errors.Is(z.Err(), context.Canceled) {
			t.Fatalf("asked before end %v: Err %v", ask, z.Err())
		}
	}

	// The parent's cancellation goes through.
	pctx, cancel := context.WithCancel(parent)
	var w reqContext
	w.start(pctx, time.Now().Add(time.Hour))
	cancel()
	if !errors.Is(w.Err(), context.Canceled) {
		t.Fatalf("parent canceled: Err %v", w.Err())
	}
	<-w.Done()
}
