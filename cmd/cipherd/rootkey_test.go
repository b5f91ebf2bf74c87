//go:build cgo && (darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/pkcs11"
	"github.com/cipherd/cipherd/internal/proctest"
	"github.com/cipherd/cipherd/internal/softhsmtest"
)

const rkAdmin = "rootkey-test-admin-token"

// rkServer is a cipherd serve process.
type rkServer struct {
	cmd    *exec.Cmd
	url    string
	stderr *proctest.Buffer
	done   chan error
}

// rkStart runs cipherd serve on a free loopback port with env added and
// waits until it is ready, or returns its exit error and output.
func rkStart(t *testing.T, dataDir string, env ...string) (*rkServer, error) {
	t.Helper()
	addr := proctest.FreeAddr(t)
	s := &rkServer{url: "http://" + addr, stderr: new(proctest.Buffer), done: make(chan error, 1)}
	s.cmd = exec.Command(proctest.Cipherd(t), "serve", "-addr", addr, "-data-dir", dataDir, "-skip-benchmark")
	s.cmd.Env = append(os.Environ(), append([]string{"CIPHERD_ADMIN_TOKEN=" + rkAdmin}, env...)...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	c := rkClient(t, s.url)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("cipherd serve exited: %v\n%s", err, s.output())
		default:
		}
		if c.Ready(context.Background()) == nil {
			t.Cleanup(func() { s.stop(t) })
			return s, nil
		}
	}
	s.cmd.Process.Kill()
	t.Fatalf("cipherd serve not ready within 60s\n%s", s.output())
	return nil, nil
}

func (s *rkServer) output() string {
	return s.stderr.String()
}

// stop sends SIGTERM and waits for the exit.
func (s *rkServer) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		t.Error("cipherd serve did not stop within 30s of SIGTERM")
	}
}

func rkClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.New(url, client.WithToken(rkAdmin))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rkMaterial returns n known 32-byte key materials, to import and then look
// for where they must not be.
func rkMaterial(t *testing.T, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, 32)
		rand.Read(out[i])
	}
	return out
}

// rkAssertClean fails if text holds any of the secrets, raw or in base64 or
// hex.
func rkAssertClean(t *testing.T, what, text string, secrets ...[]byte) {
	t.Helper()
	for _, s := range secrets {
		for _, form := range []string{string(s), base64.StdEncoding.EncodeToString(s), base64.RawURLEncoding.EncodeToString(s), hex.EncodeToString(s)} {
			if len(form) >= 4 && strings.Contains(text, form) {
				t.Errorf("%s holds a secret", what)
				return
			}
		}
	}
}

func rkRotate(t *testing.T, dataDir, to string, env ...string) (string, string, int) {
	t.Helper()
	return cipherd(t, env, "rootkey", "rotate", "-data-dir", dataDir, "-to", to)
}

