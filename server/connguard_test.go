package server

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
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

// TestLingerAfterRefusedUpload: a client that is still sending an upload the
// server refused reads the refusal, not a connection reset; the server
// closes the connection once the client pauses for lingerIdle, and within
// lingerTimeout of the response, having read at most lingerBytes, if it
// never stops sending.
func TestLingerAfterRefusedUpload(t *testing.T) {
	plain := startTestServer(t, Config{SkipBenchmark: true})
	pki := newSecPKI(t)
	overTLS := pki.start(t, Config{}, false)
	roots := x509.NewCertPool()
	roots.AddCert(pki.ca.leaf)
	// Refused by the handler (a misspelled parameter), or by checkHeaders
	// (a JSON Content-Length over max_json_body) before any handler runs.
	byHandler := func(ts *testServer) string {
		return "POST /v1/decrypt/default?verify=ful HTTP/1.1\r\nHost: x\r\n" +
			"Authorization: Bearer " + ts.Token + "\r\nContent-Type: " + api.ContentTypeStream +
			"\r\nContent-Length: " + strconv.Itoa(1<<40) + "\r\n\r\n"
	}
	byHeaders := func(ts *testServer) string {
		return "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" +
			"Authorization: Bearer " + ts.Token + "\r\nContent-Type: " + api.ContentTypeJSON +
			"\r\nContent-Length: " + strconv.Itoa(1<<30) + "\r\n\r\n"
	}
	for _, tc := range []struct {
		ts          *testServer
		tls         bool
		keepSending bool
		refusal     string
		head        func(*testServer) string
		status      int
		code        api.Code
	}{
		{plain, false, false, "handler", byHandler, 400, api.CodeInvalidParameter},
		{plain, false, true, "handler", byHandler, 400, api.CodeInvalidParameter},
		{overTLS, true, false, "handler", byHandler, 400, api.CodeInvalidParameter},
		{overTLS, true, true, "handler", byHandler, 400, api.CodeInvalidParameter},
		{plain, false, false, "headers", byHeaders, 413, api.CodeTooLarge},
		{plain, false, true, "headers", byHeaders, 413, api.CodeTooLarge},
	} {
		ts := tc.ts
		keepSending := tc.keepSending
		t.Run(fmt.Sprintf("refused by the %s, TLS %v, keep sending %v", tc.refusal, tc.tls, keepSending), func(t *testing.T) {
			addr := ts.URL[strings.Index(ts.URL, "//")+2:]
			var conn net.Conn
			var err error
			if tc.tls {
				conn, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost"})
			} else {
				conn, err = net.Dial("tcp", addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write(append([]byte(tc.head(ts)), make([]byte, 256<<10)...)); err != nil {
				t.Fatal(err)
			}
			// The refusal is out and the server is closing while 256 KiB
			// sit unread in its socket: closing now would reset the
			// connection.
			time.Sleep(200 * time.Millisecond)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the refusal: %v", err)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != tc.status || codeOf(body) != tc.code || !resp.Close {
				t.Fatalf("refusal: %d %q (close %v, %v), want %d %s with Connection: close", resp.StatusCode, body, resp.Close, err, tc.status, tc.code)
			}
			if _, err := conn.Write(make([]byte, 256<<10)); err != nil {
				t.Errorf("writing more of the body after the refusal: %v", err)
			}
			start := time.Now()
			if keepSending {
				// Until the server closes; its reset fails a write.
				var sent int64
				for time.Since(start) < lingerTimeout+10*time.Second {
					conn.SetWriteDeadline(time.Now().Add(lingerTimeout + 10*time.Second))
					m, err := conn.Write(make([]byte, 64<<10))
					sent += int64(m)
					if err != nil {
						break
					}
				}
				d := time.Since(start)
				if d > lingerTimeout+5*time.Second {
					t.Errorf("the server kept the refused connection of a client still sending %v, want about %v", d, lingerTimeout)
				}
				// What the server read, and what the sockets' buffers hold.
				if sent > lingerBytes+64<<20 {
					t.Errorf("the client sent %d MiB after the refusal, want the server to stop reading after %d MiB", sent>>20, lingerBytes>>20)
				}
				t.Logf("closed %v after the refusal was read; the client sent %d KiB meanwhile", d.Round(time.Millisecond), sent>>10)
				return
			}
			conn.SetReadDeadline(start.Add(lingerTimeout + 10*time.Second))
			n, err := conn.Read(make([]byte, 1))
			d := time.Since(start)
			if n != 0 || !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("after the refusal the server sent %d bytes, %v; want it to close the connection", n, err)
			}
			if d > lingerIdle+5*time.Second {
				t.Errorf("the server kept the refused connection of a client that paused %v, want about %v", d, lingerIdle)
			}
			t.Logf("closed %v after the refusal was read", d.Round(time.Millisecond))
		})
	}
}
