package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/cryptosvc"
	"github.com/cipherd/cipherd/cryptosvc/keystore"
	"github.com/cipherd/cipherd/cryptosvc/rootkey"
	"github.com/cipherd/cipherd/server"
)

// The tests here start a real cipherd server from the manifests: the
// container's environment as the kubelet would set it, its ConfigMap and
// Secret volumes laid out as the kubelet lays them out (under a temporary
// root), the configuration read as `cipherd serve` reads it.

var placeholderRE = regexp.MustCompile(`REPLACE_WITH_[A-Z0-9_]+`)

// fillPlaceholders replaces every REPLACE_WITH_… placeholder with a fresh
// random value of the kind it names.
func fillPlaceholders(s string) string {
	return placeholderRE.ReplaceAllStringFunc(s, func(p string) string {
		if p == "REPLACE_WITH_BASE64_OF_32_RANDOM_BYTES" {
			return base64.StdEncoding.EncodeToString(randomBytes(32))
		}
		return hex.EncodeToString(randomBytes(24))
	})
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// kubeletWrite writes files into dir the way the kubelet updates a Secret or
// ConfigMap volume: a new timestamped directory, the ..data symlink swapped
// to it atomically, each file a symlink through ..data.
func kubeletWrite(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	ts := filepath.Join(dir, fmt.Sprintf("..%d", time.Now().UnixNano()))
	if err := os.MkdirAll(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ts, name), []byte(content), 0o440); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		os.RemoveAll(filepath.Join(dir, old))
	}
}

// pod is the cipherd container as the kubelet would start it.
type pod struct {
	root    string            // the container's / lives under root
	env     map[string]string // the container's environment
	secret  map[string]string // the example Secret, placeholders filled
	volumes map[string]corev1.Volume
}

// host maps a path inside the container to the test's file system.
func (p *pod) host(path string) string { return filepath.Join(p.root, path) }

// getenv is the container's environment, with paths mapped to the host.
func (p *pod) getenv(name string) string {
	v := p.env[name]
	if strings.HasPrefix(v, "/") {
		return p.host(v)
	}
	return v
}

// mountedFiles returns what a ConfigMap or Secret volume shows.
func (p *pod) mountedFiles(t *testing.T, m *manifests, v corev1.Volume) map[string]string {
	t.Helper()
	var data map[string]string
	var items []corev1.KeyToPath
	switch {
	case v.Secret != nil:
		data, items = p.secret, v.Secret.Items
	case v.ConfigMap != nil && v.ConfigMap.Name == m.config.Name:
		data, items = m.config.Data, v.ConfigMap.Items
	case v.ConfigMap != nil && m.operatorConfigMaps[v.ConfigMap.Name] != nil:
		data, items = m.operatorConfigMaps[v.ConfigMap.Name], v.ConfigMap.Items
	default:
		t.Fatalf("volume %s is neither a Secret nor a ConfigMap the test knows", v.Name)
	}
	files := map[string]string{}
	if len(items) == 0 {
		for k, val := range data {
			files[k] = val
		}
	}
	for _, it := range items {
		val, ok := data[it.Key]
		if !ok {
			t.Fatalf("volume %s: no key %s", v.Name, it.Key)
		}
		files[it.Path] = val
	}
	return files
}

func startPod(t *testing.T, m *manifests) *pod {
	t.Helper()
	p := &pod{root: t.TempDir(), env: map[string]string{}, secret: map[string]string{}, volumes: m.mounts(t)}
	for k, v := range secretKeys(m.secret) {
		p.secret[k] = fillPlaceholders(v)
	}
	for mountPath, v := range p.volumes {
		dir := p.host(mountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if v.EmptyDir == nil {
			kubeletWrite(t, dir, p.mountedFiles(t, m, v))
		}
	}
	for _, e := range m.container(t).Env {
		switch {
		case e.ValueFrom == nil:
			p.env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			p.env[e.Name] = p.secret[e.ValueFrom.SecretKeyRef.Key]
		default:
			t.Fatalf("env %s: only values and secretKeyRef are simulated", e.Name)
		}
	}
	return p
}

// applyEnvNames returns the variables server.Config.ApplyEnv reads, by asking it.
func applyEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	var cfg server.Config
	if err := cfg.ApplyEnv(func(name string) string { names[name] = true; return "" }); err != nil {
		t.Fatal(err)
	}
	if len(names) < 10 || !names["CIPHERD_ADDR"] {
		t.Fatalf("ApplyEnv reads only %v", names)
	}
	return names
}

