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

// TestDockerfilePKCS11 checks the Dockerfile's pkcs11 target, which no CI
// machine can build (no Docker engine): a cgo build of ./cmd/cipherd, copied
// into a glibc image that runs it as the default image does. The default
// image stays the last stage, so a plain docker build is the static one.
func TestDockerfilePKCS11(t *testing.T) {
	_, stages := parseDockerfile(t, "../../Dockerfile")
	byName := map[string]*dfStage{}
	for _, st := range stages {
		byName[st.name] = st
	}
	img, build := byName["pkcs11"], byName["build-pkcs11"]
	if img == nil || build == nil {
		t.Fatal("no pkcs11 and build-pkcs11 stages")
	}
	if stages[len(stages)-1] == img || !strings.HasPrefix(stages[len(stages)-1].image, "gcr.io/distroless/static") {
		t.Fatal("the last stage (docker build's default) must stay the static image")
	}
	var built bool
	for _, in := range build.all("RUN") {
		if strings.Contains(in.args, "go build") {
			built = strings.Contains(in.args, "CGO_ENABLED=1 ") && strings.Contains(in.args, "-o /out/cipherd ./cmd/cipherd")
		}
	}
	if !built {
		t.Error("build-pkcs11 does not go build ./cmd/cipherd with CGO_ENABLED=1 into /out/cipherd")
	}
	if strings.Contains(img.image, "static") || strings.Contains(img.image, "scratch") {
		t.Errorf("pkcs11 image %s has no C library for the module", img.image)
	}
	final := stages[len(stages)-1]
	for _, cmd := range []string{"ENTRYPOINT", "CMD", "USER", "HEALTHCHECK", "VOLUME", "EXPOSE", "ENV"} {
		if a, b := img.one(t, cmd).args, final.one(t, cmd).args; a != b {
			t.Errorf("%s differs between the pkcs11 image (%s) and the default one (%s)", cmd, a, b)
		}
	}
	if !hasCopy(img, "/data", "65532", "0700") {
		t.Error("the pkcs11 image does not create /data for UID 65532")
	}
	var copied bool
	for _, in := range img.all("COPY") {
		copied = copied || in.flags["from"] == "build-pkcs11" && strings.HasSuffix(in.args, "/out/cipherd /usr/local/bin/cipherd")
	}
	if !copied {
		t.Error("the pkcs11 image does not copy build-pkcs11's binary to /usr/local/bin/cipherd")
	}
}
