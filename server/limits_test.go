package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/internal/proctest"
)

// Limits that keep one caller, or a few large requests, from taking the
// server: concurrent streams per identity, and the server-wide budget of
// ?verify=full buffers.

// openUpload starts a streaming request whose body is fed through a pipe;
// the response arrives on the returned channel.
func openUpload(t *testing.T, url, token string, hdr map[string]string) (*io.PipeWriter, <-chan *http.Response) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", api.ContentTypeStream)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- nil
			return
		}
		done <- resp
	}()
	t.Cleanup(func() { pw.CloseWithError(io.ErrClosedPipe) })
	return pw, done
}

const limitsUserToken = "limits-user-token"

func TestStreamLimitPerIdentity(t *testing.T) {
	sum := sha256.Sum256([]byte(limitsUserToken))
	ts := startTestServer(t, Config{
		SkipBenchmark:         true,
		MaxStreamsPerIdentity: 2,
		Policies:              []PolicyConfig{{Name: "all", Allow: []RuleConfig{{Ops: []string{"*"}, Keys: []string{"*"}}}}},
		Identities:            []IdentityConfig{{Name: "user", TokenSHA256: fmt.Sprintf("%x", sum), Policies: []string{"all"}}},
	})
	enc := ts.URL + "/v1/encrypt/default"
	var writers []*io.PipeWriter
	var resps []<-chan *http.Response
	for range 2 {
		pw, done := openUpload(t, enc, ts.Token, nil)
		writers, resps = append(writers, pw), append(resps, done)
	}
	if !proctest.Poll(10*time.Second, func() bool { return ts.met.activeStreams.Load() == 2 }) {
		t.Fatalf("%d streams active, want 2", ts.met.activeStreams.Load())
	}
	// A third stream of the same identity, in any streaming form, waits for
	// one of the two to end.
	for _, route := range []string{"/v1/encrypt/default", "/v1/decrypt/default", "/v1/decrypt/default?verify=full", "/v1/rewrap/default"} {
		code, body, hdr := ts.do(t, "POST", route, api.ContentTypeStream, strings.NewReader("x"), "")
		var e api.Error
		json.Unmarshal(body, &e)
		if code != 429 || e.Code != api.CodeTooManyStreams || hdr.Get("Retry-After") == "" {
			t.Errorf("third stream on %s: %d %s (Retry-After %q), want 429 %s", route, code, body, hdr.Get("Retry-After"), api.CodeTooManyStreams)
		}
	}
	// JSON requests and other identities are not held back.
	if code, body, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeJSON, strings.NewReader(`{"plaintext":"YQ=="}`), ""); code != 200 {
		t.Errorf("JSON encrypt while at the stream limit: %d %s", code, body)
	}
	if code, body, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, strings.NewReader("x"), limitsUserToken); code != 200 {
		t.Errorf("another identity's stream: %d %s", code, body)
	}
	// One stream ends: its place is free again.
	writers[0].Write([]byte("the end"))
	writers[0].Close()
	if resp := <-resps[0]; resp == nil || resp.StatusCode != 200 {
		t.Fatalf("first stream: %v", resp)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if !proctest.Poll(10*time.Second, func() bool {
		code, _, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, strings.NewReader("x"), "")
		return code == 200
	}) {
		t.Error("a place freed by a finished stream was not given again")
	}
}

// TestVerifyFullOverLimitRefusedUnread: a Content-Length over what
// max_verify_full allows is answered 413 at once, without waiting for the
// body.
func TestVerifyFullOverLimitRefusedUnread(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, MaxVerifyFull: 1 << 20, RequestTimeout: 10 * time.Second})
	// The start of a real stream of 2 MiB, and then nothing.
	code, ct, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, bytes.NewReader(make([]byte, 2<<20)), "")
	if code != 200 {
		t.Fatalf("encrypt: %d", code)
	}
	raw := "POST /v1/decrypt/default?verify=full HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ts.Token +
		"\r\nContent-Type: application/octet-stream\r\nContent-Length: " + strconv.Itoa(len(ct)) + "\r\n\r\n" + string(ct[:64<<10])
	reply, elapsed, _ := badStall(t, strings.TrimPrefix(ts.URL, "http://"), raw, 5*time.Second)
	if !bytes.HasPrefix(reply, []byte("HTTP/1.1 413")) || !bytes.Contains(reply, []byte(api.CodeTooLarge)) || elapsed > 3*time.Second {
		t.Errorf("over-limit Content-Length: after %v: %q, want 413 %s at once", elapsed, reply, api.CodeTooLarge)
	}
}

