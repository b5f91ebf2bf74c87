package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/internal/proctest"
)

const cliToken = "cli-test-token"

// startServe runs `cipherd serve` on a free port with a temporary data
// directory, and args besides, until the test ends, and returns its URL once
// /readyz is 200.
func startServe(t testing.TB, args ...string) string {
	t.Helper()
	return startServeScheme(t, "http", proctest.HTTPStatus, args...)
}

// startServeScheme is startServe for a server that speaks scheme, whose
// /readyz status probes.
func startServeScheme(t testing.TB, scheme string, status func(url string) int, args ...string) string {
	t.Helper()
	addr := proctest.FreeAddr(t)
	cmd := exec.Command(proctest.Cipherd(t), append([]string{"serve", "-addr", addr, "-data-dir", t.TempDir(), "-skip-benchmark", "-log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), "CIPHERD_ADMIN_TOKEN="+cliToken)
	var logs proctest.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	p := proctest.Start(t, cmd)
	t.Cleanup(func() {
		if err := p.Stop(t, 15*time.Second); err != nil {
			t.Errorf("cipherd serve exited with %v on SIGTERM\n%s", err, logs.String())
		}
	})
	url := scheme + "://" + addr
	if err := p.WaitReady(30*time.Second, func() bool { return status(url+"/readyz") == 200 }); err != nil {
		t.Fatalf("cipherd serve: %v\n%s", err, logs.String())
	}
	return url
}

// pipeline runs `cipherd encrypt args | cipherd decrypt args` on in.
func pipeline(t *testing.T, env []string, in []byte, encArgs, decArgs []string) (out []byte, encErr, decErr string, encCode, decCode int) {
	t.Helper()
	enc := exec.Command(proctest.Cipherd(t), append([]string{"encrypt"}, encArgs...)...)
	dec := exec.Command(proctest.Cipherd(t), append([]string{"decrypt"}, decArgs...)...)
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
	// The decrypt holds the pipe's read end now. The test's own copy
	// would keep an encrypt whose decrypt failed early writing into a full
	// pipe, and the test waiting for it.
	pipe.Close()
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
	cmd := exec.Command(proctest.Cipherd(t), "encrypt", "--key", "default", "--context", ctx)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(msg)
	ct, err := cmd.Output()
	if err != nil || len(ct) <= len(msg) || bytes.Contains(ct, msg) {
		t.Fatalf("encrypt: %v, %d bytes", err, len(ct))
	}
	cmd = exec.Command(proctest.Cipherd(t), "decrypt", "--key", "default", "--context", base64.StdEncoding.EncodeToString([]byte("invoice 8")))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(ct)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pt, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || len(pt) != 0 || !strings.Contains(stderr.String(), "decryption_failed") {
		t.Fatalf("wrong context: %v, %q, %s", err, pt, stderr.String())
	}

	// A cut ciphertext fails.
	cmd = exec.Command(proctest.Cipherd(t), "decrypt", "--key", "default", "--context", ctx)
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
	_, errOut, code = cipherd(t, nil, "health", "--server", "http://"+proctest.FreeAddr(t), "--timeout", "2s")
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

// crypt runs `cipherd encrypt|decrypt args` with stdin and returns its
// stdout, stderr and exit code.
func crypt(t testing.TB, env []string, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(proctest.Cipherd(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	return proctest.Run(t, cmd)
}

// leftovers lists the temporary files of outputs in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".*.cipherd-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCLIFiles(t *testing.T) {
	url := startServe(t)
	env := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}
	dir := t.TempDir()
	plain, sealed, back := filepath.Join(dir, "plain"), filepath.Join(dir, "plain.sealed"), filepath.Join(dir, "back")
	pt := make([]byte, 1<<20+5)
	rand.Read(pt)
	if err := os.WriteFile(plain, pt, 0o644); err != nil {
		t.Fatal(err)
	}

	if _, e, code := crypt(t, env, nil, "encrypt", "--key", "default", "-i", plain, "-o", sealed); code != 0 {
		t.Fatalf("encrypt -i -o: exit %d: %s", code, e)
	}
	if _, e, code := crypt(t, env, nil, "decrypt", "--key", "default", "-i", sealed, "-o", back); code != 0 {
		t.Fatalf("decrypt -i -o: exit %d: %s", code, e)
	}
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("round trip through files: %v, equal=%v", err, bytes.Equal(got, pt))
	}
	// -sync writes the same file, synced.
	synced := filepath.Join(dir, "synced")
	if _, e, code := crypt(t, env, nil, "decrypt", "--key", "default", "-sync", "-i", sealed, "-o", synced); code != 0 {
		t.Fatalf("decrypt -sync: exit %d: %s", code, e)
	}
	if got, err := os.ReadFile(synced); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("decrypt -sync: %v, equal=%v", err, bytes.Equal(got, pt))
	}
	if fi, err := os.Stat(back); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("a new output file: %v, mode %v, want 0600", err, fi.Mode())
	}
	// -i with standard output, and standard input with -o.
	ct, err := os.ReadFile(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if out, e, code := crypt(t, env, nil, "decrypt", "--key", "default", "-i", sealed); code != 0 || out != string(pt) {
		t.Fatalf("decrypt -i to stdout: exit %d: %s", code, e)
	}
	if err := os.Chmod(back, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, e, code := crypt(t, env, bytes.NewReader(ct), "decrypt", "--key", "default", "-o", back); code != 0 {
		t.Fatalf("decrypt stdin to -o: exit %d: %s", code, e)
	}
	if fi, err := os.Stat(back); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("a replaced output file: %v, mode %v, want its own 0640", err, fi.Mode())
	}

	// A decrypt that fails leaves the target as it was, and no temporary
	// file, whether it fails at once or after writing a good part of the
	// plaintext.
	const old = "the previous content\n"
	for name, bad := range map[string][]byte{
		"flipped bit mid-stream": func() []byte { b := bytes.Clone(ct); b[len(b)/2] ^= 1; return b }(),
		"truncated":              ct[:len(ct)-100],
		"wrong key":              ct,
	} {
		if err := os.WriteFile(back, []byte(old), 0o600); err != nil {
			t.Fatal(err)
		}
		key := "default"
		if name == "wrong key" {
			key = "missing"
		}
		_, e, code := crypt(t, env, bytes.NewReader(bad), "decrypt", "--key", key, "-o", back)
		if name == "wrong key" {
			// Refused from the header, before the output is opened.
			if code != 2 || !strings.Contains(e, "sealed under the key default") {
				t.Errorf("%s: exit %d: %s", name, code, e)
			}
		} else if code != 1 || !strings.Contains(e, back+" was not written") {
			t.Errorf("%s: exit %d: %s", name, code, e)
		}
		if got, err := os.ReadFile(back); err != nil || string(got) != old {
			t.Errorf("%s: the output file holds %d bytes, %v; want it untouched", name, len(got), err)
		}
		if l := leftovers(t, dir); len(l) != 0 {
			t.Errorf("%s: temporary files left: %v", name, l)
		}
		// A target that did not exist is not created.
		fresh := filepath.Join(dir, "fresh-"+strings.ReplaceAll(name, " ", "-"))
		crypt(t, env, bytes.NewReader(bad), "decrypt", "--key", key, "-o", fresh)
		if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a failed decrypt created %s: %v", name, fresh, err)
		}
	}

	// Inputs and outputs that cannot be used.
	if _, e, code := crypt(t, env, nil, "encrypt", "--key", "default", "-i", filepath.Join(dir, "nonexistent"), "-o", sealed); code != 1 || !strings.Contains(e, "no such file") {
		t.Errorf("missing input: exit %d: %s", code, e)
	}
	if _, e, code := crypt(t, env, nil, "encrypt", "--key", "default", "-i", plain, "-o", filepath.Join(dir, "no", "dir")); code != 1 {
		t.Errorf("output in a missing directory: exit %d: %s", code, e)
	}
	if _, e, code := crypt(t, env, nil, "encrypt", "--key", "default", "-i", plain, "-o", dir); code != 1 || !strings.Contains(e, "directory") {
		t.Errorf("output is a directory: exit %d: %s", code, e)
	}
	if _, e, code := crypt(t, env, nil, "encrypt", "--key", "default", "-i", plain, "-o", os.DevNull); code != 0 {
		t.Errorf("-o %s: exit %d: %s", os.DevNull, code, e)
	}
	if fi, err := os.Stat(os.DevNull); err != nil || fi.Mode().IsRegular() {
		t.Fatalf("%s replaced: %v %v", os.DevNull, fi.Mode(), err)
	}
}

// zeros yields n zero bytes.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), z.left)]
	clear(p)
	z.left -= int64(len(p))
	return len(p), nil
}

