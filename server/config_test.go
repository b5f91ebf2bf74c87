package server

import (
	"bytes"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cipherd/cipherd/cryptosvc"
)

// The sample configuration deploy/cipherd.yaml and the configuration
// reference are checked against Config: the sample loads strictly, states
// the defaults, and every setting and environment variable is documented.

const sampleConfig = "../deploy/cipherd.yaml"

// decodeConfig decodes YAML as cipherd serve does: unknown keys are errors.
func decodeConfig(t *testing.T, b []byte) Config {
	t.Helper()
	var cfg Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	return cfg
}

// nilEmpty sets the empty slices of a Config to nil, so that "[]" in YAML
// compares equal to an unset list.
func nilEmpty(cfg *Config) {
	v := reflect.ValueOf(cfg).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice && f.Len() == 0 {
			f.Set(reflect.Zero(f.Type()))
		}
	}
}

// yamlKeys returns the yaml keys of typ's fields and of the structs its
// fields hold (identities, policies, rules), with the Go path of each.
func yamlKeys(typ reflect.Type, prefix string) map[string]string {
	out := map[string]string{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = prefix + f.Name
		et := f.Type
		for et.Kind() == reflect.Slice || et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if et.Kind() == reflect.Struct && et.PkgPath() == typ.PkgPath() {
			for k, p := range yamlKeys(et, prefix+f.Name+".") {
				out[k] = p
			}
		}
	}
	return out
}

func TestConfigSampleLoads(t *testing.T) {
	b, err := os.ReadFile(sampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := decodeConfig(t, b)
	// The sample states the defaults: loaded, it is the empty configuration.
	got, want := cfg.Defaults(), Config{Version: ConfigVersion}.Defaults()
	nilEmpty(&got)
	nilEmpty(&want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the sample is not the defaults:\n got %+v\nwant %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the sample does not validate: %v", err)
	}
	// Every key is set explicitly (not left to a default by omission).
	var top map[string]any
	if err := yaml.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	for i := range reflect.TypeFor[Config]().NumField() {
		f := reflect.TypeFor[Config]().Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
			if _, ok := top[name]; !ok {
				t.Errorf("the sample does not set %s (Config.%s)", name, f.Name)
			}
		}
	}
}

// TestConfigSampleExamples uncomments the sample's examples (the "#  "
// lines under a list set to []) and starts a server with them, so that the
// examples are known to work.
func TestConfigSampleExamples(t *testing.T) {
	b, err := os.ReadFile(sampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []string
	examples := 0
	for i := 0; i < len(lines); i++ {
		key, isList := strings.CutSuffix(lines[i], ": []")
		if !isList || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "#  ") {
			out = append(out, lines[i])
			continue
		}
		out = append(out, key+":")
		for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "#  ") {
			i++
			out = append(out, strings.TrimPrefix(lines[i], "#"))
		}
		examples++
	}
	if examples < 3 {
		t.Fatalf("found %d commented examples, want identities, policies and trusted_proxies", examples)
	}
	cfg := decodeConfig(t, []byte(strings.Join(out, "\n")))
	if len(cfg.Identities) == 0 || len(cfg.Policies) == 0 || len(cfg.TrustedProxies) == 0 {
		t.Fatalf("the examples set nothing: %+v", cfg)
	}
	// The sample's data_dir is relative to where cipherd runs: here, the
	// package's source directory.
	cfg.SkipBenchmark, cfg.DataDir, cfg.AuditLog = true, t.TempDir(), ""
	ts := startTestServer(t, cfg)
	if code, body, _ := ts.do(t, "GET", "/readyz", "", nil, "-"); code != 200 {
		t.Fatalf("/readyz: %d %s", code, body)
	}
}

// TestConfigDocumented: every setting (yaml key, nested ones included) is in
// the sample and in the reference (docs/OPERATIONS.md or docs/API.md), and
// every environment variable config.go reads is in both too.
func TestConfigDocumented(t *testing.T) {
	sample, err := os.ReadFile(sampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	var docs []byte
	for _, f := range []string{"../docs/OPERATIONS.md", "../docs/API.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b...)
	}
	keys := yamlKeys(reflect.TypeFor[Config](), "")
	if len(keys) < 25 {
		t.Fatalf("only %d yaml keys found", len(keys))
	}
	for k, path := range keys {
		if !regexp.MustCompile(`(?m)^[#\s-]*` + regexp.QuoteMeta(k) + `:`).Match(sample) {
			t.Errorf("%s (Config.%s) is not in %s", k, path, sampleConfig)
		}
		if !bytes.Contains(docs, []byte("`"+k+"`")) {
			t.Errorf("%s (Config.%s) is not documented in docs/OPERATIONS.md or docs/API.md", k, path)
		}
	}

	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	env := regexp.MustCompile(`"(CIPHERD_[A-Z0-9_]+)"`).FindAllSubmatch(src, -1)
	names := []string{cryptosvc.EnvRootKey, "CIPHERD_CONFIG"}
	for _, m := range env {
		names = append(names, string(m[1]))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) < 15 {
		t.Fatalf("only %d environment variables found", len(names))
	}
	for _, n := range names {
		if !bytes.Contains(sample, []byte(n)) {
			t.Errorf("%s is not mentioned in %s", n, sampleConfig)
		}
		if !bytes.Contains(docs, []byte(n)) {
			t.Errorf("%s is not documented in docs/OPERATIONS.md or docs/API.md", n)
		}
	}
}