// TestRootKeyPKCS11EndToEnd: a root key generated in a real SoftHSM2
// token, the service run on it (create keys, encrypt, restart, decrypt),
// and a wrong PIN or a missing object refusing to start.
func TestRootKeyPKCS11EndToEnd(t *testing.T) {
	ctx := context.Background()
	pin := "e2e-pin-" + fmt.Sprint(time.Now().UnixNano())
	tok := softhsmtest.New(t, "cipherd", pin)
	uri := tok.URI("cipherd", "cipherd-root")
	out, errOut, code := cipherd(t, nil, "rootkey", "init", "-uri", uri)
	if code != 0 || !strings.Contains(out, "created pkcs11:token=cipherd;object=cipherd-root") {
		t.Fatalf("rootkey init: %d\n%s%s", code, out, errOut)
	}
	rkAssertClean(t, "rootkey init output", out+errOut, []byte(pin))

	dataDir := t.TempDir()
	srv, err := rkStart(t, dataDir, "CIPHERD_ROOT_KEY_URI="+uri)
	if err != nil {
		t.Fatal(err)
	}
	c := rkClient(t, srv.url)
	mat := rkMaterial(t, 2)
	for i, name := range []string{"orders", "payments"} {
		if _, err := c.CreateKey(ctx, name, api.CreateKeyRequest{Import: mat[i]}); err != nil {
			t.Fatal(err)
		}
	}
	type sealed struct{ key, pt, ct string }
	var items []sealed
	for i := range 20 {
		key := []string{"orders", "payments"}[i%2]
		pt := fmt.Sprintf("record %d", i)
		res, err := c.Encrypt(ctx, key, []byte(pt), []byte("ctx"))
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, sealed{key, pt, string(res.Ciphertext)})
	}
	metrics := rkGet(t, srv.url+"/metrics")
	srv.stop(t)
	logs := srv.output()

	// The same token and key open the store again; every ciphertext opens.
	srv, err = rkStart(t, dataDir, "CIPHERD_ROOT_KEY_URI="+uri)
	if err != nil {
		t.Fatal(err)
	}
	c = rkClient(t, srv.url)
	for _, it := range items {
		pt, err := c.Decrypt(ctx, it.key, []byte(it.ct), []byte("ctx"))
		if err != nil || string(pt) != it.pt {
			t.Fatalf("decrypt after restart: %q, %v", pt, err)
		}
	}
	metrics += rkGet(t, srv.url+"/metrics")
	srv.stop(t)
	logs += srv.output()
	if !strings.Contains(logs, "cipherd ready") {
		t.Fatalf("the logs were not captured:\n%s", logs)
	}

	// Fail closed: a wrong PIN, a missing object, a token that is not there.
	wrongPIN := filepath.Join(t.TempDir(), "pin")
	os.WriteFile(wrongPIN, []byte("not-the-pin\n"), 0o600)
	for _, tc := range []struct{ name, uri, says string }{
		{"wrong PIN", strings.Replace(uri, tok.PINFile, wrongPIN, 1), "wrong or locked PIN"},
		{"missing object", tok.URI("cipherd", "no-such-key"), "no such secret key"},
		{"missing token", tok.URI("elsewhere", "cipherd-root"), "no token"},
		{"another key", tok.URI("cipherd", "cipherd-other"), "does not unwrap"},
	} {
		if tc.name == "another key" {
			if _, e, code := cipherd(t, nil, "rootkey", "init", "-uri", tc.uri); code != 0 {
				t.Fatal(e)
			}
		}
		_, err := rkStart(t, dataDir, "CIPHERD_ROOT_KEY_URI="+tc.uri)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: start = %v, want a refusal saying %q", tc.name, err, tc.says)
		}
		if err != nil {
			logs += err.Error()
		}
	}
	rkAssertClean(t, "logs", logs, append(mat, []byte(pin))...)
	rkAssertClean(t, "/metrics", metrics, append(mat, []byte(pin))...)
	rkAssertStoreClean(t, dataDir, append(mat, []byte(pin))...)
}

func rkGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return string(b)
}

// rkAssertStoreClean scans every file of the data directory.
func rkAssertStoreClean(t *testing.T, dir string, secrets ...[]byte) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			b, _ := os.ReadFile(path)
			rkAssertClean(t, path, string(b), secrets...)
		}
		return nil
	})
}

