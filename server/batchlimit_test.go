package server

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/api"
)

// The batch decoder refuses a batch at its item limit + 1, before that item
// is decoded: the items it holds never outgrow the limit.
func TestDecodeBatchStopsAtItemLimit(t *testing.T) {
	const limit = 3
	batch := func(item string, n int) []byte {
		return []byte(`{"items":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`)
	}
	for _, item := range []string{`{}`, `1`, `null`, `{"plaintext":"YQ=="}`} {
		req, err := decodeDataRequest(batch(item, limit), "plaintext", nil, limit)
		if err != nil || len(req.items) != limit {
			t.Fatalf("%d items of %s: %d decoded, %v", limit, item, len(req.items), err)
		}
		for _, n := range []int{limit + 1, 1_000_000} {
			_, err := decodeDataRequest(batch(item, n), "plaintext", nil, limit)
			if err == nil || err.Code != api.CodeTooLarge {
				t.Fatalf("%d items of %s: %v, want %s", n, item, err, api.CodeTooLarge)
			}
		}
	}
	// The refusal comes before the syntax of what follows is read.
	if _, err := decodeDataRequest([]byte(`{"items":[{},{},{},{},`), "plaintext", nil, limit); err == nil || err.Code != api.CodeTooLarge {
		t.Fatalf("a cut body over the limit: %v, want %s", err, api.CodeTooLarge)
	}
}

// A JSON request costs the server at most a small multiple of its route's
// body limit in memory, whatever the body holds: a body of the largest size
// made of the smallest items, each of which would be a result or an error,
// is refused at the item limit.
func TestJSONRequestMemoryBounded(t *testing.T) {
	const limit = 1 << 20
	ts := startTestServer(t, Config{SkipBenchmark: true, MaxJSONBody: limit})
	fill := func(item string) []byte {
		b := []byte(`{"items":[` + strings.Repeat(item+",", (limit-64)/(len(item)+1)))
		return append(b[:len(b)-1], "]}"...)
	}
	for _, tc := range []struct {
		name string
		body []byte
		code api.Code
	}{
		{"empty objects", fill(`{}`), api.CodeTooLarge},
		{"numbers", fill(`1`), api.CodeTooLarge},
		{"nulls", fill(`null`), api.CodeTooLarge},
		{"unknown fields", fill(`{"x":1}`), api.CodeTooLarge},
	} {
		for _, path := range []string{"/v1/encrypt/default", "/v1/decrypt/default", "/v1/rewrap/default"} {
			if len(tc.body) > limit {
				t.Fatalf("%s: a body of %d bytes, over the limit", tc.name, len(tc.body))
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			code, body, _ := ts.do(t, "POST", path, api.ContentTypeJSON, bytes.NewReader(tc.body), "")
			runtime.ReadMemStats(&after)
			if code != 413 || !bytes.Contains(body, []byte(`"`+tc.code+`"`)) {
				t.Fatalf("%s to %s: %d %s, want 413 %s", tc.name, path, code, body, tc.code)
			}
			// The body itself, the room its base64 could decode to, and
			// the client's and the server's buffers: about 2.5 limits.
			if got := after.TotalAlloc - before.TotalAlloc; got > 4*limit {
				t.Errorf("%s to %s: the request allocated %d bytes, over 4 × the body limit (%d)", tc.name, path, got, limit)
			}
		}
	}
}
