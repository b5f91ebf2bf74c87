package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// auditRecords reads the audit trail's records.
func auditRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// Every audited operation has its record in the audit trail when its
// answer arrives: one operation, a failed one, a batch, a stream. No
// record holds data or context.
func TestAuditTrailRecords(t *testing.T) {
	ts := startTestServer(t, Config{})
	path := filepath.Join(ts.cfg.DataDir, "audit.log")
	secret, ctxValue := "plaintext-never-logged", "context-never-logged"
	ctxB64 := base64.StdEncoding.EncodeToString([]byte(ctxValue))

	var enc api.EncryptResult
	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]any{"plaintext": base64.StdEncoding.EncodeToString([]byte(secret)), "context": ctxB64}, &enc); code != 200 {
		t.Fatalf("encrypt: %d", code)
	}
	if n := len(auditRecords(t, path)); n != 1 {
		t.Fatalf("%d records after one encrypt, want 1", n)
	}
	if code := ts.postJSON(t, "/v1/decrypt/default", map[string]any{"ciphertext": base64.StdEncoding.EncodeToString(enc.Ciphertext)}, nil); code != 400 {
		t.Fatalf("decrypt without its context: %d, want 400", code)
	}
	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]any{"items": []map[string]any{{"plaintext": "AAAA"}, {"plaintext": "AAAA"}}}, nil); code != 200 {
		t.Fatalf("batch: %d", code)
	}
	code, sealed, _ := ts.do(t, "POST", "/v1/encrypt/default", "application/octet-stream", strings.NewReader(strings.Repeat(secret, 5000)), "")
	if code != 200 || len(sealed) == 0 {
		t.Fatalf("stream: %d", code)
	}

	recs := auditRecords(t, path)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4: %v", len(recs), recs)
	}
	want := []map[string]any{
		{"op": "encrypt", "key": "default", "key_version": 1.0, "outcome": "ok", "identity": "admin"},
		{"op": "decrypt", "key": "default", "outcome": "error", "code": "decryption_failed"},
		{"op": "encrypt", "items": 2.0, "failed": 0.0, "outcome": "ok"},
		{"op": "encrypt", "stream": true, "bytes": float64(len(sealed)), "outcome": "ok"}, // a stream's bytes are its answer's

	}
	for i, w := range want {
		for k, v := range w {
			if recs[i][k] != v {
				t.Errorf("record %d: %s = %v, want %v (%v)", i, k, recs[i][k], v, recs[i])
			}
		}
		for _, k := range []string{"time", "request_id", "remote_ip"} {
			if s, _ := recs[i][k].(string); s == "" {
				t.Errorf("record %d has no %s: %v", i, k, recs[i])
			}
		}
	}
	// The HMACs match a record to its ciphertext: the encrypt's and the
	// failed decrypt's name the same salt, and anyone holding the audit key
	// computes them from the ciphertext and the context alone.
	ak, gen, err := ts.cfg.Keystore.(cryptosvc.AuditKeySource).AuditKey()
	if err != nil {
		t.Fatal(err)
	}
	mac := func(label string, v []byte) string {
		h := hmac.New(sha256.New, ak)
		h.Write([]byte(label + "\x00"))
		h.Write(v)
		return hex.EncodeToString(h.Sum(nil)[:16])
	}
	salt := cryptosvc.MessageSalt(enc.Ciphertext)
	if recs[0]["salt_hmac"] != mac("salt", salt) || recs[1]["salt_hmac"] != recs[0]["salt_hmac"] {
		t.Errorf("salt_hmac: encrypt %v, decrypt %v, want %s", recs[0]["salt_hmac"], recs[1]["salt_hmac"], mac("salt", salt))
	}
	if recs[0]["context_hmac"] != mac("context", []byte(ctxValue)) || recs[1]["context_hmac"] != nil {
		t.Errorf("context_hmac: encrypt %v (want %s), decrypt without a context %v", recs[0]["context_hmac"], mac("context", []byte(ctxValue)), recs[1]["context_hmac"])
	}
	if recs[0]["audit_key"] != float64(gen) {
		t.Errorf("audit_key %v, want %d", recs[0]["audit_key"], gen)
	}
	if hs, _ := recs[2]["salt_hmacs"].([]any); len(hs) != 2 || hs[0] == hs[1] {
		t.Errorf("a batch of two: salt_hmacs %v", recs[2]["salt_hmacs"])
	}

	b, _ := os.ReadFile(path)
	for _, s := range []string{secret, ctxValue, ctxB64} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("the audit trail holds %q", s)
		}
	}
}

