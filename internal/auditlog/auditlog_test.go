package auditlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("%s does not end with a whole line: %q", path, b[max(0, len(b)-40):])
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Every record appended concurrently is in the file once, on a line of its
// own, when Append returns.
func TestAppendConcurrent(t *testing.T) {
	l, path := openTemp(t)
	const writers, each = 16, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				rec := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				if err := l.Append([]byte(rec)); err != nil {
					t.Errorf("append: %v", err)
					return
				}
				// Durable before Append returned: on the file already.
				if i == each-1 && !bytes.Contains(must(os.ReadFile(path)), []byte(rec+"\n")) {
					t.Errorf("record %s not in the file when Append returned", rec)
				}
			}
		})
	}
	wg.Wait()
	got := lines(t, path)
	sort.Strings(got)
	if len(got) != writers*each {
		t.Fatalf("%d lines, want %d", len(got), writers*each)
	}
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Fatalf("line %s twice", got[i])
		}
	}
	t.Logf("%d records in %d groups", writers*each, l.groups.Load())
}

// openTemp opens a log in the test's temporary directory, closed when the
// test ends.
func openTemp(t *testing.T) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// Records appended while a group is being written share the next group:
// one write and one sync for all of them.
func TestGroupCommit(t *testing.T) {
	l, path := openTemp(t)
	l.fmu.Lock() // the first group's write waits here
	l.mu.Lock()
	first := l.group
	l.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { l.Append([]byte(`{"first":true}`)) })
	waitFor(t, func() bool { // the committer took the first group
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.group != first
	})
	const n = 50
	for i := range n {
		wg.Go(func() { l.Append(fmt.Appendf(nil, `{"i":%d}`, i)) })
	}
	waitFor(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return bytes.Count(l.pending, []byte("\n")) == n
	})
	l.fmu.Unlock()
	wg.Wait()
	if g := l.groups.Load(); g != 2 {
		t.Errorf("%d records made %d groups, want 2", n+1, g)
	}
	if got := lines(t, path); len(got) != n+1 {
		t.Errorf("%d lines, want %d", len(got), n+1)
	}
}

// Where no sync is shared (here /dev/null), each caller writes its own
// record: no group is made and no goroutine is woken.
func TestAppendUnsyncedWritesInline(t *testing.T) {
	l, err := Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.kick != nil {
		t.Fatal("a committer runs for /dev/null")
	}
	if err := l.Append([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := l.Append([]byte(`{"op":"encrypt"}`)); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("an append to /dev/null allocated %v times, want 0", allocs)
	}
	if records, groups := l.Stats(); records != groups || records != 102 {
		t.Errorf("%d records in %d groups, want 102 each", records, groups)
	}
}

// Close while groups wait: every record appended before it is written,
// each caller released with its group's result.
func TestCloseWhileGroupsWait(t *testing.T) {
	l, path := openTemp(t)
	l.fmu.Lock()
	l.mu.Lock()
	first := l.group
	l.mu.Unlock()
	var wg sync.WaitGroup
	errs := make(chan error, 31)
	wg.Go(func() { errs <- l.Append([]byte(`{"first":true}`)) })
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.group != first })
	for i := range 30 {
		wg.Go(func() { errs <- l.Append(fmt.Appendf(nil, `{"i":%d}`, i)) })
	}
	waitFor(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return bytes.Count(l.pending, []byte("\n")) == 30
	})
	closed := make(chan error)
	go func() { closed <- l.Close() }()
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.closed })
	l.fmu.Unlock()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("append before Close: %v", err)
		}
	}
	if got := lines(t, path); len(got) != 31 {
		t.Errorf("%d lines, want 31", len(got))
	}
}

// Close waits for the callers writing their own records.
func TestCloseWaitsForWriters(t *testing.T) {
	l, err := Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	l.fmu.Lock()
	res := make(chan error)
	go func() { res <- l.Append([]byte(`{}`)) }()
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.writers == 1 })
	closed := make(chan error)
	go func() { closed <- l.Close() }()
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.closed })
	select {
	case <-closed:
		t.Fatal("Close returned while a record was being written")
	case <-time.After(50 * time.Millisecond):
	}
	l.fmu.Unlock()
	if err := <-res; err != nil {
		t.Errorf("the append before Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
	}
}

// A device that is full fails every append, and the log goes on once
// writes succeed again.
func TestAppendFullDevice(t *testing.T) {
	l, err := Open("/dev/full")
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer l.Close()
	if err := l.Append([]byte(`{}`)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append to /dev/full = %v, want ENOSPC", err)
	}
}

