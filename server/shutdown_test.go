package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cipherd/cipherd/api"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/internal/pgtest"
	"github.com/cipherd/cipherd/internal/proctest"
)

// The shutdown tests run the real binary: cipherd serve with a YAML
// configuration, stopped by SIGTERM in the middle of a streaming upload.

func TestMain(m *testing.M) { proctest.Main(m, pgtest.Manage()) }

// buildCipherd returns cmd/cipherd built from this module, skipping the
// test under -short or without a go command.
func buildCipherd(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build cipherd with")
	}
	return proctest.Cipherd(t)
}

// cipherdProcess is a running cipherd serve.
type cipherdProcess struct {
	cmd     *exec.Cmd
	url     string
	dataDir string
	logs    string
	exited  chan struct{}
	err     error // from Wait, once exited is closed
}

const shutdownToken = "shutdown-test-token"

func startCipherd(t *testing.T, bin, extraConfig string) *cipherdProcess {
	t.Helper()
	dir := t.TempDir()
	addr := proctest.FreeAddr(t)
	p := &cipherdProcess{url: "http://" + addr, dataDir: filepath.Join(dir, "data"), logs: filepath.Join(dir, "cipherd.log"), exited: make(chan struct{})}
	cfg := fmt.Sprintf("version: 1\naddr: %s\ndata_dir: %s\nskip_benchmark: true\n%s", addr, p.dataDir, extraConfig)
	cfgFile := filepath.Join(dir, "cipherd.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs, err := os.Create(p.logs)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, "serve", "-config", cfgFile)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CIPHERD_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, "CIPHERD_ADMIN_TOKEN="+shutdownToken)
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logs.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.logs)
			t.Logf("cipherd output:\n%s", b)
		}
	})
	if !proctest.Poll(60*time.Second, func() bool { return p.status("/readyz") == 200 }) {
		t.Fatal("cipherd did not become ready")
	}
	return p
}

// status GETs path on a fresh connection; 0 when the request fails.
func (p *cipherdProcess) status(path string) int {
	return proctest.HTTPStatus(p.url + path)
}

// upload is a streaming encryption in progress, fed through a pipe.
type upload struct {
	pw      *io.PipeWriter
	sent    bytes.Buffer // the plaintext written so far
	stop    chan struct{}
	wrote   sync.WaitGroup
	mu      sync.Mutex
	got     bytes.Buffer // the ciphertext received so far
	started chan struct{}
	done    chan struct{}
	err     error
	status  int
}

