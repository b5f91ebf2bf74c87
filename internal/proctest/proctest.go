// Package proctest runs programs as separate processes in tests: the
// cipherd binary built from this module (once per test binary), on a free
// loopback address, polled until it is ready, stopped or killed when the
// test is done with it, and programs run to their exit with their output
// collected.
//
// A test package that calls Cipherd calls Main from its TestMain, which
// removes the binary when the tests end.
package proctest

import (
	"bytes"
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cipherdPkg is built by import path, so that it builds the same from any
// package folder of the module.
const cipherdPkg = "github.com/cipherd/cipherd/cmd/cipherd"

var (
	inMain atomic.Bool

	buildOnce sync.Once
	buildDir  string // removed by Main
	buildBin  string
	buildErr  error
)

// Main runs the tests, then each of after (such as the function
// pgtest.Manage returns), then removes the binary Cipherd built: call it
// from TestMain.
func Main(m *testing.M, after ...func()) {
	inMain.Store(true)
	code := m.Run()
	for _, f := range after {
		f()
	}
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// Cipherd returns the path of cmd/cipherd built from this module. The first
// call builds it, into a folder that Main removes; the tests of the test
// binary share that one build, and a failed build fails each of them.
func Cipherd(t testing.TB) string {
	t.Helper()
	if !inMain.Load() {
		t.Fatal("proctest.Cipherd: TestMain must call proctest.Main, which removes the binary")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "proctest")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "cipherd")
		buildErr = goBuild(buildBin, nil)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// Build builds cmd/cipherd with env added to the go command's environment
// (CGO_ENABLED=0, say) into t's temporary folder, for a test that needs a
// build other than Cipherd's.
func Build(t testing.TB, env ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cipherd")
	if err := goBuild(bin, env); err != nil {
		t.Fatal(err)
	}
	return bin
}

func goBuild(bin string, env []string) error {
	// go test puts its own GOROOT/bin first on the PATH of the tests it runs.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("no go command to build cipherd with: %v", err)
	}
	cmd := exec.Command(goBin, "build", "-o", bin, cipherdPkg)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%sgo build %s: %v\n%s", envPrefix(env), cipherdPkg, err, out)
	}
	return nil
}

func envPrefix(env []string) string {
	if len(env) == 0 {
		return ""
	}
	return strings.Join(env, " ") + " "
}

// FreeAddr returns a loopback address, host:port, that nothing listens on
// now. Another process may take the port before the test does; on a test
// machine that is rare enough.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Poll calls cond every 10ms until it returns true, and reports whether it
// did within d. cond is called at least once.
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// HTTPStatus GETs url on a connection of its own, closed afterwards so
// that it holds no place of a server's connection limit, and returns the
// status code, or 0 if the request fails or takes over 2s.
func HTTPStatus(url string) int {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Run runs cmd to its exit and returns its standard output, standard
// error and exit code (-1 if a signal ended it). It fails t if cmd cannot
// run.
func Run(t testing.TB, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	code = ExitCode(t, cmd.Run())
	return o.String(), e.String(), code
}

// ExitCode returns the exit code that err, from exec.Cmd's Run or Wait,
// reports: 0 for nil, -1 if a signal ended the process. It fails t if err
// says the process did not run.
func ExitCode(t testing.TB, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return 0
}

// Buffer is a bytes.Buffer that a process's output and the test can use at
// the same time: exec.Cmd copies into it from a goroutine of its own.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Process is a started program and what became of it.
type Process struct {
	Cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// Start starts cmd, failing t if it cannot. Ending the process is for the
// test that owns it, which may outlive t: usually a t.Cleanup with Kill or
// Stop.
func Start(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p
}

// Exited is closed when the process has exited and Err is set.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err returns the error of exec.Cmd's Wait once Exited is closed.
func (p *Process) Err() error {
	<-p.exited
	return p.err
}

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// WaitExit waits up to d for the process to exit and returns its Wait
// error. It fails t if the process is still running after d.
func (p *Process) WaitExit(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		t.Fatalf("process %d (%s) did not exit within %v", p.Cmd.Process.Pid, filepath.Base(p.Cmd.Path), d)
		return nil
	}
}

// WaitReady polls ready (see Poll) until it returns true, and returns an
// error if the process exits first or ready is still false after d.
func (p *Process) WaitReady(d time.Duration, ready func() bool) error {
	exited := false
	ok := Poll(d, func() bool {
		if !p.Running() {
			exited = true
			return true
		}
		return ready()
	})
	switch {
	case exited:
		return fmt.Errorf("%s exited before it was ready: %v", filepath.Base(p.Cmd.Path), p.err)
	case !ok:
		return fmt.Errorf("%s not ready within %v", filepath.Base(p.Cmd.Path), d)
	}
	return nil
}

// Stop sends SIGTERM, as an orchestrator does, and waits up to d for the
// process to exit; it returns the Wait error. A process still running
// after d is killed, t fails, and Stop returns nil.
func (p *Process) Stop(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	default:
	}
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		p.Kill()
		t.Errorf("%s did not stop within %v of SIGTERM", filepath.Base(p.Cmd.Path), d)
		return nil
	}
}

// Kill sends SIGKILL, to the process group if the process leads one of its
// own (SysProcAttr.Setpgid), and waits for the process to exit.
func (p *Process) Kill() {
	select {
	case <-p.exited:
	default:
		kill(p.Cmd)
		<-p.exited
	}
}
