package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// lifecycleServer is a test server with a key "life" (deletion allowed)
// and what it sealed: a JSON ciphertext and a stream under version 1.
type lifecycleServer struct {
	*testServer
	ct, stream []byte
}

func startLifecycleServer(t *testing.T, cfg Config) *lifecycleServer {
	t.Helper()
	cfg.SkipBenchmark = true
	ts := startTestServer(t, cfg)
	if code := ts.postJSON(t, "/v1/keys/life", api.CreateKeyRequest{KeyConfig: api.KeyConfig{DeletionAllowed: true}}, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	ls := &lifecycleServer{testServer: ts}
	ls.ct = ls.encrypt(t, 200, "")
	ls.stream = ls.encryptStream(t, 200, "")
	return ls
}

// encrypt encrypts "secret" under life as JSON and expects code (with
// errCode when it is an error); it returns the ciphertext.
func (ls *lifecycleServer) encrypt(t *testing.T, code int, want api.Code) []byte {
	t.Helper()
	var r api.EncryptResult
	got, b, _ := ls.do(t, "POST", "/v1/encrypt/life", api.ContentTypeJSON, strings.NewReader(`{"plaintext":"c2VjcmV0"}`), "")
	checkReply(t, "JSON encrypt", got, b, code, want)
	if code == 200 {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
	}
	return r.Ciphertext
}

func (ls *lifecycleServer) encryptStream(t *testing.T, code int, want api.Code) []byte {
	t.Helper()
	got, b, _ := ls.do(t, "POST", "/v1/encrypt/life", api.ContentTypeStream, bytes.NewReader(bytes.Repeat([]byte("s"), 40_000)), "")
	checkReply(t, "stream encrypt", got, b, code, want)
	return b
}

func (ls *lifecycleServer) decrypt(t *testing.T, ct []byte, code int, want api.Code) {
	t.Helper()
	body, _ := json.Marshal(api.DecryptItem{Ciphertext: ct})
	got, b, _ := ls.do(t, "POST", "/v1/decrypt/life", api.ContentTypeJSON, bytes.NewReader(body), "")
	checkReply(t, "JSON decrypt", got, b, code, want)
	if code == 200 {
		var r api.DecryptResult
		if json.Unmarshal(b, &r) != nil || string(r.Plaintext) != "secret" {
			t.Errorf("JSON decrypt: %s", b)
		}
	}
}

func (ls *lifecycleServer) decryptStream(t *testing.T, ct []byte, code int, want api.Code) {
	t.Helper()
	got, b, _ := ls.do(t, "POST", "/v1/decrypt/life", api.ContentTypeStream, bytes.NewReader(ct), "")
	checkReply(t, "stream decrypt", got, b, code, want)
	if code == 200 && !bytes.Equal(b, bytes.Repeat([]byte("s"), 40_000)) {
		t.Errorf("stream decrypt: %d bytes of plaintext", len(b))
	}
}

// key describes life.
func (ls *lifecycleServer) key(t *testing.T) api.Key {
	t.Helper()
	code, b, _ := ls.do(t, "GET", "/v1/keys/life", "", nil, "")
	var k api.Key
	if code != 200 || json.Unmarshal(b, &k) != nil {
		t.Fatalf("describe: %d %s", code, b)
	}
	return k
}

// admin sends a key administration request and expects code (with the
// error code want); it returns the key it answers, on success.
func (ls *lifecycleServer) admin(t *testing.T, method, path, body string, code int, want api.Code) api.Key {
	t.Helper()
	ct := ""
	if body != "" {
		ct = api.ContentTypeJSON
	}
	got, b, _ := ls.do(t, method, path, ct, strings.NewReader(body), "")
	checkReply(t, method+" "+path, got, b, code, want)
	var k api.Key
	if code == 200 {
		if err := json.Unmarshal(b, &k); err != nil {
			t.Fatalf("%s %s: %s", method, path, b)
		}
	}
	return k
}

func checkReply(t *testing.T, what string, got int, body []byte, code int, want api.Code) {
	t.Helper()
	if got != code || want != "" && codeOf(body) != want {
		t.Errorf("%s: %d %.200s, want %d %s", what, got, body, code, want)
	}
}

// A scheduled deletion: bad waits refused, the key refused to every
// operation meanwhile with its delete_at in the message, still described
// and listed, counted in /metrics, then restored by a cancel.
func TestScheduledDeletionHTTP(t *testing.T) {
	ls := startLifecycleServer(t, Config{})
	for _, tc := range []struct {
		query string
		code  int
		want  api.Code
	}{
		{"?wait=1h", 400, api.CodeInvalidDeletionWait},
		{"?wait=0", 403, api.CodeImmediateDeletionDisallowed},
		{"?wait=0s", 403, api.CodeImmediateDeletionDisallowed},
		{"?wait=7", 400, api.CodeInvalidParameter},
		{"?wait=-200h", 400, api.CodeInvalidParameter},
		{"?wait=", 400, api.CodeInvalidParameter},
		{"?wait=200h&wait=200h", 400, api.CodeInvalidParameter},
		{"?days=30", 400, api.CodeInvalidParameter},
	} {
		ls.admin(t, "DELETE", "/v1/keys/life"+tc.query, "", tc.code, tc.want)
	}
	if k := ls.key(t); k.Deletion != nil {
		t.Fatalf("refused deletions scheduled one: %+v", k.Deletion)
	}
	ls.admin(t, "DELETE", "/v1/keys/default", "", 409, api.CodeDeletionNotAllowed)

	k := ls.admin(t, "DELETE", "/v1/keys/life", "", 200, "")
	if k.Deletion == nil || k.Deletion.DeleteAt.Sub(k.Deletion.Scheduled) != DefaultKeyDeletionWait || k.LatestVersion != 1 {
		t.Fatalf("scheduled with the default wait: %+v", k)
	}
	deleteAt := k.Deletion.DeleteAt.Format(time.RFC3339Nano)
	pending := func(what string, code int, b []byte) {
		t.Helper()
		var e api.Error
		if code != 409 || json.Unmarshal(b, &e) != nil || e.Code != api.CodeKeyPendingDeletion || !strings.Contains(e.Message, deleteAt) {
			t.Errorf("%s while pending: %d %.300s; want 409 key_pending_deletion naming %s", what, code, b, deleteAt)
		}
	}
	post := func(path, ctype string, body []byte) (int, []byte) {
		code, b, _ := ls.do(t, "POST", path, ctype, bytes.NewReader(body), "")
		return code, b
	}
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }
	start, err := cryptosvc.StreamStart(bytes.NewReader(ls.stream), int64(len(ls.stream)))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		what, path, ctype string
		body              []byte
	}{
		{"JSON encrypt", "/v1/encrypt/life", api.ContentTypeJSON, js(api.EncryptItem{Plaintext: []byte("x")})},
		{"stream encrypt", "/v1/encrypt/life", api.ContentTypeStream, []byte("x")},
		{"JSON decrypt", "/v1/decrypt/life", api.ContentTypeJSON, js(api.DecryptItem{Ciphertext: ls.ct})},
		{"stream decrypt", "/v1/decrypt/life", api.ContentTypeStream, ls.stream},
		{"JSON rewrap", "/v1/rewrap/life", api.ContentTypeJSON, js(api.DecryptItem{Ciphertext: ls.ct})},
		{"stream rewrap", "/v1/rewrap/life", api.ContentTypeStream, ls.stream},
		{"data key", "/v1/datakey/life", api.ContentTypeJSON, []byte(`{}`)},
		{"sealing key", "/v1/sealkey/life", api.ContentTypeJSON, nil},
		{"message key", "/v1/messagekey/life", api.ContentTypeJSON, js(api.MessageKeyRequest{Start: ls.stream[:start]})},
		{"rotate", "/v1/keys/life/rotate", api.ContentTypeJSON, nil},
		{"disable", "/v1/keys/life/versions/1/disable", "", nil},
		{"trim", "/v1/keys/life/trim", api.ContentTypeJSON, []byte(`{"min_available_version":2,"confirm":"life"}`)},
	} {
		code, b := post(r.path, r.ctype, r.body)
		pending(r.what, code, b)
	}
	// Batches: every item is refused with the code and the time.
	code, b := post("/v1/encrypt/life", api.ContentTypeJSON, js(api.EncryptRequest{Items: []api.EncryptItem{{Plaintext: []byte("a")}, {Plaintext: []byte("b")}}}))
	var batch api.BatchResponse[api.EncryptResult]
	if code != 409 || json.Unmarshal(b, &batch) != nil || len(batch.Items) != 2 || batch.Items[1].Error == nil ||
		batch.Items[1].Error.Code != api.CodeKeyPendingDeletion || !strings.Contains(batch.Items[1].Error.Message, deleteAt) {
		t.Errorf("batch encrypt while pending: %d %s", code, b)
	}
	code, b, _ = ls.do(t, "PUT", "/v1/keys/life/config", api.ContentTypeJSON, strings.NewReader(`{"rotation_period":"720h"}`), "")
	pending("configure", code, b)
	code, b, _ = ls.do(t, "DELETE", "/v1/keys/life", "", nil, "")
	pending("a second DELETE", code, b)

	// Still described and listed, and counted.
	if k := ls.key(t); k.Deletion == nil || k.Deletion.DeleteAt.Format(time.RFC3339Nano) != deleteAt || len(k.Versions) != 1 {
		t.Fatalf("described while pending: %+v", k)
	}
	code, b, _ = ls.do(t, "GET", "/v1/keys", "", nil, "")
	var list api.KeyList
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list.Keys) != 2 || list.Keys[1].Name != "life" || list.Keys[1].Deletion == nil || list.Keys[0].Deletion != nil {
		t.Fatalf("listed while pending: %d %s", code, b)
	}
	fams, _ := ls.scrape(t)
	if v := fams["cipherd_keys_pending_deletion"].value("cipherd_keys_pending_deletion", nil); v != 1 {
		t.Errorf("cipherd_keys_pending_deletion %v while one key is pending, want 1", v)
	}

	// Cancelled: everything serves again, the version it had intact.
	if k := ls.admin(t, "POST", "/v1/keys/life/cancel-deletion", "", 200, ""); k.Deletion != nil || k.LatestVersion != 1 {
		t.Fatalf("cancel: %+v", k)
	}
	ls.admin(t, "POST", "/v1/keys/life/cancel-deletion", "", 409, api.CodeKeyNotPendingDeletion)
	ls.decrypt(t, ls.ct, 200, "")
	ls.decryptStream(t, ls.stream, 200, "")
	ls.encrypt(t, 200, "")
	fams, _ = ls.scrape(t)
	if v := fams["cipherd_keys_pending_deletion"].value("cipherd_keys_pending_deletion", nil); v != 0 {
		t.Errorf("cipherd_keys_pending_deletion %v after the cancel, want 0", v)
	}

	// The audit trail has who scheduled and who cancelled.
	var actions []string
	for _, r := range auditRecords(t, filepath.Join(ls.cfg.DataDir, "audit.log")) {
		if r["op"] == "keys-admin" && r["key"] == "life" && r["outcome"] == "ok" {
			if r["identity"] != "admin" {
				t.Errorf("record %v: identity %v", r, r["identity"])
			}
			actions = append(actions, r["action"].(string))
		}
	}
	if want := []string{"create", "schedule-deletion", "cancel-deletion"}; !slices.Equal(actions, want) {
		t.Errorf("audit actions %v, want %v", actions, want)
	}
}

