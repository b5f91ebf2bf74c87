package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// TestLocalRoutes: POST /v1/sealkey answers a sealing key under the latest
// version with the configured limits, and what it seals opens on the
// service; POST /v1/messagekey answers the key of each message it is given
// (one, or a batch with per-item errors), refuses a retired version, and
// both are audited under their own operations without key material or
// context in the log.
func TestLocalRoutes(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, LocalSealMaxAge: 90 * time.Second, LocalSealMaxMessages: 7, LocalSealMaxBytes: 4096})
	req := func(path, body string) (int, []byte, http.Header) {
		return ts.do(t, "POST", path, "application/json", strings.NewReader(body), "")
	}
	code, b, h := req("/v1/sealkey/default", "")
	var sk api.SealingKeyResponse
	if code != 200 || json.Unmarshal(b, &sk) != nil || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("sealkey: %d %s", code, b)
	}
	if sk.Limits != (api.LocalLimits{MaxAge: "1m30s", MaxMessages: 7, MaxBytes: 4096}) || sk.KeyVersion != 1 || len(sk.DataKey) != 32 {
		t.Fatalf("sealkey: %+v", sk)
	}
	if code, b, _ := req("/v1/sealkey/default", `{"bytes":32}`); code != 400 || codeOf(b) != api.CodeBadRequest {
		t.Errorf("sealkey with a field: %d %s", code, b)
	}
	l, err := cryptosvc.NewLocalSealer(cryptosvc.SealingKey{Header: sk.Header, DataKey: sk.DataKey})
	if err != nil {
		t.Fatal(err)
	}
	secretCtx := []byte("context-value-never-logged")
	ct, _ := l.Seal(nil, []byte("hello"), secretCtx)
	var dec api.DecryptResult
	if st := ts.postJSON(t, "/v1/decrypt/default", api.DecryptItem{Ciphertext: ct, Context: secretCtx}, &dec); st != 200 || string(dec.Plaintext) != "hello" {
		t.Fatalf("decrypt of a local seal: %d %+v", st, dec)
	}

	start := ct[:len(sk.Header)+56]
	b64 := base64.StdEncoding.EncodeToString
	body := `{"start":"` + b64(start) + `","context":"` + b64(secretCtx) + `"}`
	code, b, h = req("/v1/messagekey/default", body)
	var mk api.MessageKeyResult
	if code != 200 || json.Unmarshal(b, &mk) != nil || h.Get("Cache-Control") != "no-store" || len(mk.Key) != 32 || len(mk.Nonce) != 12 || mk.KeyVersion != 1 {
		t.Fatalf("messagekey: %d %s", code, b)
	}
	o, err := cryptosvc.NewLocalOpener(cryptosvc.MessageKey{Start: start, Key: mk.Key, Nonce: [12]byte(mk.Nonce), Info: cryptosvc.Info{Version: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := o.Open(ct); err != nil || string(pt) != "hello" {
		t.Fatalf("opened with the message key: %q, %v", pt, err)
	}
	batch := `{"items":[{"start":"` + b64(start) + `","context":"` + b64(secretCtx) + `","reference":"a"},` +
		`{"start":"` + b64(start) + `","reference":"b"},{"reference":"c"},{"start":"` + b64(ct) + `","reference":"d"}]}`
	code, b, _ = req("/v1/messagekey/default", batch)
	var br api.BatchResponse[api.MessageKeyResult]
	if code != 207 || json.Unmarshal(b, &br) != nil || len(br.Items) != 4 {
		t.Fatalf("messagekey batch: %d %s", code, b)
	}
	for i, want := range []api.Code{"", api.CodeDecryptFailed, api.CodeBadRequest, api.CodeMalformed} {
		it := br.Items[i]
		if it.Reference != string(rune('a'+i)) || (want == "") != (it.Error == nil) || it.Error != nil && it.Error.Code != want || want == "" && !bytes.Equal(it.Key, mk.Key) {
			t.Errorf("batch item %d: %+v, want %q", i, it, want)
		}
	}

	// A retired version: no message key.
	if st := ts.postJSON(t, "/v1/keys/default/rotate", map[string]any{}, nil); st != 200 && st != 201 {
		t.Fatalf("rotate: %d", st)
	}
	if code, b, _ := ts.do(t, "PUT", "/v1/keys/default/config", "application/json", strings.NewReader(`{"min_decryption_version":2}`), ""); code != 200 {
		t.Fatalf("retire version 1: %d %s", code, b)
	}
	if code, b, _ := req("/v1/messagekey/default", body); code != 410 || codeOf(b) != api.CodeVersionRetired {
		t.Errorf("messagekey of a retired version: %d %s", code, b)
	}
	code, b, _ = req("/v1/sealkey/default", "{}")
	if code != 200 || json.Unmarshal(b, &sk) != nil || sk.KeyVersion != 2 {
		t.Errorf("sealkey after the rotation: %d, version %d", code, sk.KeyVersion)
	}

	var ops []string
	for _, e := range ts.Logs.All() {
		m := e.ContextMap()
		if op, ok := m["op"].(string); ok && strings.HasSuffix(op, "-local") {
			ops = append(ops, op)
		}
		line, _ := json.Marshal(m)
		for _, secret := range [][]byte{secretCtx, []byte(b64(secretCtx)), mk.Key, []byte(b64(mk.Key)), sk.DataKey, []byte(b64(sk.DataKey))} {
			if bytes.Contains(line, secret) {
				t.Errorf("a log line holds a context value or key material: %s", line)
			}
		}
	}
	if got := strings.Join(ops, " "); got != "encrypt-local decrypt-local decrypt-local decrypt-local encrypt-local" {
		t.Errorf("audited operations %q", got)
	}
}