// A stream's record carries the HMACs a JSON request's does: of the salt
// of the stream it seals, opens or rewraps, so that the records of one
// object match each other and a JSON request's, and of its context. Neither
// appears in clear.
func TestAuditStreamHMACs(t *testing.T) {
	ts := startTestServer(t, Config{})
	path := filepath.Join(ts.cfg.DataDir, "audit.log")
	secret, ctxValue := "stream-plaintext-never-logged", "stream-context-never-logged"
	ctxB64 := base64.StdEncoding.EncodeToString([]byte(ctxValue))
	stream := func(route, ctx string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+route, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Authorization", "Bearer "+ts.Token)
		if ctx != "" {
			req.Header.Set(api.HeaderContext, ctx)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		return resp.StatusCode, b
	}

	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]any{"plaintext": "AAAA", "context": ctxB64}, nil); code != 200 {
		t.Fatalf("JSON encrypt: %d", code)
	}
	plain := []byte(strings.Repeat(secret, 3000)) // several chunks
	code, sealed := stream("/v1/encrypt/default", ctxB64, plain)
	if code != 200 {
		t.Fatalf("stream encrypt: %d", code)
	}
	if code, got := stream("/v1/decrypt/default", ctxB64, sealed); code != 200 || !bytes.Equal(got, plain) {
		t.Fatalf("stream decrypt: %d, %d bytes", code, len(got))
	}
	wrong := base64.StdEncoding.EncodeToString([]byte("another context"))
	if code, _ := stream("/v1/decrypt/default", wrong, sealed); code != 400 {
		t.Fatalf("stream decrypt with another context: %d, want 400", code)
	}
	if code, _ := stream("/v1/decrypt/default?verify=full", ctxB64, sealed); code != 200 {
		t.Fatalf("stream decrypt ?verify=full: %d", code)
	}
	_, hlen, err := cryptosvc.ParseHeader(sealed)
	if err != nil {
		t.Fatal(err)
	}
	firstChunk := sealed[:hlen+56+cryptosvc.ChunkSize+16] // the start and chunk 0
	if code, got := stream("/v1/decrypt/default?range=0-99", ctxB64, firstChunk); code != 200 || !bytes.Equal(got, plain[:100]) {
		t.Fatalf("stream decrypt of a range: %d, %d bytes", code, len(got))
	}
	code, rewrapped := stream("/v1/rewrap/default", "", sealed)
	if code != 200 || len(rewrapped) != len(sealed) {
		t.Fatalf("stream rewrap: %d, %d bytes", code, len(rewrapped))
	}
	// The longest key name makes the longest header: its salt is still
	// found.
	long := strings.Repeat("k", cryptosvc.MaxKeyNameLen)
	if code := ts.postJSON(t, "/v1/keys/"+long, map[string]any{}, nil); code != 201 {
		t.Fatalf("creating a key of the longest name: %d", code)
	}
	code, sealedLong := stream("/v1/encrypt/"+long, "", []byte(secret))
	if code != 200 {
		t.Fatalf("stream encrypt under the longest name: %d", code)
	}

	recs := auditRecords(t, path)
	// One record per request: a stream's, whether it streamed, was
	// refused before it began (the wrong context) or was answered whole
	// (?verify=full), says "stream":true.
	if len(recs) != 9 {
		t.Fatalf("%d records, want 9: %v", len(recs), recs)
	}
	jsonEnc, enc, dec, decWrong, decFull, decRange, rewrapStream, longEnc := recs[0], recs[1], recs[2], recs[3], recs[4], recs[5], recs[6], recs[8]
	for i, r := range []map[string]any{enc, dec, decWrong, decFull, decRange, rewrapStream, longEnc} {
		if r["stream"] != true {
			t.Errorf("record %d is not a stream's: %v", i, r)
		}
	}
	if jsonEnc["stream"] != nil {
		t.Errorf("the JSON encrypt's record says stream: %v", jsonEnc)
	}
	if decWrong["code"] != "decryption_failed" || decFull["op"] != "decrypt" || rewrapStream["op"] != "rewrap" || recs[7]["op"] != "keys-admin" {
		t.Errorf("records out of order: %v", recs)
	}

	ak, gen, err := ts.cfg.Keystore.(cryptosvc.AuditKeySource).AuditKey()
	if err != nil {
		t.Fatal(err)
	}
	mac := func(label string, v []byte) string {
		h := hmac.New(sha256.New, ak)
		h.Write([]byte(label + "\x00"))
		h.Write(v)
		return hex.EncodeToString(h.Sum(nil)[:16])
	}
	salt := cryptosvc.MessageSalt(sealed)
	if salt == nil {
		t.Fatal("the sealed stream has no salt")
	}
	wantSalt := mac("salt", salt)
	for name, r := range map[string]map[string]any{"encrypt": enc, "decrypt": dec, "decrypt with another context": decWrong, "decrypt ?verify=full": decFull, "range decrypt": decRange, "rewrap": rewrapStream} {
		if r["salt_hmac"] != wantSalt {
			t.Errorf("stream %s: salt_hmac %v, want %s", name, r["salt_hmac"], wantSalt)
		}
		if r["audit_key"] != float64(gen) {
			t.Errorf("stream %s: audit_key %v, want %d", name, r["audit_key"], gen)
		}
	}
	if rewrapped := cryptosvc.MessageSalt(rewrapped); !bytes.Equal(rewrapped, salt) {
		t.Errorf("the rewrapped stream's salt differs from the original's")
	}
	// Same context, same HMAC, whichever route: the JSON request's is the
	// reference.
	wantCtx := mac("context", []byte(ctxValue))
	if jsonEnc["context_hmac"] != wantCtx {
		t.Fatalf("JSON encrypt: context_hmac %v, want %s", jsonEnc["context_hmac"], wantCtx)
	}
	for name, r := range map[string]map[string]any{"encrypt": enc, "decrypt": dec, "decrypt ?verify=full": decFull, "range decrypt": decRange} {
		if r["context_hmac"] != jsonEnc["context_hmac"] {
			t.Errorf("stream %s: context_hmac %v, want the JSON request's %v", name, r["context_hmac"], jsonEnc["context_hmac"])
		}
	}
	if decWrong["context_hmac"] != mac("context", []byte("another context")) {
		t.Errorf("stream decrypt with another context: context_hmac %v", decWrong["context_hmac"])
	}
	if rewrapStream["context_hmac"] != nil {
		t.Errorf("stream rewrap without a context: context_hmac %v", rewrapStream["context_hmac"])
	}
	if longEnc["salt_hmac"] != mac("salt", cryptosvc.MessageSalt(sealedLong)) {
		t.Errorf("stream under the longest key name: salt_hmac %v", longEnc["salt_hmac"])
	}

	b, _ := os.ReadFile(path)
	for _, s := range []string{secret, ctxValue, ctxB64, "another context", wrong,
		hex.EncodeToString(salt), base64.StdEncoding.EncodeToString(salt), base64.RawURLEncoding.EncodeToString(salt), string(salt)} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("the audit trail holds %q", s)
		}
	}
}

