package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattn/go-isatty"
)

// progressInterval is how often the progress line is redrawn. A stream
// that ends sooner prints nothing.
const progressInterval = 250 * time.Millisecond

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// progress redraws one line on a terminal with the bytes read from the
// input, the rate and, when the input's size is known, the share done and
// the time left. A nil *progress shows nothing.
type progress struct {
	w     io.Writer
	label string
	total int64 // -1 when unknown
	start time.Time
	n     atomic.Int64

	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	drawn bool // a line is on the terminal
}

// startProgress starts redrawing on w; total is the input's size, or -1.
func startProgress(w io.Writer, label string, total int64) *progress {
	p := &progress{w: w, label: label, total: total, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *progress) run() {
	defer close(p.done)
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.draw(progressLine(p.label, p.n.Load(), p.total, time.Since(p.start), false))
		}
	}
}

func (p *progress) draw(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r\x1b[K%s", line) // carriage return, erase to the end of the line
	p.drawn = true
}

// reader counts what is read from r.
func (p *progress) reader(r io.Reader) io.Reader {
	if p == nil {
		return r
	}
	return &countingReader{r: r, n: &p.n}
}

// writer counts what is written to w.
func (p *progress) writer(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return &countingWriter{w: w, n: &p.n}
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// end stops redrawing. On success the last line becomes a summary; on
// failure it is erased, so that the error message stands alone. Nothing is
// left when no line was drawn.
func (p *progress) end(ok bool) {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.drawn {
		return
	}
	if ok {
		fmt.Fprintf(p.w, "\r\x1b[K%s\n", progressLine(p.label, p.n.Load(), p.total, time.Since(p.start), true))
	} else {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// progressLine formats one progress line: n bytes of total (-1 unknown)
// after elapsed; final gives the summary.
func progressLine(label string, n, total int64, elapsed time.Duration, final bool) string {
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(n) / s
	}
	if final {
		return fmt.Sprintf("%s: %s in %s, %s/s", label, iecBytes(float64(n)), elapsed.Round(100*time.Millisecond), iecBytes(rate))
	}
	if total < 0 {
		return fmt.Sprintf("%s: %s, %s/s", label, iecBytes(float64(n)), iecBytes(rate))
	}
	// A count of the output (a local seal of a mapped file) passes the
	// input's size by the format's overhead.
	n = min(n, total)
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(n) / float64(total)
	}
	eta := "ETA --:--"
	if rate > 0 {
		eta = "ETA " + clock(time.Duration(float64(max(total-n, 0))/rate*float64(time.Second)))
	}
	return fmt.Sprintf("%s: %s of %s (%.0f%%), %s/s, %s", label, iecBytes(float64(n)), iecBytes(float64(total)), pct, iecBytes(rate), eta)
}

// iecBytes formats a byte count with a binary prefix: 999 B, 1.5 KiB,
// 12.3 MiB.
func iecBytes(b float64) string {
	const units = "KMGTPE"
	if b < 1024 {
		return fmt.Sprintf("%.0f B", b)
	}
	i := -1
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", b, units[i])
}

// clock formats a duration as m:ss, or h:mm:ss from an hour on.
func clock(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
