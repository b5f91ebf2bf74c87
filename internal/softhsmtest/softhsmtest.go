// Package softhsmtest gives tests a real PKCS#11 token: a SoftHSM2 token
// directory of their own, initialised with softhsm2-util (Debian package
// softhsm2). Without SoftHSM2 a test is skipped, or fails when
// CIPHERD_REQUIRE_SOFTHSM=1 (CI sets it).
package softhsmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// EnvRequire names the variable that turns a missing SoftHSM2 into a test
// failure.
const EnvRequire = "CIPHERD_REQUIRE_SOFTHSM"

// modulePaths are where Debian and others install the module.
var modulePaths = []string{
	"/usr/lib/softhsm/libsofthsm2.so",
	"/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
	"/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
	"/usr/local/lib/softhsm/libsofthsm2.so",
}

// Token is an initialised token in a temporary directory.
type Token struct {
	Module  string // the module's path
	Conf    string // the SOFTHSM2_CONF file
	Label   string
	PIN     string
	PINFile string // holds PIN and a newline
}

// Module returns the SoftHSM2 module's path, skipping or failing t when
// SoftHSM2 is not installed.
func Module(t testing.TB) string {
	t.Helper()
	_, errUtil := exec.LookPath("softhsm2-util")
	for _, p := range modulePaths {
		if _, err := os.Stat(p); err == nil && errUtil == nil {
			return p
		}
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("SoftHSM2 (softhsm2-util and libsofthsm2.so) is not installed and %s=1: apt-get install softhsm2", EnvRequire)
	}
	t.Skipf("SoftHSM2 is not installed (apt-get install softhsm2; set %s=1 to fail instead)", EnvRequire)
	return ""
}

// New initialises a token labelled label with user PIN pin in a directory
// of t's, and points SOFTHSM2_CONF at it for the rest of the test (so the
// test must not be parallel). Tokens made by one test share its directory.
func New(t testing.TB, label, pin string) *Token {
	t.Helper()
	mod := Module(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	text := fmt.Sprintf("directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n", tokens)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOFTHSM2_CONF", conf)
	tok := &Token{Module: mod, Conf: conf, Label: label, PIN: pin, PINFile: filepath.Join(dir, "pin")}
	tok.Init(t, label, pin)
	if err := os.WriteFile(tok.PINFile, []byte(pin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tok
}

// Init initialises one more token in the same directory.
func (tok *Token) Init(t testing.TB, label, pin string) {
	t.Helper()
	cmd := exec.Command("softhsm2-util", "--init-token", "--free", "--label", label, "--so-pin", "so-"+pin, "--pin", pin)
	cmd.Env = append(os.Environ(), "SOFTHSM2_CONF="+tok.Conf)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("softhsm2-util --init-token: %v\n%s", err, out)
	}
}

// URI returns the PKCS#11 URI of the key object in token label, its PIN
// from tok.PINFile.
func (tok *Token) URI(label, object string) string {
	return fmt.Sprintf("pkcs11:token=%s;object=%s?module-path=%s&pin-source=file:%s", label, object, tok.Module, tok.PINFile)
}