// TestVerifyFullBudget: ?verify=full requests reserve their buffer from a
// server-wide budget before reading; a request the budget cannot cover is
// refused 503 with Retry-After, and a finished request gives its share back.
func TestVerifyFullBudget(t *testing.T) {
	const limit = 1 << 20
	ts := startTestServer(t, Config{SkipBenchmark: true, MaxVerifyFull: limit, VerifyFullBudget: 2 * limit})
	pt := bytes.Repeat([]byte("verify-full "), (limit-100)/12)
	code, ct, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, bytes.NewReader(pt), "")
	if code != 200 {
		t.Fatalf("encrypt: %d", code)
	}
	small, ctSmall := []byte("small"), []byte(nil)
	if code, ctSmall, _ = ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, bytes.NewReader(small), ""); code != 200 {
		t.Fatalf("encrypt: %d", code)
	}
	url := ts.URL + "/v1/decrypt/default?verify=full"
	// Two chunked uploads (no length: each reserves max_verify_full), held
	// open half-way.
	var writers []*io.PipeWriter
	var resps []<-chan *http.Response
	for range 2 {
		pw, done := openUpload(t, url, ts.Token, nil)
		if _, err := pw.Write(ct[:len(ct)/2]); err != nil {
			t.Fatal(err)
		}
		writers, resps = append(writers, pw), append(resps, done)
	}
	if !proctest.Poll(10*time.Second, func() bool { return ts.verifyReserved.Load() == 2*limit }) {
		t.Fatalf("%d bytes reserved, want %d", ts.verifyReserved.Load(), 2*limit)
	}
	code, body, hdr := ts.do(t, "POST", "/v1/decrypt/default?verify=full", api.ContentTypeStream, bytes.NewReader(ctSmall), "")
	var e api.Error
	json.Unmarshal(body, &e)
	if code != 503 || e.Code != api.CodeVerifyBusy || hdr.Get("Retry-After") == "" {
		t.Errorf("a third ?verify=full over the budget: %d %s (Retry-After %q), want 503 %s", code, body, hdr.Get("Retry-After"), api.CodeVerifyBusy)
	}
	// Streams without ?verify=full need no budget.
	if code, body, _ := ts.do(t, "POST", "/v1/decrypt/default", api.ContentTypeStream, bytes.NewReader(ctSmall), ""); code != 200 || !bytes.Equal(body, small) {
		t.Errorf("a plain stream decrypt meanwhile: %d %q", code, body)
	}
	for i, pw := range writers {
		pw.Write(ct[len(ct)/2:])
		pw.Close()
		resp := <-resps[i]
		if resp == nil {
			t.Fatalf("upload %d: no response", i)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, pt) {
			t.Errorf("upload %d: %d, %d bytes, want 200 and the plaintext", i, resp.StatusCode, len(got))
		}
	}
	if !proctest.Poll(5*time.Second, func() bool { return ts.verifyReserved.Load() == 0 }) {
		t.Errorf("%d bytes still reserved after the responses", ts.verifyReserved.Load())
	}
	// With a Content-Length, a request reserves its length only: two small
	// ones fit where one chunked one would.
	code, body, _ = ts.do(t, "POST", "/v1/decrypt/default?verify=full", api.ContentTypeStream, bytes.NewReader(ctSmall), "")
	if code != 200 || !bytes.Equal(body, small) {
		t.Errorf("after the budget was given back: %d %q", code, body)
	}
}

