package main

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cipherd/cipherd/internal/proctest"
	"github.com/cipherd/cipherd/server"
)

// No Docker engine runs in CI, so the tests below read the Dockerfile as
// Docker would and check what it promises against the real binary: the
// health check runs against a server started with the image's environment,
// every CIPHERD_* variable goes through server.Config.ApplyEnv and Validate,
// and the server writes nowhere but the data volume.

// dfInstr is one Dockerfile instruction, continuation lines joined.
type dfInstr struct {
	line  int
	cmd   string            // upper case: FROM, RUN, COPY…
	flags map[string]string // --name=value before the arguments
	args  string            // the rest of the line
}

// dfStage is a FROM and the instructions up to the next one.
type dfStage struct {
	image, name string
	instrs      []dfInstr
}

func parseDockerfile(t *testing.T, path string) (global []dfInstr, stages []*dfStage) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pending string
	start := 0
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue // comments may sit between continuation lines, too
		}
		if pending == "" {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			pending += cont + " "
			continue
		}
		in := dfInstr{line: start, flags: map[string]string{}}
		fields := strings.Fields(pending + trimmed)
		pending = ""
		in.cmd = strings.ToUpper(fields[0])
		rest := fields[1:]
		for len(rest) > 0 && strings.HasPrefix(rest[0], "--") {
			k, v, _ := strings.Cut(strings.TrimPrefix(rest[0], "--"), "=")
			in.flags[k] = v
			rest = rest[1:]
		}
		in.args = strings.Join(rest, " ")
		if in.cmd == "FROM" {
			st := &dfStage{image: rest[0]}
			if len(rest) == 3 && strings.EqualFold(rest[1], "AS") {
				st.name = rest[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			global = append(global, in)
		} else {
			stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
		}
	}
	if pending != "" {
		t.Fatalf("%s ends inside a continuation line", path)
	}
	return global, stages
}

// all returns the stage's instructions named cmd.
func (s *dfStage) all(cmd string) []dfInstr {
	var out []dfInstr
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// one returns the stage's only instruction named cmd.
func (s *dfStage) one(t *testing.T, cmd string) dfInstr {
	t.Helper()
	ins := s.all(cmd)
	if len(ins) != 1 {
		t.Fatalf("final stage: want exactly one %s, have %d", cmd, len(ins))
	}
	return ins[0]
}

// execForm decodes the JSON array of an exec-form instruction.
func execForm(t *testing.T, in dfInstr) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(in.args), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("line %d: %s %s is not in exec form (a JSON array): the image has no shell", in.line, in.cmd, in.args)
	}
	return argv
}

// keyValues parses ENV and LABEL arguments: key=value pairs separated by
// spaces, a value double-quoted when it holds spaces (no escapes).
func keyValues(t *testing.T, in dfInstr) map[string]string {
	t.Helper()
	out := map[string]string{}
	s := in.args
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			t.Fatalf("line %d: %s: want key=value pairs, have %q", in.line, in.cmd, s)
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.Index(rest[1:], `"`)
			if end < 0 {
				t.Fatalf("line %d: unterminated quote", in.line)
			}
			v, s = rest[1:1+end], rest[2+end:]
		} else {
			v, s, _ = strings.Cut(rest, " ")
		}
		out[k] = v
	}
	return out
}

// applyEnvNames returns the variables Config.ApplyEnv reads, by asking it.
func applyEnvNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	var cfg server.Config
	if err := cfg.ApplyEnv(func(name string) string { names[name] = true; return "" }); err != nil {
		t.Fatal(err)
	}
	if len(names) < 10 || !names["CIPHERD_ADDR"] || !names["CIPHERD_DATA_DIR"] {
		t.Fatalf("ApplyEnv reads only %v", names)
	}
	return names
}

