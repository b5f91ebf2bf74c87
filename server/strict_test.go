package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/api"
)

// The documented JSON is strict, in every route's decoder: exact field
// names, no field twice, RFC 4648 §4 base64 without line breaks, and no
// error that repeats what the request said.

func postRaw(t *testing.T, ts *testServer, route, body string) (int, []byte) {
	t.Helper()
	code, b, _ := ts.do(t, "POST", route, api.ContentTypeJSON, strings.NewReader(body), "")
	return code, b
}

func wantError(t *testing.T, what string, code int, body []byte, status int, ecode api.Code) {
	t.Helper()
	var e api.Error
	if err := json.Unmarshal(body, &e); err != nil || code != status || e.Code != ecode {
		t.Errorf("%s: %d %s, want %d %s", what, code, body, status, ecode)
	}
}

func TestStrictJSONFieldNames(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	a, b := base64.StdEncoding.EncodeToString([]byte("A")), base64.StdEncoding.EncodeToString([]byte("B"))
	pt := base64.StdEncoding.EncodeToString([]byte("hello"))
	for _, tc := range []struct{ name, route, body string }{
		{"context then Context", "/v1/encrypt/default", `{"plaintext":"` + pt + `","context":"` + a + `","Context":"` + b + `"}`},
		{"Context alone", "/v1/encrypt/default", `{"plaintext":"` + pt + `","Context":"` + b + `"}`},
		{"PLAINTEXT", "/v1/encrypt/default", `{"PLAINTEXT":"` + pt + `"}`},
		{"plaintext twice", "/v1/encrypt/default", `{"plaintext":"` + pt + `","plaintext":"` + a + `"}`},
		{"escaped name", "/v1/encrypt/default", `{"pl\u0061intext":"` + pt + `","context":"` + a + `","context":"` + b + `"}`},
		{"Items", "/v1/encrypt/default", `{"Items":[{"plaintext":"` + pt + `"}]}`},
		{"items twice", "/v1/encrypt/default", `{"items":[{"plaintext":"` + pt + `"}],"items":[]}`},
		{"Ciphertext", "/v1/decrypt/default", `{"Ciphertext":"` + pt + `"}`},
		{"rewrap context twice", "/v1/rewrap/default", `{"ciphertext":"` + pt + `","context":"` + a + `","context":"` + b + `"}`},
		{"datakey Bytes", "/v1/datakey/default", `{"Bytes":16}`},
		{"datakey context twice", "/v1/datakey/default", `{"context":"` + a + `","context":"` + b + `"}`},
		{"datakey Wrapped_Only", "/v1/datakey/default", `{"Wrapped_Only":true}`},
		{"create key Import", "/v1/keys/strict-import", `{"Import":"` + base64.StdEncoding.EncodeToString(make([]byte, 32)) + `"}`},
		{"create key aead twice", "/v1/keys/strict-aead", `{"aead":"aes-256-gcm","aead":"chacha20-poly1305"}`},
		{"not an object", "/v1/encrypt/default", `null`},
		{"not UTF-8", "/v1/encrypt/default", "{\"plaintext\":\"" + pt + "\",\"reference\":\"\xff\"}"},
	} {
		code, body := postRaw(t, ts, tc.route, tc.body)
		wantError(t, tc.name, code, body, 400, api.CodeBadRequest)
	}
	// The same bodies with the right names work: the refusals above are
	// about the names.
	var res api.EncryptResult
	if code := ts.postJSON(t, "/v1/encrypt/default", map[string]any{"plaintext": []byte("hello"), "context": []byte("A")}, &res); code != 200 {
		t.Fatalf("encrypt: %d", code)
	}
	var open api.DecryptResult
	if code := ts.postJSON(t, "/v1/decrypt/default", map[string]any{"ciphertext": res.Ciphertext, "context": []byte("A")}, &open); code != 200 || string(open.Plaintext) != "hello" {
		t.Fatalf("decrypt: %d %q", code, open.Plaintext)
	}
	if code, body := postRaw(t, ts, "/v1/datakey/default", `{"bytes":16,"context":"`+a+`"}`); code != 200 {
		t.Fatalf("datakey: %d %s", code, body)
	}
}

