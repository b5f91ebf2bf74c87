package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
)

// A rotation with a body imports its material as the new version, with the
// checks of an import at creation; a body it cannot use is refused, never
// ignored.
func TestRotateImport(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	material := bytes.Repeat([]byte{7}, 32)
	b64 := base64.StdEncoding.EncodeToString(material)
	if code, body, _ := ts.do(t, "POST", "/v1/keys/byok", api.ContentTypeJSON, strings.NewReader(`{}`), ""); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	// Sealed under the imported version, a message opens under the same
	// material imported into another key: the version is that material.
	code, body, _ := ts.do(t, "POST", "/v1/keys/byok/rotate", api.ContentTypeJSON, strings.NewReader(`{"import":"`+b64+`"}`), "")
	var k api.Key
	if code != 200 || json.Unmarshal(body, &k) != nil || k.LatestVersion != 2 {
		t.Fatalf("rotate with import: %d %s", code, body)
	}
	for _, tc := range []struct{ name, body, ctype string }{
		{"unknown field", `{"imports":"` + b64 + `"}`, api.ContentTypeJSON},
		{"short material", `{"import":"` + base64.StdEncoding.EncodeToString(material[:31]) + `"}`, api.ContentTypeJSON},
		{"the material of a version", `{"import":"` + b64 + `"}`, api.ContentTypeJSON},
		{"not JSON", `import=` + b64, "application/x-www-form-urlencoded"},
		{"bad base64", `{"import":"!!"}`, api.ContentTypeJSON},
	} {
		code, body, _ := ts.do(t, "POST", "/v1/keys/byok/rotate", tc.ctype, strings.NewReader(tc.body), "")
		if code/100 != 4 {
			t.Errorf("%s: %d %s, want a 4xx", tc.name, code, body)
		}
	}
	code, body, _ = ts.do(t, "GET", "/v1/keys/byok", "", nil, "")
	if code != 200 || json.Unmarshal(body, &k) != nil || k.LatestVersion != 2 {
		t.Fatalf("after the refused rotations: %d %s, want latest version 2", code, body)
	}

	// The new version is the material: a service holding it as version 2
	// of the key opens what the server sealed.
	var enc api.EncryptResult
	if code := ts.postJSON(t, "/v1/encrypt/byok", map[string]any{"plaintext": []byte("hello")}, &enc); code != 200 || enc.KeyVersion != 2 {
		t.Fatalf("encrypt: %d, version %d", code, enc.KeyVersion)
	}
	v1, _ := cryptosvc.GenerateSecret(rand.Reader)
	v2, _ := cryptosvc.NewSecret(material)
	svc, err := cryptosvc.New(cryptosvc.Config{Keystore: cryptosvc.NewMemStore()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ImportKey(context.Background(), "byok", []cryptosvc.Secret{v1, v2}, cryptosvc.KeyConfig{}); err != nil {
		t.Fatal(err)
	}
	if pt, _, err := svc.Open(context.Background(), "byok", enc.Ciphertext, nil); err != nil || string(pt) != "hello" {
		t.Fatalf("opening with the imported material: %q, %v", pt, err)
	}

	// An empty body, or none, is a random version.
	for _, body := range []string{"", "{}"} {
		ct := api.ContentTypeJSON
		if body == "" {
			ct = ""
		}
		if code, b, _ := ts.do(t, "POST", "/v1/keys/byok/rotate", ct, strings.NewReader(body), ""); code != 200 {
			t.Fatalf("rotate with body %q: %d %s", body, code, b)
		}
	}
}
