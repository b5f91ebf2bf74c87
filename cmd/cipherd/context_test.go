package main

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// --context-text gives the context as text, and seals and opens exactly as
// --context given the same bytes in base64, whichever side uses which.
func TestCLIContextText(t *testing.T) {
	url := startServe(t)
	env := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}
	const text = "invoice 7 — Zürich ✓"
	b64 := base64.StdEncoding.EncodeToString([]byte(text))
	msg := []byte("context as text\n")
	for _, c := range []struct{ enc, dec []string }{
		{[]string{"--context-text", text}, []string{"--context", b64}},
		{[]string{"--context", b64}, []string{"--context-text", text}},
		{[]string{"--context-text", text, "--local"}, []string{"--context-text", text, "--local"}},
	} {
		ct, e, code := crypt(t, env, bytes.NewReader(msg), append([]string{"encrypt", "--key", "default"}, c.enc...)...)
		if code != 0 {
			t.Fatalf("encrypt %q: exit %d: %s", c.enc, code, e)
		}
		if pt, e, code := crypt(t, env, strings.NewReader(ct), append([]string{"decrypt", "--key", "default"}, c.dec...)...); code != 0 || pt != string(msg) {
			t.Fatalf("encrypt %q, decrypt %q: exit %d, %q: %s", c.enc, c.dec, code, pt, e)
		}
		// The text is the context: another text, or none, does not open.
		for _, other := range [][]string{{"--context-text", text + " "}, nil} {
			if pt, e, code := crypt(t, env, strings.NewReader(ct), append([]string{"decrypt", "--key", "default"}, other...)...); code != 1 || pt != "" || !strings.Contains(e, "decryption_failed") {
				t.Errorf("encrypt %q, decrypt %q: exit %d, %q: %s", c.enc, other, code, pt, e)
			}
		}
	}

	for _, args := range [][]string{
		{"--context", b64, "--context-text", text},
		{"--context", "", "--context-text", ""},
		{"--context-text", "not \xff UTF-8"},
		{"--context", text},
	} {
		if _, e, code := crypt(t, env, bytes.NewReader(msg), append([]string{"encrypt", "--key", "default"}, args...)...); code != 2 || !strings.Contains(e, "--context") {
			t.Errorf("encrypt %q: exit %d, want 2: %s", args, code, e)
		}
	}
}
