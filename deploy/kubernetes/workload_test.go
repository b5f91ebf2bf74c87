package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cipherd/cipherd/client"
	"github.com/cipherd/cipherd/server"
)

// The workload-identity overlay: cipherd trusts the cluster's
// service-account tokens (keys from the ConfigMap cipherd-jwks), and
// payments-api.yaml is a client that authenticates with a projected token.

const workloadDir = "workload-identity"

// workloadIdentity is the overlay, applied to the base as kustomize applies
// it (strategic merge patches), every object decoded strictly.
type workloadIdentity struct {
	base    *manifests
	cipherd *appsv1.Deployment // the base's, patched
	config  *corev1.ConfigMap  // the base's, patched
	account *corev1.ServiceAccount
	client  *appsv1.Deployment
}

func loadWorkloadIdentity(t *testing.T) *workloadIdentity {
	t.Helper()
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Patches    []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	if err := sigsyaml.UnmarshalStrict([]byte(readFile(t, filepath.Join(workloadDir, "kustomization.yaml"))), &k); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k.Resources, []string{"..", "payments-api.yaml"}) || len(k.Patches) != 2 ||
		k.Patches[0].Path != "configmap-patch.yaml" || k.Patches[1].Path != "deployment-patch.yaml" {
		t.Fatalf("%s/kustomization.yaml: %+v", workloadDir, k)
	}
	w := &workloadIdentity{base: loadManifests(t)}
	w.cipherd = patched(t, "deployment.yaml", "deployment-patch.yaml", appsv1.Deployment{}).(*appsv1.Deployment)
	w.config = patched(t, "configmap.yaml", "configmap-patch.yaml", corev1.ConfigMap{}).(*corev1.ConfigMap)
	dec := strictDecoder(t)
	for i, doc := range splitDocuments([]byte(readFile(t, filepath.Join(workloadDir, "payments-api.yaml")))) {
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("payments-api.yaml, document %d: %v", i+1, err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			once(t, "payments-api.yaml", &w.account, o)
		case *appsv1.Deployment:
			once(t, "payments-api.yaml", &w.client, o)
		default:
			t.Fatalf("payments-api.yaml: unexpected kind %T", obj)
		}
	}
	if w.account == nil || w.client == nil {
		t.Fatal("payments-api.yaml: want a ServiceAccount and a Deployment")
	}
	return w
}

// patched applies the overlay's patch file to the base's manifest file as
// kustomize does (a strategic merge patch) and decodes the result strictly.
func patched(t *testing.T, baseFile, patchFile string, schema any) any {
	t.Helper()
	baseJSON, err := sigsyaml.YAMLToJSON([]byte(readFile(t, baseFile)))
	if err != nil {
		t.Fatal(err)
	}
	patchJSON, err := sigsyaml.YAMLToJSON([]byte(readFile(t, filepath.Join(workloadDir, patchFile))))
	if err != nil {
		t.Fatal(err)
	}
	merged, err := strategicpatch.StrategicMergePatch(baseJSON, patchJSON, schema)
	if err != nil {
		t.Fatalf("%s does not apply: %v", patchFile, err)
	}
	obj, _, err := strictDecoder(t).Decode(merged, nil, nil)
	if err != nil {
		t.Fatalf("patched by %s, %s does not decode strictly: %v", patchFile, baseFile, err)
	}
	return obj
}

// cipherdConfig is the overlay's cipherd.yaml, decoded as cipherd serve
// decodes it, with its defaults.
func (w *workloadIdentity) cipherdConfig(t *testing.T) server.Config {
	t.Helper()
	cfg, err := decodeConfig([]byte(w.config.Data["cipherd.yaml"]))
	if err != nil {
		t.Fatalf("the overlay's cipherd.yaml: %v", err)
	}
	return cfg.Defaults()
}

// token returns the client's projected token volume and the mount of its
// directory.
func (w *workloadIdentity) token(t *testing.T) (*corev1.ServiceAccountTokenProjection, corev1.VolumeMount) {
	t.Helper()
	spec := w.client.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("the client has %d containers, want 1", len(spec.Containers))
	}
	for _, v := range spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken == nil {
				continue
			}
			for _, vm := range spec.Containers[0].VolumeMounts {
				if vm.Name == v.Name {
					return src.ServiceAccountToken, vm
				}
			}
		}
	}
	t.Fatal("the client mounts no projected service-account token")
	return nil, corev1.VolumeMount{}
}

