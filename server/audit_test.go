package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// A record that cannot be written (a full device) fails the request with
// 503 audit_unavailable and cuts a stream short; failing open answers and
// counts it.
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
