package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/internal/proctest"
)

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		n, total int64
		elapsed  time.Duration
		final    bool
		want     string
	}{
		{0, -1, 0, false, "x: 0 B, 0 B/s"},
		{1536, -1, time.Second, false, "x: 1.5 KiB, 1.5 KiB/s"},
		{50 << 20, 200 << 20, 2 * time.Second, false, "x: 50.0 MiB of 200.0 MiB (25%), 25.0 MiB/s, ETA 0:06"},
		{0, 200 << 20, time.Second, false, "x: 0 B of 200.0 MiB (0%), 0 B/s, ETA --:--"},
		{1 << 20, 8 << 30, time.Second, false, "x: 1.0 MiB of 8.0 GiB (0%), 1.0 MiB/s, ETA 2:16:31"},
		{0, 0, time.Second, false, "x: 0 B of 0 B (100%), 0 B/s, ETA --:--"},
		{3 << 30, 3 << 30, 12*time.Second + 340*time.Millisecond, true, "x: 3.0 GiB in 12.3s, 248.9 MiB/s"},
		{1023, -1, 500 * time.Millisecond, true, "x: 1023 B in 500ms, 2.0 KiB/s"},
	} {
		if got := progressLine("x", tc.n, tc.total, tc.elapsed, tc.final); got != tc.want {
			t.Errorf("progressLine(%d, %d, %v, %v) = %q, want %q", tc.n, tc.total, tc.elapsed, tc.final, got, tc.want)
		}
	}
}

// The meter counts what the stream reads and redraws one line: with a
// known size it shows the share and the time left, and ends in a summary.
func TestProgressMeter(t *testing.T) {
	var w proctest.Buffer // the meter writes from a goroutine of its own
	p := startProgress(&w, "cipherd encrypt", 4<<10)
	r := p.reader(slow(make([]byte, 4<<10)))
	if n, err := io.Copy(io.Discard, r); n != 4<<10 || err != nil {
		t.Fatal(n, err)
	}
	p.end(true)
	out := w.String()
	lines := strings.Split(out, "\r\x1b[K")
	if len(lines) < 3 || lines[0] != "" {
		t.Fatalf("want at least one redraw and the summary: %q", out)
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.HasPrefix(l, "cipherd encrypt: ") || !strings.Contains(l, " of 4.0 KiB (") || !strings.Contains(l, ", ETA ") {
			t.Errorf("progress line %q", l)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "cipherd encrypt: 4.0 KiB in ") || !strings.HasSuffix(last, "/s\n") {
		t.Errorf("summary %q", last)
	}

	// A stream quicker than one redraw prints nothing at all.
	var quiet proctest.Buffer
	p = startProgress(&quiet, "cipherd encrypt", -1)
	io.Copy(io.Discard, p.reader(strings.NewReader("quick")))
	p.end(true)
	if quiet.String() != "" {
		t.Errorf("a quick stream printed %q", quiet.String())
	}
	var nilMeter *progress
	if r := nilMeter.reader(strings.NewReader("x")); r == nil {
		t.Fatal("nil meter's reader")
	}
	nilMeter.end(false)
}