// TestVerifyFullRSS runs cipherd serve with the default max_verify_full
// (64 MiB) and verify_full_budget (256 MiB), and sends it 32 ?verify=full
// decrypts of a 64 MiB stream at once, from 32 connections. The server's
// resident memory must stay under 256 MiB plus the budget while it serves
// those the budget covers and refuses the others (503, or the connection
// closed on an upload it would not read), and fall back once they are done;
// the server must then serve the next one.
func TestVerifyFullRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc to read the server's RSS")
	}
	bin := buildCipherd(t)
	p := startCipherd(t, bin, "max_streams_per_identity: 64\n")
	const clients, size = 32, 64 << 20
	pt := make([]byte, size)
	for i := range pt {
		pt[i] = byte(i*7 + i>>16)
	}
	ct := httpDo(t, "POST", p.url+"/v1/encrypt/default", pt, 200)
	budget := Config{}.Defaults().VerifyFullBudget
	rss := func(field string) int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				return kb << 10
			}
		}
		t.Fatalf("no %s in /proc/%d/status", field, p.cmd.Process.Pid)
		return 0
	}
	before := rss("VmRSS")
	decrypt := func(c *http.Client) (int, []byte, error) {
		req, _ := http.NewRequest("POST", p.url+"/v1/decrypt/default?verify=full", bytes.NewReader(ct))
		req.Header.Set("Content-Type", api.ContentTypeStream)
		req.Header.Set("Authorization", "Bearer "+shutdownToken)
		resp, err := c.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	start := make(chan struct{})
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			code, got, err := decrypt(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
			switch {
			case err != nil:
				code = -1 // the server answered and closed while the client was sending
			case code == 200 && !bytes.Equal(got, pt):
				t.Errorf("client %d: wrong plaintext", i)
			case code != 200 && code != 503:
				t.Errorf("client %d: %d %.200s", i, code, got)
			}
			mu.Lock()
			statuses[code]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	peak := rss("VmHWM")
	// Freed buffers are unmapped at once; give the runtime's scavenger a
	// moment for what the heap held.
	var after int64
	proctest.Poll(10*time.Second, func() bool { after = rss("VmRSS"); return after < before+64<<20 })
	t.Logf("cipherd RSS: %d MiB before, peak %d MiB (bound %d MiB = 256 MiB + budget %d MiB), %d MiB after; statuses of %d requests: %v (-1: closed while sending)",
		before>>20, peak>>20, (256<<20+budget)>>20, budget>>20, after>>20, clients, statuses)
	if peak > 256<<20+budget {
		t.Errorf("peak RSS %d MiB over 256 MiB + the %d MiB budget", peak>>20, budget>>20)
	}
	if statuses[200] == 0 || statuses[200] > int(budget/size) {
		t.Errorf("%d requests served, want 1 to %d (the budget's room)", statuses[200], budget/size)
	}
	if after >= before+64<<20 {
		t.Errorf("RSS %d MiB after the requests, %d MiB before: the buffers were not given back", after>>20, before>>20)
	}
	if code, got, err := decrypt(http.DefaultClient); err != nil || code != 200 || !bytes.Equal(got, pt) {
		t.Errorf("the next request: %d, %v", code, err)
	}
}

// httpDo sends body as a stream with the shutdown tests' admin token and
// returns the response body, which must have status want.
func httpDo(t *testing.T, method, url string, body []byte, want int) []byte {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", api.ContentTypeStream)
	req.Header.Set("Authorization", "Bearer "+shutdownToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != want {
		t.Fatalf("%s %s: %d %.200s %v", method, url, resp.StatusCode, b, err)
	}
	return b
}

// TestHeadersTooLarge: a request line and headers over the read buffer
// (IOBufferSize) are 431 headers_too_large, and the connection closes;
// headers within it are served.
func TestHeadersTooLarge(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, IOBufferSize: 16 << 10})
	addr := strings.TrimPrefix(ts.URL, "http://")
	for _, tc := range []struct {
		header int
		status int
	}{{12 << 10, 200}, {20 << 10, 431}, {1 << 20, 431}} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		req := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: " + strings.Repeat("p", tc.header) + "\r\n\r\n"
		go conn.Write([]byte(req)) // the server may answer before it is all sent
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			t.Fatalf("%d bytes of header: %v", tc.header, err)
		}
		body, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%d bytes of header: %d %s, want %d", tc.header, resp.StatusCode, body, tc.status)
		}
		if tc.status == 431 && (codeOf(body) != api.CodeHeadersTooLarge || !resp.Close || bytes.Contains(body, []byte("ppp"))) {
			t.Errorf("%d bytes of header: %s (close %v), want headers_too_large with Connection: close, not repeating the header", tc.header, body, resp.Close)
		}
	}
}
