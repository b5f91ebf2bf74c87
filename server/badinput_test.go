package server

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/proctest"
)

// The bad-input suite: every malformed, hostile or unlucky request gets its
// documented status and code in the one error shape, and the server stays up
// with bounded memory. Limits are set small so that crossing them is cheap.

const (
	badMaxJSONBody   = 4 << 10
	badMaxBatchItems = 3
	badMaxVerifyFull = 32 << 10
)

// badSensitive is what the table's plaintexts and contexts are made of; no
// error message may echo it, in the clear or in base64.
var badSensitive = []string{"SENSITIVE", badB64("SENSITIVE")[:12]}

func badB64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func badJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// badCase is one row of the bad-input table.
type badCase struct {
	name   string
	method string
	path   string
	// header overrides the defaults (admin bearer token, Content-Type:
	// application/json); an empty value removes the header.
	header map[string]string
	body   []byte
	status int
	code   api.Code
	// batch: the body is a batch response whose first item carries code.
	batch bool
}

// stream is the header set of an octet-stream request.
func badStream(kv ...string) map[string]string {
	h := map[string]string{"Content-Type": api.ContentTypeStream}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

// badFixtures are ciphertexts and keys the table needs.
type badFixtures struct {
	ct, ct2, ctOther, ctRetired []byte // one-shot, under default (ct, ct2 same length), other, retiring v1
	hdrLen, otherHdrLen         int    // header lengths of ct and ctOther
	sct, sctMid, sctSmall       []byte // streams under default: 100, 40 and 10 KiB
	sctOther                    []byte // a 1 KiB stream under other
	sHdrLen                     int    // header length of sct
}

func newBadFixtures(t *testing.T, ts *testServer) *badFixtures {
	t.Helper()
	f := &badFixtures{}
	for _, k := range []string{"other", "retiring"} {
		if code, body, _ := ts.do(t, "POST", "/v1/keys/"+k, "", nil, ""); code != 201 {
			t.Fatalf("create %s: %d %s", k, code, body)
		}
	}
	seal := func(key, pt, ctx string) []byte {
		var res api.EncryptResult
		req := api.EncryptRequest{EncryptItem: api.EncryptItem{Plaintext: []byte(pt), Context: []byte(ctx)}}
		if code := ts.postJSON(t, "/v1/encrypt/"+key, req, &res); code != 200 {
			t.Fatalf("encrypt under %s: %d", key, code)
		}
		return res.Ciphertext
	}
	f.ct = seal("default", "SENSITIVE-PLAINTEXT", "SENSITIVE-CONTEXT")
	f.ct2 = seal("default", "SENSITIVE-PLAINTEXX", "SENSITIVE-CONTEXT")
	f.ctOther = seal("other", "SENSITIVE-PLAINTEXT", "SENSITIVE-CONTEXT")
	f.ctRetired = seal("retiring", "SENSITIVE-PLAINTEXT", "SENSITIVE-CONTEXT")
	if code, body, _ := ts.do(t, "POST", "/v1/keys/retiring/rotate", "", nil, ""); code != 200 {
		t.Fatalf("rotate: %d %s", code, body)
	}
	if code, body, _ := ts.do(t, "PUT", "/v1/keys/retiring/config", api.ContentTypeJSON, strings.NewReader(`{"min_decryption_version":2}`), ""); code != 200 {
		t.Fatalf("retire v1: %d %s", code, body)
	}
	_, n, err := cryptosvc.ParseHeader(f.ct)
	if err != nil {
		t.Fatal(err)
	}
	f.hdrLen = n
	if _, f.otherHdrLen, err = cryptosvc.ParseHeader(f.ctOther); err != nil {
		t.Fatal(err)
	}
	sealStream := func(key string, size int) []byte {
		pt := make([]byte, size)
		rand.Read(pt)
		code, ct, _ := ts.do(t, "POST", "/v1/encrypt/"+key, api.ContentTypeStream, bytes.NewReader(pt), "")
		if code != 200 {
			t.Fatalf("stream encrypt under %s: %d %s", key, code, ct)
		}
		return ct
	}
	f.sct = sealStream("default", 100<<10)
	f.sctMid = sealStream("default", 40<<10) // over MaxVerifyFull, under fiber's 64 KiB prefetch
	f.sctSmall = sealStream("default", 10<<10)
	f.sctOther = sealStream("other", 1<<10)
	if _, f.sHdrLen, err = cryptosvc.ParseHeader(f.sct); err != nil {
		t.Fatal(err)
	}
	return f
}

func badFlip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x01
	return c
}

func badConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func badInputTable(t *testing.T, f *badFixtures) []badCase {
	pt := badB64("SENSITIVE-PLAINTEXT")
	ctx := badB64("SENSITIVE-CONTEXT")
	enc := func(v any) []byte { return badJSON(t, v) }
	dec := func(ct []byte, ctx string) []byte {
		return []byte(fmt.Sprintf(`{"ciphertext":%q,"context":%q}`, base64.StdEncoding.EncodeToString(ct), ctx))
	}
	bigItem := strings.Repeat("A", badMaxJSONBody) // base64 of 3 KiB of zeros
	prefix := f.hdrLen + 24 + 32                   // header, salt, commitment
	long := strings.Repeat("k", 129)
	return []badCase{
		// JSON syntax and shape
		{name: "malformed JSON", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"` + pt), status: 400, code: api.CodeBadRequest},
		{name: "not an object", method: "POST", path: "/v1/encrypt/default", body: []byte(`["` + pt + `"]`), status: 400, code: api.CodeBadRequest},
		{name: "trailing data", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"` + pt + `"} {"plaintext":"` + pt + `"}`), status: 400, code: api.CodeBadRequest},
		{name: "trailing garbage", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"` + pt + `"}x`), status: 400, code: api.CodeBadRequest},
		{name: "unknown field", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"` + pt + `","aad":"` + ctx + `"}`), status: 400, code: api.CodeBadRequest},
		{name: "empty body", method: "POST", path: "/v1/encrypt/default", body: nil, status: 400, code: api.CodeBadRequest},
		{name: "bad base64 plaintext", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"` + pt[:12] + `!!"}`), status: 400, code: api.CodeBadRequest},
		{name: "url-safe base64 plaintext", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"U0VOU0lUSVZF__8-"}`), status: 400, code: api.CodeBadRequest},
		{name: "bad base64 context", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"` + pt + `","context":"` + ctx[:12] + `*"}`), status: 400, code: api.CodeBadRequest},
		{name: "bad base64 ciphertext", method: "POST", path: "/v1/decrypt/default", body: []byte(`{"ciphertext":"` + pt[:12] + `%%%%"}`), status: 400, code: api.CodeBadRequest},
		{name: "number for plaintext", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":12345}`), status: 400, code: api.CodeBadRequest},
		{name: "object for context", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"` + pt + `","context":{"a":"` + ctx + `"}}`), status: 400, code: api.CodeBadRequest},
		{name: "string for items", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"items":"` + pt + `"}`), status: 400, code: api.CodeBadRequest},
		{name: "missing plaintext", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"context":"` + ctx + `"}`), status: 400, code: api.CodeBadRequest},
		{name: "null document", method: "POST", path: "/v1/encrypt/default", body: []byte(`null`), status: 400, code: api.CodeBadRequest},
		{name: "missing ciphertext", method: "POST", path: "/v1/decrypt/default", body: []byte(`{"context":"` + ctx + `"}`), status: 400, code: api.CodeBadRequest},
		{name: "batch with top-level fields", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"` + pt + `","items":[{"plaintext":"` + pt + `"}]}`), status: 400, code: api.CodeBadRequest},
		{name: "decrypt batch with top-level context", method: "POST", path: "/v1/decrypt/default", body: []byte(`{"context":"` + ctx + `","items":[{"ciphertext":"` + base64.StdEncoding.EncodeToString(f.ct) + `"}]}`), status: 400, code: api.CodeBadRequest},
		{name: "batch over max items", method: "POST", path: "/v1/encrypt/default", body: enc(api.EncryptRequest{Items: make([]api.EncryptItem, badMaxBatchItems+1)}), status: 413, code: api.CodeTooLarge},
		{name: "body over max JSON body", method: "POST", path: "/v1/encrypt/default", body: []byte(`{"plaintext":"` + bigItem + `"}`), status: 413, code: api.CodeTooLarge},
		{name: "batch body over max JSON body", method: "POST", path: "/v1/decrypt/default", body: []byte(`{"items":[{"ciphertext":"` + bigItem[:2048] + `"},{"ciphertext":"` + bigItem[:2048] + `"}]}`), status: 413, code: api.CodeTooLarge},
		{name: "batch all items fail", method: "POST", path: "/v1/decrypt/default", body: []byte(`{"items":[{"ciphertext":"` + base64.StdEncoding.EncodeToString(f.ct) + `"},{"ciphertext":"` + base64.StdEncoding.EncodeToString(f.ct2) + `"}]}`), status: 400, code: api.CodeDecryptFailed, batch: true},

		// media types
		{name: "text/plain", method: "POST", path: "/v1/encrypt/default", header: map[string]string{"Content-Type": "text/plain"}, body: []byte(`{"plaintext":"` + pt + `"}`), status: 415, code: api.CodeUnsupportedMedia},
		{name: "form (curl -d default)", method: "POST", path: "/v1/encrypt/default", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: []byte(`{"plaintext":"` + pt + `"}`), status: 415, code: api.CodeUnsupportedMedia},
		{name: "no Content-Type", method: "POST", path: "/v1/decrypt/default", header: map[string]string{"Content-Type": ""}, body: dec(f.ct, ctx), status: 415, code: api.CodeUnsupportedMedia},
		{name: "octet-stream on datakey", method: "POST", path: "/v1/datakey/default", header: badStream(), body: []byte("0123456789"), status: 415, code: api.CodeUnsupportedMedia},

		// keys and key names
		{name: "unknown key", method: "POST", path: "/v1/encrypt/nosuchkey", body: []byte(`{"plaintext":"` + pt + `"}`), status: 404, code: api.CodeKeyNotFound},
		{name: "unknown key, 128-char name", method: "POST", path: "/v1/encrypt/" + long[:128], body: []byte(`{"plaintext":"` + pt + `"}`), status: 404, code: api.CodeKeyNotFound},
		{name: "key name of 129 chars", method: "POST", path: "/v1/encrypt/" + long, body: []byte(`{"plaintext":"` + pt + `"}`), status: 400, code: api.CodeInvalidKeyName},
		{name: "key name starting with a dot", method: "POST", path: "/v1/encrypt/.hidden", body: []byte(`{"plaintext":"` + pt + `"}`), status: 400, code: api.CodeInvalidKeyName},
		{name: "key name starting with a dash", method: "GET", path: "/v1/keys/-x", status: 400, code: api.CodeInvalidKeyName},
		{name: "key name with percent-encoded slash", method: "POST", path: "/v1/encrypt/a%2Fdefault", body: []byte(`{"plaintext":"` + pt + `"}`), status: 400, code: api.CodeInvalidKeyName},
		{name: "key name with percent-encoded dot-dot", method: "POST", path: "/v1/keys/%2e%2e", status: 400, code: api.CodeInvalidKeyName},
		{name: "unicode key name", method: "POST", path: "/v1/encrypt/d%C3%A9faut", body: []byte(`{"plaintext":"` + pt + `"}`), status: 400, code: api.CodeInvalidKeyName},
		{name: "key name with a space", method: "POST", path: "/v1/keys/a%20b", status: 400, code: api.CodeInvalidKeyName},
		{name: "describe unknown key", method: "GET", path: "/v1/keys/nosuchkey", status: 404, code: api.CodeKeyNotFound},
		{name: "create existing key", method: "POST", path: "/v1/keys/default", header: map[string]string{"Content-Type": ""}, status: 409, code: api.CodeKeyExists},
		{name: "delete without deletion_allowed", method: "DELETE", path: "/v1/keys/default", status: 409, code: api.CodeDeletionNotAllowed},
		{name: "unknown AEAD in key config", method: "PUT", path: "/v1/keys/default/config", body: []byte(`{"aead":"rot13"}`), status: 400, code: api.CodeInvalidConfig},
		{name: "unknown AEAD in a new key", method: "POST", path: "/v1/keys/newkey", body: []byte(`{"allowed_aeads":["des-cbc"]}`), status: 400, code: api.CodeInvalidConfig},
		{name: "bad rotation period", method: "PUT", path: "/v1/keys/default/config", body: []byte(`{"rotation_period":"soon"}`), status: 400, code: api.CodeInvalidConfig},
		{name: "min decryption version above latest", method: "PUT", path: "/v1/keys/default/config", body: []byte(`{"min_decryption_version":99}`), status: 400, code: api.CodeInvalidConfig},
		{name: "import of 16 bytes", method: "POST", path: "/v1/keys/imported", body: []byte(`{"import":"` + base64.StdEncoding.EncodeToString(make([]byte, 16)) + `"}`), status: 400, code: api.CodeInvalidConfig},
		{name: "rotate unknown key", method: "POST", path: "/v1/keys/nosuchkey/rotate", status: 404, code: api.CodeKeyNotFound},
		{name: "datakey with bad size", method: "POST", path: "/v1/datakey/default", body: []byte(`{"bytes":7}`), status: 400, code: api.CodeBadRequest},
		{name: "datakey with negative size", method: "POST", path: "/v1/datakey/default", body: []byte(`{"bytes":-32}`), status: 400, code: api.CodeBadRequest},
		{name: "datakey with string size", method: "POST", path: "/v1/datakey/default", body: []byte(`{"bytes":"32"}`), status: 400, code: api.CodeBadRequest},
		{name: "datakey under unknown key", method: "POST", path: "/v1/datakey/nosuchkey", body: []byte(`{}`), status: 404, code: api.CodeKeyNotFound},

		// ciphertexts
		{name: "wrong context", method: "POST", path: "/v1/decrypt/default", body: dec(f.ct, badB64("SENSITIVE-CONTEXX")), status: 400, code: api.CodeDecryptFailed},
		{name: "missing context", method: "POST", path: "/v1/decrypt/default", body: dec(f.ct, ""), status: 400, code: api.CodeDecryptFailed},
		{name: "truncated inside the header", method: "POST", path: "/v1/decrypt/default", body: dec(f.ct[:f.hdrLen-3], ctx), status: 400, code: api.CodeTruncated},
		{name: "truncated inside the commitment", method: "POST", path: "/v1/decrypt/default", body: dec(f.ct[:prefix-1], ctx), status: 400, code: api.CodeTruncated},
		{name: "truncated by one byte", method: "POST", path: "/v1/decrypt/default", body: dec(f.ct[:len(f.ct)-1], ctx), status: 400, code: api.CodeDecryptFailed},
		{name: "empty ciphertext", method: "POST", path: "/v1/decrypt/default", body: dec(nil, ctx), status: 400, code: api.CodeTruncated},
		{name: "tampered tag", method: "POST", path: "/v1/decrypt/default", body: dec(badFlip(f.ct, len(f.ct)-1), ctx), status: 400, code: api.CodeDecryptFailed},
		{name: "tampered salt", method: "POST", path: "/v1/decrypt/default", body: dec(badFlip(f.ct, f.hdrLen), ctx), status: 400, code: api.CodeDecryptFailed},
		{name: "key version zero", method: "POST", path: "/v1/decrypt/default", body: dec(badConcat(f.ct[:f.hdrLen-1], []byte{0}, f.ct[f.hdrLen:]), ctx), status: 400, code: api.CodeMalformed},
		{name: "key version that does not exist", method: "POST", path: "/v1/decrypt/default", body: dec(badConcat(f.ct[:f.hdrLen-1], []byte{7}, f.ct[f.hdrLen:]), ctx), status: 404, code: api.CodeKeyNotFound},
		{name: "spliced bodies", method: "POST", path: "/v1/decrypt/default", body: dec(badConcat(f.ct[:prefix], f.ct2[prefix:]), ctx), status: 400, code: api.CodeDecryptFailed},
		{name: "spliced header of another key", method: "POST", path: "/v1/decrypt/other", body: dec(badConcat(f.ctOther[:f.otherHdrLen], f.ct[f.hdrLen:]), ctx), status: 400, code: api.CodeDecryptFailed},
		{name: "bad magic", method: "POST", path: "/v1/decrypt/default", body: dec(badFlip(f.ct, 0), ctx), status: 400, code: api.CodeMalformed},
		{name: "unknown format version", method: "POST", path: "/v1/decrypt/default", body: dec(badFlip(f.ct, 1), ctx), status: 400, code: api.CodeUnsupported},
		{name: "unknown AEAD id", method: "POST", path: "/v1/decrypt/default", body: dec(badConcat(f.ct[:2], []byte{0x0f}, f.ct[3:]), ctx), status: 400, code: api.CodeUnsupported},
		{name: "ciphertext of another key", method: "POST", path: "/v1/decrypt/default", body: dec(f.ctOther, ctx), status: 400, code: api.CodeKeyMismatch},
		{name: "rewrap ciphertext of another key", method: "POST", path: "/v1/rewrap/default", body: dec(f.ctOther, ctx), status: 400, code: api.CodeKeyMismatch},
		{name: "retired version", method: "POST", path: "/v1/decrypt/retiring", body: dec(f.ctRetired, ctx), status: 410, code: api.CodeVersionRetired},
		{name: "rewrap retired version", method: "POST", path: "/v1/rewrap/retiring", body: dec(f.ctRetired, ctx), status: 410, code: api.CodeVersionRetired},

		// Cipherd-Context is a stream's: on a JSON request it would bind
		// nothing.
		{name: "Cipherd-Context on JSON encrypt", method: "POST", path: "/v1/encrypt/default", header: map[string]string{api.HeaderContext: ctx}, body: []byte(`{"plaintext":"` + pt + `"}`), status: 400, code: api.CodeBadRequest},
		{name: "Cipherd-Context on JSON decrypt", method: "POST", path: "/v1/decrypt/default", header: map[string]string{api.HeaderContext: ctx}, body: dec(f.ct, ctx), status: 400, code: api.CodeBadRequest},
		{name: "Cipherd-Context on a key read", method: "GET", path: "/v1/keys/default", header: map[string]string{api.HeaderContext: ctx}, status: 400, code: api.CodeBadRequest},

		// streams
		{name: "bad Cipherd-Context on stream encrypt", method: "POST", path: "/v1/encrypt/default", header: badStream(api.HeaderContext, ctx[:12]+"!"), body: []byte("SENSITIVE"), status: 400, code: api.CodeBadRequest},
		{name: "bad Cipherd-Context on stream decrypt", method: "POST", path: "/v1/decrypt/default", header: badStream(api.HeaderContext, "%%%"), body: f.sctSmall, status: 400, code: api.CodeBadRequest},
		{name: "wrong Cipherd-Context on stream decrypt", method: "POST", path: "/v1/decrypt/default", header: badStream(api.HeaderContext, ctx), body: f.sctSmall, status: 400, code: api.CodeDecryptFailed},
		{name: "stream decrypt of garbage", method: "POST", path: "/v1/decrypt/default", header: badStream(), body: []byte("SENSITIVE garbage, not a ciphertext at all"), status: 400, code: api.CodeMalformed},
		{name: "stream decrypt of nothing", method: "POST", path: "/v1/decrypt/default", header: badStream(), body: nil, status: 400, code: api.CodeTruncated},
		{name: "stream truncated after its header", method: "POST", path: "/v1/decrypt/default", header: badStream(), body: f.sct[:f.sHdrLen+10], status: 400, code: api.CodeTruncated},
		{name: "stream of another key", method: "POST", path: "/v1/decrypt/default", header: badStream(), body: f.sctOther, status: 400, code: api.CodeKeyMismatch},
		{name: "stream with tampered wrapped key", method: "POST", path: "/v1/decrypt/default", header: badStream(), body: badFlip(f.sctSmall, f.sHdrLen-1), status: 400, code: api.CodeDecryptFailed},
		{name: "stream encrypt under unknown key", method: "POST", path: "/v1/encrypt/nosuchkey", header: badStream(), body: []byte("SENSITIVE"), status: 404, code: api.CodeKeyNotFound},
		{name: "verify=full of tampered stream", method: "POST", path: "/v1/decrypt/default?verify=full", header: badStream(), body: badFlip(f.sctSmall, len(f.sctSmall)-100), status: 400, code: api.CodeDecryptFailed},
		{name: "verify=full of truncated stream", method: "POST", path: "/v1/decrypt/default?verify=full", header: badStream(), body: f.sctSmall[:len(f.sctSmall)-17], status: 400, code: api.CodeDecryptFailed},
		{name: "verify=full over its limit", method: "POST", path: "/v1/decrypt/default?verify=full", header: badStream(), body: f.sctMid, status: 413, code: api.CodeTooLarge},
		{name: "stream rewrap of garbage", method: "POST", path: "/v1/rewrap/default", header: badStream(), body: []byte("SENSITIVE garbage"), status: 400, code: api.CodeMalformed},
		{name: "stream rewrap of another key", method: "POST", path: "/v1/rewrap/default", header: badStream(), body: f.sctOther, status: 400, code: api.CodeKeyMismatch},
		{name: "stream rewrap of a cut header", method: "POST", path: "/v1/rewrap/default", header: badStream(), body: f.sct[:f.sHdrLen-1], status: 400, code: api.CodeTruncated},

		// auth
		{name: "missing token", method: "POST", path: "/v1/encrypt/default", header: map[string]string{"Authorization": ""}, body: []byte(`{"plaintext":"` + pt + `"}`), status: 401, code: api.CodeUnauthenticated},
		{name: "wrong token", method: "POST", path: "/v1/encrypt/default", header: map[string]string{"Authorization": "Bearer SENSITIVE-wrong-token"}, body: []byte(`{"plaintext":"` + pt + `"}`), status: 401, code: api.CodeUnauthenticated},
		{name: "basic auth", method: "GET", path: "/v1/keys", header: map[string]string{"Authorization": "Basic " + badB64("admin:test-admin-token")}, status: 401, code: api.CodeUnauthenticated},
		{name: "empty bearer", method: "GET", path: "/v1/keys", header: map[string]string{"Authorization": "Bearer "}, status: 401, code: api.CodeUnauthenticated},
		{name: "missing token on a stream", method: "POST", path: "/v1/decrypt/default", header: badStream("Authorization", ""), body: f.sctSmall, status: 401, code: api.CodeUnauthenticated},

		// routes
		{name: "unknown route", method: "GET", path: "/v1/nope", status: 404, code: api.CodeRouteNotFound},
		{name: "unknown route under a key", method: "POST", path: "/v1/encrypt/default/extra", body: []byte(`{}`), status: 404, code: api.CodeRouteNotFound},
		{name: "wrong method", method: "GET", path: "/v1/encrypt/default", status: 405, code: api.CodeMethodNotAllowed},
		{name: "wrong method on a probe", method: "DELETE", path: "/healthz", status: 405, code: api.CodeMethodNotAllowed},
	}
}