// openStore opens the keystore cfg's settings name, as `cipherd serve`
// does, and hands it to cfg; it closes when the test ends, after the
// server's Shutdown.
func openStore(t *testing.T, cfg *server.Config) {
	t.Helper()
	d := cfg.Defaults()
	st, err := keystore.Open(context.Background(), keystore.Config{
		DataDir: d.DataDir, Keyring: d.Keyring, Postgres: d.KeystoreURL, Logger: cfg.Logger,
		RootKey: rootkey.Config{URI: d.RootKeyURI, File: d.RootKeyFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Keystore = st.Keystore
}

// config builds the server configuration as `cipherd serve` does: the file
// named by CIPHERD_CONFIG, then ApplyEnv, then Defaults and Validate.
func (p *pod) config(t *testing.T) server.Config {
	t.Helper()
	names := applyEnvNames(t)
	for name := range p.env {
		// CIPHERD_CONFIG and CIPHERD_ROOT_KEY are read by `cipherd serve`
		// and the keystore, not by ApplyEnv.
		if !names[name] && name != "CIPHERD_CONFIG" && name != cryptosvc.EnvRootKey {
			t.Errorf("env %s is not a cipherd setting", name)
		}
	}
	var cfg server.Config
	if path := p.env["CIPHERD_CONFIG"]; path != "" {
		b, err := os.ReadFile(p.host(path))
		if err != nil {
			t.Fatalf("CIPHERD_CONFIG: %v", err)
		}
		if cfg, err = decodeConfig(b); err != nil {
			t.Fatalf("CIPHERD_CONFIG %s: %v", path, err)
		}
	}
	if err := cfg.ApplyEnv(p.getenv); err != nil {
		t.Fatalf("environment: %v", err)
	}
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the manifests' configuration is invalid: %v", err)
	}
	return cfg
}

// TestDeploymentConfiguration: the environment, the configuration file and
// the mounts make a valid cipherd configuration that uses them as intended,
// on the container's port, with shutdown timings that fit the probes and
// the grace period.
func TestDeploymentConfiguration(t *testing.T) {
	m := loadManifests(t)
	p := startPod(t, m)
	cfg := p.config(t)
	c := m.container(t)

	// One port: cipherd's, the container's, the probes' and the Service's.
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" && host != "0.0.0.0" && host != "::" {
		t.Errorf("cipherd listens on %s only: the kubelet and the Service cannot reach it", cfg.Addr)
	}
	httpPort := containerPort(t, c, intstr.FromString("http"))
	if fmt.Sprint(httpPort) != port {
		t.Errorf("cipherd listens on port %s, the container port http is %d", port, httpPort)
	}
	for name, pr := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("no %s httpGet probe", name)
			continue
		}
		if got := containerPort(t, c, pr.HTTPGet.Port); got != httpPort {
			t.Errorf("%s probe on port %d, cipherd on %d", name, got, httpPort)
		}
		if pr.HTTPGet.Scheme != "" && pr.HTTPGet.Scheme != corev1.URISchemeHTTP || cfg.TLSCert != "" {
			t.Errorf("%s probe scheme %q with TLS %v", name, pr.HTTPGet.Scheme, cfg.TLSCert != "")
		}
	}
	if p := c.ReadinessProbe.HTTPGet.Path; p != "/readyz" {
		t.Errorf("readiness probe on %s, want /readyz", p)
	}
	if p := c.LivenessProbe.HTTPGet.Path; p != "/healthz" {
		t.Errorf("liveness probe on %s, want /healthz", p)
	}
	for _, sp := range m.service.Spec.Ports {
		if got := containerPort(t, c, sp.TargetPort); got != httpPort {
			t.Errorf("Service port %s targets %d, cipherd listens on %d", sp.Name, got, httpPort)
		}
	}

	// The data directory is the emptyDir; the keyring is the Secret's file.
	dataVol, ok := p.volumes[strings.TrimPrefix(cfg.DataDir, p.root)]
	if !ok || dataVol.EmptyDir == nil {
		t.Errorf("data directory %s is not an emptyDir mount", p.env["CIPHERD_DATA_DIR"])
	}
	if cfg.Keyring == "" {
		t.Fatal("no keyring: the replicas would each have keys of their own")
	}
	krVol, ok := p.volumes[filepath.Dir(strings.TrimPrefix(cfg.Keyring, p.root))]
	if !ok || krVol.Secret == nil {
		t.Errorf("keyring %s is not in a Secret volume", p.env["CIPHERD_KEYRING"])
	}
	if cfg.AdminToken == "" || cfg.AdminToken != p.secret["admin-token"] {
		t.Error("the admin token does not come from the Secret")
	}

	// Shutdown: readiness fails within the drain delay; cipherd ends the
	// drain before the kubelet's SIGKILL.
	rp := c.ReadinessProbe
	notReadyAfter := time.Duration(rp.PeriodSeconds*rp.FailureThreshold) * time.Second
	grace := time.Duration(*m.deploy.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	if !(notReadyAfter < cfg.DrainDelay && cfg.DrainDelay < cfg.ShutdownTimeout && cfg.ShutdownTimeout < grace) {
		t.Errorf("want readiness probe period × threshold (%v) < drain_delay (%v) < shutdown_timeout (%v) < terminationGracePeriodSeconds (%v)",
			notReadyAfter, cfg.DrainDelay, cfg.ShutdownTimeout, grace)
	}
	sp := c.StartupProbe
	if d := time.Duration(sp.PeriodSeconds*sp.FailureThreshold) * time.Second; d < 30*time.Second {
		t.Errorf("the startup probe gives up after %v: the self-tests and the profile may take longer on a busy node", d)
	}
}

