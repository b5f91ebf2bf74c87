package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/api"
)

// checkDecodeDataRequest holds decodeDataRequest to encoding/json with
// strictJSON's checks (decodeJSON): a body both accept yields the same
// items; a body decodeJSON refuses is refused by decodeDataRequest, as a
// whole or in the items it finds wrong; a body decodeJSON accepts has no
// refused item.
func checkDecodeDataRequest(t *testing.T, b []byte) {
	t.Helper()
	// An item limit no body of b's length can reach: TestDecodeBatchStopsAtItemLimit
	// checks the limit, this the decoding.
	items := len(b) + 1
	for _, field := range []string{"plaintext", "ciphertext"} {
		got, err := decodeDataRequest(b, field, nil, items)
		// Scratch space of every size that matters changes nothing.
		for _, n := range []int{1, 7, len(b), 2 * len(b)} {
			g2, err2 := decodeDataRequest(b, field, make([]byte, n), items)
			if (err == nil) != (err2 == nil) || err == nil && !sameRequest(got, g2) {
				t.Fatalf("%q: %d bytes of scratch change the result", b, n)
			}
		}
		itemFailed := false
		for _, it := range got.items {
			itemFailed = itemFailed || it.err != nil
		}
		var want api.EncryptRequest
		var wantD api.DecryptRequest
		var wantErr error
		var wantItems []dataItem
		var wantSingle dataItem
		if field == "plaintext" {
			wantErr = decodeJSON(b, &want)
			wantSingle = dataItem{data: want.Plaintext, context: want.Context, reference: want.Reference}
			for _, it := range want.Items {
				wantItems = append(wantItems, dataItem{data: it.Plaintext, context: it.Context, reference: it.Reference})
			}
			if want.Items != nil && wantItems == nil {
				wantItems = []dataItem{}
			}
		} else {
			wantErr = decodeJSON(b, &wantD)
			wantSingle = dataItem{data: wantD.Ciphertext, context: wantD.Context, reference: wantD.Reference}
			for _, it := range wantD.Items {
				wantItems = append(wantItems, dataItem{data: it.Ciphertext, context: it.Context, reference: it.Reference})
			}
			if wantD.Items != nil && wantItems == nil {
				wantItems = []dataItem{}
			}
		}
		switch {
		case wantErr == nil && err != nil:
			t.Fatalf("%q (%s): refused (%v), encoding/json accepts", b, field, err)
		case wantErr == nil && itemFailed:
			t.Fatalf("%q (%s): an item refused, encoding/json accepts", b, field)
		case wantErr != nil && err == nil && !itemFailed:
			t.Fatalf("%q (%s): accepted, encoding/json refuses (%v)", b, field, wantErr)
		case wantErr == nil && !sameRequest(got, dataRequest{single: wantSingle, items: wantItems}):
			t.Fatalf("%q (%s): %+v, encoding/json %+v %+v", b, field, got, wantSingle, wantItems)
		}
	}
}

func sameItem(a, b dataItem) bool {
	return bytes.Equal(a.data, b.data) && (a.data == nil) == (b.data == nil) &&
		bytes.Equal(a.context, b.context) && (a.context == nil) == (b.context == nil) &&
		a.reference == b.reference && (a.err == nil) == (b.err == nil)
}

func sameRequest(a, b dataRequest) bool {
	if !sameItem(a.single, b.single) || (a.items == nil) != (b.items == nil) || len(a.items) != len(b.items) {
		return false
	}
	for i := range a.items {
		if !sameItem(a.items[i], b.items[i]) {
			return false
		}
	}
	return true
}

var dataRequestSeeds = []string{
	`{"plaintext":"aGVsbG8="}`,
	` { "plaintext" : "aGVsbG8=" , "context":"Yw==", "reference": "r-1 x" } ` + "\n",
	`{"context":"Yw==","plaintext":""}`,
	`{}`,
	"\t{\r\n}\n",
	`{"plaintext":"aGVsbG8=","plaintext":"Yw=="}`,
	`{"Plaintext":"aGVsbG8="}`,
	`{"plaintext":null}`,
	`{"plaintext":"aGVsbG8"}`,
	`{"plaintext":"aGVs\u0062G8="}`,
	`{"plaintext":"aGVs\nbG8="}`,
	`{"plaintext":"\/w=="}`,
	`{"plaintext":"YR=="}`,
	`{"plaintext":"aGVsbG8=","items":[]}`,
	`{"plaintext":[]}`,
	`{"plaintext":[104,105],"context":[]}`,
	`{"items":[{"plaintext":[1]}]}`,
	`{"items":[{"plaintext":"YQ=="}]}`,
	`{"items":[{"plaintext":"YQ=="},{"plaintext":"!"},null,7,{"x":[1,{"y":-0.5e+3}]}]}`,
	`{"items":null}`,
	`{"items":[],"items":[]}`,
	`{"items":{}}`,
	`{"plaintext":"aGVsbG8=","extra":"x"}`,
	`{"plaintext":"aGVsbG8="} {}`,
	`{"plaintext":"aGVsbG8=",}`,
	`{"plaintext":"aGVsbG8="`,
	`{"reference":"caf\u00e9 \ud83d\ude00 \ud800 \"q\""}`,
	"{\"reference\":\"caf\xc3\xa9\"}",
	"{\"reference\":\"bad\xff\"}",
	`{"reference":"<b>"}`,
	`{"reference":5}`,
	`[]`,
	`null`,
	``,
	`{"items":[{"ciphertext":"YQ==","context":"Yg==","reference":"r"}]}`,
}

func TestDecodeDataRequest(t *testing.T) {
	for _, s := range dataRequestSeeds {
		checkDecodeDataRequest(t, []byte(s))
	}
	// What the batch route relies on: the items come back in order, bad
	// ones with their error and their reference.
	req, err := decodeDataRequest([]byte(`{"items":[{"plaintext":"YQ==","reference":"a"},{"plaintext":"%%","reference":"b"},{"reference":"c","Plaintext":"YQ=="},7]}`), "plaintext", nil, 1000)
	if err != nil || len(req.items) != 4 {
		t.Fatalf("%+v %v", req, err)
	}
	for i, want := range []struct {
		ref string
		bad bool
	}{{"a", false}, {"b", true}, {"c", true}, {"", true}} {
		it := req.items[i]
		if it.reference != want.ref || (it.err != nil) != want.bad || it.err != nil && it.data != nil {
			t.Errorf("item %d: %+v, want reference %q, refused %v", i, it, want.ref, want.bad)
		}
		if it.err != nil && strings.Contains(it.err.Message, "Plaintext") {
			t.Errorf("item %d: the error repeats the request: %s", i, it.err.Message)
		}
	}
}

func FuzzDecodeDataRequest(f *testing.F) {
	for _, s := range dataRequestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeDataRequest(t, b) })
}
