package zaplog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a destination that records everything written to it.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestLogSinkKeepsEveryLineInOrder(t *testing.T) {
	var dst lockedBuffer
	s := NewSink(&dst, time.Millisecond)
	const writers, lines = 8, 3000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				pad := ""
				if i%997 == 0 { // now and then a line longer than a buffer
					pad = strings.Repeat("x", logSinkSize+i)
				}
				if _, err := fmt.Fprintf(s, "%d %d %s\n", g, i, pad); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	for _, l := range strings.Split(strings.TrimSuffix(dst.String(), "\n"), "\n") {
		var g, i int
		if _, err := fmt.Sscanf(l, "%d %d", &g, &i); err != nil {
			t.Fatalf("line %.40q: %v", l, err)
		}
		if i != next[g] {
			t.Fatalf("writer %d: line %d after line %d", g, i, next[g]-1)
		}
		next[g]++
	}
	for g, n := range next {
		if n != lines {
			t.Errorf("writer %d: %d lines of %d", g, n, lines)
		}
	}
	if dst.writes >= writers*lines/10 {
		t.Errorf("%d writes to the destination for %d lines: not buffered", dst.writes, writers*lines)
	}
}

func TestLogSinkSyncWritesEverything(t *testing.T) {
	var dst lockedBuffer
	s := NewSink(&dst, time.Hour)
	defer s.Stop()
	io.WriteString(s, "one\n")
	io.WriteString(s, "two\n")
	if got := dst.String(); got != "" {
		t.Fatalf("written before Sync or a tick: %q", got)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := dst.String(); got != "one\ntwo\n" {
		t.Fatalf("after Sync: %q", got)
	}
}

func TestLogSinkFlushesEveryInterval(t *testing.T) {
	var dst lockedBuffer
	s := NewSink(&dst, 10*time.Millisecond)
	defer s.Stop()
	io.WriteString(s, "line\n")
	for deadline := time.Now().Add(5 * time.Second); dst.String() == ""; {
		if time.Now().After(deadline) {
			t.Fatal("a line was not written within 5 s of a 10 ms interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := dst.String(); got != "line\n" {
		t.Fatalf("got %q", got)
	}
}

// gatedWriter blocks every write until the gate is closed.
type gatedWriter struct {
	gate chan struct{}
	lockedBuffer
}

func (w *gatedWriter) Write(p []byte) (int, error) {
	<-w.gate
	return w.lockedBuffer.Write(p)
}

func TestLogSinkWaitsOnlyWhenEveryBufferIsFull(t *testing.T) {
	dst := &gatedWriter{gate: make(chan struct{})}
	s := NewSink(dst, time.Hour)
	line := strings.Repeat("a", 1023) + "\n"
	// With the destination blocked, the first buffer is taken by the
	// writer and the others fill up: that many lines must not wait.
	n := 0
	for range (logSinkBuffers - 1) * logSinkSize / len(line) {
		io.WriteString(s, line)
		n++
	}
	// Enough more to fill every buffer: this must wait for the destination.
	returned := make(chan int)
	go func() {
		k := 0
		for range 2 * logSinkSize / len(line) {
			io.WriteString(s, line)
			k++
		}
		returned <- k
	}()
	select {
	case <-returned:
		t.Fatal("writes beyond every buffer returned while the destination was blocked: memory is not bounded")
	case <-time.After(100 * time.Millisecond):
	}
	close(dst.gate)
	n += <-returned
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if got, want := len(dst.String()), n*len(line); got != want {
		t.Fatalf("%d bytes written, want %d", got, want)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write(p []byte) (int, error) { return 0, w.err }

func TestLogSinkReportsWriteErrors(t *testing.T) {
	boom := errors.New("disk on fire")
	s := NewSink(failingWriter{boom}, time.Hour)
	io.WriteString(s, "x\n")
	if err := s.Sync(); !errors.Is(err, boom) {
		t.Fatalf("Sync: %v, want %v", err, boom)
	}
	if err := s.Sync(); err != nil {
		t.Fatalf("second Sync reported the same error again: %v", err)
	}
	// A full buffer's error comes back from a later Write, or from the
	// Write that filled it if the writer failed before that one returned.
	line := strings.Repeat("b", logSinkSize)
	_, err := io.WriteString(s, line)
	for deadline := time.Now().Add(5 * time.Second); err == nil && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		_, err = io.WriteString(s, "c\n")
	}
	if !errors.Is(err, boom) {
		t.Fatalf("Write: %v, want %v", err, boom)
	}
	s.Stop()
}

func TestLogSinkAfterStop(t *testing.T) {
	var dst lockedBuffer
	s := NewSink(&dst, time.Hour)
	io.WriteString(s, "before\n")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(s, "after\n")
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := dst.String(); got != "before\nafter\n" {
		t.Fatalf("got %q", got)
	}
}

func TestLogSinkSyncOnAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	s := NewSink(w, time.Hour)
	defer s.Stop()
	io.WriteString(s, "piped\n")
	if err := s.Sync(); err != nil {
		t.Fatalf("Sync on a pipe: %v (a pipe cannot be synced; that is not an error)", err)
	}
	got := make([]byte, 6)
	if _, err := io.ReadFull(r, got); err != nil || string(got) != "piped\n" {
		t.Fatalf("read %q, %v", got, err)
	}
}