// TestExampleSecretRefused: the example keyring, placeholders unfilled, is
// refused by cipherd, so that nobody runs with a published key; filled in,
// it loads.
func TestExampleSecretRefused(t *testing.T) {
	m := loadManifests(t)
	kr := secretKeys(m.secret)["keyring.json"]
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		ok      bool
	}{{kr, false}, {fillPlaceholders(kr), true}} {
		path := filepath.Join(dir, "keyring.json")
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := cryptosvc.OpenKeyring(path, cryptosvc.KeyringConfig{PollInterval: -1})
		if (err == nil) != tc.ok {
			t.Errorf("keyring (filled in: %v): %v", tc.ok, err)
		}
		if err == nil {
			r.Close()
		}
	}
}

// TestDeploymentServes starts cipherd from the manifests and checks it as
// the kubelet and the clients would: the probes answer 200 without
// credentials, the admin token from the Secret works with the keyring from
// the Secret, a Secret update rotates the key without a restart (the
// procedure docs/OPERATIONS.md gives), and on shutdown readiness turns 503
// while liveness stays 200.
func TestDeploymentServes(t *testing.T) {
	m := loadManifests(t)
	p := startPod(t, m)
	cfg := p.config(t)
	c := m.container(t)
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	openStore(t, &cfg)
	srv, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The container's port may be taken on the test host: listen on a free
	// one (TestDeploymentConfiguration checks the port itself).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	// Shutdown waits out the drain delay unless shutdownCtx ends first.
	shutdownCtx, stop := context.WithCancel(context.Background())
	var (
		once         sync.Once
		shutdownErr  error
		shutdownDone = make(chan struct{})
	)
	startShutdown := func() {
		once.Do(func() {
			go func() { shutdownErr = srv.Shutdown(shutdownCtx); close(shutdownDone) }()
		})
	}
	defer func() { startShutdown(); stop(); <-shutdownDone }()

	get := func(path string) int {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	probes := map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}
	for name, pr := range probes {
		if code := get(pr.HTTPGet.Path); code != 200 {
			t.Errorf("%s probe GET %s: %d, want 200", name, pr.HTTPGet.Path, code)
		}
	}

	cl, err := client.New(base, client.WithToken(p.env["CIPHERD_ADMIN_TOKEN"]))
	if err != nil {
		t.Fatal(err)
	}
	keyName := firstKey(t, p.secret["keyring.json"])
	msg := []byte("sealed before the rotation")
	before, err := cl.Encrypt(ctx, keyName, msg, nil)
	if err != nil {
		t.Fatalf("encrypt with the Secret's admin token and key %s: %v", keyName, err)
	}

	// Rotate as docs/OPERATIONS.md says: cipherd keyring rotate, then
	// update the Secret.
	p.secret["keyring.json"] = rotateWithCLI(t, p.secret["keyring.json"], keyName)
	for mountPath, v := range p.volumes {
		if v.Secret != nil {
			kubeletWrite(t, p.host(mountPath), p.mountedFiles(t, m, v))
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := cl.Encrypt(ctx, keyName, msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.KeyVersion == before.KeyVersion+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still sealing under version %d 20 s after the Secret update", r.KeyVersion)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if pt, err := cl.Decrypt(ctx, keyName, before.Ciphertext, nil); err != nil || string(pt) != string(msg) {
		t.Errorf("data sealed before the rotation: %v", err)
	}

	// SIGTERM's effect: readiness off at once, liveness and traffic on
	// through the drain delay.
	startShutdown()
	deadline = time.Now().Add(2 * time.Second)
	for get(c.ReadinessProbe.HTTPGet.Path) != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatal("readiness still 200 two seconds into the shutdown")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := get(c.LivenessProbe.HTTPGet.Path); code != 200 {
		t.Errorf("liveness %d while draining: the kubelet would restart a draining replica", code)
	}
	if _, err := cl.Decrypt(ctx, keyName, before.Ciphertext, nil); err != nil {
		t.Errorf("a request during the drain delay: %v", err)
	}
	stop() // end the drain delay early: the test need not wait for it
	<-shutdownDone
	if shutdownErr != nil {
		t.Logf("shutdown: %v", shutdownErr)
	}
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// firstKey returns the name of the keyring's first key.
func firstKey(t *testing.T, keyring string) string {
	t.Helper()
	var f struct {
		Keys []struct {
			Name string `json:"name"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(keyring), &f); err != nil || len(f.Keys) == 0 {
		t.Fatalf("keyring: %v", err)
	}
	return f.Keys[0].Name
}

// rotateWithCLI runs the real `cipherd keyring rotate` on a copy of keyring
// and returns the result.
func rotateWithCLI(t *testing.T, keyring, name string) string {
	t.Helper()
	dir := t.TempDir()
	bin, file := filepath.Join(dir, "cipherd"), filepath.Join(dir, "keyring.json")
	// go test puts its own GOROOT/bin first on the PATH of the tests it runs.
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/cipherd/cipherd/cmd/cipherd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.WriteFile(file, []byte(keyring), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "keyring", "rotate", "-f", file, name).CombinedOutput(); err != nil {
		t.Fatalf("cipherd keyring rotate: %v\n%s", err, out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