// With allow_immediate_key_deletion, ?wait=0 deletes at once; a wait is
// still scheduled.
func TestImmediateDeletionAllowed(t *testing.T) {
	ls := startLifecycleServer(t, Config{AllowImmediateKeyDeletion: true, KeyDeletionMinWait: time.Hour})
	if k := ls.admin(t, "DELETE", "/v1/keys/life?wait=90m", "", 200, ""); k.Deletion == nil || k.Deletion.DeleteAt.Sub(k.Deletion.Scheduled) != 90*time.Minute {
		t.Fatalf("scheduled: %+v", k.Deletion)
	}
	ls.admin(t, "DELETE", "/v1/keys/life?wait=0", "", 409, api.CodeKeyPendingDeletion)
	ls.admin(t, "POST", "/v1/keys/life/cancel-deletion", "", 200, "")
	if code, b, _ := ls.do(t, "DELETE", "/v1/keys/life?wait=0", "", nil, ""); code != 204 || len(b) != 0 {
		t.Fatalf("immediate deletion: %d %s", code, b)
	}
	if code, b, _ := ls.do(t, "GET", "/v1/keys/life", "", nil, ""); code != 404 || codeOf(b) != api.CodeKeyNotFound {
		t.Fatalf("after the immediate deletion: %d %s", code, b)
	}
	ls.decrypt(t, ls.ct, 404, api.CodeKeyNotFound)
}

