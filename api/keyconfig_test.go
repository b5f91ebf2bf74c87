package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestKeyConfigPatch(t *testing.T) {
	cur := KeyConfig{MinDecryptionVersion: 2, AllowedAEADs: []string{"aes-256-gcm"}, AEAD: "aes-256-gcm", DeletionAllowed: true, RotationPeriod: "720h0m0s"}
	for _, tc := range []struct {
		body string
		want KeyConfig
	}{
		{`{}`, cur},
		{`{"deletion_allowed":false}`, KeyConfig{MinDecryptionVersion: 2, AllowedAEADs: []string{"aes-256-gcm"}, AEAD: "aes-256-gcm", RotationPeriod: "720h0m0s"}},
		{`{"min_decryption_version":3,"rotation_period":"24h"}`, KeyConfig{MinDecryptionVersion: 3, AllowedAEADs: []string{"aes-256-gcm"}, AEAD: "aes-256-gcm", DeletionAllowed: true, RotationPeriod: "24h"}},
		{`{"allowed_aeads":null,"aead":null,"rotation_period":null}`, KeyConfig{MinDecryptionVersion: 2, DeletionAllowed: true}},
		{`{"allowed_aeads":["aes-128-gcm","chacha20-poly1305"], "min_decryption_version" : null }`, KeyConfig{AllowedAEADs: []string{"aes-128-gcm", "chacha20-poly1305"}, AEAD: "aes-256-gcm", DeletionAllowed: true, RotationPeriod: "720h0m0s"}},
	} {
		var p KeyConfigPatch
		if err := json.Unmarshal([]byte(tc.body), &p); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if got := p.Apply(cur); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.body, got, tc.want)
		}
		// Encoding the patch again gives the same patch.
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var again KeyConfigPatch
		if err := json.Unmarshal(b, &again); err != nil || !reflect.DeepEqual(again, p) {
			t.Errorf("%s: re-encoded as %s: %+v, %v", tc.body, b, again, err)
		}
	}
	var p KeyConfigPatch
	if err := json.Unmarshal([]byte(`{"min_decryption_version":"2"}`), &p); err == nil {
		t.Error("a string for a number was accepted")
	}

	// ReplaceKeyConfig sets every field, so the result is cfg whatever was
	// there before.
	for _, cfg := range []KeyConfig{{}, {DeletionAllowed: true}, {Exportable: true}, cur} {
		b, err := json.Marshal(ReplaceKeyConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		var p KeyConfigPatch
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		for _, before := range []KeyConfig{{}, cur} {
			if got := p.Apply(before); !reflect.DeepEqual(got, cfg) {
				t.Errorf("ReplaceKeyConfig(%+v) as %s over %+v: %+v", cfg, b, before, got)
			}
		}
	}
	if b, _ := json.Marshal(KeyConfigPatch{AEAD: Some("aes-128-gcm"), RotationPeriod: Null[string]()}); string(b) != `{"aead":"aes-128-gcm","rotation_period":null}` {
		t.Errorf("encoded patch %s", b)
	}
}
