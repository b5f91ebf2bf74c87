package server

import (
	"io"
	"sync"

	"golang.org/x/sync/semaphore"
)

// ?verify=full holds a whole plaintext until its last chunk authenticates.
// Those buffers are bounded server-wide by a budget of bytes
// (Config.VerifyFullBudget): a request reserves what it may need before it
// reads anything — its Content-Length, or max_verify_full for a chunked
// upload — and is refused 503 verify_full_busy, with Retry-After, when the
// budget cannot cover it. Over-limit Content-Lengths are refused before
// that, unread.
//
// The buffers are not on the Go heap (verifyAlloc maps them from the OS on
// unix): a reservation costs address space, not memory, until the plaintext
// arrives; the pages go back to the OS the moment the response is written;
// and the collector's heap goal, which grows with the live heap, is not
// doubled by them, which would let other garbage grow as much again before
// the next collection (TestVerifyFullRSS measures the process's RSS under
// 32 such requests at the limit).

// verifyBuffer is one ?verify=full plaintext and its reservation. As a
// response body stream, it is read by fasthttp and closed when the response
// ends, however it ends: then its memory and reservation are given back.
type verifyBuffer struct {
	buf      []byte // the mapping; len is its size
	n        int    // bytes of plaintext in buf
	off      int    // bytes read out
	budget   *semaphore.Weighted
	reserved int64
	once     sync.Once
	onClose  func() // also run once on Close
}

// newVerifyBuffer reserves size bytes of budget and maps a buffer of that
// size; it reports false when the budget cannot cover size now.
func newVerifyBuffer(budget *semaphore.Weighted, size int64) (*verifyBuffer, bool, error) {
	if !budget.TryAcquire(size) {
		return nil, false, nil
	}
	b, err := verifyAlloc(int(size))
	if err != nil {
		budget.Release(size)
		return nil, true, err
	}
	return &verifyBuffer{buf: b, budget: budget, reserved: size}, true, nil
}

// fill reads r into the buffer to its end. It reports whether r ended
// within the buffer's size; when it did not, the plaintext is over the
// limit (one more byte was read to tell).
func (v *verifyBuffer) fill(r io.Reader) (fits bool, err error) {
	for v.n < len(v.buf) {
		m, err := r.Read(v.buf[v.n:])
		v.n += m
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
	var one [1]byte
	for {
		m, err := r.Read(one[:])
		if m > 0 {
			return false, nil
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

func (v *verifyBuffer) Read(p []byte) (int, error) {
	if v.off >= v.n {
		return 0, io.EOF
	}
	m := copy(p, v.buf[v.off:v.n])
	v.off += m
	return m, nil
}

// Close unmaps the buffer and returns its reservation.
func (v *verifyBuffer) Close() error {
	v.once.Do(func() {
		verifyFree(v.buf)
		v.buf, v.n, v.off = nil, 0, 0
		v.budget.Release(v.reserved)
		if v.onClose != nil {
			v.onClose()
		}
	})
	return nil
}