// A record that cannot be written (a full device) fails the request with
// 503 audit_unavailable and cuts a stream short (fails a short one with the
// same 503); failing open answers and counts it.
func TestAuditUnavailable(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	ts := startTestServer(t, Config{AuditLog: "/dev/full"})
	var e api.Error
	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]any{"plaintext": "AAAA"}, &e); code != 503 || e.Code != api.CodeAuditUnavailable {
		t.Fatalf("encrypt with a full audit trail: %d %s, want 503 audit_unavailable", code, e.Code)
	}
	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]any{"items": []map[string]any{{"plaintext": "AAAA"}}}, &e); code != 503 || e.Code != api.CodeAuditUnavailable {
		t.Fatalf("batch with a full audit trail: %d %s, want 503 audit_unavailable", code, e.Code)
	}
	body := strings.Repeat("x", 1<<20)
	req, _ := http.NewRequest("POST", ts.URL+"/v1/encrypt/default", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+ts.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr == nil && int64(len(got)) == resp.ContentLength {
		t.Fatalf("a stream whose record failed came whole: %d bytes", len(got))
	}
	// A stream whose answer is one piece ends before the answer starts:
	// its record's failure is the JSON error.
	code, b, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, strings.NewReader("short"), "")
	if code != 503 || codeOf(b) != api.CodeAuditUnavailable {
		t.Fatalf("a short stream with a full audit trail: %d %s, want 503 audit_unavailable", code, b)
	}

	open := startTestServer(t, Config{AuditLog: "/dev/full", AuditFailOpen: true})
	if code := open.postJSON(t, "/v1/encrypt/default", map[string]any{"plaintext": "AAAA"}, nil); code != 200 {
		t.Fatalf("encrypt failing open: %d, want 200", code)
	}
	fams, _ := open.scrape(t)
	if f := fams["cipherd_audit_failures_total"]; f == nil || len(f.samples) != 1 || f.samples[0].value != 1 {
		t.Errorf("cipherd_audit_failures_total = %+v, want 1", f)
	}
}

