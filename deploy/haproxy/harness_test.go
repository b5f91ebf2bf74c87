//go:build linux

package haproxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/internal/proctest"
)

// The harness runs real processes: cipherd replicas built from this tree and
// the host's haproxy, each in a process group of its own, killed with the
// test (t.Cleanup, and SIGKILL if the test binary dies). Everything listens
// on 127.0.0.1 on ports picked free.

const (
	testToken = "cluster-test-token"
	testKey   = "orders"
	// drainDelay is the replicas' drain_delay. The test replaces the
	// example's check intervals with these: HAProxy takes a replica out
	// after inter + (fall-1)*fastinter = 300ms, far inside drainDelay.
	drainDelay                 = 2 * time.Second
	checkInter, checkFastInter = "200ms", "100ms"
)

func TestMain(m *testing.M) { proctest.Main(m) }

// needHAProxy returns haproxy's path, or skips the test when it is not
// installed (fails it with CIPHERD_REQUIRE_HAPROXY=1) or in -short mode,
// saying what the test starts.
func needHAProxy(t *testing.T, starts string) string {
	t.Helper()
	haproxy, err := exec.LookPath("haproxy")
	switch {
	case err != nil && os.Getenv("CIPHERD_REQUIRE_HAPROXY") == "1":
		t.Fatal("haproxy is not installed and CIPHERD_REQUIRE_HAPROXY=1")
	case err != nil:
		t.Skip("haproxy is not installed (set CIPHERD_REQUIRE_HAPROXY=1 to fail instead)")
	case testing.Short():
		t.Skip(starts)
	}
	return haproxy
}

// process is a running child in its own process group.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// startProcess starts bin with args, appending its output to logPath. The
// process is killed when owner (the test that owns the cluster, which may
// outlive t) ends.
func startProcess(t, owner *testing.T, logPath string, env []string, bin string, args ...string) *process {
	t.Helper()
	logs, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logs, "==== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(append([]string{bin}, args...), " "))
	p := &process{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logs, logs
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logs.Close()
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logs.Close()
		close(p.exited)
	}()
	owner.Cleanup(func() { p.kill() })
	return p
}

// kill sends SIGKILL to the process group and waits for the process.
func (p *process) kill() {
	select {
	case <-p.exited:
	default:
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// waitExit waits up to d for the process to exit and returns its Wait error.
func (p *process) waitExit(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(d):
		t.Fatalf("process %d did not exit within %v", p.cmd.Process.Pid, d)
		return nil
	}
}

// replica is one cipherd serve process, restartable on the same address and
// data directory.
type replica struct {
	name, aead, addr string
	env              []string // more environment, after the cluster's
	dataDir, config  string
	logPath          string
	proc             *process
	api              *client.Client // direct, not through HAProxy
}

func (r *replica) url() string { return "http://" + r.addr }

// start runs the replica and waits until its /readyz answers 200.
func (r *replica) start(t *testing.T, c *cluster) {
	t.Helper()
	env := []string{
		"CIPHERD_ADDR=" + r.addr,
		"CIPHERD_DATA_DIR=" + r.dataDir,
		"CIPHERD_ADMIN_TOKEN=" + testToken,
		"CIPHERD_SKIP_BENCHMARK=1",
	}
	if c.proxyProtocol { // HAProxy tells the client's address, from here
		env = append(env, "CIPHERD_PROXY_PROTOCOL=true", "CIPHERD_TRUSTED_PROXIES=127.0.0.1/32")
	}
	if r.aead != "" { // else the replica's own choice
		env = append(env, "CIPHERD_AEAD="+r.aead)
	}
	if c.keystore != "" {
		env = append(env, "CIPHERD_KEYSTORE="+c.keystore, "CIPHERD_ROOT_KEY_FILE="+c.rootKeyFile, "CIPHERD_DEFAULT_KEY=-")
	} else {
		env = append(env, "CIPHERD_KEYRING="+c.keyring)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CIPHERD_") {
			env = append(env, kv)
		}
	}
	env = append(env, r.env...)
	r.proc = startProcess(t, c.t, r.logPath, env, c.bin, "serve", "-config", r.config)
}

