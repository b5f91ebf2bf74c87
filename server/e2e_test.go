package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/cryptosvc"
)

// End-to-end tests against a listening server with curl, the client every
// operator has, and with the Go client: what docs/API.md shows is what works.

// e2eCurl finds curl. It is required under CI (CI set) and skips the test
// elsewhere when missing.
func e2eCurl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("curl is required under CI: %v", err)
		}
		t.Skip("curl not found")
	}
	return p
}

// curlRun runs curl with args and returns its standard output and exit code.
type curlRun struct {
	t    *testing.T
	bin  string
	base string
	tok  string
}

func (c curlRun) run(stdin []byte, args ...string) (out []byte, code int, stderr string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"-sS", "--no-progress-meter", "-H", "Authorization: Bearer " + c.tok}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		c.t.Fatalf("curl: %v", err)
	}
	return o.Bytes(), code, e.String()
}

// json posts body as JSON to route and decodes the answer into out,
// returning the HTTP status (curl -w).
func (c curlRun) json(route, body string, out any) int {
	c.t.Helper()
	b, code, stderr := c.run(nil, "-H", "Content-Type: application/json", "-d", body, "-w", "\n%{http_code}", c.base+route)
	if code != 0 {
		c.t.Fatalf("curl %s: exit %d: %s", route, code, stderr)
	}
	i := bytes.LastIndexByte(b, '\n')
	status, _ := strconv.Atoi(string(b[i+1:]))
	if out != nil {
		if err := json.Unmarshal(b[:i], out); err != nil {
			c.t.Fatalf("curl %s: %d %s: %v", route, status, b[:i], err)
		}
	}
	return status
}

// dumpTrailer returns the value of name in the trailer section of a curl -D
// dump: after the blank line that ends the final response's headers.
func dumpTrailer(dump []byte, name string) (string, bool) {
	blocks := strings.Split(strings.ReplaceAll(string(dump), "\r\n", "\n"), "\n\n")
	// blocks: [100 Continue], final headers, trailers, ""
	for i, b := range blocks {
		if !strings.HasPrefix(b, "HTTP/") || strings.HasPrefix(b, "HTTP/1.1 100") || i+1 >= len(blocks) {
			continue
		}
		for _, line := range strings.Split(blocks[i+1], "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
				return strings.TrimSpace(v), true
			}
		}
	}
	return "", false
}

