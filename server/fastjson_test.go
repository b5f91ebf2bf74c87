package server

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/cipherd/cipherd/api"
)

// strictItem decodes b the general way, as an encryption request.
func strictItem(b []byte) (api.EncryptRequest, bool) {
	var req api.EncryptRequest
	return req, decodeJSON(b, &req) == nil
}

// checkDecodeItem holds decodeItem to its contract on one input: when it
// accepts, encoding/json accepts too and yields the same item.
func checkDecodeItem(t *testing.T, b []byte) bool {
	t.Helper()
	data, ctx, ref, ok := decodeItem(b, "plaintext", nil)
	// With scratch space of every size that matters, the results must be
	// the same, and disjoint.
	for _, n := range []int{0, 1, len(data), len(data) + len(ctx), 2 * len(b)} {
		scratch := make([]byte, n)
		d, c, r, k := decodeItem(b, "plaintext", scratch)
		if k != ok || !bytes.Equal(d, data) || (d == nil) != (data == nil) || !bytes.Equal(c, ctx) || (c == nil) != (ctx == nil) || r != ref {
			t.Fatalf("%q with %d bytes of scratch: (%q, %q, %q, %v), without: (%q, %q, %q, %v)", b, n, d, c, r, k, data, ctx, ref, ok)
		}
		keep := bytes.Clone(c)
		for i := range d {
			d[i] = ^d[i]
		}
		if !bytes.Equal(c, keep) {
			t.Fatalf("%q with %d bytes of scratch: data and context share memory", b, n)
		}
	}
	if !ok {
		return false
	}
	want, wantOK := strictItem(b)
	switch {
	case !wantOK:
		t.Fatalf("%q: the fast path accepted what encoding/json refuses", b)
	case want.Items != nil:
		t.Fatalf("%q: the fast path accepted a batch", b)
	case !bytes.Equal(data, want.Plaintext) || (data == nil) != (want.Plaintext == nil):
		t.Fatalf("%q: plaintext %q (nil %v), encoding/json %q (nil %v)", b, data, data == nil, want.Plaintext, want.Plaintext == nil)
	case !bytes.Equal(ctx, want.Context) || (ctx == nil) != (want.Context == nil):
		t.Fatalf("%q: context %q, encoding/json %q", b, ctx, want.Context)
	case ref != want.Reference:
		t.Fatalf("%q: reference %q, encoding/json %q", b, ref, want.Reference)
	}
	return true
}

func TestDecodeItem(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool
	}{
		{`{"plaintext":"aGVsbG8="}`, true},
		{` { "plaintext" : "aGVsbG8=" , "context":"Yw==", "reference": "r-1 x" } ` + "\n", true},
		{`{"context":"Yw==","plaintext":""}`, true},
		{`{}`, true},
		{"\t{\r\n}\n", true},
		{`{"plaintext":"aGVsbG8=","plaintext":"Yw=="}`, false}, // duplicate: last wins in encoding/json
		{`{"Plaintext":"aGVsbG8="}`, false},                    // encoding/json matches names without case
		{`{"plaintext":null}`, false},
		{`{"plaintext":"aGVsbG8"}`, false}, // bad padding: the general path words the error
		{`{"plaintext":"aGVs\u0062G8="}`, false},
		{`{"plaintext":"aGVsbG8=","items":[]}`, false},
		{`{"items":[{"plaintext":"YQ=="}]}`, false},
		{`{"plaintext":"aGVsbG8=","extra":"x"}`, false},
		{`{"plaintext":"aGVsbG8="} {}`, false},
		{`{"plaintext":"aGVsbG8=",}`, false},
		{`{"plaintext":"aGVsbG8="`, false},
		{`{"reference":"caf\u00e9"}`, false},
		{"{\"reference\":\"caf\xc3\xa9\"}", false},
		{"{\"reference\":\"bad\xff\"}", false},
		{`{"reference":"<b>"}`, true},
		{`[]`, false},
		{``, false},
	} {
		if got := checkDecodeItem(t, []byte(tc.in)); got != tc.fast {
			t.Errorf("%q: fast path %v, want %v", tc.in, got, tc.fast)
		}
	}
}

func FuzzDecodeItem(f *testing.F) {
	for _, s := range []string{`{"plaintext":"aGVsbG8=","context":"Yw==","reference":"x"}`, `{}`, `{"plaintext":""}`, ` {"context" :"" } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeItem(t, b) })
}

// The fast encoders write what encoding/json writes, or decline.
func checkAppendResults(t *testing.T, data []byte, version uint32, aead, ref string) {
	t.Helper()
	er := api.EncryptResult{Ciphertext: data, KeyVersion: version, AEAD: aead, Reference: ref}
	if got, ok := appendEncryptResult(nil, &er); ok {
		want, _ := json.Marshal(&er)
		if !bytes.Equal(got, want) {
			t.Fatalf("encrypt result %+v:\n got %s\nwant %s", er, got, want)
		}
	} else if ref == "" && plainASCII(aead) {
		t.Fatalf("encrypt result %+v: the fast encoder declined a plain result", er)
	}
	dr := api.DecryptResult{Plaintext: data, KeyVersion: version, Reference: ref}
	if got, ok := appendDecryptResult(nil, &dr); ok {
		want, _ := json.Marshal(&dr)
		if !bytes.Equal(got, want) {
			t.Fatalf("decrypt result %+v:\n got %s\nwant %s", dr, got, want)
		}
	} else if ref == "" {
		t.Fatalf("decrypt result %+v: the fast encoder declined a plain result", dr)
	}
}

func TestAppendResults(t *testing.T) {
	for _, data := range [][]byte{nil, {}, {0}, []byte("hello, world"), bytes.Repeat([]byte{0xff}, 100)} {
		for _, v := range []uint32{0, 1, 4294967295} {
			for _, aead := range []string{"", "aes-256-gcm", "a<b", "é"} {
				for _, ref := range []string{"", "r"} {
					checkAppendResults(t, data, v, aead, ref)
				}
			}
		}
	}
	if _, ok := appendEncryptResult(nil, &api.EncryptResult{Error: &api.Error{Code: api.CodeBadRequest}}); ok {
		t.Error("the fast encoder took an error result")
	}
}

func FuzzAppendResults(f *testing.F) {
	f.Add([]byte("x"), uint32(1), "aes-128-gcm", "")
	f.Fuzz(checkAppendResults)
}