func (r *replica) waitReady(t *testing.T) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ok := proctest.Poll(30*time.Second, func() bool {
		if !r.proc.running() {
			return true
		}
		resp, err := hc.Get(r.url() + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !ok || !r.proc.running() {
		t.Fatalf("%s did not become ready (exited: %v)", r.name, !r.proc.running())
	}
}

// cluster is three replicas behind one HAProxy, sharing a keyring file or,
// with keystore set, a PostgreSQL keystore.
type cluster struct {
	t                 *testing.T // the owner: processes live until it ends
	bin, dir, keyring string
	keystore          string           // a PostgreSQL URL, or empty
	rootKeyFile       string           // with keystore
	env               map[int][]string // more environment of replica i
	// proxyProtocol: HAProxy sends the PROXY protocol header (the
	// example's commented send-proxy-v2 line), the replicas read it.
	proxyProtocol bool
	replicas      []*replica
	lb            *process
	lbAddr, lbLog string
	statsSocket   string
	api           *client.Client // through HAProxy
}

// newTransport is a keep-alive transport that never uses a proxy.
func newTransport() *http.Transport {
	return &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
}

func newClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.New(url, client.WithToken(testToken), client.WithHTTPClient(&http.Client{Transport: newTransport()}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startCluster makes a keyring with `cipherd keyring new`, starts one
// replica per AEAD and HAProxy with the example configuration, its PROXY
// protocol line uncommented, and waits until HAProxy sees every replica UP.
func startCluster(t *testing.T, haproxy string, aeads ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: proctest.Cipherd(t), dir: t.TempDir(), proxyProtocol: true}
	c.keyring = filepath.Join(c.dir, "keyring.json")
	if out, err := exec.Command(c.bin, "keyring", "new", "-o", c.keyring, testKey).CombinedOutput(); err != nil {
		t.Fatalf("cipherd keyring new: %v\n%s", err, out)
	}
	return c.start(t, haproxy, aeads...)
}

// startPostgresCluster starts the replicas on the PostgreSQL keystore at
// dsn, with a new root key; no key exists yet.
func startPostgresCluster(t *testing.T, haproxy, dsn string, aeads ...string) *cluster {
	t.Helper()
	return startPostgresClusterEnv(t, haproxy, dsn, nil, aeads...)
}

// startPostgresClusterEnv is startPostgresCluster with more environment
// for some replicas, by index.
func startPostgresClusterEnv(t *testing.T, haproxy, dsn string, env map[int][]string, aeads ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: proctest.Cipherd(t), dir: t.TempDir(), keystore: dsn, env: env}
	c.rootKeyFile = filepath.Join(c.dir, "root.key")
	if err := os.WriteFile(c.rootKeyFile, []byte(base64.StdEncoding.EncodeToString(random(32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return c.start(t, haproxy, aeads...)
}

func (c *cluster) start(t *testing.T, haproxy string, aeads ...string) *cluster {
	t.Helper()
	for i, aead := range aeads {
		name := fmt.Sprintf("cipherd%d", i+1)
		r := &replica{name: name, aead: aead, addr: proctest.FreeAddr(t), env: c.env[i],
			dataDir: filepath.Join(c.dir, name), config: filepath.Join(c.dir, name+".yaml"), logPath: filepath.Join(c.dir, name+".log")}
		cfg := fmt.Sprintf("version: 1\ndrain_delay: %s\nshutdown_timeout: 30s\n", drainDelay)
		if err := os.WriteFile(r.config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		r.api = newClient(t, r.url())
		c.replicas = append(c.replicas, r)
		r.start(t, c)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs(t)
		}
	})
	for _, r := range c.replicas {
		r.waitReady(t)
	}

	example, err := os.ReadFile("haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	c.lbAddr = proctest.FreeAddr(t)
	c.statsSocket = filepath.Join(c.dir, "haproxy.sock")
	lp := lbParams{Bind: c.lbAddr, StatsBind: proctest.FreeAddr(t), Socket: c.statsSocket,
		Inter: checkInter, FastInter: checkFastInter, DownInter: checkInter, ProxyProtocol: c.proxyProtocol}
	for _, r := range c.replicas {
		lp.Servers = append(lp.Servers, [2]string{r.name, r.addr})
	}
	cfg, err := renderConfig(string(example), lp)
	if err != nil {
		t.Fatalf("deploy/haproxy/haproxy.cfg: %v", err)
	}
	cfgPath := filepath.Join(c.dir, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-f", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, cfg)
	}
	c.lbLog = filepath.Join(c.dir, "haproxy.log")
	c.lb = startProcess(t, t, c.lbLog, os.Environ(), haproxy, "-db", "-f", cfgPath)
	for _, r := range c.replicas {
		c.waitStatus(t, r, "UP")
	}
	c.api = newClient(t, "http://"+c.lbAddr)
	return c
}

// dumpLogs logs the end of every process's output.
func (c *cluster) dumpLogs(t *testing.T) {
	paths := []string{c.lbLog}
	for _, r := range c.replicas {
		paths = append(paths, r.logPath)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// Without the access and audit lines of requests that succeeded:
		// those of a failed one tell which replica served it, and when.
		var lines [][]byte
		for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			perRequest := bytes.Contains(l, []byte(`"msg":"access"`)) || bytes.Contains(l, []byte(`"msg":"audit"`))
			if !perRequest || bytes.Contains(l, []byte(`"status":5`)) {
				lines = append(lines, l)
			}
		}
		lines = lines[max(0, len(lines)-40):]
		t.Logf("---- last lines of %s:\n%s", filepath.Base(p), bytes.Join(lines, []byte("\n")))
	}
}

// ctx is a context for a few requests of the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}
