package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMaxConnections holds max_connections connections open without sending
// a byte and checks that one more is not served until one of them closes,
// then that it is served.
func TestMaxConnections(t *testing.T) {
	const limit = 3
	ts := startTestServer(t, Config{SkipBenchmark: true, MaxConnections: limit})
	addr := strings.TrimPrefix(ts.URL, "http://")
	// Fill every place with a silent connection. The kernel's accept queue
	// is first in, first out, so these are the ones accepted.
	var held []net.Conn
	for range limit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}

	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err) // the kernel completes the handshake: the listen queue
	}
	defer extra.Close()
	if _, err := extra.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	extra.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	br := bufio.NewReader(extra)
	if resp, err := http.ReadResponse(br, nil); err == nil {
		resp.Body.Close()
		t.Fatalf("connection %d of a limit of %d was served: %s", limit+1, limit, resp.Status)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("connection %d: want no answer while %d are open, got %v", limit+1, limit, err)
	}

	// One held connection is served while it holds its place; its metrics
	// show the server full.
	if _, err := held[0].Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	held[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(held[0]), nil)
	if err != nil {
		t.Fatalf("a held connection was not served: %v", err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("held connection: %s, %v", resp.Status, err)
	}
	for _, want := range []string{fmt.Sprintf("cipherd_open_connections %d\n", limit), fmt.Sprintf("cipherd_max_connections %d\n", limit)} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}

	// Closing one frees its place: the waiting request is answered.
	held[1].Close()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("after a close, the waiting connection was not served: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("waiting connection: %s", resp.Status)
	}
}