// Reopen after a rename, as logrotate does it: records before it stay in
// the renamed file, later ones go to a new file at the path. A path that
// cannot be opened fails appends until a Reopen succeeds.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Append([]byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte(`{"n":2}`)); err != nil { // still the renamed file
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte(`{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lines(t, path+".1"), " "); got != `{"n":1} {"n":2}` {
		t.Errorf("rotated file: %s", got)
	}
	if got := strings.Join(lines(t, path), " "); got != `{"n":3}` {
		t.Errorf("new file: %s", got)
	}

	sub := filepath.Join(dir, "gone")
	os.Mkdir(sub, 0o700)
	l2, err := Open(filepath.Join(sub, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	os.RemoveAll(sub)
	if err := l2.Reopen(); err == nil {
		t.Fatal("Reopen in a removed directory succeeded")
	}
	if err := l2.Append([]byte(`{}`)); err == nil {
		t.Fatal("Append without a file succeeded")
	}
	os.Mkdir(sub, 0o700)
	if err := l2.Reopen(); err != nil {
		t.Fatal(err)
	}
	if err := l2.Append([]byte(`{"back":true}`)); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, filepath.Join(sub, "audit.log")); len(got) != 1 || got[0] != `{"back":true}` {
		t.Errorf("after the directory came back: %q", got)
	}
}

// Close waits for the records appended before it; later appends fail.
func TestClose(t *testing.T) {
	l, path := openTemp(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { l.Append(fmt.Appendf(nil, `{"i":%d}`, i)) })
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("append after Close = %v, want ErrClosed", err)
	}
	if err := l.Reopen(); !errors.Is(err, ErrClosed) || l.f != nil {
		t.Errorf("Reopen after Close = %v, file %v: want ErrClosed and no file opened", err, l.f)
	}
	if got := lines(t, path); len(got) != 20 {
		t.Errorf("%d lines, want 20", len(got))
	}
}

// BenchmarkAppendParallel appends 200-byte records from many goroutines to
// a file on the test's temporary directory, each waiting for its sync: the
// cost of a durable record per request, and how many a sync serves.
func BenchmarkAppendParallel(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "audit.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rec := bytes.Repeat([]byte("x"), 200)
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.Append(rec); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/float64(max(1, l.groups.Load())), "records/sync")
}

// A group whose sync fails is cut off the file. If the cut fails too, the
// next group cuts it first, or fails without writing: no record is
// written after an uncut group, where a later cut would take it away.
func TestFailedCut(t *testing.T) {
	l, path := openTemp(t)
	if err := l.Append([]byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	errSync, errCut := errors.New("sync failed"), errors.New("cut failed")
	var syncFails, cutFails atomic.Int32
	l.fmu.Lock()
	l.failSync = func() error {
		if syncFails.Add(-1) >= 0 {
			return errSync
		}
		return nil
	}
	l.failTruncate = func() error {
		if cutFails.Add(-1) >= 0 {
			return errCut
		}
		return nil
	}
	l.fmu.Unlock()

	syncFails.Store(1)
	cutFails.Store(2) // the group's own cut, then the next group's
	if err := l.Append([]byte(`{"n":2}`)); !errors.Is(err, errSync) {
		t.Fatalf("append with a failing sync: %v", err)
	}
	if err := l.Append([]byte(`{"n":3}`)); !errors.Is(err, errCut) {
		t.Fatalf("append after an uncut group, the cut failing again: %v", err)
	}
	if got := strings.Join(lines(t, path), " "); got != `{"n":1} {"n":2}` {
		t.Fatalf("after two failed cuts: %s, want the uncut group and nothing after it", got)
	}
	if err := l.Append([]byte(`{"n":4}`)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte(`{"n":5}`)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(lines(t, path), " "); got != `{"n":1} {"n":4} {"n":5}` {
		t.Fatalf("lines %s, want the failed group cut before the next", got)
	}
	// A later failure cuts back to the end of {"n":5}, not further.
	syncFails.Store(1)
	if err := l.Append([]byte(`{"n":6}`)); !errors.Is(err, errSync) {
		t.Fatalf("append with a failing sync: %v", err)
	}
	if got := strings.Join(lines(t, path), " "); got != `{"n":1} {"n":4} {"n":5}` {
		t.Fatalf("lines %s after a cut", got)
	}
}

// A group a crash cut short at the end of the file is cut off when the
// file is opened, so the next record starts on a line of its own.
func TestOpenCutsTornTail(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, content, want string }{
		{"torn", "{\"n\":1}\n{\"n\":2}\n{\"n\":", "{\"n\":1}\n{\"n\":2}\n"},
		{"whole", "{\"n\":1}\n", "{\"n\":1}\n"},
		{"one torn", "{\"n\":", ""},
		{"empty", "", ""},
		{"long torn", "{\"n\":1}\n" + strings.Repeat("x", 200<<10), "{\"n\":1}\n"},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.CutAtOpen(); got != int64(len(tc.content)-len(tc.want)) {
			t.Errorf("%s: cut %d bytes, want %d", tc.name, got, len(tc.content)-len(tc.want))
		}
		if err := l.Append([]byte(`{"next":true}`)); err != nil {
			t.Fatal(err)
		}
		l.Close()
		if got := string(must(os.ReadFile(path))); got != tc.want+"{\"next\":true}\n" {
			t.Errorf("%s: file %.80q, want %.80q", tc.name, got, tc.want+"{\"next\":true}\n")
		}
	}
}
