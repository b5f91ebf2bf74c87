package server

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// streamPost posts body to path as a stream: with its length when sized,
// else chunked (a reader that hides its length).
func streamPost(t *testing.T, ts *testServer, path string, body []byte, sized bool) (*http.Response, []byte, error) {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if !sized {
		r = io.MultiReader(r)
	}
	req, err := http.NewRequest("POST", ts.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", api.ContentTypeStream)
	req.Header.Set("Authorization", "Bearer "+ts.Token)
	resp, b, err := send(req)
	if resp == nil {
		t.Fatal(err)
	}
	return resp, b, err
}

// send does req and reads the answer; resp is nil when no answer came.
func send(req *http.Request) (*http.Response, []byte, error) {
	resp, err := plainClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// TestStreamExactLength: the answer to an upload with a Content-Length has
// the exact Content-Length of what it carries, for encrypt, decrypt and
// rewrap; to a chunked upload it is chunked, and a decrypt ends with the
// trailer. A decrypt that fails after its answer started ends short of its
// length, and the client sees the body cut.
func TestStreamExactLength(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	for _, n := range []int{0, 1, 16 << 10, 16<<10 + 1, 3<<20 + 5} {
		pt := make([]byte, n)
		rand.Read(pt)
		resp, ct, err := streamPost(t, ts, "/v1/encrypt/default", pt, true)
		if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(ct)) || resp.TransferEncoding != nil {
			t.Fatalf("encrypt of %d bytes: %d, Content-Length %d for %d bytes, %v, %v", n, resp.StatusCode, resp.ContentLength, len(ct), resp.TransferEncoding, err)
		}
		resp, got, err := streamPost(t, ts, "/v1/decrypt/default", ct, true)
		if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(n) || !bytes.Equal(got, pt) {
			t.Fatalf("decrypt of %d bytes: %d, Content-Length %d, equal %v, %v", n, resp.StatusCode, resp.ContentLength, bytes.Equal(got, pt), err)
		}
		resp, rw, err := streamPost(t, ts, "/v1/rewrap/default", ct, true)
		if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(rw)) {
			t.Fatalf("rewrap of %d bytes: %d, Content-Length %d for %d bytes, %v", n, resp.StatusCode, resp.ContentLength, len(rw), err)
		}
		// Chunked: no length, and the decrypt's trailer.
		resp, ct2, err := streamPost(t, ts, "/v1/encrypt/default", pt, false)
		if err != nil || resp.StatusCode != 200 || resp.ContentLength != -1 || len(ct2) != len(ct) {
			t.Fatalf("chunked encrypt of %d bytes: %d, Content-Length %d, %d bytes, %v", n, resp.StatusCode, resp.ContentLength, len(ct2), err)
		}
		resp, got, err = streamPost(t, ts, "/v1/decrypt/default", ct2, false)
		if err != nil || resp.ContentLength != -1 || resp.Trailer.Get(api.TrailerStatus) != "ok" || !bytes.Equal(got, pt) {
			t.Fatalf("chunked decrypt of %d bytes: Content-Length %d, trailer %q, %v", n, resp.ContentLength, resp.Trailer.Get(api.TrailerStatus), err)
		}
	}

	// A forged byte in the last chunk: the answer is cut short of its
	// length, and nothing of the last chunk's plaintext came.
	pt := make([]byte, 1<<20)
	_, ct, _ := streamPost(t, ts, "/v1/encrypt/default", pt, true)
	ct[len(ct)-3] ^= 1
	resp, got, err := streamPost(t, ts, "/v1/decrypt/default", ct, true)
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(pt)) || err == nil || len(got) >= len(pt) {
		t.Fatalf("forged decrypt: %d, Content-Length %d, %d bytes, %v; want the body cut", resp.StatusCode, resp.ContentLength, len(got), err)
	}

	// curl reports the cut as a transfer closed with bytes remaining.
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "forged")
	if err := os.WriteFile(in, ct, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(curl, "-sS", "-o", filepath.Join(dir, "out"), "-D", "-", "-X", "POST", "-T", in,
		"-H", "Content-Type: "+api.ContentTypeStream, "-H", "Authorization: Bearer "+ts.Token, ts.URL+"/v1/decrypt/default").CombinedOutput()
	var ee *exec.ExitError
	if !strings.Contains(string(out), "Content-Length: "+strconv.Itoa(len(pt))) || !errors.As(err, &ee) || ee.ExitCode() != 18 {
		t.Fatalf("curl of a forged stream: %v\n%s", err, out)
	}
}