// TestRootKeyRotateUnderLoad rotates a running server's root key static →
// PKCS#11 → PKCS#11 while clients encrypt, decrypt and rotate keys, with
// zero failed requests; then the server restarts on the last root key and
// every ciphertext opens, and neither earlier root key opens the store.
func TestRootKeyRotateUnderLoad(t *testing.T) {
	ctx := context.Background()
	pin := "load-pin-4711"
	tok := softhsmtest.New(t, "cipherd", pin)
	uriA, uriB := tok.URI("cipherd", "root-a"), tok.URI("cipherd", "root-b")
	for _, u := range []string{uriA, uriB} {
		if _, e, code := cipherd(t, nil, "rootkey", "init", "-uri", u); code != 0 {
			t.Fatal(e)
		}
	}
	staticRoot := make([]byte, 32)
	rand.Read(staticRoot)
	rootFile := filepath.Join(t.TempDir(), "root.key")
	os.WriteFile(rootFile, []byte(base64.StdEncoding.EncodeToString(staticRoot)+"\n"), 0o600)

	dataDir := t.TempDir()
	srv, err := rkStart(t, dataDir, "CIPHERD_ROOT_KEY_FILE="+rootFile)
	if err != nil {
		t.Fatal(err)
	}
	c := rkClient(t, srv.url)
	mat := rkMaterial(t, 8)
	for i := range mat {
		if _, err := c.CreateKey(ctx, fmt.Sprintf("k%d", i), api.CreateKeyRequest{Import: mat[i]}); err != nil {
			t.Fatal(err)
		}
	}

	type sealed struct{ key, pt, ct string }
	var (
		mu       sync.Mutex
		items    []sealed
		requests atomic.Int64
		failures atomic.Int64
		firstErr atomic.Value
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		failures.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("k%d", (w+i)%len(mat))
				pt := fmt.Sprintf("w%d-%d", w, i)
				res, err := c.Encrypt(ctx, key, []byte(pt), nil)
				requests.Add(1)
				if err != nil {
					fail(err)
					continue
				}
				got, err := c.Decrypt(ctx, key, res.Ciphertext, nil)
				requests.Add(1)
				if err != nil || string(got) != pt {
					fail(fmt.Errorf("decrypt: %q, %v", got, err))
					continue
				}
				if i%16 == 0 {
					mu.Lock()
					items = append(items, sealed{key, pt, string(res.Ciphertext)})
					mu.Unlock()
				}
			}
		}()
	}
	// Key writes go on too: they wait while the store re-seals.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_, err := c.RotateKey(ctx, fmt.Sprintf("k%d", i%len(mat)))
			requests.Add(1)
			if err != nil {
				fail(fmt.Errorf("key rotation: %w", err))
			}
		}
	}()

	time.Sleep(300 * time.Millisecond)
	var during []int64
	for _, to := range []string{uriA, uriB} {
		before := requests.Load()
		out, e, code := rkRotate(t, dataDir, to)
		if code != 0 || !strings.Contains(out, "by the running server") {
			t.Fatalf("rotate to %s: %d\n%s%s", to, code, out, e)
		}
		during = append(during, requests.Load()-before)
		time.Sleep(300 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d requests, %d failed; during the two rotations: %v", requests.Load(), failures.Load(), during)
	if failures.Load() != 0 {
		t.Fatalf("%d failed requests; the first: %v", failures.Load(), firstErr.Load())
	}
	if during[0] == 0 || during[1] == 0 {
		t.Fatalf("no request was served during a rotation: %v", during)
	}
	metrics := rkGet(t, srv.url+"/metrics")
	srv.stop(t)
	logs := srv.output()
	for _, want := range []string{"root key rotated", "pkcs11:token=cipherd;object=root-b"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the server's logs do not say %q", want)
		}
	}

	// Restart on root-b: everything opens. Neither the static key nor
	// root-a opens the store any more.
	for _, old := range []string{"CIPHERD_ROOT_KEY_FILE=" + rootFile, "CIPHERD_ROOT_KEY_URI=" + uriA} {
		if _, err := rkStart(t, dataDir, old); err == nil || !strings.Contains(err.Error(), "root key") {
			t.Errorf("start with %s: %v, want a root-key refusal", old, err)
		} else {
			logs += err.Error()
		}
	}
	srv, err = rkStart(t, dataDir, "CIPHERD_ROOT_KEY_URI="+uriB)
	if err != nil {
		t.Fatal(err)
	}
	c = rkClient(t, srv.url)
	for _, it := range items {
		pt, err := c.Decrypt(ctx, it.key, []byte(it.ct), nil)
		if err != nil || string(pt) != it.pt {
			t.Fatalf("decrypt after the rotations and a restart: %q, %v", pt, err)
		}
	}
	t.Logf("%d ciphertexts opened after the restart", len(items))
	srv.stop(t)
	logs += srv.output()
	secrets := append(mat, staticRoot, []byte(pin))
	rkAssertClean(t, "logs", logs, secrets...)
	rkAssertClean(t, "/metrics", metrics, secrets...)
	rkAssertStoreClean(t, dataDir, secrets...)
}