func portOf(t *testing.T, hostport string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// image is what the final stage of the Dockerfile sets up.
type image struct {
	binary      string   // where the binary is copied
	entrypoint  []string // exec form
	cmd         []string
	healthcheck []string // exec form, after CMD
	hcTimeout   time.Duration
	env         map[string]string
	user        string
	volumes     []string
	exposed     []int
	final       *dfStage
}

// TestDockerfile checks the Dockerfile's structure and every value in it
// that cipherd itself must understand.
func TestDockerfile(t *testing.T) {
	img := readImage(t)

	// The health check runs the real binary's health command, with a
	// timeout of its own inside Docker's.
	if img.healthcheck[0] != img.binary || img.entrypoint[0] != img.binary || len(img.entrypoint) != 1 {
		t.Errorf("HEALTHCHECK %q and ENTRYPOINT %q must run the copied binary %s", img.healthcheck, img.entrypoint, img.binary)
	}
	if img.healthcheck[1] != "health" {
		t.Errorf("HEALTHCHECK runs %q, want the health command", img.healthcheck[1])
	}
	if i := slices.Index(img.healthcheck, "-timeout"); i < 0 || i+1 >= len(img.healthcheck) {
		t.Errorf("HEALTHCHECK %q: pass -timeout, shorter than Docker's --timeout", img.healthcheck)
	} else if d, err := time.ParseDuration(img.healthcheck[i+1]); err != nil || d >= img.hcTimeout {
		t.Errorf("health -timeout %s must be a duration below HEALTHCHECK --timeout=%v", img.healthcheck[i+1], img.hcTimeout)
	}
	if !slices.Equal(img.cmd, []string{"serve"}) {
		t.Errorf("CMD %q, want [serve]", img.cmd)
	}

	// Every CIPHERD_* variable is one ApplyEnv reads, and together they
	// make a valid configuration.
	names := applyEnvNames(t)
	for k := range img.env {
		if strings.HasPrefix(k, "CIPHERD_") && !names[k] {
			t.Errorf("ENV %s is not a variable server.Config.ApplyEnv reads", k)
		}
	}
	var cfg server.Config
	if err := cfg.ApplyEnv(func(k string) string { return img.env[k] }); err != nil {
		t.Fatalf("ENV: %v", err)
	}
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("ENV makes an invalid configuration: %v", err)
	}
	if host, _, _ := net.SplitHostPort(cfg.Addr); host != "" && host != "0.0.0.0" && host != "::" {
		t.Errorf("CIPHERD_ADDR %s: listen on every address in a container", cfg.Addr)
	}

	// One port: the one listened on, exposed, and asked by `cipherd health`
	// when CIPHERD_URL is unset.
	port := portOf(t, cfg.Addr)
	u, err := url.Parse(defaultServerURL)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(img.exposed, []int{port}) || portOf(t, u.Host) != port {
		t.Errorf("EXPOSE %v, CIPHERD_ADDR %s and the health command's default %s disagree", img.exposed, cfg.Addr, defaultServerURL)
	}

	// The data directory is a volume the non-root user owns.
	if !slices.Contains(img.volumes, cfg.DataDir) {
		t.Errorf("data directory %s is not a VOLUME (%v)", cfg.DataDir, img.volumes)
	}
	uid, _, _ := strings.Cut(img.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root UID (Kubernetes verifies runAsNonRoot only on numbers)", img.user)
	}
	if !hasCopy(img.final, cfg.DataDir, uid, "0700") {
		t.Errorf("no COPY --chown=%s --chmod=0700 creates %s: the volume would belong to root", uid, cfg.DataDir)
	}

	ignore, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", "**/cipherd-data"} {
		if !slices.Contains(strings.Split(string(ignore), "\n"), want) {
			t.Errorf(".dockerignore lacks %s", want)
		}
	}
}

func hasCopy(st *dfStage, dst, uid, mode string) bool {
	for _, in := range st.all("COPY") {
		f := strings.Fields(in.args)
		owner, _, _ := strings.Cut(in.flags["chown"], ":")
		if f[len(f)-1] == dst && owner == uid && in.flags["chmod"] == mode {
			return true
		}
	}
	return false
}