// The server refuses a large upload before reading it (unknown key, bad
// token) and closes the connection: the command reports the server's
// answer, never the write error of the rest of the upload.
func TestCLIEarlyAnswer(t *testing.T) {
	url := startServe(t)
	for round := range 8 {
		_, e, code := crypt(t, []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}, &zeros{64 << 20}, "encrypt", "--key", "missing")
		if code != 1 || !strings.Contains(e, "404 key_not_found") {
			t.Fatalf("round %d: unknown key: exit %d: %s", round, code, e)
		}
		_, e, code = crypt(t, []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=wrong"}, &zeros{64 << 20}, "decrypt", "--key", "default")
		if code != 1 || !strings.Contains(e, "401 unauthenticated") {
			t.Fatalf("round %d: bad token: exit %d: %s", round, code, e)
		}
	}
}

// slowReader yields b in pieces, pausing before each.
type slowReader struct {
	b     []byte
	piece int
	pause time.Duration
}

func slow(b []byte) *slowReader {
	return &slowReader{b: b, piece: 1 << 10, pause: 100 * time.Millisecond}
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	k := copy(p[:min(len(p), s.piece)], s.b)
	s.b = s.b[k:]
	return k, nil
}

func TestCLIProgress(t *testing.T) {
	url := startServe(t)
	env := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}
	// A pipe: no size, so bytes and rate only; the summary stays.
	ct, e, code := crypt(t, env, slow(make([]byte, 8<<10)), "encrypt", "--key", "default", "-progress", "always")
	if code != 0 || !regexp.MustCompile(`\r\x1b\[Kcipherd encrypt: \d+(\.\d)? [KM]?i?B, \d+(\.\d)? [KM]?i?B/s`).MatchString(e) ||
		!regexp.MustCompile(`\r\x1b\[Kcipherd encrypt: 8\.0 KiB in [\d.]+m?s, \d+(\.\d)? [KM]?i?B/s\n$`).MatchString(e) || strings.Contains(e, "ETA") {
		t.Fatalf("progress of a pipe: exit %d: %q", code, e)
	}
	// Not a terminal: nothing unless asked.
	if _, e, code := crypt(t, env, slow(make([]byte, 4<<10)), "encrypt", "--key", "default"); code != 0 || e != "" {
		t.Fatalf("progress on a non-terminal: exit %d: %q", code, e)
	}
	// A failure erases the line: the error stands alone.
	bad := []byte(ct)
	bad[len(bad)-100] ^= 1
	_, e, code = crypt(t, env, slow(bad), "decrypt", "--key", "default", "-progress", "always")
	if code != 1 || !strings.Contains(e, "B/s\r\x1b[Kcipherd decrypt: ") {
		t.Fatalf("progress of a failure: exit %d: %q", code, e)
	}
	// The command's name once: the client's own "cipherd: " is left off.
	if strings.Contains(e, "decrypt: cipherd:") {
		t.Fatalf("the failure names cipherd twice: %q", e)
	}
	if _, _, code := crypt(t, env, nil, "encrypt", "--key", "default", "-progress", "sometimes"); code != 2 {
		t.Fatalf("-progress sometimes: exit %d, want 2", code)
	}
}

