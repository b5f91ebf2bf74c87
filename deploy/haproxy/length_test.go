package haproxy

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/cipherd/cipherd/api"
)

// (e) Through HAProxy, the answer to an upload with a Content-Length has
// the exact length of what it carries, and a decrypt that fails after its
// answer started reaches the client cut short of that length.
func testExactLength(t *testing.T, c *cluster) {
	hc := &http.Client{Transport: newTransport()}
	post := func(route string, body []byte) (*http.Response, []byte, error) {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+c.lbAddr+route, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", api.ContentTypeStream)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	pt := random(5<<20 + 3)
	resp, ct, err := post("/v1/encrypt/"+testKey, pt)
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(ct)) || len(ct) <= len(pt) {
		t.Fatalf("encrypt: %d, Content-Length %d for %d bytes, %v", resp.StatusCode, resp.ContentLength, len(ct), err)
	}
	resp, got, err := post("/v1/decrypt/"+testKey, ct)
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != int64(len(pt)) || !bytes.Equal(got, pt) {
		t.Fatalf("decrypt: %d, Content-Length %d, equal %v, %v", resp.StatusCode, resp.ContentLength, bytes.Equal(got, pt), err)
	}
	ct[len(ct)-1] ^= 1
	resp, got, err = post("/v1/decrypt/"+testKey, ct)
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(pt)) || err == nil || len(got) >= len(pt) {
		t.Fatalf("forged decrypt: %d, Content-Length %d, %d bytes, %v; want the body cut", resp.StatusCode, resp.ContentLength, len(got), err)
	}
}