// TestWorkloadIdentityOverlay: the client's projected token is made for
// cipherd's audience and its account is the identity's; the token file is
// where the client reads it; cipherd's keys are the mounted ConfigMap; and
// the overlay's cipherd.yaml keeps the base's other settings.
func TestWorkloadIdentityOverlay(t *testing.T) {
	w := loadWorkloadIdentity(t)
	cfg := w.cipherdConfig(t)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the overlay's cipherd.yaml: %v", err)
	}
	if len(cfg.JWTIssuers) != 1 || len(cfg.Identities) != 1 || cfg.Identities[0].JWT == nil {
		t.Fatalf("want one issuer and one identity with jwt: %+v", cfg)
	}
	iss, id := cfg.JWTIssuers[0], cfg.Identities[0]

	// The client.
	spec := w.client.Spec.Template.Spec
	if spec.ServiceAccountName != w.account.Name || id.JWT.Issuer != iss.Issuer ||
		id.JWT.Claims["sub"] != "system:serviceaccount:default:"+w.account.Name || len(id.JWT.Claims) != 1 {
		t.Errorf("the client runs as %s; the identity matches %v of %s", spec.ServiceAccountName, id.JWT.Claims, id.JWT.Issuer)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken || w.account.AutomountServiceAccountToken == nil || *w.account.AutomountServiceAccountToken {
		t.Error("the client gets the API server's token too: automountServiceAccountToken: false")
	}
	tok, vm := w.token(t)
	if !slices.Contains(iss.Audiences, tok.Audience) || tok.Audience == "" {
		t.Errorf("the projected token's audience %q is not one of cipherd's %v", tok.Audience, iss.Audiences)
	}
	if tok.ExpirationSeconds == nil || *tok.ExpirationSeconds < 600 || *tok.ExpirationSeconds > 24*3600 {
		t.Errorf("expirationSeconds %v: want 600 (the least the API server gives) to a day", tok.ExpirationSeconds)
	}
	if !vm.ReadOnly || vm.SubPath != "" {
		t.Errorf("the token mount %+v: want read-only, without subPath (the kubelet renews the file)", vm)
	}
	env := map[string]string{}
	for _, e := range spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if f := filepath.Join(vm.MountPath, tok.Path); env["CIPHERD_TOKEN_FILE"] != f {
		t.Errorf("CIPHERD_TOKEN_FILE %q, the token is %s", env["CIPHERD_TOKEN_FILE"], f)
	}
	if env["CIPHERD_URL"] != "http://"+w.base.service.Name+":8080" {
		t.Errorf("CIPHERD_URL %q is not the Service %s", env["CIPHERD_URL"], w.base.service.Name)
	}

	// cipherd: the key file in the read-only mount of cipherd-jwks.
	m := *w.base
	m.deploy = w.cipherd
	var jwksVol *corev1.Volume
	for mountPath, v := range m.mounts(t) {
		if filepath.Join(mountPath, "jwks.json") == iss.JWKSFile {
			jwksVol = &v
		}
	}
	if jwksVol == nil || jwksVol.ConfigMap == nil || jwksVol.ConfigMap.Name != "cipherd-jwks" ||
		len(jwksVol.ConfigMap.Items) != 1 || jwksVol.ConfigMap.Items[0].Key != "jwks.json" {
		t.Fatalf("jwks_file %s is not jwks.json of the ConfigMap cipherd-jwks: %+v", iss.JWKSFile, jwksVol)
	}
	for _, vm := range m.container(t).VolumeMounts {
		if !vm.ReadOnly && vm.Name != "data" || vm.SubPath != "" {
			t.Errorf("mount %s: want read-only, without subPath", vm.MountPath)
		}
	}
	if !strings.Contains(readFile(t, filepath.Join(workloadDir, "kustomization.yaml")), "kubectl get --raw /openid/v1/jwks > jwks.json") {
		t.Error("kustomization.yaml does not say how to make cipherd-jwks")
	}

	// The base's other settings, unchanged.
	base, err := decodeConfig([]byte(w.base.config.Data["cipherd.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	base = base.Defaults()
	cfg.JWTIssuers, cfg.Identities, cfg.Policies = base.JWTIssuers, base.Identities, base.Policies
	if cfg.DrainDelay != base.DrainDelay || cfg.ShutdownTimeout != base.ShutdownTimeout {
		t.Errorf("the overlay's drain_delay %v and shutdown_timeout %v differ from the base's %v and %v", cfg.DrainDelay, cfg.ShutdownTimeout, base.DrainDelay, base.ShutdownTimeout)
	}
}

// TestWorkloadIdentityServes starts cipherd from the overlay, with the
// ConfigMap cipherd-jwks holding a cluster's key, and plays the client: a
// token as the API server makes it for the projected volume, in the file
// the kubelet writes and renews, sent by the Go client with
// WithTokenFile. Then the cluster's key rotates as docs/OPERATIONS.md says.
func TestWorkloadIdentityServes(t *testing.T) {
	w := loadWorkloadIdentity(t)
	cfgFile := w.cipherdConfig(t)
	issuer := cfgFile.JWTIssuers[0].Issuer
	keys := map[string]*rsa.PrivateKey{"sa-2026-01": newRSAKey(t)}
	jwks := func(kids ...string) string {
		var set jose.JSONWebKeySet
		for _, kid := range kids {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: keys[kid].Public(), KeyID: kid, Algorithm: string(jose.RS256), Use: "sig"})
		}
		b, err := json.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	m := *w.base
	m.deploy, m.config = w.cipherd, w.config
	m.operatorConfigMaps = map[string]map[string]string{"cipherd-jwks": {"jwks.json": jwks("sa-2026-01")}}
	p := startPod(t, &m)
	// A key the identity's policy covers, besides the example's default.
	p.secret["keyring.json"] = addKeyringKey(t, p.secret["keyring.json"], "payments-ledger")
	for mountPath, v := range p.volumes {
		if v.Secret != nil {
			kubeletWrite(t, p.host(mountPath), p.mountedFiles(t, &m, v))
		}
	}
	cfg := p.config(t)
	// Paths in the file are the container's.
	jwksFile := p.host(cfg.JWTIssuers[0].JWKSFile)
	cfg.JWTIssuers[0].JWKSFile = jwksFile
	cfg.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	openStore(t, &cfg)
	srv, err := server.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	// The client's pod: the projected token as the kubelet writes it.
	tok, vm := w.token(t)
	clientRoot := t.TempDir()
	tokenDir := filepath.Join(clientRoot, vm.MountPath)
	if err := os.MkdirAll(tokenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	project := func(kid, account string) {
		t.Helper()
		now := time.Now()
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: keys[kid], KeyID: kid}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The claims of a projected token (the API server's TokenRequest).
		s, err := jwt.Signed(sig).Claims(jwt.Claims{
			Issuer:    issuer,
			Subject:   "system:serviceaccount:default:" + account,
			Audience:  jwt.Audience{tok.Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			Expiry:    jwt.NewNumericDate(now.Add(time.Duration(*tok.ExpirationSeconds) * time.Second)),
		}).Claims(map[string]any{"kubernetes.io": map[string]any{
			"namespace":      "default",
			"pod":            map[string]string{"name": account + "-5d8f7c9b6-qx2lp", "uid": "3f7a9c1e-2b4d-4e6f-8a0b-1c2d3e4f5a6b"},
			"serviceaccount": map[string]string{"name": account, "uid": "9b8a7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d"},
		}}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		kubeletWrite(t, tokenDir, map[string]string{tok.Path: s})
	}
	var env string
	for _, e := range w.client.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "CIPHERD_TOKEN_FILE" {
			env = e.Value
		}
	}
	c, err := client.New("http://"+ln.Addr().String(), client.WithTokenFile(filepath.Join(clientRoot, env)))
	if err != nil {
		t.Fatal(err)
	}
	encrypt := func(what, key string, want error) {
		t.Helper()
		_, err := c.Encrypt(ctx, key, []byte("ledger entry"), nil)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("%s: encrypt with %s: %v, want %v", what, key, err, want)
		}
	}
	project("sa-2026-01", w.account.Name)
	encrypt("the projected token", "payments-ledger", nil)
	encrypt("the projected token", "default", client.ErrForbidden)
	project("sa-2026-01", w.account.Name) // the kubelet renews it
	encrypt("the renewed token", "payments-ledger", nil)
	project("sa-2026-01", "orders-api")
	encrypt("another account's token", "payments-ledger", client.ErrUnauthenticated)

	// The cluster's signing key rotates: both keys in cipherd-jwks, tokens
	// of the new one, then the old one removed.
	keys["sa-2026-07"] = newRSAKey(t)
	jwksDir := filepath.Dir(jwksFile)
	kubeletWrite(t, jwksDir, map[string]string{"jwks.json": jwks("sa-2026-01", "sa-2026-07")})
	project("sa-2026-07", w.account.Name)
	encrypt("a token of the new key", "payments-ledger", nil)
	kubeletWrite(t, jwksDir, map[string]string{"jwks.json": jwks("sa-2026-07")})
	if _, err := srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	encrypt("a token of the new key, the old one removed", "payments-ledger", nil)
	project("sa-2026-01", w.account.Name)
	encrypt("a token of the removed key", "payments-ledger", client.ErrUnauthenticated)
}

func newRSAKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// addKeyringKey returns the keyring with a copy of its first key under
// name, with a fresh secret.
func addKeyringKey(t *testing.T, keyring, name string) string {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal([]byte(keyring), &f); err != nil {
		t.Fatal(err)
	}
	keys := f["keys"].([]any)
	k := map[string]any{}
	b, _ := json.Marshal(keys[0])
	json.Unmarshal(b, &k)
	k["name"] = name
	k["versions"] = []any{map[string]any{"version": 1, "created": "2026-01-01T00:00:00Z", "secret": fillPlaceholders("REPLACE_WITH_BASE64_OF_32_RANDOM_BYTES")}}
	f["keys"] = append(keys, k)
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