func TestStrictBase64(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	for _, tc := range []struct{ name, route, body string }{
		{"CRLF in plaintext", "/v1/encrypt/default", `{"plaintext":"aGVs\r\nbG8="}`},
		{"LF in plaintext", "/v1/encrypt/default", `{"plaintext":"aGVs\nbG8="}`},
		{"CR in context", "/v1/encrypt/default", `{"plaintext":"aGVsbG8=","context":"\rYQ=="}`},
		{"LF at the end", "/v1/encrypt/default", `{"plaintext":"aGVsbG8=\n"}`},
		{"non-canonical padding bits", "/v1/encrypt/default", `{"plaintext":"YR=="}`},
		{"no padding", "/v1/encrypt/default", `{"plaintext":"aGVsbG8"}`},
		{"URL-safe alphabet", "/v1/encrypt/default", `{"plaintext":"-_-_"}`},
		{"LF in ciphertext", "/v1/decrypt/default", `{"ciphertext":"zQEC\nB2Rl"}`},
		{"LF in datakey context", "/v1/datakey/default", `{"context":"YQ\n=="}`},
		{"CRLF in imported key", "/v1/keys/strict-b64", `{"import":"` + base64.StdEncoding.EncodeToString(make([]byte, 16)) + `\r\n` + base64.StdEncoding.EncodeToString(make([]byte, 16)) + `"}`},
		// encoding/json would fill these []byte fields from the arrays.
		{"array for plaintext", "/v1/encrypt/default", `{"plaintext":[104,105]}`},
		{"empty array for plaintext", "/v1/encrypt/default", `{"plaintext":[]}`},
		{"array for rewrap ciphertext", "/v1/rewrap/default", `{"ciphertext":[205,1]}`},
		{"array for datakey context", "/v1/datakey/default", `{"context":[97]}`},
		{"array for imported key", "/v1/keys/strict-b64", `{"import":[` + strings.Repeat("0,", 31) + `0]}`},
	} {
		code, body := postRaw(t, ts, tc.route, tc.body)
		wantError(t, tc.name, code, body, 400, api.CodeBadRequest)
	}
	// Standard base64 with an escaped slash is still base64.
	if code, body := postRaw(t, ts, "/v1/encrypt/default", `{"plaintext":"\/w=="}`); code != 200 {
		t.Errorf(`"\/w==": %d %s`, code, body)
	}
}

// TestErrorsDoNotQuoteRequest: an unknown field's name is request data, and
// the error does not repeat it, on the data routes and the others.
func TestErrorsDoNotQuoteRequest(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	const secret = "zz_secret_4e1f"
	for _, tc := range []struct{ route, body string }{
		{"/v1/encrypt/default", `{"plaintext":"YQ==","` + secret + `":1}`},
		{"/v1/encrypt/default", `{"` + secret + `":"YQ=="}`},
		{"/v1/decrypt/default", `{"ciphertext":"YQ==","` + secret + `":{}}`},
		{"/v1/encrypt/default", `{"items":[{"plaintext":"YQ=="},{"` + secret + `":"x"}]}`},
		{"/v1/datakey/default", `{"` + secret + `":true}`},
		{"/v1/keys/strict-quote", `{"` + secret + `":"x"}`},
		{"/v1/keys/strict-quote", `{"aead":"` + secret + `"}`},
	} {
		code, body := postRaw(t, ts, tc.route, tc.body)
		if code < 400 && code != api.BatchStatusPartial {
			t.Errorf("%s %s: %d, want an error", tc.route, tc.body, code)
		}
		if bytes.Contains(body, []byte(secret)) {
			t.Errorf("%s %s: the answer repeats request data: %s", tc.route, tc.body, body)
		}
	}
}