// TestStreamForgedEndCut: a stream whose full chunks authenticate and
// whose final chunk does not (an attacker who cut a stream at a chunk
// boundary and forged an empty final chunk) never reaches a client as a
// complete answer, whatever the size: the last piece of an answer with a
// Content-Length waits for the final chunk. An answer that is all one
// piece is a JSON error instead. Also for a range to the end.
func TestStreamForgedEndCut(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	for _, n := range []int{16 << 10, 256 << 10, 512 << 10, 1 << 20, 1<<20 + 3*16<<10} {
		pt := make([]byte, n)
		rand.Read(pt)
		_, ct, err := streamPost(t, ts, "/v1/encrypt/default", pt, true)
		if err != nil {
			t.Fatal(err)
		}
		rand.Read(ct[len(ct)-16:]) // the final chunk: its tag alone
		rg := cryptosvc.Range{Off: int64(n / 2), Len: -1}
		for _, path := range []string{"/v1/decrypt/default", "/v1/decrypt/default?range=" + rg.String()} {
			body, want := ct, pt
			if path != "/v1/decrypt/default" {
				body, want = rangeBody(t, ct, rg), pt[n/2:]
			}
			req, _ := http.NewRequest("POST", ts.URL+path, bytes.NewReader(body))
			req.Header.Set("Content-Type", api.ContentTypeStream)
			req.Header.Set("Authorization", "Bearer "+ts.Token)
			resp, got, err := send(req)
			if resp == nil {
				t.Errorf("%d bytes, %s: no answer (%v)", n, path, err)
				continue
			}
			if len(want) <= streamWriteSize {
				// The whole answer is its first piece, read before the
				// answer starts: the failure is a JSON error.
				if resp.StatusCode != 400 || codeOf(got) != api.CodeDecryptFailed {
					t.Errorf("%d bytes, %s: %d %.200s; want 400 %s", n, path, resp.StatusCode, got, api.CodeDecryptFailed)
				}
				continue
			}
			if resp.StatusCode != 200 || err == nil || int64(len(got)) >= resp.ContentLength || !bytes.HasPrefix(want, got) {
				t.Errorf("%d bytes, %s: %d, %d of %d bytes, prefix %v, %v; want the answer cut", n, path, resp.StatusCode, len(got), resp.ContentLength, bytes.HasPrefix(want, got), err)
			}
		}
	}
}

// TestStreamShortFailure: a decrypt whose whole answer is its first piece
// (streamWriteSize) and that fails anywhere in it is an ordinary JSON error,
// sized or chunked, and curl sees that error rather than a connection closed
// before any status line. Chunk by chunk framing gives the answer of a
// chunked upload its first piece at the first chunk that opens, so the
// failures here sit in the first chunk or the stream's end.
func TestStreamShortFailure(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	pt := make([]byte, cryptosvc.ChunkSize+100)
	rand.Read(pt)
	_, ct, err := streamPost(t, ts, "/v1/encrypt/default", pt, true)
	if err != nil {
		t.Fatal(err)
	}
	start, err := cryptosvc.StreamStart(bytes.NewReader(ct), int64(len(ct)))
	if err != nil {
		t.Fatal(err)
	}
	full := start + cryptosvc.ChunkSize + 16
	flipped := bytes.Clone(ct)
	flipped[start+5] ^= 1
	cases := []struct {
		name string
		body []byte
		code api.Code
		late bool // the failure follows a chunk that opened
	}{
		{"the start alone", ct[:start], api.CodeTruncated, false},
		{"the final chunk dropped", ct[:full], api.CodeTruncated, true},
		{"cut inside the final chunk", ct[:len(ct)-5], api.CodeDecryptFailed, true},
		{"a bit flipped in the first chunk", flipped, api.CodeDecryptFailed, false},
	}
	for _, c := range cases {
		for _, sized := range []bool{true, false} {
			resp, got, _ := streamPost(t, ts, "/v1/decrypt/default", c.body, sized)
			if c.late && !sized {
				// Chunked, the first chunk goes out as it opens: the
				// failure after it comes once the answer started.
				if resp.StatusCode != 200 || resp.Trailer.Get(api.TrailerStatus) == "ok" {
					t.Errorf("%s, chunked: %d, trailer %q; want 200 without ok", c.name, resp.StatusCode, resp.Trailer.Get(api.TrailerStatus))
				}
				continue
			}
			if resp.StatusCode != 400 || codeOf(got) != c.code || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s, sized %v: %d %s %.200s; want 400 %s", c.name, sized, resp.StatusCode, resp.Header.Get("Content-Type"), got, c.code)
			}
		}
	}

	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed")
	}
	in := filepath.Join(t.TempDir(), "cut")
	if err := os.WriteFile(in, ct[:full], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(curl, "-sS", "-w", " %{http_code}", "-X", "POST", "-T", in,
		"-H", "Content-Type: "+api.ContentTypeStream, "-H", "Authorization: Bearer "+ts.Token, ts.URL+"/v1/decrypt/default").CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), " 400") || !strings.Contains(string(out), string(api.CodeTruncated)) {
		t.Fatalf("curl of a stream cut at a chunk boundary: %v\n%s", err, out)
	}
}

