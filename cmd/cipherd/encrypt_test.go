package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const cliToken = "cli-test-token"

// freeAddr returns a loopback address nothing listens on (now).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startServe runs `cipherd serve` on a free port with a temporary data
// directory until the test ends, and returns its URL once /readyz is 200.
func startServe(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(cipherdBin, "serve", "-addr", addr, "-data-dir", t.TempDir(), "-skip-benchmark", "-log-level", "warn")
	cmd.Env = append(os.Environ(), "CIPHERD_ADMIN_TOKEN="+cliToken)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("cipherd serve exited with %v on SIGTERM\n%s", err, logs.String())
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("cipherd serve did not stop on SIGTERM")
		}
	})
	url := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("cipherd serve exited: %v\n%s", err, logs.String())
		default:
		}
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url
			}
		}
	}
	t.Fatalf("cipherd serve not ready after 30s\n%s", logs.String())
	return ""
}

// pipeline runs `cipherd encrypt args | cipherd decrypt args` on in.
func pipeline(t *testing.T, env []string, in []byte, encArgs, decArgs []string) (out []byte, encErr, decErr string, encCode, decCode int) {
	t.Helper()
	enc := exec.Command(cipherdBin, append([]string{"encrypt"}, encArgs...)...)
	dec := exec.Command(cipherdBin, append([]string{"decrypt"}, decArgs...)...)
	enc.Env = append(os.Environ(), env...)
	dec.Env = enc.Env
	enc.Stdin = bytes.NewReader(in)
	pipe, err := enc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dec.Stdin = pipe
	var stdout, e1, e2 bytes.Buffer
	dec.Stdout, enc.Stderr, dec.Stderr = &stdout, &e1, &e2
	if err := enc.Start(); err != nil {
		t.Fatal(err)
	}
	if err := dec.Start(); err != nil {
		t.Fatal(err)
	}
	code := func(err error) int {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	decCode = code(dec.Wait())
	encCode = code(enc.Wait())
	return stdout.Bytes(), e1.String(), e2.String(), encCode, decCode
}

func TestCLIEncryptDecrypt(t *testing.T) {
	url := startServe(t)
	env := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}

	// echo … | cipherd encrypt --key default | cipherd decrypt --key default
	msg := []byte("attack at dawn\n")
	out, e1, e2, c1, c2 := pipeline(t, env, msg, []string{"--key", "default"}, []string{"--key", "default"})
	if c1 != 0 || c2 != 0 || !bytes.Equal(out, msg) {
		t.Fatalf("round trip: exit %d|%d, %q\n%s\n%s", c1, c2, out, e1, e2)
	}

	// Several MiB with a context, the server named by flag and the token by
	// flag.
	big := make([]byte, 3<<20+17)
	rand.Read(big)
	ctx := base64.StdEncoding.EncodeToString([]byte("invoice 7"))
	args := []string{"--key", "default", "--context", ctx, "--server", url, "--token", cliToken}
	out, e1, e2, c1, c2 = pipeline(t, nil, big, args, args)
	if c1 != 0 || c2 != 0 || !bytes.Equal(out, big) {
		t.Fatalf("3 MiB round trip: exit %d|%d, %d bytes\n%s\n%s", c1, c2, len(out), e1, e2)
	}

	// The ciphertext is not the plaintext, and the wrong context fails.
	cmd := exec.Command(cipherdBin, "encrypt", "--key", "default", "--context", ctx)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(msg)
	ct, err := cmd.Output()
	if err != nil || len(ct) <= len(msg) || bytes.Contains(ct, msg) {
		t.Fatalf("encrypt: %v, %d bytes", err, len(ct))
	}
	cmd = exec.Command(cipherdBin, "decrypt", "--key", "default", "--context", base64.StdEncoding.EncodeToString([]byte("invoice 8")))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(ct)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pt, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || len(pt) != 0 || !strings.Contains(stderr.String(), "decryption_failed") {
		t.Fatalf("wrong context: %v, %q, %s", err, pt, stderr.String())
	}

	// A cut ciphertext fails.
	cmd = exec.Command(cipherdBin, "decrypt", "--key", "default", "--context", ctx)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(ct[:len(ct)-1])
	if err := cmd.Run(); err == nil {
		t.Fatalf("truncated ciphertext decrypted")
	}

	// Usage and authentication errors.
	if _, _, code := cipherd(t, env, "encrypt"); code != 2 {
		t.Errorf("encrypt without --key: exit %d, want 2", code)
	}
	if _, _, code := cipherd(t, env, "encrypt", "--key", "default", "--context", "%%"); code != 2 {
		t.Errorf("bad --context: exit %d, want 2", code)
	}
	_, errOut, code := cipherd(t, []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=tok-5ecret-zz"}, "encrypt", "--key", "default")
	if code != 1 || !strings.Contains(errOut, "unauthenticated") || strings.Contains(errOut, "tok-5ecret-zz") {
		t.Errorf("wrong token: exit %d: %s", code, errOut)
	}
}

func TestCLIHealth(t *testing.T) {
	url := startServe(t)
	out, errOut, code := cipherd(t, nil, "health", "--server", url)
	if code != 0 || strings.TrimSpace(out) != "ready" {
		t.Fatalf("health: exit %d: %s %s", code, out, errOut)
	}
	if _, _, code := cipherd(t, []string{"CIPHERD_URL=" + url}, "health", "-q"); code != 0 {
		t.Fatalf("health via CIPHERD_URL: exit %d", code)
	}
	start := time.Now()
	_, errOut, code = cipherd(t, nil, "health", "--server", "http://"+freeAddr(t), "--timeout", "2s")
	if code != 1 || !strings.Contains(errOut, "unreachable") {
		t.Fatalf("health against a dead port: exit %d: %s", code, errOut)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("health against a dead port took %v", time.Since(start))
	}
	if _, _, code := cipherd(t, nil, "health", "--server", "not a url"); code != 2 {
		t.Errorf("bad URL: exit %d, want 2", code)
	}
}