// startUpload posts a body that keeps coming, 64 KiB every 5 ms, until
// finish.
func startUpload(t *testing.T, url string) *upload {
	t.Helper()
	pr, pw := io.Pipe()
	u := &upload{pw: pw, stop: make(chan struct{}), started: make(chan struct{}), done: make(chan struct{})}
	u.wrote.Add(1)
	go func() {
		defer u.wrote.Done()
		block := make([]byte, 64<<10)
		for {
			select {
			case <-u.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			rand.Read(block)
			if _, err := pw.Write(block); err != nil {
				return
			}
			u.sent.Write(block)
		}
	}()
	req, err := http.NewRequest("POST", url+"/v1/encrypt/default", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", api.ContentTypeStream)
	req.Header.Set("Authorization", "Bearer "+shutdownToken)
	go func() {
		defer close(u.done)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			u.mu.Lock()
			u.err = err
			u.mu.Unlock()
			close(u.started)
			return
		}
		defer resp.Body.Close()
		u.mu.Lock()
		u.status = resp.StatusCode
		u.mu.Unlock()
		buf := make([]byte, 32<<10)
		for first := true; ; first = false {
			n, err := resp.Body.Read(buf)
			u.mu.Lock()
			u.got.Write(buf[:n])
			u.mu.Unlock()
			if first {
				close(u.started)
			}
			if err != nil {
				if err != io.EOF {
					u.mu.Lock()
					u.err = err
					u.mu.Unlock()
				}
				return
			}
		}
	}()
	select {
	case <-u.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the upload did not start")
	}
	u.mu.Lock()
	status, err := u.status, u.err
	u.mu.Unlock()
	if status != 200 || err != nil && err != io.ErrUnexpectedEOF {
		t.Fatalf("upload: %d %v", status, err)
	}
	return u
}

// finish ends the plaintext and waits for the response to end.
func (u *upload) finish(t *testing.T, limit time.Duration) {
	t.Helper()
	close(u.stop)
	u.wrote.Wait()
	u.pw.Close()
	select {
	case <-u.done:
	case <-time.After(limit):
		t.Fatal("the response did not end")
	}
}

func TestShutdownDrainsStreams(t *testing.T) {
	bin := buildCipherd(t)
	const drain, shutdownTimeout = time.Second, 10 * time.Second
	p := startCipherd(t, bin, fmt.Sprintf("drain_delay: %s\nshutdown_timeout: %s\nstream_idle_timeout: 10s\n", drain, shutdownTimeout))
	u := startUpload(t, p.url)

	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Readiness goes off at once, while the listener still serves.
	if !proctest.Poll(drain/2, func() bool { return p.status("/readyz") == 503 }) {
		t.Fatalf("/readyz not 503 within %v of SIGTERM", drain/2)
	}
	notReady := time.Since(t0)
	if st := p.status("/healthz"); st != 200 {
		t.Errorf("/healthz during the drain delay: %d", st)
	}
	// After the drain delay the listener is closed: new connections fail.
	time.Sleep(drain + 300*time.Millisecond - time.Since(t0))
	if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(p.url, "http://"), time.Second); err == nil {
		conn.Close()
		t.Errorf("a new connection was accepted %v after SIGTERM", time.Since(t0))
	}
	select {
	case <-p.exited:
		t.Fatal("cipherd exited with a stream in flight")
	default:
	}

	// The stream in flight completes, and the process exits 0.
	u.finish(t, shutdownTimeout)
	if u.err != nil {
		t.Fatalf("the in-flight stream failed: %v", u.err)
	}
	select {
	case <-p.exited:
	case <-time.After(shutdownTimeout):
		t.Fatal("cipherd did not exit")
	}
	exited := time.Since(t0)
	if p.err != nil {
		t.Errorf("cipherd exited with %v", p.err)
	}
	t.Logf("SIGTERM → readyz 503 in %v; %d MiB streamed; exit in %v", notReady.Round(time.Millisecond), u.sent.Len()>>20, exited.Round(time.Millisecond))

	// The ciphertext is whole: open it with the keystore the process left.
	fs, err := cryptosvc.OpenFileStore(filepath.Join(p.dataDir, "keys"), cryptosvc.FileStoreConfig{DevRootKey: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	svc, err := cryptosvc.New(cryptosvc.Config{Keystore: fs})
	if err != nil {
		t.Fatal(err)
	}
	dr, err := svc.DecryptReader(context.Background(), "default", bytes.NewReader(u.got.Bytes()), nil)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := io.ReadAll(dr)
	if err != nil || !bytes.Equal(pt, u.sent.Bytes()) {
		t.Fatalf("the drained stream does not decrypt to what was sent: %v (%d of %d bytes)", err, len(pt), u.sent.Len())
	}
}

// TestShutdownTimeout: a stream that does not end cannot hold the process
// past drain_delay + shutdown_timeout; it exits 1, having cut the stream.
func TestShutdownTimeout(t *testing.T) {
	bin := buildCipherd(t)
	const drain, shutdownTimeout = 200 * time.Millisecond, 2 * time.Second
	p := startCipherd(t, bin, fmt.Sprintf("drain_delay: %s\nshutdown_timeout: %s\n", drain, shutdownTimeout))
	u := startUpload(t, p.url)
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(drain + shutdownTimeout + 3*time.Second):
		t.Fatal("cipherd outlived its shutdown timeout")
	}
	elapsed := time.Since(t0)
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1 after a forced shutdown", p.err)
	}
	close(u.stop)
	u.wrote.Wait()
	u.pw.CloseWithError(errors.New("done"))
	<-u.done
	if u.err == nil {
		t.Error("the cut stream read as complete")
	}
	if elapsed < shutdownTimeout {
		t.Errorf("exited after %v, before the shutdown timeout", elapsed)
	}
	t.Logf("exit after %v: %v; stream: %v", elapsed.Round(time.Millisecond), p.err, u.err)
}
