package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cipherd/cipherd/client"
)

// paceWindow is the client's window on loopback (client/pace.go).
const paceWindow = 1 << 20

// leadSource is a source of known length that records, at each read, how
// far the upload is ahead of the answer written to out.
type leadSource struct {
	r    *bytes.Reader
	out  *countWriter
	read atomic.Int64
	// marks are (read, written) at the start of each read. The transport
	// may read once more, to the end, after the answer is complete.
	mu    sync.Mutex
	marks [][2]int64
}

func (s *leadSource) Len() int { return s.r.Len() }

func (s *leadSource) Read(p []byte) (int, error) {
	s.mu.Lock()
	s.marks = append(s.marks, [2]int64{s.read.Load(), s.out.n.Load()})
	s.mu.Unlock()
	n, err := s.r.Read(p)
	s.read.Add(int64(n))
	return n, err
}

// maxLead returns the most request bytes the upload was ahead of the
// answer, counting the answer in request bytes as the pacer does.
func (s *leadSource) maxLead(reqLen, respLen int64) float64 {
	scale := float64(reqLen) / float64(respLen)
	s.mu.Lock()
	defer s.mu.Unlock()
	var most float64
	for _, m := range s.marks {
		most = max(most, float64(m[0])-float64(m[1])*scale)
	}
	return most
}

type countWriter struct {
	buf bytes.Buffer
	n   atomic.Int64
}

func (w *countWriter) Write(p []byte) (int, error) {
	n, _ := w.buf.Write(p)
	w.n.Add(int64(n))
	return n, nil
}

// A stream whose lengths are known keeps its upload within the pacing
// window of the answer, on encrypt and on decrypt (whose answer is shorter
// than its request), and the results are whole.
func TestStreamPaced(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("streams are paced on Linux only")
	}
	// The bound is the window's: a pause of the service in this process
	// (its collector, a busy machine) must not end pacing here.
	client.SetPaceSilence(t, time.Minute)
	base, _ := startServer(t)
	c := newClient(t, base)
	ctx := context.Background()
	pt := make([]byte, 48<<20+5)
	rand.Read(pt)

	ct := &countWriter{}
	ct.buf.Grow(len(pt) + len(pt)/64)
	src := &leadSource{r: bytes.NewReader(pt), out: ct}
	if _, err := c.EncryptStream(ctx, "default", ct, src, nil); err != nil {
		t.Fatal(err)
	}
	if lead := src.maxLead(int64(len(pt)), int64(ct.buf.Len())); lead > paceWindow {
		t.Errorf("encrypt: the upload ran %.0f bytes ahead of the answer, window %d", lead, paceWindow)
	}

	out := &countWriter{}
	out.buf.Grow(len(pt))
	src = &leadSource{r: bytes.NewReader(ct.buf.Bytes()), out: out}
	if _, err := c.DecryptStream(ctx, "default", out, src, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.buf.Bytes(), pt) {
		t.Fatal("decrypt: the plaintext differs")
	}
	if lead := src.maxLead(int64(ct.buf.Len()), int64(len(pt))); lead > paceWindow {
		t.Errorf("decrypt: the upload ran %.0f bytes ahead of the answer, window %d", lead, paceWindow)
	}
}

// A server (or a proxy) that reads the whole upload before it answers
// holds more than the window: the upload goes on unpaced once the answer
// has not moved for a while, and the stream completes.
func TestStreamPacedBufferingServer(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	defer hs.Close()
	c := newClient(t, hs.URL)
	in := make([]byte, 8*paceWindow+3)
	rand.Read(in)
	out := &countWriter{}
	src := &leadSource{r: bytes.NewReader(in), out: out}
	if _, err := c.EncryptStream(context.Background(), "default", out, src, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.buf.Bytes(), in) {
		t.Fatalf("got %d bytes back of %d, or other bytes", out.buf.Len(), len(in))
	}
}
