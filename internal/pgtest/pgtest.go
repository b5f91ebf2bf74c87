// Package pgtest runs a real PostgreSQL server for tests: initdb in a
// temporary folder, postgres on a free loopback port, as the unprivileged
// user postgres when the tests run as root (PostgreSQL refuses to run as
// root), stopped when the tests end.
//
// Without PostgreSQL installed (Debian: postgresql, binaries in
// /usr/lib/postgresql/<version>/bin), tests skip, unless
// CIPHERD_REQUIRE_POSTGRES=1 (which CI sets): then they fail.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvRequire names the variable that turns a missing PostgreSQL into a
// failure.
const EnvRequire = "CIPHERD_REQUIRE_POSTGRES"

// Server is one running PostgreSQL cluster.
type Server struct {
	Port     int
	User     string // the superuser
	Password string

	bin, dir string
	cred     *syscall.Credential // nil: run as ourselves
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	logPath  string
}

// binDir finds the newest installed PostgreSQL's bin folder.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin; Debian: apt-get install postgresql)")
}

// Missing skips or fails t (see the package comment) if PostgreSQL is not
// installed.
func Missing(t testing.TB) {
	t.Helper()
	if _, err := binDir(); err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1: %v", EnvRequire, err)
		}
		t.Skip(err)
	}
}

// Start runs a new cluster for t, stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("postgres: %v", err)
		}
		if _, berr := binDir(); berr != nil {
			t.Skip(berr)
		}
		t.Fatalf("postgres: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

var (
	shared     *Server
	sharedErr  error
	sharedOnce sync.Once
	managed    atomic.Bool // a TestMain will stop the shared cluster
)

// Shared returns the cluster shared by the tests of this test binary,
// starting it on first use. Tests take a database of their own
// (Database); Main, or the function Manage returns, stops the cluster.
// Without either the cluster would outlive the tests (postgres runs in a
// process group of its own), so Shared fails the test.
func Shared(t testing.TB) *Server {
	t.Helper()
	Missing(t)
	if !managed.Load() {
		t.Fatal("pgtest.Shared: TestMain must call pgtest.Main, or stop the shared cluster with the function pgtest.Manage returns")
	}
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		t.Fatalf("postgres: %v", sharedErr)
	}
	return shared
}

// Main runs the tests and then stops the shared cluster: call it from
// TestMain.
func Main(m *testing.M) {
	stop := Manage()
	code := m.Run()
	stop()
	os.Exit(code)
}

// Manage is for a TestMain that is not Main: it lets the tests use Shared
// and returns the function that stops the shared cluster, if one was
// started, to call after m.Run.
func Manage() func() {
	managed.Store(true)
	return func() {
		if shared != nil {
			shared.Stop()
		}
	}
}

func start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, User: "cipherd", Password: hex.EncodeToString(randBytes(12))}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root needs the user postgres to run the server: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir: its parents are private to root.
	if s.dir, err = os.MkdirTemp("", "cipherd-pgtest-"); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(s.dir)
		}
	}()
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return nil, err
		}
	}
	pwfile := filepath.Join(s.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if s.cred != nil {
		os.Chown(pwfile, int(s.cred.Uid), int(s.cred.Gid))
	}
	data := filepath.Join(s.dir, "data")
	initdb := s.command(filepath.Join(bin, "initdb"), "-D", data, "-U", s.User, "--pwfile="+pwfile,
		"--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	os.Remove(pwfile)
	s.logPath = filepath.Join(s.dir, "postgres.log")
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.Port = port
	if err := s.launch(); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if s.cred != nil {
		cmd.SysProcAttr.Credential = s.cred
	}
	cmd.Dir = s.dir
	return cmd
}

// launch starts postgres on s.Port and waits until it accepts connections.
// fsync is off: the tests kill the server, never the machine, and the
// kernel keeps what postgres wrote. synchronous_commit stays on, so that a
// commit that returned survives a kill -9 as it would in production.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	defer logf.Close()
	var from int64 // this launch's part of the log
	if fi, err := logf.Stat(); err == nil {
		from = fi.Size()
	}
	cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.Port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+s.dir, "-c", "fsync=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=16MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(s.logPath)
			if int64(len(log)) >= from {
				log = log[from:]
			}
			return fmt.Errorf("postgres exited at start:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not accepting connections after 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// DSN returns the URL of database db, with the password in it.
func (s *Server) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(s.User, s.Password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Database creates a new empty database for t and returns its URL.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	name := "t_" + hex.EncodeToString(randBytes(6))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return s.DSN(name)
}

// Kill ends the server and every backend at once with SIGKILL, as a crash
// would.
//
// Killing the postmaster's process group is not enough: PostgreSQL puts
// each backend and auxiliary process in a session of its own (setsid), so
// they outlive the group kill until they notice the postmaster is gone, and
// while one still holds the shared memory segment a restart refuses to
// start ("pre-existing shared memory block is still in use"). Kill finds
// the postmaster's children, kills them too, and waits until they are gone.
//
// It stops the postmaster before listing them, so that none is forked
// after the listing: such a backend would outlive the crash until it
// noticed, answering meanwhile the client it was forked for, and Kill
// would return with it alive (TestKillLeavesNoBackend).
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	pid := cmd.Process.Pid
	syscall.Kill(pid, syscall.SIGSTOP)
	for st, ok := procStat(pid); ok && st.alive() && st.state != 'T'; st, ok = procStat(pid) {
		time.Sleep(100 * time.Microsecond)
	}
	children := childrenOf(pid)
	for _, c := range children {
		syscall.Kill(c, syscall.SIGKILL)
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	<-exited
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range children {
		for alive(c) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	return processes(func(c int) bool {
		st, ok := procStat(c)
		return ok && st.ppid == pid
	})
}

// processes lists the processes in /proc for which keep is true.
func processes(keep func(pid int) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && keep(pid) {
			out = append(out, pid)
		}
	}
	return out
}

type stat struct {
	state byte
	ppid  int
}

// procStat reads the state and parent of pid from /proc/<pid>/stat.
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return stat{state: f[0][0], ppid: ppid}, true
}

// alive reports whether pid still runs: a zombie has released its memory,
// shared segments included.
func alive(pid int) bool {
	st, ok := procStat(pid)
	return ok && st.alive()
}

func (st stat) alive() bool { return st.state != 'Z' && st.state != 'X' }

// Restart starts the server again on the same port and data (after Kill:
// with crash recovery).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.launch()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "pre-existing shared memory block") || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the server down fast and removes its folder.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