// badClient uses a fresh connection per request, so that rows cannot
// influence each other through a reused connection.
var badClient = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

func runBadCase(t *testing.T, ts *testServer, tc badCase) {
	t.Helper()
	req, err := http.NewRequest(tc.method, ts.URL+tc.path, bytes.NewReader(tc.body))
	if err != nil {
		t.Fatal(err)
	}
	if tc.body == nil {
		req.Body, req.ContentLength = nil, 0
	}
	req.Header.Set("Authorization", "Bearer "+ts.Token)
	req.Header.Set("Content-Type", api.ContentTypeJSON)
	for k, v := range tc.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := badClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", tc.method, tc.path, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	if resp.StatusCode != tc.status {
		t.Errorf("status %d, want %d; body %s", resp.StatusCode, tc.status, body)
	}
	for _, s := range badSensitive {
		if bytes.Contains(body, []byte(s)) {
			t.Errorf("the response echoes request data %q: %s", s, body)
		}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, api.ContentTypeJSON) {
		t.Errorf("Content-Type %q, want JSON", ct)
	}
	if tc.batch {
		var out struct {
			Items []struct {
				Error *api.Error `json:"error"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &out); err != nil || len(out.Items) == 0 || out.Items[0].Error == nil {
			t.Fatalf("not a failed batch: %s (%v)", body, err)
		}
		for i, it := range out.Items {
			if it.Error == nil || it.Error.Message == "" {
				t.Errorf("item %d: no error", i)
			}
		}
		if got := out.Items[0].Error.Code; got != tc.code {
			t.Errorf("item code %q, want %q", got, tc.code)
		}
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var e api.Error
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("not the error shape: %s (%v)", body, err)
	}
	if e.Code != tc.code {
		t.Errorf("code %q, want %q (message %q)", e.Code, tc.code, e.Message)
	}
	if e.Code.Status() != resp.StatusCode {
		t.Errorf("code %q is documented with status %d, sent with %d", e.Code, e.Code.Status(), resp.StatusCode)
	}
	if e.Message == "" {
		t.Error("empty message")
	}
	if e.RequestID == "" || e.RequestID != resp.Header.Get(api.HeaderRequestID) {
		t.Errorf("request_id %q, X-Request-Id %q", e.RequestID, resp.Header.Get(api.HeaderRequestID))
	}
	if resp.StatusCode == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without a Bearer challenge: %q", resp.Header.Get("WWW-Authenticate"))
	}
}

func badInputServer(t *testing.T, cfg Config) *testServer {
	cfg.SkipBenchmark = true
	cfg.MaxJSONBody = badMaxJSONBody
	cfg.MaxBatchItems = badMaxBatchItems
	cfg.MaxVerifyFull = badMaxVerifyFull
	return startTestServer(t, cfg)
}

func TestBadInput(t *testing.T) {
	ts := badInputServer(t, Config{})
	f := newBadFixtures(t, ts)
	table := badInputTable(t, f)
	if len(table) < 30 {
		t.Fatalf("only %d cases", len(table))
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) { runBadCase(t, ts, tc) })
	}

	// Nothing the table did changed the keys it must not change.
	if code, body, _ := ts.do(t, "GET", "/v1/keys/newkey", "", nil, ""); code != 404 {
		t.Errorf("a rejected key configuration created the key: %d %s", code, body)
	}
	var k api.Key
	if code, body, _ := ts.do(t, "GET", "/v1/keys/default", "", nil, ""); code != 200 || json.Unmarshal(body, &k) != nil || k.AEAD != "" || k.MinDecryptionVersion != 0 || k.RotationPeriod != "" {
		t.Errorf("rejected configurations changed the default key: %d %s", code, body)
	}
	var got api.DecryptResult
	if code := ts.postJSON(t, "/v1/decrypt/default", api.DecryptRequest{DecryptItem: api.DecryptItem{Ciphertext: f.ct, Context: []byte("SENSITIVE-CONTEXT")}}, &got); code != 200 || string(got.Plaintext) != "SENSITIVE-PLAINTEXT" {
		t.Errorf("the fixture no longer decrypts: %d", code)
	}
	if code, body, _ := ts.do(t, "GET", "/healthz", "", nil, "-"); code != 200 {
		t.Fatalf("/healthz after the table: %d %s", code, body)
	}
	if n := ts.met.activeStreams.Load(); n != 0 {
		t.Errorf("%d streams still active", n)
	}
}

// badRaw writes raw to a new connection and reads one response.
func badRaw(t testing.TB, addr string, raw []byte) (*http.Response, []byte, error) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	werr := make(chan error, 1)
	go func() { _, err := conn.Write(raw); werr <- err }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, body, err
}

// TestBadInputMemoryBound sends a few hundred oversized and garbage requests,
// fixed-length and chunked, and checks that the heap stays within a bound
// and that the server keeps answering.
func TestBadInputMemoryBound(t *testing.T) {
	ts := badInputServer(t, Config{})
	addr := strings.TrimPrefix(ts.URL, "http://")
	auth := "Authorization: Bearer " + ts.Token + "\r\n"

	big := bytes.Repeat([]byte("A"), 1<<20) // 1 MiB
	garbage := make([]byte, 1<<20)
	rand.Read(garbage)
	garbage[0] = 0 // never the magic byte
	chunked := func(b []byte) []byte {
		var w bytes.Buffer
		for len(b) > 0 {
			n := min(len(b), 32<<10)
			fmt.Fprintf(&w, "%x\r\n", n)
			w.Write(b[:n])
			w.WriteString("\r\n")
			b = b[n:]
		}
		w.WriteString("0\r\n\r\n")
		return w.Bytes()
	}
	type kind struct {
		name   string
		raw    []byte
		status int
	}
	kinds := []kind{
		{"JSON over the limit, Content-Length", badConcat([]byte("POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/json\r\nContent-Length: "+fmt.Sprint(len(big)+16)+"\r\nConnection: close\r\n\r\n{\"plaintext\":\""), big, []byte("\"}")), 413},
		{"JSON over the limit, chunked", badConcat([]byte("POST /v1/decrypt/default HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"), chunked(badConcat([]byte(`{"ciphertext":"`), big, []byte(`"}`)))), 413},
		{"stream decrypt of garbage, chunked", badConcat([]byte("POST /v1/decrypt/default HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"), chunked(garbage)), 400},
		{"stream decrypt of garbage, verify=full", badConcat([]byte("POST /v1/decrypt/default?verify=full HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"), chunked(garbage)), 400},
		{"verify=full over the limit, Content-Length", badConcat([]byte("POST /v1/decrypt/default?verify=full HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/octet-stream\r\nContent-Length: "+fmt.Sprint(len(garbage))+"\r\nConnection: close\r\n\r\n"), garbage), 413},
		{"unauthenticated upload", badConcat([]byte("POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: "+fmt.Sprint(len(garbage))+"\r\nConnection: close\r\n\r\n"), garbage), 401},
		{"malformed JSON", []byte("POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: 4000\r\nConnection: close\r\n\r\n{" + strings.Repeat("[", 3999)), 400},
	}

	var peak atomic.Uint64
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()

	const rounds = 240
	statuses := map[string]map[int]int{}
	var mu sync.Mutex
	sem := make(chan struct{}, 8)
	var rg sync.WaitGroup
	for i := range rounds {
		k := kinds[i%len(kinds)]
		sem <- struct{}{}
		rg.Add(1)
		go func() {
			defer rg.Done()
			defer func() { <-sem }()
			resp, _, err := badRaw(t, addr, k.raw)
			st := -1 // no response: the server closed the connection first
			if err == nil {
				st = resp.StatusCode
			}
			mu.Lock()
			if statuses[k.name] == nil {
				statuses[k.name] = map[int]int{}
			}
			statuses[k.name][st]++
			mu.Unlock()
		}()
	}
	rg.Wait()
	close(stop)
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	after := ms.HeapAlloc

	// -1: the server answered and closed while the client was still
	// sending, and the reset reached the client before the answer did.
	for _, k := range kinds {
		got := statuses[k.name]
		for st, n := range got {
			if st != k.status && st != -1 {
				t.Errorf("%s: %d answers with status %d, want %d", k.name, n, st, k.status)
			}
		}
		if got[k.status] < rounds/len(kinds)/2 {
			t.Errorf("%s: statuses %v, want mostly %d", k.name, got, k.status)
		}
	}
	const bound = 64 << 20
	t.Logf("heap: base %d KiB, peak %d KiB, after %d KiB", base>>10, peak.Load()>>10, after>>10)
	if p := peak.Load(); p > base+bound {
		t.Errorf("heap peaked %d MiB above its base", (p-base)>>20)
	}
	if after > base+16<<20 {
		t.Errorf("heap grew by %d MiB", (after-base)>>20)
	}
	if code, _, _ := ts.do(t, "GET", "/healthz", "", nil, "-"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	if n := ts.met.activeStreams.Load(); n != 0 {
		t.Errorf("%d streams still active", n)
	}
}

// TestBadInputUnreadBodyNotReparsed: a request rejected before its body was
// read (over 8 KiB, fasthttp's read-ahead, or chunked) must not leave the rest
// of that body to be parsed as the connection's next request. Behind a proxy
// that reuses backend connections, that would smuggle a request and shift
// every later response to the wrong client. The server must either consume
// the body or close the connection.
func TestBadInputUnreadBodyNotReparsed(t *testing.T) {
	ts := badInputServer(t, Config{})
	addr := strings.TrimPrefix(ts.URL, "http://")
	smuggled := "GET /v1/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ts.Token + "\r\n\r\n"
	body := strings.Repeat(" ", 16<<10) + smuggled
	chunk := fmt.Sprintf("%x\r\n%s\r\n", 16<<10, strings.Repeat(" ", 16<<10))
	cases := []struct {
		name, head, body string
		status           int
	}{
		{"415 before reading", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ts.Token + "\r\nContent-Type: text/plain\r\n", body, 415},
		{"401 before reading", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n", body, 401},
		{"404 route", "POST /v1/nope HTTP/1.1\r\nHost: x\r\n", body, 404},
		{"400 bad stream context", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ts.Token + "\r\nContent-Type: application/octet-stream\r\nCipherd-Context: %%\r\n", body, 400},
		{"413 JSON over its limit", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ts.Token + "\r\nContent-Type: application/json\r\n", body, 413},
		{"413 on a route without a body", "GET /healthz HTTP/1.1\r\nHost: x\r\n", body, 413},
		{"401 chunked", "POST /v1/decrypt/default HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n", chunk + chunk + "0\r\n\r\n", 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			head := tc.head
			if !strings.Contains(head, "Transfer-Encoding") {
				head += fmt.Sprintf("Content-Length: %d\r\n", len(tc.body))
			}
			// The request, then an innocent second request on the same
			// connection.
			go io.WriteString(conn, head+"\r\n"+tc.body+"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if resp.Close {
				return // the connection ends here: nothing can be smuggled
			}
			resp2, err := http.ReadResponse(br, nil)
			if err != nil {
				return // closed without saying so; also safe
			}
			b, _ := io.ReadAll(resp2.Body)
			resp2.Body.Close()
			if resp2.StatusCode != 200 || !bytes.Contains(b, []byte(`"go_version"`)) {
				t.Errorf("the unread body was parsed as a request: the next response on the connection is %d %.120q", resp2.StatusCode, b)
			}
		})
	}
}

// TestBadInputMalformedHTTP: requests fasthttp itself cannot parse get the
// error shape too, without their bytes echoed back.
func TestBadInputMalformedHTTP(t *testing.T) {
	ts := badInputServer(t, Config{RequestTimeout: time.Second})
	addr := strings.TrimPrefix(ts.URL, "http://")
	cases := []struct {
		name string
		raw  string
	}{
		{"no method", "SENSITIVE-PLAINTEXT\r\n\r\n"},
		{"bad Content-Length", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nContent-Length: SENSITIVE\r\n\r\n"},
		{"bad chunk size", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ts.Token + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nSENSITIVE\r\n{}\r\n0\r\n\r\n"},
		{"header without colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nSENSITIVE-CONTEXT\r\n\r\n"}, // fasthttp waits for more: 408
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := badRaw(t, addr, []byte(tc.raw))
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			if resp.StatusCode < 400 || resp.StatusCode > 499 {
				t.Errorf("status %d, want 4xx", resp.StatusCode)
			}
			var e api.Error
			if err := json.Unmarshal(body, &e); err != nil || e.Code == "" || e.Message == "" {
				t.Errorf("not the error shape: %.200q", body)
			}
			for _, s := range badSensitive {
				if bytes.Contains(body, []byte(s)) {
					t.Errorf("the response echoes the request: %.200q", body)
				}
			}
		})
	}
	if code, _, _ := ts.do(t, "GET", "/healthz", "", nil, "-"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
}

// TestBadInputStreamTooLong: a stream encrypt announcing more plaintext
// than a stream holds (2^52 bytes and up, FORMAT.md, Sizes) is refused
// before its answer announces a length it could never reach.
func TestBadInputStreamTooLong(t *testing.T) {
	ts := badInputServer(t, Config{})
	addr := strings.TrimPrefix(ts.URL, "http://")
	for _, n := range []int64{cryptosvc.MaxPlaintextLen + 1, 1 << 60} {
		// With a first byte of the body and without: the refusal does not
		// wait for the body (badRaw gives up long before the idle timeout).
		for _, first := range []string{"SENSITIVE", ""} {
			raw := fmt.Sprintf("POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", ts.Token, api.ContentTypeStream, n, first)
			resp, body, err := badRaw(t, addr, []byte(raw))
			if err != nil {
				t.Fatalf("Content-Length %d, body %q: no response: %v", n, first, err)
			}
			if resp.StatusCode != 413 || codeOf(body) != api.CodeTooLarge {
				t.Errorf("Content-Length %d, body %q: %d %.200s, want 413 %s", n, first, resp.StatusCode, body, api.CodeTooLarge)
			}
		}
	}
}

// badStall sends raw and then nothing; it returns what the server sent
// and how long until it answered or closed the connection.
func badStall(t *testing.T, addr, raw string, limit time.Duration) (reply []byte, elapsed time.Duration, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(start.Add(limit))
	reply, err = io.ReadAll(conn)
	elapsed = time.Since(start)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return reply, elapsed, false
	}
	return reply, elapsed, true
}

// badHealthyWhile checks that /healthz answers quickly while f runs.
func badHealthyWhile(t *testing.T, ts *testServer, f func()) {
	t.Helper()
	done := make(chan struct{})
	var bad atomic.Value
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond)
		c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get(ts.URL + "/healthz")
		if err != nil {
			bad.Store(err.Error())
			return
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			bad.Store(resp.Status)
		}
	}()
	f()
	<-done
	if v := bad.Load(); v != nil {
		t.Errorf("/healthz while a client stalls: %v", v)
	}
}

// TestBadInputSlowBody: a client that stops sending in the middle of its
// headers or JSON body gets 408 or a closed connection within
// RequestTimeout, and a stalled stream is closed after StreamIdleTimeout;
// other clients are served meanwhile.
func TestBadInputSlowBody(t *testing.T) {
	const reqTimeout, idle = 500 * time.Millisecond, 700 * time.Millisecond
	ts := badInputServer(t, Config{RequestTimeout: reqTimeout, StreamIdleTimeout: idle})
	addr := strings.TrimPrefix(ts.URL, "http://")
	auth := "Authorization: Bearer " + ts.Token + "\r\n"

	slow := []struct{ name, raw string }{
		{"half the headers", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth},
		{"half a JSON body", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"plaintext\":\"U0VO"},
		{"half a chunked JSON body", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n12\r\n{\"plaintext\":\"U0VO\r\n"},
		{"a chunked JSON body stopped after a chunk", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"pla"},
		{"half a large JSON body", "POST /v1/decrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"ciphertext\":\"" + strings.Repeat("A", 2000)},
	}
	for _, tc := range slow {
		t.Run(tc.name, func(t *testing.T) {
			badHealthyWhile(t, ts, func() {
				reply, elapsed, closed := badStall(t, addr, tc.raw, reqTimeout+3*time.Second)
				if !closed {
					t.Fatalf("still open after %v", elapsed)
				}
				if elapsed > reqTimeout+time.Second {
					t.Errorf("took %v, RequestTimeout is %v", elapsed, reqTimeout)
				}
				if len(reply) > 0 {
					resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(reply)), nil)
					if err != nil {
						t.Fatalf("unreadable reply %.200q: %v", reply, err)
					}
					b, _ := io.ReadAll(resp.Body)
					var e api.Error
					if resp.StatusCode != 408 || json.Unmarshal(b, &e) != nil || e.Code != api.CodeTimeout {
						t.Errorf("reply %d %s, want 408 timeout", resp.StatusCode, b)
					}
				}
				t.Logf("closed after %v with %d bytes of reply", elapsed.Round(time.Millisecond), len(reply))
			})
		})
	}

	pt := make([]byte, 64<<10)
	rand.Read(pt)
	code, sct, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, bytes.NewReader(pt), "")
	if code != 200 {
		t.Fatalf("stream encrypt: %d", code)
	}
	_, sHdrLen, err := cryptosvc.ParseHeader(sct)
	if err != nil {
		t.Fatal(err)
	}
	head := func(route string, n int) string {
		return "POST " + route + " HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/octet-stream\r\nContent-Length: " + fmt.Sprint(n) + "\r\n\r\n"
	}
	chunked := func(route string, b []byte) string {
		return "POST " + route + " HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n", len(b)) + string(b) + "\r\n"
	}
	// early: the stall comes before the response starts, so the reply, if
	// any, is 408; otherwise the 200 response is cut short.
	streams := []struct {
		name, raw string
		early     bool
	}{
		{"stalled stream encrypt", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + strings.Repeat("x", 0x400) + "\r\n", false},
		{"stalled stream encrypt, Content-Length", head("/v1/encrypt/default", 1000000) + strings.Repeat("x", 40<<10), false},
		{"stalled stream decrypt", head("/v1/decrypt/default", len(sct)) + string(sct[:20<<10]), false},
		{"stalled stream decrypt in the header", chunked("/v1/decrypt/default", sct[:5]), true},
		{"stalled stream decrypt in the commitment", chunked("/v1/decrypt/default", sct[:sHdrLen+30]), true},
		{"stalled stream decrypt in fasthttp's read-ahead", head("/v1/decrypt/default", len(sct)) + string(sct[:sHdrLen+30]), true},
		{"stalled verify=full", chunked("/v1/decrypt/default?verify=full", sct[:20<<10]), true},
		{"stalled stream rewrap", head("/v1/rewrap/default", len(sct)) + string(sct[:20<<10]), false},
		{"stalled stream rewrap in the header", chunked("/v1/rewrap/default", sct[:5]), true},
	}
	for _, tc := range streams {
		t.Run(tc.name, func(t *testing.T) {
			badHealthyWhile(t, ts, func() {
				reply, elapsed, closed := badStall(t, addr, tc.raw, idle+3*time.Second)
				if !closed {
					t.Fatalf("still open after %v; reply %.300q", elapsed, reply)
				}
				// Inside fasthttp's 8 KiB read-ahead RequestTimeout applies.
				if elapsed < min(idle, reqTimeout)*8/10 || elapsed > idle+time.Second {
					t.Errorf("closed after %v; RequestTimeout %v, StreamIdleTimeout %v", elapsed, reqTimeout, idle)
				}
				if bytes.HasSuffix(reply, []byte("0\r\n\r\n")) || bytes.Contains(reply, []byte(api.TrailerStatus+": ok")) {
					t.Errorf("a stalled stream ended like a complete one: %.300q", reply)
				}
				if tc.early && len(reply) > 0 {
					resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(reply)), nil)
					if err != nil {
						t.Fatalf("unreadable reply %.200q: %v", reply, err)
					}
					b, _ := io.ReadAll(resp.Body)
					var e api.Error
					if resp.StatusCode != 408 || json.Unmarshal(b, &e) != nil || e.Code != api.CodeTimeout {
						t.Errorf("reply %d %s, want 408 timeout", resp.StatusCode, b)
					}
				}
				t.Logf("closed after %v with %d bytes of reply", elapsed.Round(time.Millisecond), len(reply))
			})
			if !proctest.Poll(2*time.Second, func() bool { return ts.met.activeStreams.Load() == 0 }) {
				t.Errorf("%d streams still active", ts.met.activeStreams.Load())
			}
		})
	}

	badNoStuckRequests(t)
}

// TestBadInputClientGone: clients that hang up in the middle of a stream,
// uploading or downloading, leave no stream or goroutine behind.
func TestBadInputClientGone(t *testing.T) {
	ts := badInputServer(t, Config{StreamIdleTimeout: 5 * time.Second})
	addr := strings.TrimPrefix(ts.URL, "http://")
	auth := "Authorization: Bearer " + ts.Token + "\r\n"
	pt := make([]byte, 8<<20)
	rand.Read(pt)
	code, ct, _ := ts.do(t, "POST", "/v1/encrypt/default", api.ContentTypeStream, bytes.NewReader(pt), "")
	if code != 200 {
		t.Fatalf("stream encrypt: %d", code)
	}

	hangUp := func(t *testing.T, head string, body []byte, sendAll bool, readBytes int) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		if sendAll {
			go conn.Write(body)
		} else if _, err := conn.Write(body); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if _, err := io.CopyN(io.Discard, resp.Body, int64(readBytes)); err != nil {
			t.Fatalf("reading the first %d bytes: %v", readBytes, err)
		}
		if !proctest.Poll(2*time.Second, func() bool { return ts.met.activeStreams.Load() == 1 }) {
			t.Errorf("%d streams active during the stream", ts.met.activeStreams.Load())
		}
		conn.Close()
		if !proctest.Poll(5*time.Second, func() bool { return ts.met.activeStreams.Load() == 0 }) {
			t.Errorf("%d streams still active after the client left", ts.met.activeStreams.Load())
		}
	}
	t.Run("upload", func(t *testing.T) {
		// 100 KiB of a chunked upload, some ciphertext back, then gone.
		body := fmt.Sprintf("%x\r\n%s\r\n", 100<<10, bytes.Repeat([]byte("x"), 100<<10))
		hangUp(t, "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n", []byte(body), false, 32<<10)
	})
	t.Run("download", func(t *testing.T) {
		// All 8 MiB of ciphertext sent, 64 KiB of plaintext read, then gone.
		hangUp(t, "POST /v1/decrypt/default HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/octet-stream\r\nContent-Length: "+fmt.Sprint(len(ct))+"\r\n\r\n", ct, true, 64<<10)
	})
	t.Run("many", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				fmt.Fprintf(conn, "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/octet-stream\r\nContent-Length: 10000000\r\n\r\n", auth)
				conn.Write(bytes.Repeat([]byte("y"), 50<<10))
				conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				conn.Read(make([]byte, 1024))
			}()
		}
		wg.Wait()
		if !proctest.Poll(5*time.Second, func() bool { return ts.met.activeStreams.Load() == 0 }) {
			t.Errorf("%d streams still active after the clients left", ts.met.activeStreams.Load())
		}
	})
	badNoStuckRequests(t)
	if code, _, _ := ts.do(t, "GET", "/healthz", "", nil, "-"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
}

// badNoStuckRequests fails if, after a grace period, some goroutine is still
// serving a request inside cipherd's code: a stream or handler left behind
// by a client that went away. (fasthttp's idle workers linger for seconds by
// design, so a plain goroutine count would not do; and a connection waiting
// for its next request reads through coalescingConn, which is not a request.)
func badNoStuckRequests(t *testing.T) {
	t.Helper()
	var stuck []string
	ok := proctest.Poll(5*time.Second, func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		stuck = stuck[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			waiting := strings.Contains(g, "bufio.(*Reader).Peek") && strings.Count(g, "github.com/cipherd/cipherd/") == strings.Count(g, "server.(*coalescingConn).Read")
			if strings.Contains(g, "fasthttp.(*Server).serveConn") && strings.Contains(g, "github.com/cipherd/cipherd/") && !waiting {
				stuck = append(stuck, g)
			}
		}
		return len(stuck) == 0
	})
	if !ok {
		t.Errorf("%d requests still in cipherd code after their clients left:\n%s", len(stuck), strings.Join(stuck, "\n\n"))
	}
}

// TestBadInputCutUpload: an upload that ends before its Content-Length, in
// the middle of a chunk, or between two chunks without the last, empty one,
// is not sealed as a complete stream. The client
// half-closes its side, so it can still read whatever the server answers.
func TestBadInputCutUpload(t *testing.T) {
	ts := badInputServer(t, Config{StreamIdleTimeout: 5 * time.Second})
	addr := strings.TrimPrefix(ts.URL, "http://")
	auth := "Authorization: Bearer " + ts.Token + "\r\n"
	data := strings.Repeat("z", 40<<10)
	cases := []struct{ name, raw string }{
		{"short of Content-Length", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n" + data},
		{"in the middle of a chunk", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n", 100000) + data},
		{"without the last chunk", "POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n", len(data)) + data + "\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(conn, tc.raw); err != nil {
				t.Fatal(err)
			}
			conn.(*net.TCPConn).CloseWrite()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				return // closed without an answer: nothing was sealed
			}
			ct, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && err == nil {
				t.Errorf("a cut upload was sealed as a complete stream of %d bytes", len(ct))
			}
		})
	}
	badNoStuckRequests(t)
}

// TestJSONTypeMessages: a field of the wrong JSON type is named as the
// request spells it, with the JSON type it takes: no Go struct or type
// names (encoding/json puts an embedded struct's name in the path).
func TestJSONTypeMessages(t *testing.T) {
	cases := []struct {
		body string
		into any
		want string
	}{
		{`{"allowed_aeads":"aes-256-gcm"}`, &api.CreateKeyRequest{}, `field "allowed_aeads" must be an array, not string`},
		{`{"min_decryption_version":"2"}`, &api.CreateKeyRequest{}, `field "min_decryption_version" must be a number, not string`},
		{`{"import":7}`, &api.CreateKeyRequest{}, `field "import" must be a base64 string, not number`},
		{`{"deletion_allowed":1}`, &api.KeyConfig{}, `field "deletion_allowed" must be true or false, not number`},
	}
	for _, c := range cases {
		err := json.Unmarshal([]byte(c.body), c.into)
		if err == nil {
			t.Fatalf("%s decoded", c.body)
		}
		if got := jsonErrorText(err); got != c.want {
			t.Errorf("%s: %q, want %q", c.body, got, c.want)
		}
	}
}

// TestBadInputContextLines: a Cipherd-Context line on a JSON request is
// refused whatever its value, empty included, and wherever it is among
// several: the header is a stream's.
func TestBadInputContextLines(t *testing.T) {
	ts := badInputServer(t, Config{})
	addr := strings.TrimPrefix(ts.URL, "http://")
	body := `{"plaintext":"aGk="}`
	for _, lines := range []string{"Cipherd-Context:\r\n", "Cipherd-Context: \r\n", "Cipherd-Context:\r\nCipherd-Context: b3JkZXIgNDI=\r\n"} {
		raw := fmt.Sprintf("POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\n%sContent-Length: %d\r\n\r\n%s",
			ts.Token, api.ContentTypeJSON, lines, len(body), body)
		resp, got, err := badRaw(t, addr, []byte(raw))
		if err != nil {
			t.Fatalf("%q: no response: %v", lines, err)
		}
		if resp.StatusCode != 400 || codeOf(got) != api.CodeBadRequest {
			t.Errorf("%q: %d %.200s, want 400 %s", lines, resp.StatusCode, got, api.CodeBadRequest)
		}
	}
}

// TestBadInputTwoContentTypes: a request with two Content-Type lines is
// refused, whatever they say: fasthttp would take the last, and a proxy in
// front may have judged the request by the first.
func TestBadInputTwoContentTypes(t *testing.T) {
	ts := badInputServer(t, Config{})
	addr := strings.TrimPrefix(ts.URL, "http://")
	body := `{"plaintext":"aGk="}`
	for _, types := range [][2]string{{api.ContentTypeJSON, api.ContentTypeStream}, {api.ContentTypeJSON, api.ContentTypeJSON}} {
		raw := fmt.Sprintf("POST /v1/encrypt/default HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\ncontent-type: %s\r\nContent-Length: %d\r\n\r\n%s",
			ts.Token, types[0], types[1], len(body), body)
		resp, got, err := badRaw(t, addr, []byte(raw))
		if err != nil {
			t.Fatalf("%v: no response: %v", types, err)
		}
		if resp.StatusCode != 400 || codeOf(got) != api.CodeBadRequest || !strings.Contains(string(got), "one Content-Type") {
			t.Errorf("%v: %d %.200s, want 400 %s", types, resp.StatusCode, got, api.CodeBadRequest)
		}
	}
}

// TestBadInputExpectWithoutCredential: a request that asks before sending
// its body (Expect: 100-continue) with no credential, where no identity is
// a certificate, gets its 401 at once instead of 100 Continue; with a
// token it gets 100 Continue, and a route that needs no credential is
// unaffected.
func TestBadInputExpectWithoutCredential(t *testing.T) {
	ts := badInputServer(t, Config{})
	addr := strings.TrimPrefix(ts.URL, "http://")
	ask := func(route, auth, framing string) string {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Type: %s\r\n%s\r\nExpect: 100-continue\r\n\r\n", route, auth, api.ContentTypeStream, framing)
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("%s: no answer: %v", route, err)
		}
		return strings.TrimSpace(line)
	}
	for _, framing := range []string{"Content-Length: 1000000", "Transfer-Encoding: chunked"} {
		if got := ask("/v1/encrypt/default", "", framing); got != "HTTP/1.1 401 Unauthorized" {
			t.Errorf("%s, no credential: %q, want 401 before any body", framing, got)
		}
		if got := ask("/v1/encrypt/default", "Authorization: Bearer "+ts.Token+"\r\n", framing); got != "HTTP/1.1 100 Continue" {
			t.Errorf("%s, with a token: %q, want 100 Continue", framing, got)
		}
	}
	// The full answer: the error shape and WWW-Authenticate, as any 401.
	raw := "POST /v1/decrypt/default HTTP/1.1\r\nHost: x\r\nContent-Type: " + api.ContentTypeStream + "\r\nContent-Length: 50\r\nExpect: 100-continue\r\n\r\n"
	resp, body, err := badRaw(t, addr, []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 401 || codeOf(body) != api.CodeUnauthenticated || resp.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("decrypt without a credential: %d %s, WWW-Authenticate %q", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
	}
}
