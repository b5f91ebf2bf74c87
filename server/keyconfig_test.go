package server

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
)

// PUT /v1/keys/{key}/config is a merge patch: the fields given change, null
// resets one, the others are kept. The walk is docs/API.md's, and its
// output is the one the docs show.
func TestKeyConfigPatch(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	put := func(body string) (int, api.Key, string) {
		t.Helper()
		code, b, _ := ts.do(t, "PUT", "/v1/keys/orders/config", "application/json", strings.NewReader(body), "")
		var k api.Key
		if code == 200 {
			if err := json.Unmarshal(b, &k); err != nil {
				t.Fatalf("PUT %s: %s: %v", body, b, err)
			}
		}
		return code, k, string(b)
	}
	describe := func() api.Key {
		t.Helper()
		code, b, _ := ts.do(t, "GET", "/v1/keys/orders", "", nil, "")
		var k api.Key
		if code != 200 || json.Unmarshal(b, &k) != nil {
			t.Fatalf("describe: %d %s", code, b)
		}
		return k
	}

	if code := ts.postJSON(t, "/v1/keys/orders", map[string]any{"allowed_aeads": []string{"aes-256-gcm"}, "rotation_period": "720h"}, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	if code, _, _ := ts.do(t, "POST", "/v1/keys/orders/rotate", "", nil, ""); code != 200 {
		t.Fatalf("rotate: %d", code)
	}
	code, k, body := put(`{"min_decryption_version":2,"deletion_allowed":true}`)
	want := api.KeyConfig{MinDecryptionVersion: 2, AllowedAEADs: []string{"aes-256-gcm"}, DeletionAllowed: true, RotationPeriod: "720h0m0s"}
	if code != 200 || !sameConfig(k.KeyConfig, want) || k.LatestVersion != 2 {
		t.Fatalf("configure: %d %s; want %+v", code, body, want)
	}
	cfgJSON, err := json.Marshal(k.KeyConfig)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	if shown := strings.Trim(string(cfgJSON), "{}"); !strings.Contains(string(doc), shown) {
		t.Errorf("docs/API.md does not show the configuration the route answers: %s", shown)
	}

	// null resets a field; the others stay.
	if code, k, body := put(`{"rotation_period":null,"aead":"aes-256-gcm"}`); code != 200 ||
		!sameConfig(k.KeyConfig, api.KeyConfig{MinDecryptionVersion: 2, AllowedAEADs: []string{"aes-256-gcm"}, AEAD: "aes-256-gcm", DeletionAllowed: true}) {
		t.Fatalf("reset rotation_period: %d %s", code, body)
	}
	if code, k, body := put(`{}`); code != 200 || !sameConfig(k.KeyConfig, describe().KeyConfig) || k.AEAD != "aes-256-gcm" {
		t.Fatalf("empty patch: %d %s", code, body)
	}

	// A patch whose result is invalid changes nothing.
	before := describe().KeyConfig
	for body, wantCode := range map[string]api.Code{
		`{"aead":"chacha20-poly1305"}`:                api.CodeInvalidConfig, // outside allowed_aeads
		`{"allowed_aeads":["aes-128-gcm"]}`:           api.CodeInvalidConfig, // the pinned aead outside it
		`{"rotation_period":"monthly"}`:               api.CodeInvalidConfig,
		`{"min_decryption_version":3}`:                api.CodeInvalidConfig,
		`{"min_decryption_version":"2"}`:              api.CodeBadRequest,
		`{"deletion_allowed":false,"colour":"green"}`: api.CodeBadRequest,
		`[]`: api.CodeBadRequest,
	} {
		code, _, b := put(body)
		var e api.Error
		if code != 400 || json.Unmarshal([]byte(b), &e) != nil || e.Code != wantCode {
			t.Errorf("PUT %s: %d %s, want 400 %s", body, code, b, wantCode)
		}
		if strings.Contains(b, "monthly") {
			t.Errorf("PUT %s: the error repeats the request: %s", body, b)
		}
		if after := describe().KeyConfig; !sameConfig(after, before) {
			t.Fatalf("PUT %s changed the configuration to %+v", body, after)
		}
	}

	// Concurrent patches of different fields all hold.
	var wg sync.WaitGroup
	for _, body := range []string{`{"deletion_allowed":false}`, `{"rotation_period":"48h"}`, `{"aead":null}`, `{"min_decryption_version":1}`} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, _, b := put(body); code != 200 {
				t.Errorf("PUT %s: %d %s", body, code, b)
			}
		}()
	}
	wg.Wait()
	if got := describe().KeyConfig; !sameConfig(got, api.KeyConfig{MinDecryptionVersion: 1, AllowedAEADs: []string{"aes-256-gcm"}, RotationPeriod: "48h0m0s"}) {
		t.Fatalf("after concurrent patches: %+v", got)
	}
	if code, _, b := ts.do(t, "PUT", "/v1/keys/nosuch/config", "application/json", strings.NewReader(`{}`), ""); code != 404 {
		t.Fatalf("unknown key: %d %s", code, b)
	}
}