// readImage parses the Dockerfile and checks its build stages.
func readImage(t *testing.T) image {
	t.Helper()
	global, stages := parseDockerfile(t, "../../Dockerfile")
	if len(stages) < 2 {
		t.Fatalf("%d FROM stages: want a build stage and a runtime stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if build.name == "" {
		t.Fatalf("the build stage has no name")
	}

	// The Go image is at least as new as go.mod asks.
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var goLine string
	for _, l := range strings.Split(string(gomod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			goLine = v
		}
	}
	goVersion := ""
	for _, in := range global {
		if v, ok := strings.CutPrefix(in.args, "GO_VERSION="); in.cmd == "ARG" && ok {
			goVersion = v
		}
	}
	if goVersion == "" || !strings.HasPrefix(goLine, goVersion) || !strings.Contains(build.image, "golang:${GO_VERSION}") {
		t.Errorf("build image %s with GO_VERSION %q does not follow go.mod's go %s", build.image, goVersion, goLine)
	}

	// A static binary, built in the build stage.
	var out string
	for _, in := range build.all("RUN") {
		if !strings.Contains(in.args, "go build") {
			continue
		}
		if !strings.Contains(in.args, "CGO_ENABLED=0 ") || !strings.Contains(in.args, "./cmd/cipherd") {
			t.Errorf("line %d: go build without CGO_ENABLED=0 or not of ./cmd/cipherd: %s", in.line, in.args)
		}
		f := strings.Fields(in.args)
		if i := slices.Index(f, "-o"); i >= 0 {
			out = f[i+1]
		}
	}
	if out == "" {
		t.Fatal("the build stage has no go build -o")
	}

	// The runtime stage: distroless static or scratch, no shell.
	if !strings.HasPrefix(final.image, "gcr.io/distroless/static") && final.image != "scratch" {
		t.Errorf("runtime image %s: want distroless static or scratch", final.image)
	}
	img := image{env: map[string]string{}, final: final}
	for _, in := range final.all("COPY") {
		f := strings.Fields(in.args)
		if in.flags["from"] == build.name && len(f) == 2 && f[0] == out {
			img.binary = f[1]
		}
	}
	if img.binary == "" {
		t.Fatalf("no COPY --from=%s %s into the runtime stage", build.name, out)
	}
	img.entrypoint = execForm(t, final.one(t, "ENTRYPOINT"))
	img.cmd = execForm(t, final.one(t, "CMD"))
	hc := final.one(t, "HEALTHCHECK")
	cmdArgs, ok := strings.CutPrefix(hc.args, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %s: want CMD [...]", hc.args)
	}
	img.healthcheck = execForm(t, dfInstr{line: hc.line, cmd: "HEALTHCHECK", args: cmdArgs})
	if img.hcTimeout, err = time.ParseDuration(hc.flags["timeout"]); err != nil {
		t.Errorf("HEALTHCHECK --timeout: %v", err)
	}
	for _, in := range final.all("ENV") {
		for k, v := range keyValues(t, in) {
			img.env[k] = v
		}
	}
	img.user = final.one(t, "USER").args
	for _, in := range final.all("VOLUME") {
		img.volumes = append(img.volumes, execForm(t, in)...)
	}
	for _, in := range final.all("EXPOSE") {
		for _, p := range strings.Fields(in.args) {
			n, err := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
			if err != nil {
				t.Fatalf("EXPOSE %s", p)
			}
			img.exposed = append(img.exposed, n)
		}
	}
	labels := map[string]string{}
	for _, in := range final.all("LABEL") {
		for k, v := range keyValues(t, in) {
			labels[k] = v
		}
	}
	for _, k := range []string{"title", "description", "source", "version", "revision"} {
		if labels["org.opencontainers.image."+k] == "" {
			t.Errorf("no LABEL org.opencontainers.image.%s", k)
		}
	}
	return img
}

// TestDockerfileRun runs the binary as the image does — its CMD, its
// environment and nothing else (the data directory and the port moved to
// free ones), HOME, TMPDIR and the working directory empty — and its
// HEALTHCHECK against it: 0 while it serves, 1 once it is gone. Afterwards
// only the data directory may hold files: the image's root is read-only.
func TestDockerfileRun(t *testing.T) {
	img := readImage(t)
	root := t.TempDir()
	data, home, tmp, wd := filepath.Join(root, "data"), filepath.Join(root, "home"), filepath.Join(root, "tmp"), filepath.Join(root, "wd")
	for _, d := range []string{data, home, tmp, wd} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	addr := proctest.FreeAddr(t)
	env := []string{"HOME=" + home, "TMPDIR=" + tmp}
	for k, v := range img.env {
		switch k {
		case "CIPHERD_ADDR":
			v = addr
		case "CIPHERD_DATA_DIR":
			v = data
		}
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(proctest.Cipherd(t), img.cmd...)
	cmd.Env, cmd.Dir = env, wd
	var logs proctest.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	p := proctest.Start(t, cmd)
	stop := func() {
		if err := p.Stop(t, 20*time.Second); err != nil {
			t.Errorf("cipherd serve: %v on SIGTERM\n%s", err, logs.String())
		}
	}
	defer func() {
		if p.Running() {
			stop()
		}
	}()

	health := func() int {
		hc := exec.Command(proctest.Cipherd(t), img.healthcheck[1:]...)
		hc.Env = append(slices.Clone(env), "CIPHERD_URL=http://"+addr)
		hc.Dir = wd
		err := hc.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	// Well inside --start-period.
	if err := p.WaitReady(img.hcTimeout*12, func() bool { return proctest.HTTPStatus("http://"+addr+"/readyz") == 200 }); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	if code := health(); code != 0 {
		t.Fatalf("HEALTHCHECK %q against a serving cipherd: exit %d\n%s", img.healthcheck, code, logs.String())
	}
	stop()
	if code := health(); code != 1 {
		t.Errorf("HEALTHCHECK %q against a stopped cipherd: exit %d, want 1", img.healthcheck, code)
	}

	for _, d := range []string{home, tmp, wd} {
		if entries, _ := os.ReadDir(d); len(entries) > 0 {
			t.Errorf("cipherd wrote outside its data directory, in %s: %v", d, entries)
		}
	}
	if entries, _ := os.ReadDir(data); len(entries) == 0 {
		t.Errorf("the data directory is empty: the test ran no real start-up")
	}
}