// TestCLIDecryptRange: decrypt --range A-B -i FILE writes exactly that part
// of the plaintext, from a file or from standard input redirected from one,
// and refuses what cannot be read at random or satisfied.
func TestCLIDecryptRange(t *testing.T) {
	url := startServe(t)
	env := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}
	dir := t.TempDir()
	plain, sealed, part := filepath.Join(dir, "plain"), filepath.Join(dir, "plain.sealed"), filepath.Join(dir, "part")
	pt := make([]byte, 3<<20+77)
	rand.Read(pt)
	if err := os.WriteFile(plain, pt, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, e, code := crypt(t, env, nil, "encrypt", "--key", "default", "-i", plain, "-o", sealed); code != 0 {
		t.Fatalf("encrypt: exit %d: %s", code, e)
	}
	for _, c := range []struct {
		rg       string
		off, end int
	}{
		{"0-0", 0, 1},
		{"1048576-2097151", 1 << 20, 2 << 20},
		{"16383-16384", 16383, 16385},
		{"3145000-", 3145000, len(pt)},
		{"3145000-99999999", 3145000, len(pt)},
	} {
		os.Remove(part)
		if _, e, code := crypt(t, env, nil, "decrypt", "--key", "default", "--range", c.rg, "-i", sealed, "-o", part); code != 0 {
			t.Fatalf("--range %s: exit %d: %s", c.rg, code, e)
		}
		if got, err := os.ReadFile(part); err != nil || !bytes.Equal(got, pt[c.off:c.end]) {
			t.Fatalf("--range %s: %d bytes, want %d (%v)", c.rg, len(got), c.end-c.off, err)
		}
	}
	f, err := os.Open(sealed)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out, e, code := crypt(t, env, f, "decrypt", "--key", "default", "--range", "100-199")
	if code != 0 || out != string(pt[100:200]) {
		t.Fatalf("--range from standard input redirected from the file: exit %d, %d bytes: %s", code, len(out), e)
	}
	if _, e, code := crypt(t, env, bytes.NewReader([]byte("not a file")), "decrypt", "--key", "default", "--range", "0-1"); code != 1 || !strings.Contains(e, "-i FILE") {
		t.Errorf("--range from a pipe: exit %d: %s", code, e)
	}
	if _, e, code := crypt(t, env, nil, "decrypt", "--key", "default", "--range", fmt.Sprint(len(pt), "-"), "-i", sealed, "-o", part); code != 1 || !strings.Contains(e, "range_not_satisfiable") {
		t.Errorf("--range past the end: exit %d: %s", code, e)
	}
	for _, bad := range []string{"5", "9-5", "-5", "a-b"} {
		if _, e, code := crypt(t, env, nil, "decrypt", "--key", "default", "--range", bad, "-i", sealed); code != 2 {
			t.Errorf("--range %s: exit %d, want 2: %s", bad, code, e)
		}
	}
	if _, e, code := crypt(t, env, nil, "encrypt", "--key", "default", "--range", "0-1", "-i", plain); code != 2 {
		t.Errorf("encrypt --range: exit %d, want 2: %s", code, e)
	}
}

