package server

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// rangeBody is what a range decrypt of rg sends: the stream's start and the
// chunks RangeSpan names.
func rangeBody(t *testing.T, sealed []byte, rg cryptosvc.Range) []byte {
	t.Helper()
	start, err := cryptosvc.StreamStart(bytes.NewReader(sealed), int64(len(sealed)))
	if err != nil {
		t.Fatal(err)
	}
	from, to, _, err := cryptosvc.RangeSpan(start, int64(len(sealed)), rg)
	if err != nil {
		t.Fatal(err)
	}
	return append(bytes.Clone(sealed[:start]), sealed[from:to]...)
}

// TestRangeDecrypt: POST /v1/decrypt/{key}?range=A-B with the stream's
// start and the chunks that cover the range answers exactly bytes A to B:
// with their exact length to an upload with one, chunked with the trailer
// to a chunked upload, and whole before answering with ?verify=full.
func TestRangeDecrypt(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	const n = 5*cryptosvc.ChunkSize + 1234
	pt := make([]byte, n)
	rand.Read(pt)
	resp, sealed, err := streamPost(t, ts, "/v1/encrypt/default", pt, true)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("encrypt: %d, %v", resp.StatusCode, err)
	}
	for _, c := range []struct {
		q          string
		off, end   int // the plaintext wanted: pt[off:end]
		uploadMost int // chunks sent
	}{
		{"0-0", 0, 1, 1},
		{"0-", 0, n, 6},
		{"100-199", 100, 200, 1},
		{"16383-16384", 16383, 16385, 2},
		{"16384-32767", 16384, 32768, 1},
		{"70000-", 70000, n, 2},
		{fmt.Sprintf("%d-%d", n-1, n-1), n - 1, n, 1},
		{fmt.Sprintf("%d-%d", 70000, 1<<40), 70000, n, 2}, // past the end: cut there
	} {
		rg, err := cryptosvc.ParseRange(c.q)
		if err != nil {
			t.Fatal(err)
		}
		body := rangeBody(t, sealed, rg)
		if limit := 200 + c.uploadMost*(cryptosvc.ChunkSize+16); len(body) > limit {
			t.Errorf("range %s: the body is %d bytes, over %d", c.q, len(body), limit)
		}
		for _, path := range []string{"/v1/decrypt/default?range=" + c.q, "/v1/decrypt/default?verify=full&range=" + c.q} {
			for _, sized := range []bool{true, false} {
				resp, got, err := streamPost(t, ts, path, body, sized)
				if err != nil || resp.StatusCode != 200 || !bytes.Equal(got, pt[c.off:c.end]) {
					t.Fatalf("%s, sized %v: %d, %d bytes (want %d), %v", path, sized, resp.StatusCode, len(got), c.end-c.off, err)
				}
				streamed := path == "/v1/decrypt/default?range="+c.q
				switch {
				case sized || !streamed:
					if resp.ContentLength != int64(c.end-c.off) {
						t.Errorf("%s, sized %v: Content-Length %d, want %d", path, sized, resp.ContentLength, c.end-c.off)
					}
				case resp.Trailer.Get(api.TrailerStatus) != "ok":
					t.Errorf("%s, chunked: trailer %q, want ok", path, resp.Trailer.Get(api.TrailerStatus))
				}
			}
		}
	}
}

