package kubernetes

import (
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cipherd/cipherd/internal/pgtest"
	"github.com/cipherd/cipherd/server"
)

// TestMain stops the PostgreSQL cluster that the tests share
// (pgtest.Shared) once they have run: without it the cluster outlives the
// test binary.
func TestMain(m *testing.M) { pgtest.Main(m) }

// postgresDeployment applies postgres/deployment-patch.yaml to
// deployment.yaml as kustomize does (a strategic merge patch) and decodes
// the result strictly.
func postgresDeployment(t *testing.T) (*appsv1.Deployment, *corev1.Secret) {
	t.Helper()
	base, err := os.ReadFile("deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	patch, err := os.ReadFile(filepath.Join("postgres", "deployment-patch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	baseJSON, err := sigsyaml.YAMLToJSON(base)
	if err != nil {
		t.Fatal(err)
	}
	patchJSON, err := sigsyaml.YAMLToJSON(patch)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(baseJSON, patchJSON, appsv1.Deployment{})
	if err != nil {
		t.Fatalf("the patch does not apply: %v", err)
	}
	obj, _, err := strictDecoder(t).Decode(merged, nil, nil)
	if err != nil {
		t.Fatalf("the patched Deployment does not decode strictly: %v", err)
	}
	b, err := os.ReadFile(filepath.Join("postgres", "secret.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sobj, _, err := strictDecoder(t).Decode(b, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*appsv1.Deployment), sobj.(*corev1.Secret)
}

// TestPostgresOverlay: the overlay replaces the keyring by the database
// URL, its password and the root key, all from the Secret it documents,
// and nothing else.
func TestPostgresOverlay(t *testing.T) {
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Patches    []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	b, err := os.ReadFile(filepath.Join("postgres", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sigsyaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Resources) != 1 || k.Resources[0] != ".." || len(k.Patches) != 1 || k.Patches[0].Path != "deployment-patch.yaml" {
		t.Fatalf("postgres/kustomization.yaml: %+v", k)
	}

	d, secret := postgresDeployment(t)
	base := loadManifests(t)
	c := d.Spec.Template.Spec.Containers[0]
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if _, ok := env["CIPHERD_KEYRING"]; ok {
		t.Error("the overlay keeps CIPHERD_KEYRING")
	}
	for name, key := range map[string]string{"CIPHERD_KEYSTORE": "url", "PGPASSWORD": "password"} {
		e := env[name]
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != secret.Name || e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("%s is not the key %s of Secret %s: %+v", name, key, secret.Name, e)
		}
		if _, ok := secret.StringData[key]; !ok {
			t.Errorf("the example Secret has no %s", key)
		}
	}
	if len(c.Env) != len(base.container(t).Env)+2 {
		t.Errorf("%d variables, want the base's %d less CIPHERD_KEYRING plus three", len(c.Env), len(base.container(t).Env))
	}
	rootFile := env["CIPHERD_ROOT_KEY_FILE"].Value
	var mounted bool
	for _, m := range c.VolumeMounts {
		if m.Name == "keyring" || m.MountPath == "/etc/cipherd/keyring" {
			t.Error("the keyring is still mounted")
		}
		if m.Name == "root-key" && filepath.Join(m.MountPath, "root.key") == rootFile && m.ReadOnly {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("CIPHERD_ROOT_KEY_FILE %q is not root.key of the read-only root-key mount", rootFile)
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "keyring" {
			t.Error("the keyring volume is still there")
		}
		if v.Name == "root-key" && (v.Secret == nil || v.Secret.SecretName != secret.Name || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "root.key") {
			t.Errorf("the root-key volume: %+v", v.Secret)
		}
	}
	if !strings.HasPrefix(secret.StringData["url"], "postgres://") || strings.Contains(secret.StringData["url"], ":REPLACE") {
		t.Errorf("the example URL %q", secret.StringData["url"])
	}
}

// TestPostgresOverlayServes starts cipherd with the patched container's
// environment, the Secret's values pointing at a real PostgreSQL (the
// password through PGPASSWORD, as the overlay gives it), and checks that it
// keeps its keys there.
func TestPostgresOverlayServes(t *testing.T) {
	db := pgtest.Shared(t)
	dsn, err := url.Parse(db.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	password, _ := dsn.User.Password()
	dsn.User = url.User(dsn.User.Username())
	d, secret := postgresDeployment(t)
	dir := t.TempDir()
	values := map[string]string{
		"url":      dsn.String(),
		"password": password,
		"root.key": fillPlaceholders(secret.StringData["root.key"]),
	}
	getenv := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		switch {
		case e.Name == "CIPHERD_CONFIG" || e.Name == "CIPHERD_ADMIN_TOKEN":
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == secret.Name:
			getenv[e.Name] = values[e.ValueFrom.SecretKeyRef.Key]
		case e.Name == "CIPHERD_ROOT_KEY_FILE":
			getenv[e.Name] = filepath.Join(dir, "root.key")
			os.WriteFile(getenv[e.Name], []byte(values["root.key"]), 0o400)
		case e.Name == "CIPHERD_DATA_DIR":
			getenv[e.Name] = filepath.Join(dir, "data")
		default:
			getenv[e.Name] = e.Value
		}
	}
	t.Setenv("PGPASSWORD", getenv["PGPASSWORD"]) // what the kubelet sets
	var cfg server.Config
	if err := cfg.ApplyEnv(func(k string) string { return getenv[k] }); err != nil {
		t.Fatal(err)
	}
	cfg.Addr, cfg.SkipBenchmark, cfg.AdminToken = "127.0.0.1:0", true, "test-token"
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx := context.Background()
	openStore(t, &cfg)
	srv, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatalf("cipherd from the overlay: %v", err)
	}
	defer srv.Shutdown(ctx)
	resp, err := srv.App().Test(httptest.NewRequest("GET", "/readyz", nil))
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 512)
	n, _ := resp.Body.Read(body)
	if resp.StatusCode != 200 || !strings.Contains(string(body[:n]), `"keystore":"ok"`) {
		t.Fatalf("/readyz: %d %s", resp.StatusCode, body[:n])
	}
	if _, err := srv.Service().DescribeKey(ctx, "default"); err != nil {
		t.Fatalf("the default key is not in the database: %v", err)
	}
}
