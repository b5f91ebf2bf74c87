// Package auditlog writes audit records, one JSON object per line, to a file
// (or standard error) and returns only once a record is on stable storage.
//
// Records of a file are committed in groups: a caller appends its line to
// the pending group and waits; one goroutine writes the group with one
// write and makes it durable with one fdatasync, then releases every
// caller of the group. While a sync runs, the next group fills, so one sync
// serves every request that waits on it however many there are
// (BenchmarkAppendParallel).
//
// Standard error, /dev/null and the like take no sync: there each caller
// writes its own record, at once. Handing it to the committing goroutine
// and back cost more than the write (BenchmarkHandleEncryptJSON, whose
// records go to /dev/null), and no sync is there to share.
//
// A failed write or sync fails every caller of its group, and what the
// failed write left of the group is cut off the file, so the file holds
// whole lines only; if that cut fails, nothing more is written until a
// later cut succeeds. A process killed in the middle of a write can leave
// a group cut short at the end, none of whose callers was answered: it is
// cut off when the file is next opened (CutAtOpen). The caller decides what a failure means (cipherd serve
// refuses the request).
package auditlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrClosed is returned by Append after Close.
var ErrClosed = errors.New("auditlog: closed")

// Stderr is the path that names standard error rather than a file.
const Stderr = "stderr"

// Config configures OpenConfig.
type Config struct {
	// Observe, when set, is called after each group's write and sync
	// with how long the two took together and their error: the latency
	// every caller of the group waited on. It is called before the
	// group's callers return, so it must be quick and must not block;
	// where callers write their own records (no sync), several may call
	// it at once. nil means nothing is called.
	Observe func(d time.Duration, err error)
}

// Log is an audit log. It is safe for concurrent use.
type Log struct {
	path    string
	observe func(time.Duration, error) // Config.Observe

	mu      sync.Mutex
	pending []byte // lines of the group that fills
	group   *group // the group that fills
	spare   []byte // the buffer of the group last written, for reuse
	closed  bool
	kick    chan struct{} // wakes the committer; nil: callers write their own records
	stopped chan struct{} // closed when the committer returns
	writers int           // callers writing their own records
	idle    sync.Cond     // signalled when writers falls to 0 after Close

	groups    atomic.Int64 // groups written
	records   atomic.Int64 // records written
	cutAtOpen atomic.Int64 // bytes of a torn last line cut when the file was opened

	fmu     sync.Mutex // held while the file is written, synced or swapped
	aio     *aioSyncer // nil: fdatasync
	f       *os.File
	off     int64  // end of the last whole line written
	sync    bool   // f is a regular file: fdatasync it
	uncut   bool   // a failed group is past off: cut it before the next write
	scratch []byte // a caller's record and its newline, under fmu

	// Tests set these to fail a sync or a cut; nil in service.
	failSync, failTruncate func() error
}

type group struct {
	done chan struct{}
	err  error
}

// Open opens the log at path for appending, creating it (mode 0600) if it
// does not exist, or standard error if path is Stderr.
func Open(path string) (*Log, error) { return OpenConfig(path, Config{}) }

// OpenConfig is Open with cfg.
func OpenConfig(path string, cfg Config) (*Log, error) {
	l := &Log{path: path, observe: cfg.Observe}
	l.idle.L = &l.mu
	if err := l.open(); err != nil {
		return nil, err
	}
	if l.sync {
		l.aio, _ = newAIOSyncer() // nil: fdatasync
		l.group = &group{done: make(chan struct{})}
		l.kick, l.stopped = make(chan struct{}, 1), make(chan struct{})
		go l.commit()
	}
	return l, nil
}