// dumpHeader returns the value of name in the final response's headers.
func dumpHeader(dump []byte, name string) string {
	blocks := strings.Split(strings.ReplaceAll(string(dump), "\r\n", "\n"), "\n\n")
	for _, b := range blocks {
		if !strings.HasPrefix(b, "HTTP/") || strings.HasPrefix(b, "HTTP/1.1 100") {
			continue
		}
		for _, line := range strings.Split(b, "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, name) {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}

func TestE2ECurl(t *testing.T) {
	bin := e2eCurl(t)
	ts := startTestServer(t, Config{SkipBenchmark: true})
	c := curlRun{t: t, bin: bin, base: ts.URL, tok: ts.Token}
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	ctxB64 := base64.StdEncoding.EncodeToString([]byte("order 42"))

	var oneShot []byte // a one-shot ciphertext under version 1
	t.Run("json", func(t *testing.T) {
		c.t = t
		var enc api.EncryptResult
		if st := c.json("/v1/encrypt/default", `{"plaintext":"aGVsbG8gd29ybGQ=","context":"`+ctxB64+`"}`, &enc); st != 200 || enc.KeyVersion != 1 || enc.AEAD == "" {
			t.Fatalf("encrypt: %d %+v", st, enc)
		}
		oneShot = enc.Ciphertext
		var dec api.DecryptResult
		body := `{"ciphertext":"` + base64.StdEncoding.EncodeToString(enc.Ciphertext) + `","context":"` + ctxB64 + `"}`
		if st := c.json("/v1/decrypt/default", body, &dec); st != 200 || string(dec.Plaintext) != "hello world" {
			t.Fatalf("decrypt: %d %+v", st, dec)
		}

		// A batch keeps order and reports each item; one bad item makes it 207.
		var batch api.BatchResponse[api.DecryptResult]
		items := `{"items":[` +
			`{"ciphertext":"` + base64.StdEncoding.EncodeToString(enc.Ciphertext) + `","context":"` + ctxB64 + `","reference":"a"},` +
			`{"ciphertext":"` + base64.StdEncoding.EncodeToString(enc.Ciphertext) + `","reference":"b"},` +
			`{"ciphertext":"` + base64.StdEncoding.EncodeToString(enc.Ciphertext) + `","context":"` + ctxB64 + `","reference":"c"}]}`
		if st := c.json("/v1/decrypt/default", items, &batch); st != 207 || len(batch.Items) != 3 {
			t.Fatalf("batch: %d %+v", st, batch)
		}
		for i, want := range []string{"a", "b", "c"} {
			it := batch.Items[i]
			if it.Reference != want || (i == 1) != (it.Error != nil) {
				t.Errorf("item %d: %+v", i, it)
			}
		}
		if e := batch.Items[1].Error; e == nil || e.Code != api.CodeDecryptFailed {
			t.Errorf("item b: %+v", e)
		}

		// Errors: the JSON shape, the request id in the header and the body,
		// and curl --fail-with-body exits 22 with the body on stdout.
		b, code, _ := c.run(nil, "--fail-with-body", "-D", file("err.hdr"), "-H", "Content-Type: application/json", "-d", `{"plaintext":""}`, ts.URL+"/v1/encrypt/nosuchkey")
		var e api.Error
		if code != 22 || json.Unmarshal(b, &e) != nil || e.Code != api.CodeKeyNotFound {
			t.Fatalf("unknown key: exit %d, %s", code, b)
		}
		dump, _ := os.ReadFile(file("err.hdr"))
		if id := dumpHeader(dump, api.HeaderRequestID); id == "" || id != e.RequestID {
			t.Errorf("X-Request-Id %q, request_id %q", id, e.RequestID)
		}
		// curl -d without a Content-Type sends a form: 415, as documented.
		b, code, _ = c.run(nil, "--fail-with-body", "-d", `{"plaintext":""}`, ts.URL+"/v1/encrypt/default")
		if code != 22 || !bytes.Contains(b, []byte(api.CodeUnsupportedMedia)) {
			t.Errorf("form body: exit %d, %s", code, b)
		}
	})
	c.t = t

	// 20 MiB through the streaming routes with -T (a file, Content-Length)
	// and from standard input (chunked).
	pt := make([]byte, 20<<20+12345)
	rand.Read(pt)
	if err := os.WriteFile(file("pt"), pt, 0o600); err != nil {
		t.Fatal(err)
	}
	stream := []string{"-X", "POST", "-H", "Content-Type: application/octet-stream", "-H", api.HeaderContext + ": " + ctxB64}
	var ct []byte
	t.Run("stream", func(t *testing.T) {
		c.t = t
		start := time.Now()
		_, code, stderr := c.run(nil, append(stream, "--fail", "-T", file("pt"), "-o", file("ct"), "-D", file("enc.hdr"), ts.URL+"/v1/encrypt/default")...)
		if code != 0 {
			t.Fatalf("encrypt: exit %d: %s", code, stderr)
		}
		dump, _ := os.ReadFile(file("enc.hdr"))
		if dumpHeader(dump, api.HeaderKeyVersion) != "1" || dumpHeader(dump, api.HeaderAEAD) == "" {
			t.Errorf("encrypt headers:\n%s", dump)
		}
		ct, _ = os.ReadFile(file("ct"))
		t.Logf("encrypted %d MiB in %v", len(pt)>>20, time.Since(start).Round(time.Millisecond))

		start = time.Now()
		_, code, stderr = c.run(nil, append(stream, "--fail", "-T", file("ct"), "-o", file("out"), "-D", file("dec.hdr"), ts.URL+"/v1/decrypt/default")...)
		if code != 0 {
			t.Fatalf("decrypt: exit %d: %s", code, stderr)
		}
		out, _ := os.ReadFile(file("out"))
		if !bytes.Equal(out, pt) {
			t.Fatalf("decrypted %d bytes, not the %d sent", len(out), len(pt))
		}
		// An upload of known length: the answer has the plaintext's exact
		// length, and no trailer, which only chunked framing carries.
		dump, _ = os.ReadFile(file("dec.hdr"))
		if _, ok := dumpTrailer(dump, api.TrailerStatus); ok || dumpHeader(dump, "Content-Length") != strconv.Itoa(len(pt)) {
			t.Errorf("want Content-Length %d and no trailer in curl's dump:\n%s", len(pt), dump)
		}
		t.Logf("decrypted %d MiB in %v", len(pt)>>20, time.Since(start).Round(time.Millisecond))

		// Chunked upload from standard input.
		out, code, stderr = c.run(ct, append(stream, "--fail", "-T", "-", "-D", file("dec2.hdr"), ts.URL+"/v1/decrypt/default")...)
		dump, _ = os.ReadFile(file("dec2.hdr"))
		if v, _ := dumpTrailer(dump, api.TrailerStatus); code != 0 || !bytes.Equal(out, pt) || v != "ok" {
			t.Fatalf("chunked decrypt: exit %d (%s), %d bytes, trailer %q", code, stderr, len(out), v)
		}
	})
	c.t = t
	if ct == nil {
		t.Fatal("no stream ciphertext")
	}

	t.Run("tampered stream", func(t *testing.T) {
		c.t = t
		for _, tc := range []struct {
			name string
			ct   []byte
		}{
			{"bit flip", badFlip(ct, len(ct)/2)},
			{"cut", ct[:len(ct)-100]},
			{"cut before the final chunk", ct[:len(ct)-(12345+16)]},
			{"spliced chunks", badConcat(ct[:1<<20], ct[2<<20:])},
		} {
			name := filepath.Join(dir, "bad")
			os.WriteFile(name, tc.ct, 0o600)
			out, code, stderr := c.run(nil, append(stream, "-T", name, "-D", file("bad.hdr"), ts.URL+"/v1/decrypt/default")...)
			dump, _ := os.ReadFile(file("bad.hdr"))
			// 18: the response ended without its terminating chunk; 56: the
			// connection was reset while receiving; 55: while still sending
			// (the abort came before curl had uploaded everything).
			if code != 18 && code != 55 && code != 56 {
				t.Errorf("%s: curl exit %d (%s), want 18, 55 or 56", tc.name, code, stderr)
			}
			if v, ok := dumpTrailer(dump, api.TrailerStatus); ok {
				t.Errorf("%s: trailer %s: %s", tc.name, api.TrailerStatus, v)
			}
			if len(out) >= len(pt) {
				t.Errorf("%s: %d bytes of plaintext released", tc.name, len(out))
			}
			// ?verify=full answers 400 before releasing anything. The
			// server stops reading at the bad chunk and closes the
			// connection after its answer, so curl, still uploading the
			// rest, may see the reset (55, 56) before the answer; it never
			// sees a success.
			b, code, _ := c.run(nil, append(stream, "--fail-with-body", "-T", name, ts.URL+"/v1/decrypt/default?verify=full")...)
			var e api.Error
			switch {
			case code == 55 || code == 56:
				if len(b) > 0 && !bytes.HasPrefix(b, []byte(`{"code":`)) {
					t.Errorf("%s with verify=full: plaintext released: %.50q", tc.name, b)
				}
			case code != 22 || json.Unmarshal(b, &e) != nil || (e.Code != api.CodeDecryptFailed && e.Code != api.CodeTruncated):
				t.Errorf("%s with verify=full: exit %d, %.200s", tc.name, code, b)
			}
		}
		// verify=full of the good stream returns all of it.
		out, code, stderr := c.run(nil, append(stream, "--fail", "-T", file("ct"), ts.URL+"/v1/decrypt/default?verify=full")...)
		if code != 0 || !bytes.Equal(out, pt) {
			t.Errorf("verify=full: exit %d (%s), %d bytes", code, stderr, len(out))
		}
	})
	c.t = t

	t.Run("rewrap header only", func(t *testing.T) {
		c.t = t
		var k api.Key
		b, code, _ := c.run(nil, "--fail", "-X", "POST", ts.URL+"/v1/keys/default/rotate")
		if code != 0 || json.Unmarshal(b, &k) != nil || k.LatestVersion != 2 {
			t.Fatalf("rotate: exit %d, %s", code, b)
		}
		_, n, err := cryptosvc.ParseHeader(ct)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(file("hdr"), ct[:n], 0o600)
		// No context: the header alone does not need it.
		hdr, code, stderr := c.run(nil, "--fail", "-H", "Content-Type: application/octet-stream", "--data-binary", "@"+file("hdr"), "-D", file("rw.hdr"), ts.URL+"/v1/rewrap/default")
		if code != 0 {
			t.Fatalf("rewrap: exit %d: %s", code, stderr)
		}
		dump, _ := os.ReadFile(file("rw.hdr"))
		h, hn, err := cryptosvc.ParseHeader(hdr)
		if err != nil || hn != len(hdr) || h.KeyVersion != 2 || dumpHeader(dump, api.HeaderKeyVersion) != "2" {
			t.Fatalf("new header: %v, %d of %d bytes, %+v", err, hn, len(hdr), h)
		}
		os.WriteFile(file("ct2"), badConcat(hdr, ct[n:]), 0o600)
		ct2, _ := os.ReadFile(file("ct2"))
		out, code, stderr := c.run(ct2, append(stream, "--fail", "-T", "-", "-D", file("dec3.hdr"), ts.URL+"/v1/decrypt/default")...)
		dump, _ = os.ReadFile(file("dec3.hdr"))
		if v, _ := dumpTrailer(dump, api.TrailerStatus); code != 0 || !bytes.Equal(out, pt) || v != "ok" || dumpHeader(dump, api.HeaderKeyVersion) != "2" {
			t.Fatalf("chunked decrypt after rewrap: exit %d (%s), %d bytes, trailer %q", code, stderr, len(out), v)
		}
		// The old header still opens the body while version 1 is not retired.
		out, code, _ = c.run(nil, append(stream, "--fail", "-T", file("ct"), ts.URL+"/v1/decrypt/default")...)
		if code != 0 || !bytes.Equal(out, pt) {
			t.Errorf("old ciphertext: exit %d", code)
		}
		// JSON rewrap of a one-shot message needs its context.
		var rw api.RewrapResult
		if st := c.json("/v1/rewrap/default", `{"ciphertext":"`+base64.StdEncoding.EncodeToString(oneShot)+`","context":"`+ctxB64+`"}`, &rw); st != 200 || rw.KeyVersion != 2 {
			t.Errorf("JSON rewrap: %d %+v", st, rw)
		}
	})
	c.t = t

	t.Run("go client", func(t *testing.T) {
		cl, err := client.New(ts.URL, client.WithToken(ts.Token))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		// curl's ciphertext, the Go client's plaintext, and back.
		var dst bytes.Buffer
		if _, err := cl.DecryptStream(ctx, "default", &dst, bytes.NewReader(ct), []byte("order 42")); err != nil || !bytes.Equal(dst.Bytes(), pt) {
			t.Fatalf("client decrypt of curl's stream: %v, %d bytes", err, dst.Len())
		}
		dst.Reset()
		if _, err := cl.EncryptStream(ctx, "default", &dst, bytes.NewReader(pt), []byte("order 42")); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(file("ct3"), dst.Bytes(), 0o600)
		out, code, stderr := c.run(nil, append(stream, "--fail", "-T", file("ct3"), ts.URL+"/v1/decrypt/default")...)
		if code != 0 || !bytes.Equal(out, pt) {
			t.Fatalf("curl decrypt of the client's stream: exit %d (%s)", code, stderr)
		}
		if got, err := cl.Decrypt(ctx, "default", oneShot, []byte("order 42")); err != nil || string(got) != "hello world" {
			t.Errorf("client decrypt of curl's message: %v %q", err, got)
		}
		dst.Reset()
		if _, err := cl.DecryptStream(ctx, "default", &dst, bytes.NewReader(badFlip(ct, len(ct)/2)), []byte("order 42")); err == nil {
			t.Errorf("the client read a tampered stream without error")
		}
	})

	t.Run("api", func(t *testing.T) {
		c.t = t
		b, code, _ := c.run(nil, "--fail", ts.URL+"/v1/api")
		var desc api.APIDescription
		if code != 0 || json.Unmarshal(b, &desc) != nil {
			t.Fatalf("/v1/api: exit %d %s", code, b)
		}
		listed := map[string]api.Route{}
		for _, r := range desc.Routes {
			listed[r.Method+" "+r.Path] = r
		}
		routes := ts.routes()
		if len(desc.Routes) != len(routes) {
			t.Errorf("/v1/api lists %d routes, the server has %d", len(desc.Routes), len(routes))
		}
		for _, r := range routes {
			got, ok := listed[r.method+" "+r.path]
			if !ok {
				t.Errorf("%s %s is not listed", r.method, r.path)
				continue
			}
			want := api.Route{Method: r.method, Path: r.path, Auth: string(r.op), AuthOr: string(r.orOp), MaxBody: r.maxBody,
				Timeout: r.timeout.String(), RateCost: r.cost, MaxItems: r.items, Streaming: r.stream, MaxVerifyFull: r.verifyFull}
			if r.op == "" {
				want.Auth = "none"
			}
			if r.stream {
				want.StreamIdleTimeout = ts.cfg.StreamIdleTimeout.String()
				want.MaxStreamsPerIdentity = ts.cfg.MaxStreamsPerIdentity
			}
			if r.verifyFull > 0 {
				want.VerifyFullBudget = ts.cfg.VerifyFullBudget
			}
			for _, q := range r.query {
				want.Query = append(want.Query, api.QueryParam{Name: q.name, Values: q.values, Pattern: q.pattern, Description: q.doc})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s: listed %+v, want %+v", r.method, r.path, got, want)
			}
		}
		for _, p := range []string{"/healthz", "/readyz", "/version"} {
			if _, code, _ := c.run(nil, "--fail", ts.URL+p); code != 0 {
				t.Errorf("%s: curl exit %d", p, code)
			}
		}
	})
}

// An empty message decrypts to "plaintext":"", alone and in a batch: a
// client that reads the field finds it.
func TestDecryptEmptyMessage(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	var enc api.EncryptResult
	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]string{"plaintext": ""}, &enc); code != 200 || len(enc.Ciphertext) == 0 {
		t.Fatalf("encrypt of an empty message: %d %+v", code, enc)
	}
	ct := base64.StdEncoding.EncodeToString(enc.Ciphertext)
	for body, want := range map[string]string{
		`{"ciphertext":"` + ct + `"}`:             `{"plaintext":"","key_version":1}`,
		`{"items":[{"ciphertext":"` + ct + `"}]}`: `{"items":[{"plaintext":"","key_version":1}]}`,
	} {
		code, got, _ := ts.do(t, "POST", "/v1/decrypt/default", api.ContentTypeJSON, strings.NewReader(body), "")
		if code != 200 || string(bytes.TrimSpace(got)) != want {
			t.Errorf("decrypt %.30s…: %d %s, want %s", body, code, got, want)
		}
	}
}