// A disabled version neither seals nor opens, as JSON and as a stream, and
// says which version; enabled again, it does both.
func TestDisabledVersionHTTP(t *testing.T) {
	ls := startLifecycleServer(t, Config{})
	ls.admin(t, "POST", "/v1/keys/life/rotate", "", 200, "")
	ct2 := ls.encrypt(t, 200, "")
	stream2 := ls.encryptStream(t, 200, "")

	versionCode := func(what string, code int, b []byte, v string) {
		t.Helper()
		var e api.Error
		if code != 409 || json.Unmarshal(b, &e) != nil || e.Code != api.CodeVersionDisabled || !strings.Contains(e.Message, "version "+v+" ") {
			t.Errorf("%s: %d %s; want 409 key_version_disabled naming version %s", what, code, b, v)
		}
	}
	if k := ls.admin(t, "POST", "/v1/keys/life/versions/1/disable", "", 200, ""); !slices.Equal(k.DisabledVersions, []uint32{1}) {
		t.Fatalf("disable 1: %+v", k)
	}
	for _, p := range []struct {
		ct     []byte
		stream bool
	}{{ls.ct, false}, {ls.stream, true}} {
		ctype, body := api.ContentTypeStream, p.ct
		if !p.stream {
			ctype, body = api.ContentTypeJSON, []byte(`{"ciphertext":"`+base64.StdEncoding.EncodeToString(p.ct)+`"}`)
		}
		code, b, _ := ls.do(t, "POST", "/v1/decrypt/life", ctype, bytes.NewReader(body), "")
		versionCode("decrypt of version 1", code, b, "1")
	}
	ls.decrypt(t, ct2, 200, "")
	ls.decryptStream(t, stream2, 200, "")
	ls.encrypt(t, 200, "")

	// The latest disabled: nothing seals, none falls back to version 1
	// (enabled again).
	ls.admin(t, "POST", "/v1/keys/life/versions/1/enable", "", 200, "")
	if k := ls.admin(t, "POST", "/v1/keys/life/versions/2/disable", "", 200, ""); !slices.Equal(k.DisabledVersions, []uint32{2}) {
		t.Fatalf("disable 2: %+v", k)
	}
	if k := ls.key(t); !slices.Equal(k.DisabledVersions, []uint32{2}) {
		t.Fatalf("described: %+v", k)
	}
	code, b, _ := ls.do(t, "POST", "/v1/encrypt/life", api.ContentTypeJSON, strings.NewReader(`{"plaintext":"c2VjcmV0"}`), "")
	versionCode("JSON encrypt with version 2 disabled", code, b, "2")
	code, b, _ = ls.do(t, "POST", "/v1/encrypt/life", api.ContentTypeStream, strings.NewReader("x"), "")
	versionCode("stream encrypt with version 2 disabled", code, b, "2")
	code, b, _ = ls.do(t, "POST", "/v1/decrypt/life", api.ContentTypeStream, bytes.NewReader(stream2), "")
	versionCode("stream decrypt of version 2", code, b, "2")
	ls.decrypt(t, ls.ct, 200, "")
	ls.decryptStream(t, ls.stream, 200, "")

	if k := ls.admin(t, "POST", "/v1/keys/life/versions/2/enable", "", 200, ""); k.DisabledVersions != nil {
		t.Fatalf("enable 2: %+v", k)
	}
	ls.encrypt(t, 200, "")
	ls.decryptStream(t, stream2, 200, "")

	for _, bad := range []struct {
		v    string
		code int
		want api.Code
	}{{"0", 400, api.CodeBadRequest}, {"x", 400, api.CodeBadRequest}, {"-1", 400, api.CodeBadRequest}, {"4294967296", 400, api.CodeBadRequest}, {"3", 404, api.CodeKeyNotFound}} {
		ls.admin(t, "POST", "/v1/keys/life/versions/"+bad.v+"/disable", "", bad.code, bad.want)
	}
	ls.admin(t, "GET", "/v1/keys/life/versions/1/disable", "", 405, api.CodeMethodNotAllowed)
}