// TestContextHeaderTwice: two Cipherd-Context lines are refused, whichever
// would have won.
func TestContextHeaderTwice(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	send := func(route string, ctxs ...string) (int, []byte) {
		req, _ := http.NewRequest("POST", ts.URL+route, strings.NewReader("stream body"))
		req.Header.Set("Content-Type", api.ContentTypeStream)
		req.Header.Set("Authorization", "Bearer "+ts.Token)
		for _, c := range ctxs {
			req.Header.Add(api.HeaderContext, c)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	a, b := base64.StdEncoding.EncodeToString([]byte("A")), base64.StdEncoding.EncodeToString([]byte("B"))
	for _, route := range []string{"/v1/encrypt/default", "/v1/decrypt/default", "/v1/rewrap/default"} {
		code, body := send(route, a, b)
		wantError(t, route+" with two context lines", code, body, 400, api.CodeBadRequest)
		code, body = send(route, a, a)
		wantError(t, route+" with the same context twice", code, body, 400, api.CodeBadRequest)
	}
	if code, body := send("/v1/encrypt/default", a); code != 200 {
		t.Errorf("one context line: %d %s", code, body)
	}
	if code, body := send("/v1/encrypt/default", "YR=="); code != 400 {
		t.Errorf("a context with non-canonical padding: %d %s", code, body)
	}
}

// TestBatchBadItem: a batch whose items are valid JSON answers every item in
// order; the bad ones carry their error and the status is 207.
func TestBatchBadItem(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	code, body := postRaw(t, ts, "/v1/encrypt/default", `{"items":[
		{"plaintext":"YQ==","reference":"a"},
		{"plaintext":"!!not base64!!","reference":"b"},
		{"plaintext":"Yw==","reference":"c"},
		{"plaintext":"YQ==","plaintext":"Yg==","reference":"d"},
		{"plaintext":"YQ==","unknown":1,"reference":"e"},
		{"plaintext":7,"reference":"f"},
		{"plaintext":"YQ\r\n==","reference":"g"},
		{"Plaintext":"YQ==","reference":"h"},
		42,
		{"plaintext":"ZA==","context":"Yw==","reference":"j"}]}`)
	var out api.BatchResponse[api.EncryptResult]
	if err := json.Unmarshal(body, &out); err != nil || code != api.BatchStatusPartial {
		t.Fatalf("batch with bad items: %d %s", code, body)
	}
	good := map[int]bool{0: true, 2: true, 9: true}
	refs := "abcdefgh?j"
	if len(out.Items) != 10 {
		t.Fatalf("%d results for 10 items: %s", len(out.Items), body)
	}
	var cts [][]byte
	for i, r := range out.Items {
		if refs[i] != '?' && r.Reference != refs[i:i+1] {
			t.Errorf("item %d: reference %q, want %q", i, r.Reference, refs[i:i+1])
		}
		switch {
		case good[i] && (r.Error != nil || len(r.Ciphertext) == 0):
			t.Errorf("item %d: %+v, want a ciphertext", i, r)
		case !good[i] && (r.Error == nil || r.Error.Code != api.CodeBadRequest || r.Ciphertext != nil):
			t.Errorf("item %d: %+v, want a bad_request error", i, r)
		case good[i]:
			cts = append(cts, r.Ciphertext)
		}
	}
	// The good items are sealed as asked, in order.
	for i, want := range []string{"a", "c", "d"} {
		ctx := []byte(nil)
		if i == 2 {
			ctx = []byte("c")
		}
		var res api.DecryptResult
		if code := ts.postJSON(t, "/v1/decrypt/default", api.DecryptRequest{DecryptItem: api.DecryptItem{Ciphertext: cts[i], Context: ctx}}, &res); code != 200 || string(res.Plaintext) != want {
			t.Errorf("good item %d decrypts to %d %q, want %q", i, code, res.Plaintext, want)
		}
	}

	// The same on decrypt: a bad item next to a good one.
	code, body = postRaw(t, ts, "/v1/decrypt/default", fmt.Sprintf(`{"items":[{"ciphertext":"%s"},{"ciphertext":"%%%%"}]}`, base64.StdEncoding.EncodeToString(cts[0])))
	var dout api.BatchResponse[api.DecryptResult]
	if err := json.Unmarshal(body, &dout); err != nil || code != api.BatchStatusPartial || len(dout.Items) != 2 ||
		string(dout.Items[0].Plaintext) != "a" || dout.Items[1].Error == nil || dout.Items[1].Error.Code != api.CodeBadRequest {
		t.Errorf("decrypt batch with a bad item: %d %s", code, body)
	}

	// Every item bad: the first error's status, with every item answered.
	code, body = postRaw(t, ts, "/v1/encrypt/default", `{"items":[{"plaintext":"%%"},{"plaintext":"YQ=","reference":"x"}]}`)
	out = api.BatchResponse[api.EncryptResult]{}
	if err := json.Unmarshal(body, &out); err != nil || code != 400 || len(out.Items) != 2 || out.Items[1].Reference != "x" || out.Items[1].Error == nil {
		t.Errorf("batch of bad items: %d %s", code, body)
	}

	// Malformed JSON still refuses the batch as a whole.
	for _, b := range []string{`{"items":[{"plaintext":"YQ=="},{"plaintext":}]}`, `{"items":[{"plaintext":"YQ=="}`, `{"items":{}}`, `{"items":[],"plaintext":"YQ=="}`} {
		code, body := postRaw(t, ts, "/v1/encrypt/default", b)
		wantError(t, b, code, body, 400, api.CodeBadRequest)
	}
}
