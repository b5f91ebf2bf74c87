package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/internal/proctest"
)

// failRE finds a FAIL result in `cipherd selftest` output.
var failRE = regexp.MustCompile(`\bFAIL\b`)

// The tests run the real binary, built once, as a user would.
func TestMain(m *testing.M) { proctest.Main(m) }

// cipherd runs the binary and returns its stdout, stderr and exit code.
func cipherd(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(proctest.Cipherd(t), args...)
	cmd.Env = append(os.Environ(), env...)
	return proctest.Run(t, cmd)
}

func TestSelftestCommand(t *testing.T) {
	out, errOut, code := cipherd(t, nil, "selftest", "-budget", "50ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"PASS", "aead for new data:", "host:", "features:"} {
		if !strings.Contains(out, want) {
			t.Errorf("selftest output lacks %q:\n%s", want, out)
		}
	}
	if failRE.MatchString(out) {
		t.Errorf("selftest reports a failure:\n%s", out)
	}
}

func TestSelftestJSON(t *testing.T) {
	out, errOut, code := cipherd(t, nil, "selftest", "-json", "-skip-benchmark")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v struct {
		Selection struct {
			AEAD string `json:"aead"`
		} `json:"selection"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Selection.AEAD == "" {
		t.Fatalf("bad JSON (%v): %s", err, out)
	}
}

// A process whose known-answer tests all fail must refuse to run.
func TestSelftestRefusesWhenNothingPasses(t *testing.T) {
	for _, env := range [][]string{nil, {"CIPHERD_SELFTEST_FAIL=*"}} {
		args := []string{"selftest", "-skip-benchmark"}
		if env == nil {
			args = append(args, "-fail", "*")
		}
		out, errOut, code := cipherd(t, env, args...)
		if code == 0 {
			t.Fatalf("env %v: exit 0 with every KAT failing\n%s", env, out)
		}
		if !failRE.MatchString(out) || !strings.Contains(errOut, "refusing to run") {
			t.Errorf("env %v: failure not reported:\n%s\n%s", env, out, errOut)
		}
		// speed refuses too.
		if _, _, code := cipherd(t, []string{"CIPHERD_SELFTEST_FAIL=*"}, "speed", "-seconds", "0.01", "-bytes", "16", "aes-128-gcm"); code == 0 {
			t.Fatalf("speed ran with every KAT failing")
		}
	}
}

// One failing implementation is excluded and reported; the rest go on.
func TestSelftestExcludesFailingImplementation(t *testing.T) {
	out, errOut, code := cipherd(t, nil, "selftest", "-skip-benchmark", "-fail", "chacha20-poly1305/xcrypto")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !failRE.MatchString(out) {
		t.Errorf("failure not reported:\n%s", out)
	}
	if regexp.MustCompile(`(?m)^\s+chacha20-poly1305\s+xcrypto`).MatchString(out) {
		t.Errorf("failed implementation still selected:\n%s", out)
	}
	_, errOut, code = cipherd(t, nil, "speed", "-fail-not-a-flag")
	if code != 2 {
		t.Errorf("unknown flag: exit %d, want 2: %s", code, errOut)
	}
}

func TestSpeedMR(t *testing.T) {
	out, errOut, code := cipherd(t, nil, "speed", "-mr", "-seconds", "0.05", "-evp", "aes-128-gcm", "chacha20")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := regexp.MustCompile(`^\+H:16:64:256:1024:8192:16384\n\+F:25:AES-128-GCM(:\d+\.\d\d){6}\n\+F:25:ChaCha20(:\d+\.\d\d){6}\n$`)
	if !want.MatchString(out) {
		t.Errorf("-mr output:\n%s", out)
	}
	if !strings.Contains(errOut, "+DT:AES-128-GCM:0.05:16\n") || !regexp.MustCompile(`\+R:\d+:ChaCha20:\d+\.\d+\n`).MatchString(errOut) {
		t.Errorf("-mr progress on stderr:\n%s", errOut)
	}
}

func TestSpeedTable(t *testing.T) {
	out, errOut, code := cipherd(t, nil, "speed", "-seconds", "0.05", "-bytes", "16384", "-evp", "aes-128-gcm")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^built on: .+\n(.+\n){3}The 'numbers' are in 1000s of bytes per second processed.\ntype {10}16384 bytes\nAES-128-GCM   +\d+\.\d\dk\n$`).MatchString(out) {
		t.Errorf("table:\n%s", out)
	}
	// -multi: openssl's form, with each worker's figures first and no header.
	out, errOut, code = cipherd(t, nil, "speed", "-seconds", "0.05", "-bytes", "16384", "-evp", "aes-128-gcm", "-multi", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`^Forked child 0\nForked child 1\nGot: \+H:16384 from 0\nGot: \+F:25:AES-128-GCM:\d+\.\d\d from 0\nGot: \+H:16384 from 1\nGot: \+F:25:AES-128-GCM:\d+\.\d\d from 1\nversion: .*\n(.+\n){4}AES-128-GCM   +\d+\.\d\dk\n$`).MatchString(out) {
		t.Errorf("-multi table:\n%s", out)
	}
	if !strings.Contains(errOut, "Doing AES-128-GCM for 0.05s on 16384 size blocks: ") {
		t.Errorf("progress:\n%s", errOut)
	}
}