// TestRangeDecryptRefused: bad ranges and bodies that are not the range's
// get a 4xx with a stable code before any plaintext; a chunk that fails
// later cuts the answer short of its length; and no answer carries
// plaintext that is not the range's.
func TestRangeDecryptRefused(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	const full = cryptosvc.ChunkSize + 16
	pt := make([]byte, 4*cryptosvc.ChunkSize+500)
	rand.Read(pt)
	_, sealed, _ := streamPost(t, ts, "/v1/encrypt/default", pt, true)
	_, other, _ := streamPost(t, ts, "/v1/encrypt/default", pt, true)
	start, _ := cryptosvc.StreamStart(bytes.NewReader(sealed), int64(len(sealed)))
	chunk := func(b []byte, i int64) []byte { return b[start+i*full : min(int64(len(b)), start+(i+1)*full)] }
	body := func(chunks ...[]byte) []byte {
		b := bytes.Clone(sealed[:start])
		for _, c := range chunks {
			b = append(b, c...)
		}
		return b
	}
	const mid = "16390-49151" // chunks 1 and 2
	const toEnd = "49152-"    // chunks 3 and 4 (final)
	for _, c := range []struct {
		name, q string
		body    []byte
		status  int
		code    api.Code
	}{
		{"a malformed range", "5", body(chunk(sealed, 0)), 400, api.CodeInvalidParameter},
		{"a range ending before its start", "9-5", body(chunk(sealed, 0)), 400, api.CodeInvalidParameter},
		{"a range with a sign", "+1-5", body(chunk(sealed, 0)), 400, api.CodeInvalidParameter},
		{"a range given twice", "0-1&range=0-1", body(chunk(sealed, 0)), 400, api.CodeInvalidParameter},
		{"a range past the end", "70000-70010", body(chunk(sealed, 4)), 416, api.CodeRangeNotSatisfiable},
		{"a range from the end", "66036-", body(chunk(sealed, 4)), 416, api.CodeRangeNotSatisfiable},
		{"chunks of another message", mid, body(chunk(other, 1), chunk(other, 2)), 400, api.CodeDecryptFailed},
		{"chunks from another offset", mid, body(chunk(sealed, 2), chunk(sealed, 3)), 400, api.CodeDecryptFailed},
		{"chunks reordered", mid, body(chunk(sealed, 2), chunk(sealed, 1)), 400, api.CodeDecryptFailed},
		{"a later chunk of another message", mid, body(chunk(sealed, 1), chunk(other, 2)), 400, api.CodeDecryptFailed},
		{"a later chunk out of place", mid, body(chunk(sealed, 1), chunk(sealed, 3)), 400, api.CodeDecryptFailed},
		{"a chunk too many", mid, body(chunk(sealed, 1), chunk(sealed, 2), chunk(sealed, 3)), 400, api.CodeRangeMismatch},
		{"a chunk too few", mid, body(chunk(sealed, 1)), 400, api.CodeTruncated},
		{"the final chunk dropped", toEnd, body(chunk(sealed, 3)), 400, api.CodeTruncated},
		{"a final chunk forged", toEnd, body(chunk(sealed, 3)[:full-1]), 400, api.CodeDecryptFailed},
		{"a final chunk forged after the first", toEnd, body(chunk(sealed, 3), chunk(sealed, 4)[:16]), 400, api.CodeDecryptFailed},
		{"the start of another message", mid, append(bytes.Clone(other[:start]), sealed[start+full:start+3*full]...), 400, api.CodeDecryptFailed},
		{"no chunk", mid, body(), 400, api.CodeTruncated},
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/decrypt/default?range="+c.q, bytes.NewReader(c.body))
		req.Header.Set("Content-Type", api.ContentTypeStream)
		req.Header.Set("Authorization", "Bearer "+ts.Token)
		resp, got, _ := send(req)
		// The range's answer is short: a failure in any of its chunks is
		// found before the answer starts, and is a JSON error.
		if resp == nil || resp.StatusCode != c.status {
			t.Errorf("%s: %v, %s; want status %d", c.name, resp, got, c.status)
			continue
		}
		var e api.Error
		if json.Unmarshal(got, &e) != nil || e.Code != c.code {
			t.Errorf("%s: %s, want code %s", c.name, got, c.code)
		}
	}
	// A JSON decrypt takes no range.
	code, b, _ := ts.do(t, "POST", "/v1/decrypt/default?range=0-1", "application/json", bytes.NewReader([]byte(`{"ciphertext":"AAAA"}`)), ts.Token)
	if code != 400 || codeOf(b) != api.CodeBadRequest {
		t.Errorf("JSON decrypt with ?range: %d %s, want 400 %s", code, b, api.CodeBadRequest)
	}
}

// TestRangeDocExample runs the shell example of docs/API.md's Ranges
// section as written, with bash and curl, on a stream sealed under each
// AEAD's header size: it sends only the start and the covering chunks, and
// gets the second MiB of the plaintext.
func TestRangeDocExample(t *testing.T) {
	curl := e2eCurl(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	doc, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n### Ranges\n")
	_, block, _ := strings.Cut(section, "```sh\n")
	script, _, ok := strings.Cut(block, "```")
	if !ok || !strings.Contains(script, "?range=") {
		t.Fatalf("docs/API.md's Ranges section has no shell example")
	}
	ts := startTestServer(t, Config{SkipBenchmark: true})
	pt := make([]byte, 3<<20+100)
	rand.Read(pt)
	for _, aead := range []string{"aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"} {
		key := "range-" + aead
		if code := ts.postJSON(t, "/v1/keys/"+key, map[string]string{"aead": aead}, nil); code != 201 {
			t.Fatalf("create %s: %d", key, code)
		}
		req, _ := http.NewRequest("POST", ts.URL+"/v1/encrypt/"+key, bytes.NewReader(pt))
		req.Header.Set("Content-Type", api.ContentTypeStream)
		req.Header.Set("Authorization", "Bearer "+ts.Token)
		req.Header.Set(api.HeaderContext, base64.StdEncoding.EncodeToString([]byte("order 42")))
		resp, sealed, err := send(req)
		if resp == nil || resp.StatusCode != 200 || err != nil || resp.Header.Get(api.HeaderAEAD) != aead {
			t.Fatalf("encrypt under %s: %v, %v", key, resp, err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "backup.tar.cd"), sealed, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bash, "-c", strings.ReplaceAll(script, "/v1/decrypt/default", "/v1/decrypt/"+key))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "auth=Authorization: Bearer "+ts.Token, "CIPHERD="+ts.URL, "PATH="+filepath.Dir(curl)+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: the example failed: %v\n%s", aead, err, out)
		}
		got, err := os.ReadFile(filepath.Join(dir, "part.bin"))
		if err != nil || !bytes.Equal(got, pt[1<<20:2<<20]) {
			t.Fatalf("%s: part.bin holds %d bytes, equal to the second MiB: %v (%v)", aead, len(got), bytes.Equal(got, pt[1<<20:2<<20]), err)
		}
	}
}
