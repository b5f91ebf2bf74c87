package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRootKeyStaticBuild builds cipherd as the static image does
// (CGO_ENABLED=0) and checks that it refuses a pkcs11: URI, at start-up
// and in rootkey init, with a message that says how to get a build that
// has PKCS#11.
func TestRootKeyStaticBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "cipherd-static")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	uri := "pkcs11:token=cipherd;object=cipherd-root?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin"
	for _, args := range [][]string{
		{"serve", "-data-dir", t.TempDir(), "-addr", "127.0.0.1:0", "-skip-benchmark"},
		{"rootkey", "init", "-uri", uri},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "CIPHERD_ROOT_KEY_URI="+uri, "CIPHERD_ADMIN_TOKEN=t")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("%s with a pkcs11: URI succeeded in a build without cgo\n%s", args[0], out)
		}
		if !strings.Contains(string(out), "built without cgo") || !strings.Contains(string(out), "--target pkcs11") {
			t.Errorf("%s: the refusal does not say why and what to do:\n%s", args[0], out)
		}
		if strings.Contains(string(out), "/run/secrets/pin") {
			t.Errorf("%s: the output names the PIN source", args[0])
		}
	}
}
