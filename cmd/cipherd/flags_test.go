package main

import (
	"flag"

	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cipherd/cipherd/selftest"
	"github.com/cipherd/cipherd/server"
)

// Every setting of server.Config, every variable ApplyEnv reads and every
// flag of serve has its entry in serveSettings, and every entry names what
// exists, so that `cipherd serve -h` lists all of them and only them.
func TestServeSettingsComplete(t *testing.T) {
	byKey, byEnv, byFlag := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, s := range serveSettings {
		if s.key == "" && s.env == "" && s.flag == "" || s.help == "" {
			t.Errorf("setting %+v: needs a key, variable or flag, and help", s)
		}
		for _, m := range []struct {
			m map[string]bool
			v string
		}{{byKey, s.key}, {byEnv, s.env}, {byFlag, s.flag}} {
			if m.v != "" && m.m[m.v] {
				t.Errorf("%q is listed twice", m.v)
			}
			m.m[m.v] = true
		}
	}

	defaults := reflect.ValueOf(server.Config{}.Defaults())
	typ := reflect.TypeOf(server.Config{})
	for i := range typ.NumField() {
		key, _, _ := strings.Cut(typ.Field(i).Tag.Get("yaml"), ",")
		if key == "-" || key == "" {
			continue
		}
		if !byKey[key] {
			t.Errorf("server.Config.%s (YAML key %q) has no entry in serveSettings (cmd/cipherd/flags.go)", typ.Field(i).Name, key)
		}
	}
	for _, s := range serveSettings {
		if s.key == "" {
			continue
		}
		v, ok := configField(defaults, s.key)
		if !ok {
			t.Errorf("serveSettings lists %q, which server.Config does not have", s.key)
		} else if v.IsZero() && s.zero == "" {
			t.Errorf("%q defaults to the zero value: its entry must say what that means", s.key)
		}
	}

	// The variables the configuration reads, and those read elsewhere.
	var read []string
	var cfg server.Config
	cfg.ApplyEnv(func(name string) string { read = append(read, name); return "" })
	read = append(read, "CIPHERD_CONFIG", "CIPHERD_ROOT_KEY", "CIPHERD_SELFTEST_FAIL")
	for _, name := range read {
		if !byEnv[name] {
			t.Errorf("%s has no entry in serveSettings", name)
		}
	}
	for name := range byEnv {
		if name != "" && !slices.Contains(read, name) {
			t.Errorf("serveSettings lists %s, which nothing reads", name)
		}
	}

	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var sf serveFlags
	sf.register(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !byFlag[f.Name] {
			t.Errorf("serve's flag -%s has no entry in serveSettings", f.Name)
		}
	})
	for name := range byFlag {
		if name != "" && fs.Lookup(name) == nil {
			t.Errorf("serveSettings lists -%s, which serve does not have", name)
		}
	}
}

func TestServeHelp(t *testing.T) {
	_, out, code := cipherd(t, nil, "serve", "-h")
	if code != 0 {
		t.Fatalf("serve -h: exit %d\n%s", code, out)
	}
	for _, s := range serveSettings {
		for _, w := range []string{s.key, s.env} {
			if w != "" && !strings.Contains(out, "  "+w) {
				t.Errorf("serve -h does not show %s", w)
			}
		}
	}
	for _, w := range []string{"-addr", "-config", "-fail", "127.0.0.1:8080.", "Default: 15s.", "Default: 4194304 (4.0 MiB).", "Default: 0 (no limit)."} {
		if !strings.Contains(out, w) {
			t.Errorf("serve -h does not show %q", w)
		}
	}
	for i, line := range strings.Split(out, "\n") {
		if len(line) > 80 && !strings.HasPrefix(line, "    \t") { // the flag package's own lines
			t.Errorf("serve -h line %d is %d columns: %q", i+1, len(line), line)
		}
	}
	if _, _, code := cipherd(t, nil, "serve", "-no-such-flag"); code != 2 {
		t.Errorf("serve -no-such-flag: exit %d, want 2", code)
	}
}

func TestWrap(t *testing.T) {
	got := wrap("aa bb cc dddddddd e", 5)
	want := []string{"aa bb", "cc", "dddddddd", "e"}
	if !slices.Equal(got, want) {
		t.Fatalf("wrap = %q, want %q", got, want)
	}
	if wrap("", 5) != nil {
		t.Fatal("wrap of nothing")
	}
}

// A -fail entry that names nothing would let a self-test "survive" a
// fault that was never injected: selftest and serve refuse it and list the
// valid names.
func TestFailNamesRefused(t *testing.T) {
	for _, args := range [][]string{
		{"selftest", "-skip-benchmark", "-fail", "aes-128-gcm/stdlib,no-such-kat"},
		{"serve", "-skip-benchmark", "-addr", "127.0.0.1:0", "-fail", "no-such-kat"},
	} {
		_, errOut, code := cipherd(t, nil, args...)
		if code != 2 || !strings.Contains(errOut, `"no-such-kat" names no known-answer test`) ||
			strings.Contains(errOut, `"aes-128-gcm/stdlib"`) ||
			!strings.Contains(errOut, "implementations:\n") || !strings.Contains(errOut, "aes-128-gcm/stdlib") ||
			!strings.Contains(errOut, "known-answer tests:\n") || !strings.Contains(errOut, "AES-128-GCM/gcm-spec-tc1") || !strings.Contains(errOut, "ciphers:\n") {
			t.Errorf("%s: exit %d:\n%s", strings.Join(args, " "), code, errOut)
		}
	}
	_, errOut, code := cipherd(t, []string{"CIPHERD_SELFTEST_FAIL=AES-128-GCM/nope"}, "selftest", "-skip-benchmark")
	if code != 2 || !strings.Contains(errOut, `CIPHERD_SELFTEST_FAIL: "AES-128-GCM/nope"`) {
		t.Errorf("CIPHERD_SELFTEST_FAIL with an unknown name: exit %d:\n%s", code, errOut)
	}
	// Names are matched without regard to case, as the self-tests do.
	if out, errOut, code := cipherd(t, nil, "selftest", "-skip-benchmark", "-fail", "AES-128-GCM/StdLib"); code != 0 || !failRE.MatchString(out) {
		t.Errorf("a valid name in other case: exit %d:\n%s\n%s", code, out, errOut)
	}
	// serve hands the names to its self-tests: with everything failing it
	// refuses to start.
	_, errOut, code = cipherd(t, []string{"CIPHERD_ADMIN_TOKEN=x"}, "serve", "-skip-benchmark", "-addr", "127.0.0.1:0", "-data-dir", t.TempDir(), "-fail", "*")
	if code != 1 || !strings.Contains(errOut, "known-answer tests failed") {
		t.Errorf("serve -fail '*': exit %d:\n%s", code, errOut)
	}
}

// The default that `cipherd serve -h` states for allowed_aeads is the set
// the selection chooses from when the setting is empty.
func TestServeHelpAllowedAEADsDefault(t *testing.T) {
	var names []string
	for _, c := range selftest.DefaultCandidates() {
		names = append(names, c.String())
	}
	for _, s := range serveSettings {
		if s.key == "allowed_aeads" && s.zero != strings.Join(names, ",") {
			t.Errorf("serve -h says allowed_aeads defaults to %q; the selection's default is %q", s.zero, strings.Join(names, ","))
		}
	}
}