// A trim needs its confirmation and retired versions only; afterwards the
// destroyed versions' ciphertexts are refused as such.
func TestTrimHTTP(t *testing.T) {
	ls := startLifecycleServer(t, Config{})
	for range 2 {
		ls.admin(t, "POST", "/v1/keys/life/rotate", "", 200, "")
	}
	ct3 := ls.encrypt(t, 200, "")
	for _, tc := range []struct {
		body string
		code int
		want api.Code
	}{
		{`{"min_available_version":2}`, 400, api.CodeTrimNotConfirmed},
		{`{"min_available_version":2,"confirm":"LIFE"}`, 400, api.CodeTrimNotConfirmed},
		{`{"min_available_version":2,"confirm":"life "}`, 400, api.CodeTrimNotConfirmed},
		{`{"min_available_version":2,"confirm":"life"}`, 409, api.CodeTrimAboveMinDecryption},
		{`{"min_available_version":2,"confirm":"life","force":true}`, 400, api.CodeBadRequest},
	} {
		ls.admin(t, "POST", "/v1/keys/life/trim", tc.body, tc.code, tc.want)
	}
	if code, b, _ := ls.do(t, "PUT", "/v1/keys/life/config", api.ContentTypeJSON, strings.NewReader(`{"min_decryption_version":2}`), ""); code != 200 {
		t.Fatalf("retire version 1: %d %s", code, b)
	}
	ls.admin(t, "POST", "/v1/keys/life/trim", `{"min_available_version":3,"confirm":"life"}`, 409, api.CodeTrimAboveMinDecryption)
	ls.admin(t, "POST", "/v1/keys/life/trim", `{"min_available_version":1,"confirm":"life"}`, 400, api.CodeInvalidConfig)
	if k := ls.key(t); k.MinAvailableVersion != 1 || len(k.Versions) != 3 {
		t.Fatalf("refused trims changed the key: %+v", k)
	}
	k := ls.admin(t, "POST", "/v1/keys/life/trim", `{"min_available_version":2,"confirm":"life"}`, 200, "")
	if k.MinAvailableVersion != 2 || len(k.Versions) != 2 || k.Versions[0].Version != 2 || k.LatestVersion != 3 {
		t.Fatalf("trimmed: %+v", k)
	}
	ls.decrypt(t, ls.ct, 409, api.CodeVersionDestroyed)
	ls.decryptStream(t, ls.stream, 409, api.CodeVersionDestroyed)
	ls.decrypt(t, ct3, 200, "")
	ls.admin(t, "POST", "/v1/keys/life/trim", `{"min_available_version":2,"confirm":"life"}`, 400, api.CodeInvalidConfig)
	if code, b, _ := ls.do(t, "PUT", "/v1/keys/life/config", api.ContentTypeJSON, strings.NewReader(`{"min_decryption_version":null}`), ""); code != 400 || codeOf(b) != api.CodeInvalidConfig {
		t.Fatalf("min_decryption_version below the trim: %d %s", code, b)
	}
	if k := ls.admin(t, "POST", "/v1/keys/life/rotate", "", 200, ""); k.LatestVersion != 4 || k.MinAvailableVersion != 2 {
		t.Fatalf("rotate after the trim: %+v", k)
	}
	var recs int
	for _, r := range auditRecords(t, filepath.Join(ls.cfg.DataDir, "audit.log")) {
		if r["action"] == "trim" && r["outcome"] == "ok" && r["key_version"] == 2.0 {
			recs++
		}
	}
	if recs != 1 {
		t.Errorf("%d audit records of the trim, want 1", recs)
	}
}
