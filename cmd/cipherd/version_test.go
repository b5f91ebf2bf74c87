package main

import (
	"strings"
	"testing"
)

func TestVersionFlagAndHelp(t *testing.T) {
	want, _, code := cipherd(t, nil, "version")
	if code != 0 || !strings.HasPrefix(want, "cipherd ") {
		t.Fatalf("version: exit %d: %q", code, want)
	}
	for _, flag := range []string{"--version", "-version"} {
		if out, errOut, code := cipherd(t, nil, flag); code != 0 || out != want {
			t.Errorf("cipherd %s: exit %d: %q %s, want %q", flag, code, out, errOut, want)
		}
	}
	if out, _, code := cipherd(t, nil, "--version", "-json"); code != 0 || !strings.Contains(out, `"go_version"`) {
		t.Errorf("cipherd --version -json: exit %d: %q", code, out)
	}
	for cmd, want := range map[string]string{"serve": "settings (file key", "encrypt": "-o FILE", "decrypt": "-i file"} {
		if _, errOut, code := cipherd(t, nil, "help", cmd); code != 0 || !strings.Contains(errOut, want) {
			t.Errorf("cipherd help %s: exit %d:\n%s", cmd, code, errOut)
		}
	}
	if _, errOut, code := cipherd(t, nil, "help"); code != 0 || !strings.Contains(errOut, "--version") {
		t.Errorf("cipherd help: exit %d:\n%s", code, errOut)
	}
}
