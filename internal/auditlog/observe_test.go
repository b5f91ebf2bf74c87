package auditlog

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// observed records what Config.Observe is called with.
type observed struct {
	mu   sync.Mutex
	errs []error
	durs []time.Duration
}

func (o *observed) observe(d time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.durs = append(o.durs, d)
	o.errs = append(o.errs, err)
}

func (o *observed) get() ([]time.Duration, []error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]time.Duration(nil), o.durs...), append([]error(nil), o.errs...)
}

// TestObserve: every group's write and sync is observed before its callers
// return, failures with their error.
func TestObserve(t *testing.T) {
	var o observed
	l, err := OpenConfig(filepath.Join(t.TempDir(), "audit.log"), Config{Observe: o.observe})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 3 { // one at a time: one group each
		if err := l.Append([]byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		durs, errs := o.get()
		if len(durs) != i+1 || errs[i] != nil || durs[i] <= 0 {
			t.Fatalf("after append %d: observed %v, %v", i, durs, errs)
		}
	}
	if _, groups := l.Stats(); groups != 3 {
		t.Fatalf("%d groups written, 3 observed", groups)
	}

	var full observed
	f, err := OpenConfig("/dev/full", Config{Observe: full.observe})
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer f.Close()
	f.Append([]byte(`{}`))
	if _, errs := full.get(); len(errs) != 1 || !errors.Is(errs[0], syscall.ENOSPC) {
		t.Fatalf("a failed write observed as %v", errs)
	}
}

// TestWriterPanics: a panic while a caller writes its own record (here in
// Observe) goes up its stack and leaves the log working: Close does not
// wait for it.
func TestWriterPanics(t *testing.T) {
	var panicking atomic.Bool
	l, err := OpenConfig(os.DevNull, Config{Observe: func(time.Duration, error) {
		if panicking.Load() {
			panic("observer")
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	appendRecovering := func(rec string) (err error, panicked bool) {
		defer func() {
			if r := recover(); r != nil {
				panicked = true
			}
		}()
		return l.Append([]byte(rec)), false
	}
	panicking.Store(true)
	if _, p := appendRecovering(`{"first":true}`); !p {
		t.Fatal("the writer did not panic")
	}
	panicking.Store(false)
	if err, p := appendRecovering(`{"after":true}`); err != nil || p {
		t.Fatalf("append after the panic: %v, panicked %v", err, p)
	}
	done := make(chan error)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for the writer that panicked")
	}
}
