package server

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
)

// deadlineRecorder is a connection whose reads return at once and which
// records the read deadlines set on it.
type deadlineRecorder struct {
	net.Conn // nil: only the methods below are called
	sets     int
	deadline time.Time
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.sets++
	d.deadline = t
	return nil
}

func (d *deadlineRecorder) Read(p []byte) (int, error) { return len(p), nil }

func TestCoalescingConnSkipsUpdatesWithinSlack(t *testing.T) {
	rec := &deadlineRecorder{}
	c := &coalescingConn{Conn: rec, slack: int64(time.Second)}
	buf := make([]byte, 1)
	// fasthttp's pattern on a keep-alive connection whose requests arrive
	// whole: the idle deadline, a read, the request deadline, no read.
	for range 1000 {
		c.SetReadDeadline(time.Now().Add(2 * time.Minute))
		c.Read(buf)
		c.SetReadDeadline(time.Now().Add(15 * time.Second))
	}
	if rec.sets != 1 {
		t.Errorf("%d deadline updates for 1000 requests within a second, want 1", rec.sets)
	}
	// A request that needs another read gets its own, earlier deadline.
	want := time.Now().Add(15 * time.Second)
	c.SetReadDeadline(want)
	c.Read(buf)
	if !rec.deadline.Equal(want) {
		t.Errorf("deadline in force %v, want %v", rec.deadline, want)
	}
	// And the idle deadline after it moves more than the slack: set again.
	want = time.Now().Add(2 * time.Minute)
	c.SetReadDeadline(want)
	c.Read(buf)
	if !rec.deadline.Equal(want) {
		t.Errorf("deadline in force %v, want %v", rec.deadline, want)
	}
	c.SetReadDeadline(time.Time{})
	c.Read(buf)
	if !rec.deadline.IsZero() {
		t.Errorf("deadline in force %v after clearing it", rec.deadline)
	}
}

// The deadline in force when a read starts is never later than the one
// asked for and at most slack earlier, whatever the sequence of deadlines.
func TestCoalescingConnBounds(t *testing.T) {
	const slack = int64(time.Second)
	rec := &deadlineRecorder{}
	c := &coalescingConn{Conn: rec, slack: slack}
	rnd := rand.New(rand.NewPCG(1, 2))
	base := time.Now()
	var want time.Time
	reads := 0
	for i := range 100000 {
		switch rnd.IntN(4) {
		case 0:
			want = time.Time{}
		default:
			want = base.Add(time.Duration(rnd.Int64N(int64(3 * time.Second))))
		}
		c.SetReadDeadline(want)
		if rnd.IntN(2) == 0 {
			continue
		}
		c.Read(make([]byte, 1))
		reads++
		got := rec.deadline
		switch {
		case want.IsZero() != got.IsZero():
			t.Fatalf("step %d: in force %v, asked for %v", i, got, want)
		case want.IsZero():
		case got.After(want):
			t.Fatalf("step %d: in force %v, later than %v", i, got, want)
		case want.Sub(got) > time.Duration(slack):
			t.Fatalf("step %d: in force %v, more than the slack before %v", i, got, want)
		}
	}
	if rec.sets >= reads {
		t.Errorf("%d updates for %d reads: none coalesced", rec.sets, reads)
	}
}

func TestCoalescingConnOverTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl := coalescingListener{Listener: ln, slack: deadlineSlack(100 * time.Millisecond)}
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c, err := cl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 8)

	start := time.Now()
	c.SetReadDeadline(start.Add(100 * time.Millisecond))
	_, err = c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read with nothing sent: %v, want a timeout", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond-cl.slack || d > 5*time.Second {
		t.Errorf("timed out after %v, want 100 ms less at most %v", d, cl.slack)
	}
	// After the timeout, a later deadline lets reads through again.
	c.SetReadDeadline(time.Now().Add(time.Hour))
	client.Write([]byte("ping"))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	// SetDeadline sets both at once, and clearing it means no deadline.
	c.SetDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past SetDeadline: %v", err)
	}
	c.SetDeadline(time.Time{})
	client.Write([]byte("pong"))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

func TestDeadlineSlack(t *testing.T) {
	for _, c := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, time.Second},
		{[]time.Duration{15 * time.Second, time.Minute, 2 * time.Minute}, 937500 * time.Microsecond},
		{[]time.Duration{time.Hour, 100 * time.Millisecond}, 6250 * time.Microsecond},
		{[]time.Duration{0, time.Minute}, time.Second},
	} {
		if got := deadlineSlack(c.in...); got != c.want {
			t.Errorf("deadlineSlack(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