func sameConfig(a, b api.KeyConfig) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// AEAD names are accepted in any case, in a key's configuration and in the
// server's, and are stored, compared and shown in the canonical one.
func TestAEADNamesCanonical(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true, AEAD: "AES-256-GCM", AllowedAEADs: []string{"AES-256-GCM", "ChaCha20-Poly1305"}})
	if ts.cfg.AEAD != "aes-256-gcm" || !slices.Equal(ts.cfg.AllowedAEADs, []string{"aes-256-gcm", "chacha20-poly1305"}) {
		t.Errorf("server config: aead %q allowed_aeads %q", ts.cfg.AEAD, ts.cfg.AllowedAEADs)
	}
	var k api.Key
	if code := ts.postJSON(t, "/v1/keys/mixed", map[string]any{"aead": "aes-256-gcm", "allowed_aeads": []string{"AES-256-GCM"}}, &k); code != 201 {
		t.Fatalf("create with aead and allowed_aeads in different cases: %d %+v", code, k)
	}
	if k.AEAD != "aes-256-gcm" || !slices.Equal(k.AllowedAEADs, []string{"aes-256-gcm"}) {
		t.Errorf("created: %+v", k.KeyConfig)
	}
	code, b, _ := ts.do(t, "PUT", "/v1/keys/mixed/config", "application/json", strings.NewReader(`{"aead":"Aes-256-Gcm"}`), "")
	if code != 200 || json.Unmarshal(b, &k) != nil || k.AEAD != "aes-256-gcm" {
		t.Fatalf("PUT config: %d %s", code, b)
	}
	var enc api.EncryptResult
	if code := ts.postJSON(t, "/v1/encrypt/mixed", map[string]any{"plaintext": []byte("x")}, &enc); code != 200 || enc.AEAD != "aes-256-gcm" {
		t.Fatalf("encrypt: %d %+v", code, enc)
	}
}

// An invalid configuration's message says what is wrong, without the
// packages' error prefixes.
func TestInvalidConfigMessage(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/v1/keys/rot", `{"aead":"rot13"}`, "not an AEAD of the sealed format"},
		{"PUT", "/v1/keys/default/config", `{"min_decryption_version":9}`, "min_decryption_version 9 is above the latest version 1"},
	} {
		code, b, _ := ts.do(t, tc.method, tc.path, "application/json", strings.NewReader(tc.body), "")
		var e api.Error
		if code != 400 || json.Unmarshal(b, &e) != nil || e.Code != api.CodeInvalidConfig || !strings.HasPrefix(e.Message, tc.want) || strings.Contains(e.Message, "cryptosvc") {
			t.Errorf("%s %s %s: %d %s, want 400 invalid_config starting %q", tc.method, tc.path, tc.body, code, b, tc.want)
		}
	}
}

// rotation_period is at least min_rotation_period (1h unless configured
// lower), refused below with 400 invalid_config; the server looks for due
// keys every minute, or every min_rotation_period if shorter.
func TestRotationPeriodMinimum(t *testing.T) {
	ts := startTestServer(t, Config{SkipBenchmark: true})
	if ts.cfg.MinRotationPeriod != time.Hour {
		t.Errorf("default min_rotation_period %v, want 1h", ts.cfg.MinRotationPeriod)
	}
	refused := func(code int, b []byte) bool {
		var e api.Error
		return code == 400 && json.Unmarshal(b, &e) == nil && e.Code == api.CodeInvalidConfig && strings.Contains(e.Message, "1h0m0s")
	}
	for _, p := range []string{"1s", "59m"} {
		code, b, _ := ts.do(t, "POST", "/v1/keys/fast", "application/json", strings.NewReader(`{"rotation_period":"`+p+`"}`), "")
		if !refused(code, b) {
			t.Errorf("create with rotation_period %s: %d %s, want 400 %s naming the minimum", p, code, b, api.CodeInvalidConfig)
		}
	}
	if code := ts.postJSON(t, "/v1/keys/hourly", map[string]any{"rotation_period": "1h"}, nil); code != 201 {
		t.Fatalf("create with rotation_period 1h: %d", code)
	}
	if code, b, _ := ts.do(t, "PUT", "/v1/keys/hourly/config", "application/json", strings.NewReader(`{"rotation_period":"1s"}`), ""); !refused(code, b) {
		t.Errorf("PUT rotation_period 1s: %d %s", code, b)
	}
	if got := rotationCheck(&ts.cfg); got != time.Minute {
		t.Errorf("rotation checked every %v with min_rotation_period 1h, want every minute (docs/API.md)", got)
	}

	// Set lower by the operator.
	cfg := Config{SkipBenchmark: true}
	if err := cfg.ApplyEnv(env{"CIPHERD_MIN_ROTATION_PERIOD": "2s"}.get); err != nil {
		t.Fatal(err)
	}
	lax := startTestServer(t, cfg)
	if code := lax.postJSON(t, "/v1/keys/fast", map[string]any{"rotation_period": "2s"}, nil); code != 201 {
		t.Fatalf("create with rotation_period 2s and min_rotation_period 2s: %d", code)
	}
	if got := rotationCheck(&lax.cfg); got != 2*time.Second {
		t.Errorf("rotation checked every %v with min_rotation_period 2s, want 2s", got)
	}
	for _, bad := range []string{"soon", "-1h", "0s"} {
		if err := (&Config{}).ApplyEnv(env{"CIPHERD_MIN_ROTATION_PERIOD": bad}.get); err == nil {
			t.Errorf("CIPHERD_MIN_ROTATION_PERIOD=%s accepted", bad)
		}
	}
}

type env map[string]string

func (e env) get(name string) string { return e[name] }