// An audit trail whose file cannot be opened again after rotation (its
// directory gone) fails audited requests with 503 until a reopen
// succeeds; nothing is answered without its record.
func TestAuditReopenFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "audit.log")
	ts := startTestServer(t, Config{AuditLog: path})
	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]any{"plaintext": "AAAA"}, nil); code != 200 {
		t.Fatalf("encrypt: %d", code)
	}
	os.RemoveAll(dir)
	if err := ts.ReopenAuditLog(); err == nil {
		t.Fatal("reopening in a removed directory succeeded")
	}
	var e api.Error
	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]any{"plaintext": "AAAA"}, &e); code != 503 || e.Code != api.CodeAuditUnavailable {
		t.Fatalf("encrypt without an audit file: %d %s, want 503 audit_unavailable", code, e.Code)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := ts.ReopenAuditLog(); err != nil {
		t.Fatal(err)
	}
	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]any{"plaintext": "AAAA"}, nil); code != 200 {
		t.Fatalf("encrypt after the reopen: %d", code)
	}
	if n := len(auditRecords(t, path)); n != 1 {
		t.Errorf("%d records in the reopened file, want 1", n)
	}
}

// A record's time is RFC 3339 in UTC with nine digits of fraction, the
// same instant as time.RFC3339Nano gives, and records sort by their text.
func TestAppendRecordTime(t *testing.T) {
	zone := time.FixedZone("east", 5*3600+30*60)
	times := []time.Time{
		time.Date(2026, 12, 7, 10, 44, 12, 0, time.UTC),
		time.Date(2026, 12, 7, 10, 44, 12, 500000000, time.UTC),
		time.Date(2026, 12, 7, 10, 44, 12, 450000000, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2027, 1, 1, 3, 0, 0, 7, zone),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		times = append(times, time.Unix(r.Int64N(253402300800), r.Int64N(1e9)).In(zone))
	}
	var prev string
	for i, tm := range times {
		got := string(appendRecordTime(nil, tm))
		if tm.Year() > 9999 { // RFC 3339 has no such years: Go's own form
			if want := tm.UTC().Format(time.RFC3339Nano); got != want {
				t.Fatalf("%v: %q, want %q", tm, got, want)
			}
			continue
		}
		back, err := time.Parse(time.RFC3339Nano, got)
		if err != nil || !back.Equal(tm) {
			t.Fatalf("%v: %q parses as %v, %v", tm, got, back, err)
		}
		if len(got) != len("2006-01-02T15:04:05.000000000Z") || !strings.HasSuffix(got, "Z") {
			t.Fatalf("%v: %q is not fixed-width UTC", tm, got)
		}
		if i == 2 && got >= prev { // .45 after .5: the text sorts as the times
			t.Fatalf("%q sorts after %q", got, prev)
		}
		prev = got
	}
}