func TestSpeedImplAllJSON(t *testing.T) {
	out, errOut, code := cipherd(t, nil, "speed", "-json", "-impl", "all", "-seconds", "0.01", "-bytes", "64", "xchacha20-poly1305")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var v struct {
		Rows []struct {
			Cipher, Impl string
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Rows) == 0 || v.Rows[0].Cipher != "XChaCha20-Poly1305" {
		t.Fatalf("bad JSON (%v): %s", err, out)
	}
}

func TestSpeedUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"speed", "-evp", "rot13"},
		{"speed", "-seconds", "0"},
		{"speed", "-hw", "maybe"},
		{"speed", "-mr", "-json"},
		{"nonesuch"},
		{"serve", "extra-argument"},
		{"serve", "-log-level", "loud"},
	} {
		if _, _, code := cipherd(t, nil, args...); code != 2 {
			t.Errorf("cipherd %q: exit %d, want 2", args, code)
		}
	}
}

// -hw off re-runs the benchmark with the hardware paths switched off, in the
// standard library and in cipherd's own CPU dispatch alike.
func TestSpeedHWOff(t *testing.T) {
	on, _, code := cipherd(t, nil, "speed", "-seconds", "0.05", "-bytes", "1024", "aes-128-gcm")
	if code != 0 {
		t.Fatal("hw on failed")
	}
	off, errOut, code := cipherd(t, nil, "speed", "-hw", "off", "-seconds", "0.05", "-bytes", "1024", "aes-128-gcm")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(on, "off by GODEBUG") {
		t.Errorf("hardware reported off without -hw off:\n%s", on)
	}
	if strings.Contains(on, "AES-NI") && !regexp.MustCompile(`off by GODEBUG: .*AES-NI`).MatchString(off) {
		t.Errorf("-hw off did not switch AES-NI off:\n%s", off)
	}
}

func TestSpeedVsOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	out, errOut, code := cipherd(t, nil, "speed", "--vs-openssl", "-seconds", "1", "-bytes", "16", "aes-128-gcm")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^  ratio +\d+\.\d\dx$`).MatchString(out) {
		t.Errorf("no ratio line:\n%s", out)
	}
	// Without openssl on PATH, a clear message and a failure exit.
	_, errOut, code = cipherd(t, []string{"PATH=" + t.TempDir()}, "speed", "--vs-openssl", "-seconds", "0.01", "-bytes", "16", "aes-128-gcm")
	if code == 0 || !strings.Contains(errOut, "no openssl binary found") {
		t.Errorf("missing openssl: exit %d, %s", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	out, _, code := cipherd(t, nil, "version")
	if code != 0 || !strings.HasPrefix(out, "cipherd ") || !strings.Contains(out, "build id: ") {
		t.Fatalf("version: exit %d\n%s", code, out)
	}
	out, _, code = cipherd(t, nil, "version", "-json")
	var v struct {
		Version, GoVersion string `json:",omitempty"`
		BuildID            string `json:"build_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.BuildID == "" {
		t.Fatalf("version -json: exit %d\n%s", code, out)
	}
}