// TestRootKeyRotateKilled SIGKILLs `cipherd rootkey rotate` after it has
// rewritten a number of the store's key files, over rounds that move a
// stopped 100-key store between two PKCS#11 keys, and checks after every kill
// that the store opens with the old root key or the new one and holds every
// key; a rotation cut short is finished by the next round's run of the same
// command.
func TestRootKeyRotateKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx := context.Background()
	tok := softhsmtest.New(t, "cipherd", "kill-pin")
	uris := []string{tok.URI("cipherd", "root-a"), tok.URI("cipherd", "root-b")}
	for _, u := range uris {
		if _, e, code := cipherd(t, nil, "rootkey", "init", "-uri", u); code != 0 {
			t.Fatal(e)
		}
	}
	staticRoot := make([]byte, 32)
	rand.Read(staticRoot)
	rootFile := filepath.Join(t.TempDir(), "root.key")
	os.WriteFile(rootFile, []byte(hex.EncodeToString(staticRoot)+"\n"), 0o600)

	// A store of 100 keys, sealed under the static key.
	const nkeys = 100
	dataDir := t.TempDir()
	dir := filepath.Join(dataDir, "keys")
	sr, _ := cryptosvc.NewSecret(staticRoot)
	static, _ := cryptosvc.NewStaticRootKey(&sr, nil)
	s, err := cryptosvc.OpenFileStore(dir, cryptosvc.FileStoreConfig{RootKeyProvider: static})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nkeys {
		sec, _ := cryptosvc.GenerateSecret(rand.Reader)
		k := &cryptosvc.StoredKey{Name: fmt.Sprintf("k%02d", i), Created: time.Now().UTC().Truncate(time.Second),
			Versions: []cryptosvc.StoredVersion{{KeyVersion: cryptosvc.KeyVersion{Version: 1, Created: time.Now().UTC().Truncate(time.Second)}, Secret: sec}}}
		if err := s.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	// The providers this test opens the store with, opened after the keys
	// were generated in the token.
	provs := map[string]cryptosvc.RootKeyProvider{"file:" + rootFile: static}
	for _, u := range uris {
		p, err := pkcs11.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		provs[u] = p
	}
	opens := func(uri string) error {
		s, err := cryptosvc.OpenFileStore(dir, cryptosvc.FileStoreConfig{RootKeyProvider: provs[uri]})
		if err != nil {
			return err
		}
		defer s.Close()
		if names, _ := s.List(ctx); len(names) != nkeys {
			return fmt.Errorf("%d keys, want %d", len(names), nkeys)
		}
		return nil
	}

	// The first rotation, static -> PKCS#11, runs to the end.
	if out, e, code := cipherd(t, nil, "rootkey", "rotate", "-data-dir", dataDir, "-from", "file:"+rootFile, "-to", uris[0]); code != 0 {
		t.Fatalf("rotate static -> PKCS#11: exit %d: %s%s", code, out, e)
	}
	if err := opens(uris[0]); err != nil {
		t.Fatal(err)
	}
	cur, target := uris[0], uris[1]
	var killed, finished, pendingSeen int
	const rounds = 24
	for round := range rounds {
		cmd := exec.Command(proctest.Cipherd(t), "rootkey", "rotate", "-data-dir", dataDir, "-from", cur, "-to", target)
		var out, errOut bytes.Buffer // standard output is copied by exec's goroutine, standard error by this one
		cmd.Stdout = &out
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The kill lands in the store's re-seal, after the command has
		// logged in to the token: SoftHSM2 rewrites its token file
		// (token.object) at every login, and a SIGKILL during that write
		// damages the token itself, which no keystore can make safe. It
		// lands after a number of key files were rewritten, counted from
		// the directory rather than timed, so that where it lands does
		// not depend on the machine's load; a number past the store's
		// keys lets the rotation finish.
		after := 1 + (round*13)%120
		var watch chan struct{}
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errOut.Write(append(sc.Bytes(), '\n'))
			if watch == nil && sc.Text() == resealingLine {
				watch = make(chan struct{})
				go killAfterRewrites(cmd.Process, filepath.Join(dir, "keys"), time.Now(), after, watch)
			}
		}
		err = cmd.Wait()
		if watch != nil {
			close(watch)
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
			killed++
		} else if err != nil {
			t.Fatalf("round %d: rotate %s → %s: %v\n%s%s", round, cur, target, err, out.Bytes(), errOut.Bytes())
		}
		errOld, errNew := opens(cur), opens(target)
		if errOld != nil && errNew != nil {
			t.Fatalf("round %d (killed after %d rewritten keys): the store opens with neither root key: old %v; new %v", round, after, errOld, errNew)
		}
		if errNew != nil && !errors.Is(errNew, cryptosvc.ErrRootKey) {
			t.Fatalf("round %d: the new root key fails otherwise than refused: %v", round, errNew)
		}
		_, pending := os.Stat(filepath.Join(dir, "rotate.json"))
		switch {
		case pending == nil:
			pendingSeen++ // the next round finishes it
		case errOld != nil:
			finished++ // the old root key is refused: the rotation is done
			next := uris[0]
			if target == uris[0] {
				next = uris[1]
			}
			cur, target = target, next
		}
	}
	t.Logf("%d rounds: %d killed, %d rotations finished, %d kills left a rotation half done", rounds, killed, finished, pendingSeen)
	if killed < rounds/3 || pendingSeen == 0 {
		t.Fatalf("the kills did not land inside rotations often enough (killed %d, half done %d)", killed, pendingSeen)
	}
	// Finish whatever is pending and check the store once more.
	if out, e, code := cipherd(t, nil, "rootkey", "rotate", "-data-dir", dataDir, "-from", cur, "-to", target); code != 0 {
		t.Fatalf("final rotate: %s%s", out, e)
	}
	if err := opens(target); err != nil {
		t.Fatal(err)
	}
}

// killAfterRewrites kills p once n files of dir have been written since
// since, polling every half millisecond until stop is closed. The rotation
// replaces each key file by a rename, so a file modified after since is one
// it re-sealed.
func killAfterRewrites(p *os.Process, dir string, since time.Time, n int, stop <-chan struct{}) {
	tick := time.NewTicker(500 * time.Microsecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		entries, _ := os.ReadDir(dir)
		done := 0
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && fi.ModTime().After(since) {
				done++
			}
		}
		if done >= n {
			p.Signal(syscall.SIGKILL)
			return
		}
	}
}
