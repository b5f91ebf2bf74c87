package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/internal/proctest"
)

// decrypt without --key opens what the header names the key of: from a
// pipe, a file, standard input redirected from a file, locally and by
// range. A --key that names another key is refused before any request.
func TestCLIDecryptKeyFromHeader(t *testing.T) {
	url := startServe(t)
	env := []string{"CIPHERD_URL=" + url, "CIPHERD_TOKEN=" + cliToken}
	dir := t.TempDir()
	plain, sealed, back := filepath.Join(dir, "plain"), filepath.Join(dir, "sealed"), filepath.Join(dir, "back")
	pt := make([]byte, 1<<20+4321)
	rand.Read(pt)
	if err := os.WriteFile(plain, pt, 0o600); err != nil {
		t.Fatal(err)
	}

	// A pipe: the header is read from it and sent on with the rest.
	out, e1, e2, c1, c2 := pipeline(t, env, pt, []string{"--key", "default"}, nil)
	if c1 != 0 || c2 != 0 || !bytes.Equal(out, pt) {
		t.Fatalf("encrypt --key default | decrypt: exit %d|%d, %d bytes\n%s\n%s", c1, c2, len(out), e1, e2)
	}
	out, e1, e2, c1, c2 = pipeline(t, env, pt, []string{"--key", "default"}, []string{"--local"})
	if c1 != 0 || c2 != 0 || !bytes.Equal(out, pt) {
		t.Fatalf("encrypt --key default | decrypt --local: exit %d|%d, %d bytes\n%s\n%s", c1, c2, len(out), e1, e2)
	}

	if _, e, code := crypt(t, env, nil, "encrypt", "--key", "default", "-i", plain, "-o", sealed); code != 0 {
		t.Fatalf("encrypt: exit %d: %s", code, e)
	}
	for _, args := range [][]string{{"-i", sealed, "-o", back}, {"-i", sealed, "-o", back, "--local"}} {
		os.Remove(back)
		if _, e, code := crypt(t, env, nil, append([]string{"decrypt"}, args...)...); code != 0 {
			t.Fatalf("decrypt %q: exit %d: %s", args, code, e)
		}
		if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("decrypt %q: %d bytes, %v", args, len(got), err)
		}
	}
	// Standard input redirected from the file: a regular file, sent with
	// its length.
	f, err := os.Open(sealed)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if out, e, code := crypt(t, env, f, "decrypt"); code != 0 || out != string(pt) {
		t.Fatalf("decrypt < sealed: exit %d, %d bytes: %s", code, len(out), e)
	}
	for _, local := range [][]string{nil, {"--local"}} {
		args := append([]string{"decrypt", "--range", "500000-600000", "-i", sealed}, local...)
		if out, e, code := crypt(t, env, nil, args...); code != 0 || out != string(pt[500000:600001]) {
			t.Fatalf("decrypt %q: exit %d, %d bytes: %s", args, code, len(out), e)
		}
	}

	// Refused before anything is sent: the server here is no server, so a
	// request would fail otherwise (exit 1, connection refused).
	dead := []string{"CIPHERD_URL=http://" + proctest.FreeAddr(t), "CIPHERD_TOKEN=" + cliToken}
	ct, err := os.ReadFile(sealed)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		stdin io.Reader
		args  []string
	}{
		{"a pipe", io.MultiReader(bytes.NewReader(ct)), nil},
		{"a file", nil, []string{"-i", sealed}},
		{"a range", nil, []string{"-i", sealed, "--range", "0-9"}},
		{"a file, locally", nil, []string{"-i", sealed, "--local"}},
	} {
		args := append([]string{"decrypt", "--key", "orders", "-o", back + "-mismatch"}, c.args...)
		_, e, code := crypt(t, dead, c.stdin, args...)
		if code != 2 || !strings.Contains(e, "--key is orders, but the input is sealed under the key default") {
			t.Errorf("decrypt --key orders of %s sealed under default: exit %d, want 2: %s", c.name, code, e)
		}
		if _, err := os.Stat(back + "-mismatch"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("decrypt --key orders of %s: the output was created: %v", c.name, err)
		}
	}
	// Without --key, an input that names no key is refused as the service
	// would refuse it, without a request.
	for _, c := range []struct {
		name, in, want string
	}{
		{"not a sealed stream", "plain text, not sealed\n", "malformed_ciphertext"},
		{"nothing", "", "truncated_ciphertext"},
		{"a cut header", string(ct[:5]), "truncated_ciphertext"},
	} {
		if _, e, code := crypt(t, dead, strings.NewReader(c.in), "decrypt"); code != 1 || !strings.Contains(e, c.want) || strings.Contains(e, "connect") {
			t.Errorf("decrypt of %s: exit %d, want 1 and %s: %s", c.name, code, c.want, e)
		}
	}
	// With --key, such an input goes to the service, which says what is
	// wrong with it.
	if _, e, code := crypt(t, env, strings.NewReader("plain text, not sealed\n"), "decrypt", "--key", "default"); code != 1 || !strings.Contains(e, "400 malformed_ciphertext") {
		t.Errorf("decrypt --key default of plain text: exit %d: %s", code, e)
	}
}
