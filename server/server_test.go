package server

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"testing"

	"github.com/cipherd/cipherd/api"
)

func TestEncryptDecryptJSONAndStream(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	var enc api.EncryptResult
	if code := ts.postJSON(t, "/v1/encrypt/default", api.EncryptRequest{EncryptItem: api.EncryptItem{Plaintext: []byte("hello"), Context: []byte("c")}}, &enc); code != 200 || enc.KeyVersion != 1 {
		t.Fatalf("encrypt: %d %+v", code, enc)
	}
	var dec api.DecryptResult
	if code := ts.postJSON(t, "/v1/decrypt/default", api.DecryptRequest{DecryptItem: api.DecryptItem{Ciphertext: enc.Ciphertext, Context: []byte("c")}}, &dec); code != 200 || string(dec.Plaintext) != "hello" {
		t.Fatalf("decrypt: %d %+v", code, dec)
	}

	pt := make([]byte, 3<<20+123)
	rand.Read(pt)
	code, ct, hdr := ts.do(t, "POST", "/v1/encrypt/default", "application/octet-stream", bytes.NewReader(pt), "")
	if code != 200 || hdr.Get(api.HeaderKeyVersion) != "1" {
		t.Fatalf("stream encrypt: %d", code)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/v1/decrypt/default", bytes.NewReader(ct))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+ts.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, pt) || resp.ContentLength != int64(len(pt)) {
		t.Fatalf("stream decrypt: %v, equal=%v, Content-Length %d", err, bytes.Equal(got, pt), resp.ContentLength)
	}

	// A flipped bit mid-stream: the client gets an error, never a clean end.
	ct[len(ct)/2] ^= 1
	req, _ = http.NewRequest("POST", ts.URL+"/v1/decrypt/default", bytes.NewReader(ct))
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+ts.Token)
	// The server aborts the connection at the forged chunk; if the client is
	// still sending the body then, the error comes from Do (connection reset)
	// rather than from reading the response: an error all the same.
	if resp, err = http.DefaultClient.Do(req); err == nil {
		got, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil || resp.Trailer.Get(api.TrailerStatus) == "ok" || len(got) >= len(pt)/2+1 {
			t.Fatalf("tampered stream read as complete: err=%v len=%d trailer=%q", err, len(got), resp.Trailer.Get(api.TrailerStatus))
		}
	}
}
