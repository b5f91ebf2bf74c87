package auditlog

import (
	"bytes"
	"errors"
	"fmt"
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

// TestWriterPanics: a panic while a group is written (here in Observe)
// goes up its writer's stack, fails the callers that waited on the group,
// and leaves the log working.
func TestWriterPanics(t *testing.T) {
	var panicking atomic.Bool
	var l *Log
	var err error
	l, err = OpenConfig(filepath.Join(t.TempDir(), "audit.log"), Config{Observe: func(time.Duration, error) {
		if panicking.Load() {
			panic("observer")
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendRecovering := func(rec string) (err error, panicked bool) {
		defer func() {
			if r := recover(); r != nil {
				panicked = true
			}
		}()
		return l.Append([]byte(rec)), false
	}
	panicking.Store(true)
	l.fmu.Lock() // the first record's write waits here, the others join a group
	first := make(chan bool)
	go func() { _, p := appendRecovering(`{"first":true}`); first <- p }()
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.busy })
	results := make(chan error, 3)
	for i := range 3 {
		go func() {
			err, p := appendRecovering(fmt.Sprintf(`{"i":%d}`, i))
			if p {
				err = errors.New("panicked")
			}
			results <- err
		}()
	}
	waitFor(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return bytes.Count(l.pending, []byte("\n")) == 3
	})
	l.fmu.Unlock()
	if !<-first {
		t.Fatal("the first writer did not panic")
	}
	// The group's writer panics too, after the others were released
	// with an error.
	var failed, panicked int
	for range 3 {
		switch err := <-results; {
		case errors.Is(err, errWriterPanicked):
			failed++
		case err != nil && err.Error() == "panicked":
			panicked++
		default:
			t.Errorf("a caller of the panicking group got %v", err)
		}
	}
	if failed != 2 || panicked != 1 {
		t.Errorf("%d callers failed and %d panicked, want 2 and 1", failed, panicked)
	}
	panicking.Store(false)
	if err, p := appendRecovering(`{"after":true}`); err != nil || p {
		t.Fatalf("append after the panics: %v, panicked %v", err, p)
	}
}
