package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/proctest"
)

// TestRootKeyStaticBuild builds cipherd as the static image does
// (CGO_ENABLED=0) and checks that it refuses a pkcs11: URI, at start-up
// and in rootkey init, with a message that says how to get a build that
// has PKCS#11.
func TestRootKeyStaticBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := proctest.Build(t, "CGO_ENABLED=0")
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

// TestRootkeySealKeyring seals a keyring made by cipherd keyring new, then
// re-seals it under another root key, and checks that the sealed file holds
// no material and that the server starts on it with the root key only.
func TestRootkeySealKeyring(t *testing.T) {
	dir := t.TempDir()
	plain, sealed, resealed := filepath.Join(dir, "plain.json"), filepath.Join(dir, "sealed.json"), filepath.Join(dir, "resealed.json")
	if out, e, code := cipherd(t, nil, "keyring", "new", "-o", plain, "orders", "payments"); code != 0 {
		t.Fatalf("keyring new: %s%s", out, e)
	}
	keys := readKeyringFile(t, plain)
	roots := []string{filepath.Join(dir, "root1.key"), filepath.Join(dir, "root2.key")}
	for i, r := range roots {
		os.WriteFile(r, []byte(strings.Repeat(string(rune('a'+i)), 64)+"\n"), 0o600) // hex
	}
	if out, e, code := cipherd(t, nil, "rootkey", "seal-keyring", "-in", plain, "-out", sealed, "-to", "file:"+roots[0]); code != 0 || !strings.Contains(out, "2 keys sealed") {
		t.Fatalf("seal-keyring: %d %s%s", code, out, e)
	}
	if out, e, code := cipherd(t, nil, "rootkey", "seal-keyring", "-in", sealed, "-from", "file:"+roots[0], "-out", resealed, "-to", "file:"+roots[1]); code != 0 {
		t.Fatalf("re-seal: %d %s%s", code, out, e)
	}
	for _, f := range []string{sealed, resealed} {
		b, _ := os.ReadFile(f)
		for _, k := range keys {
			for _, v := range k.Versions {
				rkNoMaterial(t, f, b, v.Secret.Expose())
			}
		}
	}
	// The server reads the sealed keyring with its root key, and refuses it
	// without, or with the root key it was re-sealed away from.
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"CIPHERD_ROOT_KEY_URI=file:" + roots[0]}, "root key"},
		{nil, "needs the root key"},
	} {
		cmd := exec.Command(proctest.Cipherd(t), "serve", "-keyring", resealed, "-addr", "127.0.0.1:0", "-data-dir", t.TempDir(), "-skip-benchmark")
		cmd.Env = append(os.Environ(), append(tc.env, "CIPHERD_ADMIN_TOKEN=t", "CIPHERD_ROOT_KEY=", "CIPHERD_ROOT_KEY_FILE=")...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("serve with %v: %v, want a refusal saying %q\n%s", tc.env, err, tc.want, out)
		}
	}
	keys2 := readSealed(t, resealed, roots[1])
	if len(keys2) != 2 {
		t.Fatalf("%d keys in the re-sealed keyring", len(keys2))
	}
}

func rkNoMaterial(t *testing.T, what string, b, secret []byte) {
	t.Helper()
	for _, form := range [][]byte{secret, []byte(base64.StdEncoding.EncodeToString(secret)), []byte(hex.EncodeToString(secret))} {
		if bytes.Contains(b, form) {
			t.Errorf("%s holds key material", what)
		}
	}
}

func readSealed(t *testing.T, path, rootFile string) []*cryptosvc.StoredKey {
	t.Helper()
	root, err := cryptosvc.LoadRootKey(rootFile, "")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cryptosvc.NewStaticRootKey(&root, nil)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys, err := cryptosvc.ReadSealedKeyring(context.Background(), f, p)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