// TestCLILocal: encrypt --local and decrypt --local, files and pipes, each
// way against the server's own encrypt and decrypt, and by range.
func TestCLILocal(t *testing.T) {
	url := startServe(t)
	env := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	pt := make([]byte, 2<<20+333)
	rand.Read(pt)
	if err := os.WriteFile(plain, pt, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := base64.StdEncoding.EncodeToString([]byte("cli local"))
	for _, enc := range [][]string{{"--local"}, nil} {
		for _, dec := range [][]string{{"--local"}, nil} {
			sealed := filepath.Join(dir, "sealed")
			args := append([]string{"encrypt", "--key", "default", "--context", ctx, "-i", plain, "-o", sealed}, enc...)
			if _, e, code := crypt(t, env, nil, args...); code != 0 {
				t.Fatalf("encrypt %v: exit %d: %s", enc, code, e)
			}
			args = append([]string{"decrypt", "--key", "default", "--context", ctx, "-i", sealed}, dec...)
			out, e, code := crypt(t, env, nil, args...)
			if code != 0 || out != string(pt) {
				t.Fatalf("encrypt %v, decrypt %v: exit %d, %d bytes: %s", enc, dec, code, len(out), e)
			}
			// Pipes: standard input to standard output.
			f, _ := os.Open(sealed)
			out, e, code = crypt(t, env, io.MultiReader(f), append([]string{"decrypt", "--key", "default", "--context", ctx}, dec...)...)
			f.Close()
			if code != 0 || out != string(pt) {
				t.Fatalf("encrypt %v, decrypt %v from a pipe: exit %d, %d bytes: %s", enc, dec, code, len(out), e)
			}
			args = append([]string{"decrypt", "--key", "default", "--context", ctx, "--range", "1000000-1999999", "-i", sealed}, dec...)
			if out, e, code := crypt(t, env, nil, args...); code != 0 || out != string(pt[1000000:2000000]) {
				t.Fatalf("encrypt %v, decrypt %v --range: exit %d, %d bytes: %s", enc, dec, code, len(out), e)
			}
		}
	}
	// encrypt --local from a pipe to a pipe.
	sealedOut, e, code := crypt(t, env, io.MultiReader(bytes.NewReader(pt)), "encrypt", "--key", "default", "--local")
	if code != 0 {
		t.Fatalf("encrypt --local from a pipe: exit %d: %s", code, e)
	}
	if out, e, code := crypt(t, env, strings.NewReader(sealedOut), "decrypt", "--key", "default"); code != 0 || out != string(pt) {
		t.Fatalf("encrypt --local from a pipe, decrypt on the server: exit %d, %d bytes: %s", code, len(out), e)
	}
	// A wrong context fails locally as it does on the server.
	sealed := filepath.Join(dir, "sealed")
	if _, e, code := crypt(t, env, nil, "decrypt", "--key", "default", "--local", "-i", sealed); code != 1 || !strings.Contains(e, "decryption_failed") {
		t.Errorf("decrypt --local with another context: exit %d: %s", code, e)
	}
}

// TestCLITokenFile: the token can come from a file named by --token-file
// or CIPHERD_TOKEN_FILE (a Kubernetes projected service-account token);
// two sources of one kind are refused.
func TestCLITokenFile(t *testing.T) {
	url := startServe(t)
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(cliToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	msg := []byte("from a token file\n")
	for name, c := range map[string]struct{ env, args []string }{
		"CIPHERD_TOKEN_FILE":              {env: []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN_FILE=" + file}},
		"--token-file":                    {env: []string{"CIPHERD_URL=" + url}, args: []string{"--token-file", file}},
		"--token-file over CIPHERD_TOKEN": {env: []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=wrong"}, args: []string{"--token-file", file}},
		"CIPHERD_TOKEN alone":             {env: []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}},
	} {
		args := append([]string{"--key", "default"}, c.args...)
		out, e1, e2, c1, c2 := pipeline(t, c.env, msg, args, args)
		if c1 != 0 || c2 != 0 || !bytes.Equal(out, msg) {
			t.Errorf("%s: exit %d|%d, %q\n%s\n%s", name, c1, c2, out, e1, e2)
		}
	}
	for name, c := range map[string]struct{ env, args []string }{
		"both variables": {env: []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken, "CIPHERD_TOKEN_FILE=" + file}},
		"both flags":     {env: []string{"CIPHERD_URL=" + url}, args: []string{"--token", cliToken, "--token-file", file}},
		"missing file":   {env: []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN_FILE=" + file + ".missing"}},
	} {
		args := append([]string{"encrypt", "--key", "default"}, c.args...)
		if _, errOut, code := cipherd(t, c.env, args...); code == 0 || strings.Contains(errOut, cliToken) {
			t.Errorf("%s: exit %d: %s", name, code, errOut)
		}
	}
}