// open opens l.path, under fmu or before the log is shared.
func (l *Log) open() error {
	if l.path == Stderr {
		l.f, l.off, l.sync = os.Stderr, 0, false
		return nil
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("auditlog: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("auditlog: %w", err)
	}
	size := fi.Size()
	if fi.Mode().IsRegular() {
		whole, err := lastWholeLine(l.path, size)
		if err == nil && whole < size {
			err = f.Truncate(whole)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("auditlog: cutting a record cut short off %s: %w", l.path, err)
		}
		l.cutAtOpen.Add(size - whole)
		size = whole
	}
	l.f, l.off, l.sync, l.uncut = f, size, fi.Mode().IsRegular(), false
	return nil
}

// lastWholeLine returns the end of the last whole line of the file at
// path, size bytes long. What follows it is a group a crash cut short:
// the kernel ends a write early when the writer is killed (SIGKILL between
// two pages), and no caller of that group was answered.
func lastWholeLine(path string, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var buf [64 << 10]byte
	for end := size; end > 0; {
		start := max(0, end-int64(len(buf)))
		chunk := buf[:end-start]
		if _, err := f.ReadAt(chunk, start); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// CutAtOpen returns how many bytes of records cut short by a crash were
// cut off the file when it was opened (or reopened): none unless the
// process that wrote it died in the middle of a write.
func (l *Log) CutAtOpen() int64 { return l.cutAtOpen.Load() }

// Path returns the path the log was opened with.
func (l *Log) Path() string { return l.path }

// Append adds line (one record, without its newline) to the log and
// returns once it is written and, in a file, synced. An error means the
// record may not be in the log.
func (l *Log) Append(line []byte) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	if l.kick == nil {
		l.writers++
		l.mu.Unlock()
		return l.writeOwn(line)
	}
	l.pending = append(l.pending, line...)
	l.pending = append(l.pending, '\n')
	g := l.group
	select { // under mu, so that Close cannot close kick meanwhile
	case l.kick <- struct{}{}:
	default:
	}
	l.mu.Unlock()
	<-g.done
	return g.err
}

// writeOwn writes one caller's record, where no sync is shared.
func (l *Log) writeOwn(line []byte) error {
	defer func() {
		l.mu.Lock()
		if l.writers--; l.writers == 0 && l.closed {
			l.idle.Broadcast()
		}
		l.mu.Unlock()
	}()
	start := l.clock()
	return l.observed(start, l.writeLine(line))
}

// commit writes the groups until Close.
func (l *Log) commit() {
	defer close(l.stopped)
	for range l.kick {
		for {
			l.mu.Lock()
			buf, g := l.pending, l.group
			if len(buf) == 0 {
				l.mu.Unlock()
				break
			}
			l.pending, l.spare = l.spare[:0], nil
			l.group = &group{done: make(chan struct{})}
			l.mu.Unlock()

			start := l.clock()
			g.err = l.observed(start, l.write(buf))
			close(g.done)

			l.mu.Lock()
			if l.spare == nil && cap(buf) <= maxSpare {
				l.spare = buf[:0]
			}
			l.mu.Unlock()
		}
	}
}

// clock reads the time a write starts at, when Config.Observe wants it.
func (l *Log) clock() time.Time {
	if l.observe == nil {
		return time.Time{}
	}
	return time.Now()
}

// observed reports a write that started at start, and returns its error.
func (l *Log) observed(start time.Time, err error) error {
	if l.observe != nil {
		l.observe(time.Since(start), err)
	}
	return err
}

// maxSpare bounds the buffer kept for the next group.
const maxSpare = 1 << 20

// write writes one group and syncs it.
func (l *Log) write(buf []byte) error {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	return l.writeLocked(buf)
}

// writeLine writes one record, line without its newline, and syncs it.
func (l *Log) writeLine(line []byte) error {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	l.scratch = append(append(l.scratch[:0], line...), '\n')
	err := l.writeLocked(l.scratch)
	if cap(l.scratch) > maxSpare {
		l.scratch = nil
	}
	return err
}

// writeLocked writes buf, whole lines, under fmu and syncs it. A write that
// fails part way is cut off, so that the next group starts on a line of its
// own.
func (l *Log) writeLocked(buf []byte) error {
	if l.f == nil {
		return fmt.Errorf("auditlog: %s is not open", l.path)
	}
	if l.uncut {
		// A failed group is still at the end: cut it first, or write
		// nothing. Written after it, this group would make off wrong, and
		// the next cut would take acknowledged records with it.
		if err := l.truncate(); err != nil {
			return fmt.Errorf("auditlog: cutting a failed write off %s: %w", l.path, err)
		}
		l.uncut = false
	}
	n, err := l.f.Write(buf)
	if err == nil && l.sync {
		err = l.datasync()
	}
	if err != nil {
		if l.sync && n > 0 {
			// O_APPEND writes at the end: cut what this group added.
			l.uncut = l.truncate() != nil
		}
		return fmt.Errorf("auditlog: %w", err)
	}
	l.off += int64(n)
	l.groups.Add(1)
	l.records.Add(int64(bytes.Count(buf, []byte{'\n'})))
	return nil
}

// truncate cuts the file back to the end of its last whole line.
func (l *Log) truncate() error {
	if l.failTruncate != nil {
		if err := l.failTruncate(); err != nil {
			return err
		}
	}
	return l.f.Truncate(l.off)
}

// Stats returns how many records the log has written and in how many
// groups, each one write and one sync: records per group is how many
// requests one sync served.
func (l *Log) Stats() (records, groups int64) { return l.records.Load(), l.groups.Load() }

// errAIOUnsupported: the kernel refused an AIO sync itself.
var errAIOUnsupported = errors.New("AIO sync unsupported")

// errAIOBroken: a sync was submitted and its completion could not be
// read. Its result is unknown, and a completion left behind could be
// taken for a later sync's: the log gives AIO up for fdatasync.
var errAIOBroken = errors.New("AIO sync lost")

// datasync makes what was written durable: through AIO where the kernel
// takes it (aioSyncer), else with fdatasync.
func (l *Log) datasync() error {
	if l.failSync != nil {
		if err := l.failSync(); err != nil {
			return err
		}
	}
	if l.aio != nil {
		err := l.aio.sync(l.f)
		switch {
		case errors.Is(err, errAIOBroken):
			l.aio.close()
			l.aio = nil
			return err // this group's sync may not have happened
		case !errors.Is(err, errAIOUnsupported):
			return err
		}
		l.aio.close()
		l.aio = nil
	}
	return fdatasync(l.f)
}

func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// Reopen closes the file and opens the path again, as log rotation
// expects after it renamed the file (logrotate's postrotate, SIGHUP).
// Records wait meanwhile; none is lost. If the path cannot be opened, the
// log has no file until a Reopen succeeds, and appends fail.
func (l *Log) Reopen() error {
	if l.path == Stderr {
		return nil
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed { // Close closes the file under fmu after it sets closed
		return ErrClosed
	}
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	return l.open()
}

// Close waits for the records appended so far, then closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	if l.kick != nil {
		close(l.kick)
	}
	for l.writers > 0 {
		l.idle.Wait()
	}
	l.mu.Unlock()
	if l.stopped != nil {
		<-l.stopped
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if l.aio != nil {
		l.aio.close()
		l.aio = nil
	}
	if l.f == nil || l.f == os.Stderr {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

var _ io.Closer = (*Log)(nil)