// TestStreamHTTP10: HTTP/1.0 has neither chunked framing nor trailers. A
// decrypt whose answer has a length gets it; one whose length is not known
// in advance (no stream has the upload's length) and that does not fail in
// its first piece is refused with a JSON error rather than answered in a
// framing HTTP/1.0 cannot read.
func TestStreamHTTP10(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	addr := strings.TrimPrefix(ts.URL, "http://")
	pt := make([]byte, 512<<10)
	rand.Read(pt)
	_, ct, err := streamPost(t, ts, "/v1/encrypt/default", pt, true)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body []byte) (*http.Response, []byte) {
		t.Helper()
		raw := "POST /v1/decrypt/default HTTP/1.0\r\nAuthorization: Bearer " + ts.Token + "\r\nContent-Type: " + api.ContentTypeStream +
			"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
		resp, got, err := badRaw(t, addr, append([]byte(raw), body...))
		if err != nil {
			t.Fatalf("%d bytes over HTTP/1.0: no answer: %v", len(body), err)
		}
		return resp, got
	}
	if resp, got := post(ct); resp.StatusCode != 200 || resp.ContentLength != int64(len(pt)) || len(resp.TransferEncoding) != 0 || !bytes.Equal(got, pt) {
		t.Errorf("a whole stream: %d, Content-Length %d, Transfer-Encoding %v, %d bytes", resp.StatusCode, resp.ContentLength, resp.TransferEncoding, len(got))
	}
	// Five bytes short: no stream has that length, and the first piece
	// (256 KiB) opens.
	if resp, got := post(ct[:len(ct)-5]); resp.StatusCode != 400 || codeOf(got) != api.CodeTruncated || len(resp.TransferEncoding) != 0 {
		t.Errorf("a stream of no stream's length: %d, Transfer-Encoding %v, %.200s; want 400 %s", resp.StatusCode, resp.TransferEncoding, got, api.CodeTruncated)
	}
	// The same cut of a stream that is one piece fails within it.
	_, short, err := streamPost(t, ts, "/v1/encrypt/default", pt[:1000], true)
	if err != nil {
		t.Fatal(err)
	}
	if resp, got := post(short[:len(short)-5]); resp.StatusCode != 400 || codeOf(got) != api.CodeDecryptFailed {
		t.Errorf("a short stream of no stream's length: %d %.200s; want 400 %s", resp.StatusCode, got, api.CodeDecryptFailed)
	}
}

// TestStreamChunkedUploadCutEarly: a chunked encrypt or rewrap whose upload
// is cut, or stops, before its first chunk of output is answered with a
// JSON error: the sealed stream's start (or the new header), which comes
// before any of the upload, is not taken for the answer's first piece.
func TestStreamChunkedUploadCutEarly(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, StreamIdleTimeout: 500 * time.Millisecond})
	addr := strings.TrimPrefix(ts.URL, "http://")
	_, ct, err := streamPost(t, ts, "/v1/encrypt/default", make([]byte, 40000), true)
	if err != nil {
		t.Fatal(err)
	}
	_, hlen, err := cryptosvc.ParseHeader(ct)
	if err != nil {
		t.Fatal(err)
	}
	head := func(route string) string {
		return "POST " + route + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ts.Token + "\r\nContent-Type: " + api.ContentTypeStream + "\r\nTransfer-Encoding: chunked\r\n\r\n"
	}
	cases := []struct {
		name, raw string
		stall     bool // the client sends nothing more, rather than closing
		status    int
		code      api.Code
	}{
		{"encrypt cut inside its first chunk", head("/v1/encrypt/default") + "5\r\nhello\r\n", false, 400, api.CodeBadRequest},
		{"encrypt stopped inside its first chunk", head("/v1/encrypt/default") + "5\r\nhello\r\n", true, 408, api.CodeTimeout},
		{"encrypt with a bad chunk size", head("/v1/encrypt/default") + "zz\r\nhello\r\n", false, 400, api.CodeBadRequest},
		{"rewrap stopped after the header", head("/v1/rewrap/default") + fmt.Sprintf("%x\r\n", hlen) + string(ct[:hlen]) + "\r\n", true, 408, api.CodeTimeout},
	}
	for _, c := range cases {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, c.raw)
		if !c.stall {
			conn.(*net.TCPConn).CloseWrite()
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s: no answer: %v", c.name, err)
			conn.Close()
			continue
		}
		got, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != c.status || codeOf(got) != c.code {
			t.Errorf("%s: %d %.200q, want %d %s", c.name, resp.StatusCode, got, c.status, c.code)
		}
	}
}
