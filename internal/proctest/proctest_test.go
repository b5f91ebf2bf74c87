//go:build unix

package proctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests run this test binary as the child process: with
// PROCTEST_CHILD set, TestMain acts out the child's part instead.
func TestMain(m *testing.M) {
	switch os.Getenv("PROCTEST_CHILD") {
	case "":
		Main(m)
	case "exit3":
		fmt.Print("out")
		fmt.Fprint(os.Stderr, "err")
		os.Exit(3)
	case "serve":
		// Listens until SIGTERM, then exits 0.
		ln, err := net.Listen("tcp", os.Getenv("PROCTEST_ADDR"))
		if err != nil {
			os.Exit(1)
		}
		defer ln.Close()
		time.Sleep(time.Hour)
	case "hang":
		time.Sleep(time.Hour)
	}
}

func child(part string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{"PROCTEST_CHILD=" + part}, env...)...)
	return cmd
}

func TestRun(t *testing.T) {
	out, errOut, code := Run(t, child("exit3"))
	if out != "out" || errOut != "err" || code != 3 {
		t.Errorf("Run = %q, %q, %d; want \"out\", \"err\", 3", out, errOut, code)
	}
}

func TestPoll(t *testing.T) {
	n := 0
	if !Poll(time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Errorf("Poll stopped after %d calls", n)
	}
	n = 0
	if Poll(30*time.Millisecond, func() bool { n++; return false }) || n < 2 {
		t.Errorf("Poll of a false condition: %d calls", n)
	}
}

func TestStartReadyKill(t *testing.T) {
	addr := FreeAddr(t)
	p := Start(t, child("serve", "PROCTEST_ADDR="+addr))
	t.Cleanup(p.Kill)
	err := p.WaitReady(10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if p.Running() {
		t.Fatal("running after Kill")
	}
	if code := ExitCode(t, p.Err()); code != -1 {
		t.Errorf("exit code after SIGKILL: %d", code)
	}
}

func TestWaitReadyExited(t *testing.T) {
	p := Start(t, child("exit3"))
	t.Cleanup(p.Kill)
	err := p.WaitReady(10*time.Second, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready: exit status 3") {
		t.Errorf("WaitReady = %v", err)
	}
}

func TestKillGroup(t *testing.T) {
	cmd := child("hang")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := Start(t, cmd)
	p.Kill()
	if err := p.WaitExit(t, 10*time.Second); err == nil {
		t.Error("no error from a killed process")
	}
}

func TestFreeAddr(t *testing.T) {
	addr := FreeAddr(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("FreeAddr = %q", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("FreeAddr's address is taken: %v", err)
	}
	ln.Close()
}
