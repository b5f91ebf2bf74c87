package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cipherd/cipherd/server"
)

// exampleSecretFile is the one manifest kustomization.yaml leaves out.
const exampleSecretFile = "secret.example.yaml"

// manifests is every object in this directory's manifests, decoded.
type manifests struct {
	deploy  *appsv1.Deployment
	service *corev1.Service
	pdb     *policyv1.PodDisruptionBudget
	hpa     *autoscalingv2.HorizontalPodAutoscaler
	secret  *corev1.Secret // the example
	config  *corev1.ConfigMap
	account *corev1.ServiceAccount
	files   []string // the manifest files, kustomization.yaml excepted
	// operatorConfigMaps are the data of ConfigMaps that the operator
	// makes and the manifests only mount (workload-identity's
	// cipherd-jwks), by name.
	operatorConfigMaps map[string]map[string]string
}

// strictDecoder decodes the API kinds the manifests may use, as the API
// server's strict field validation does: unknown fields, duplicate fields and
// fields in the wrong case are errors.
func strictDecoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		appsv1.AddToScheme, corev1.AddToScheme, policyv1.AddToScheme, autoscalingv2.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// splitDocuments splits a YAML stream at its "---" lines.
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := strictDecoder(t)
	m := &manifests{}
	seen := map[string]string{}
	for _, f := range files {
		if f == "kustomization.yaml" {
			continue
		}
		m.files = append(m.files, f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs := splitDocuments(b)
		if len(docs) == 0 {
			t.Errorf("%s holds no object", f)
		}
		for i, doc := range docs {
			obj, gvk, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			meta, err := metaOf(obj)
			if err != nil {
				t.Fatal(err)
			}
			id := gvk.Kind + "/" + meta.Name
			if prev, dup := seen[id]; dup {
				t.Errorf("%s in both %s and %s", id, prev, f)
			}
			seen[id] = f
			if meta.Namespace != "" {
				t.Errorf("%s: %s sets a namespace; leave it to kubectl -n or kustomize", f, id)
			}
			assign(t, m, f, obj)
		}
	}
	if m.deploy == nil || m.service == nil || m.pdb == nil || m.hpa == nil || m.secret == nil || m.config == nil || m.account == nil {
		t.Fatalf("missing manifests: want a Deployment, Service, PodDisruptionBudget, HorizontalPodAutoscaler, Secret, ConfigMap and ServiceAccount; have %v", seen)
	}
	return m
}

func metaOf(obj runtime.Object) (*metav1.ObjectMeta, error) {
	a, ok := obj.(metav1.ObjectMetaAccessor)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	return a.GetObjectMeta().(*metav1.ObjectMeta), nil
}

func assign(t *testing.T, m *manifests, file string, obj runtime.Object) {
	t.Helper()
	switch o := obj.(type) {
	case *appsv1.Deployment:
		once(t, file, &m.deploy, o)
	case *corev1.Service:
		once(t, file, &m.service, o)
	case *policyv1.PodDisruptionBudget:
		once(t, file, &m.pdb, o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		once(t, file, &m.hpa, o)
	case *corev1.Secret:
		once(t, file, &m.secret, o)
	case *corev1.ConfigMap:
		once(t, file, &m.config, o)
	case *corev1.ServiceAccount:
		once(t, file, &m.account, o)
	default:
		t.Fatalf("%s: unexpected kind %T", file, obj)
	}
}

func once[T any](t *testing.T, file string, p **T, v *T) {
	t.Helper()
	if *p != nil {
		t.Fatalf("%s: a second %T", file, v)
	}
	*p = v
}

// container returns the Deployment's cipherd container, the only one.
func (m *manifests) container(t *testing.T) *corev1.Container {
	t.Helper()
	cs := m.deploy.Spec.Template.Spec.Containers
	if len(cs) != 1 || len(m.deploy.Spec.Template.Spec.InitContainers) != 0 {
		t.Fatalf("want one container, have %d (+%d init)", len(cs), len(m.deploy.Spec.Template.Spec.InitContainers))
	}
	return &cs[0]
}

// containerPort resolves a probe's or the Service's port (a name or a
// number) to one of the container's ports.
func containerPort(t *testing.T, c *corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	for _, cp := range c.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("port %s is not a port of the container (%v)", p.String(), c.Ports)
	return 0
}

// TestManifestsDecodeStrictly: every file decodes into the official API types
// with nothing unknown, and each names a kind the test knows.
func TestManifestsDecodeStrictly(t *testing.T) {
	m := loadManifests(t)
	if len(m.files) < 7 {
		t.Errorf("only %v", m.files)
	}

	// The strict decoder is strict: a misspelt field fails.
	dec := strictDecoder(t)
	b, err := os.ReadFile("deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ from, to string }{
		{"readOnlyRootFilesystem:", "readOnlyRootFileSystem:"},
		{"  replicas: 3", "  replicas: 3\n  replica: 3"},
		{"  replicas: 3", "  replicas: 3\n  replicas: 4"},
	} {
		mutated := strings.Replace(string(b), bad.from, bad.to, 1)
		if mutated == string(b) {
			t.Fatalf("%q not in deployment.yaml", bad.from)
		}
		if _, _, err := dec.Decode([]byte(mutated), nil, nil); err == nil {
			t.Errorf("deployment.yaml with %q decodes without error", bad.to)
		}
	}
}

// TestKustomization: kustomization.yaml lists every manifest but the example
// Secret, and nothing else.
func TestKustomization(t *testing.T) {
	m := loadManifests(t)
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The fields used here of kustomize's Kustomization type.
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := sigsyaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatal(err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: %s %s", k.APIVersion, k.Kind)
	}
	want := slices.DeleteFunc(slices.Clone(m.files), func(f string) bool { return f == exampleSecretFile })
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources %v, want %v (everything but %s)", got, want, exampleSecretFile)
	}
}

// TestLabelsAndSelectors: the Deployment, Service, PodDisruptionBudget,
// HorizontalPodAutoscaler and topology spread all pick the same pods.
func TestLabelsAndSelectors(t *testing.T) {
	m := loadManifests(t)
	d := m.deploy
	podLabels := labels.Set(d.Spec.Template.Labels)
	for k, v := range podLabels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("label %s: %v", k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%s: %v", k, v, errs)
		}
	}
	deploySel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || deploySel.Empty() || !deploySel.Matches(podLabels) {
		t.Fatalf("Deployment selector %v does not select its own pods %v (%v)", d.Spec.Selector, podLabels, err)
	}
	same := func(what string, sel *metav1.LabelSelector) {
		t.Helper()
		if sel == nil || !equalSelectors(sel, d.Spec.Selector) {
			t.Errorf("%s selector %v differs from the Deployment's %v", what, sel, d.Spec.Selector)
		}
	}
	same("Service", &metav1.LabelSelector{MatchLabels: m.service.Spec.Selector})
	same("PodDisruptionBudget", m.pdb.Spec.Selector)
	for i, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		same(fmt.Sprintf("topologySpreadConstraints[%d]", i), c.LabelSelector)
	}
	if len(d.Spec.Template.Spec.TopologySpreadConstraints) == 0 && d.Spec.Template.Spec.Affinity == nil {
		t.Error("no topology spread and no anti-affinity: replicas may share a node")
	}
	ref := m.hpa.Spec.ScaleTargetRef
	if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != d.Name {
		t.Errorf("HPA targets %s %s %s, not the Deployment %s", ref.APIVersion, ref.Kind, ref.Name, d.Name)
	}
	if d.Spec.Template.Spec.ServiceAccountName != m.account.Name {
		t.Errorf("pods run as service account %q, the manifest defines %q", d.Spec.Template.Spec.ServiceAccountName, m.account.Name)
	}
}

// deref prints what p points to, or "unset".
func deref[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func equalSelectors(a, b *metav1.LabelSelector) bool {
	sa, err1 := metav1.LabelSelectorAsSelector(a)
	sb, err2 := metav1.LabelSelectorAsSelector(b)
	return err1 == nil && err2 == nil && sa.String() == sb.String()
}

// TestSecurityContext: non-root, no privilege escalation, read-only root,
// no capabilities, the runtime's seccomp profile; the user is the image's.
func TestSecurityContext(t *testing.T) {
	m := loadManifests(t)
	pod := m.deploy.Spec.Template.Spec
	c := m.container(t)
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("set both the pod's and the container's securityContext")
	}
	isTrue := func(b *bool) bool { return b != nil && *b }
	isFalse := func(b *bool) bool { return b != nil && !*b }
	if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
		t.Error("runAsNonRoot is not true")
	}
	if !isFalse(sc.AllowPrivilegeEscalation) {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if isTrue(sc.Privileged) {
		t.Error("privileged")
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %+v: want drop [ALL] and nothing added", sc.Capabilities)
	}
	for _, s := range []*corev1.SeccompProfile{psc.SeccompProfile, sc.SeccompProfile} {
		if s != nil && s.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("seccompProfile %s, want RuntimeDefault", s.Type)
		}
	}
	if psc.SeccompProfile == nil && sc.SeccompProfile == nil {
		t.Error("no seccompProfile")
	}
	uid := sc.RunAsUser
	if uid == nil {
		uid = psc.RunAsUser
	}
	if image := dockerfileUser(t); uid == nil || fmt.Sprint(*uid) != image {
		t.Errorf("runAsUser %s, the image's USER is %s", deref(uid), image)
	}
	if !isFalse(pod.AutomountServiceAccountToken) || !isFalse(m.account.AutomountServiceAccountToken) {
		t.Error("the service account token is mounted: cipherd never calls the Kubernetes API")
	}
	// A Service named cipherd would otherwise add CIPHERD_SERVICE_HOST,
	// CIPHERD_PORT… to the environment, next to cipherd's own settings.
	if !isFalse(pod.EnableServiceLinks) {
		t.Error("enableServiceLinks is not false")
	}
}

// dockerfileUser returns the UID of the image's last USER instruction.
func dockerfileUser(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	ms := regexp.MustCompile(`(?m)^USER\s+(\d+)`).FindAllSubmatch(b, -1)
	if len(ms) == 0 {
		t.Fatal("the Dockerfile has no numeric USER")
	}
	return string(ms[len(ms)-1][1])
}

// TestWorkloadShape: replicas, rollout, PDB, HPA and resources fit together.
func TestWorkloadShape(t *testing.T) {
	m := loadManifests(t)
	d := m.deploy
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas %s, want 3", deref(d.Spec.Replicas))
	}
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("strategy %+v: want a rolling update with maxUnavailable 0", d.Spec.Strategy)
	}
	hpa := m.hpa.Spec
	if hpa.MinReplicas == nil || *hpa.MinReplicas != *d.Spec.Replicas || hpa.MaxReplicas <= *hpa.MinReplicas {
		t.Errorf("HPA %s..%d, Deployment %s replicas", deref(hpa.MinReplicas), hpa.MaxReplicas, deref(d.Spec.Replicas))
	}
	// A budget that always lets one replica go, whatever the HPA has set,
	// and never all of them.
	pdb := m.pdb.Spec
	switch {
	case pdb.MaxUnavailable != nil:
		if n := pdb.MaxUnavailable.IntValue(); pdb.MaxUnavailable.Type != intstr.Int || n < 1 || n >= int(*hpa.MinReplicas) {
			t.Errorf("PDB maxUnavailable %s", pdb.MaxUnavailable.String())
		}
	case pdb.MinAvailable != nil:
		if n := pdb.MinAvailable.IntValue(); pdb.MinAvailable.Type != intstr.Int || n < 1 || n >= int(*hpa.MinReplicas) {
			t.Errorf("PDB minAvailable %s blocks drains at %d replicas", pdb.MinAvailable.String(), *hpa.MinReplicas)
		}
	default:
		t.Error("PDB sets neither maxUnavailable nor minAvailable")
	}
	c := m.container(t)
	for _, mt := range hpa.Metrics {
		if mt.Type == autoscalingv2.ResourceMetricSourceType && mt.Resource.Target.Type == autoscalingv2.UtilizationMetricType {
			if _, ok := c.Resources.Requests[mt.Resource.Name]; !ok {
				t.Errorf("the HPA scales on %s utilization, but the container requests no %s", mt.Resource.Name, mt.Resource.Name)
			}
		}
	}
	if len(hpa.Metrics) == 0 {
		t.Error("the HPA has no metric")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.Cmp(c.Resources.Requests[corev1.ResourceMemory]) < 0 {
		t.Error("no memory limit at or above the request")
	}
}

// mounts maps each volume mount of the container to its volume.
func (m *manifests) mounts(t *testing.T) map[string]corev1.Volume {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range m.deploy.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	out := map[string]corev1.Volume{}
	for _, vm := range m.container(t).VolumeMounts {
		v, ok := vols[vm.Name]
		if !ok {
			t.Fatalf("volume mount %s names no volume", vm.Name)
		}
		out[vm.MountPath] = v
	}
	return out
}

// TestVolumesAndSecret: the data directory is an emptyDir; the keyring and
// the configuration come read-only, as whole directories (a subPath mount is
// never updated, so the keyring would not reload); every Secret key and
// ConfigMap key referenced exists in the example Secret and the ConfigMap;
// the example Secret holds placeholders only.
func TestVolumesAndSecret(t *testing.T) {
	m := loadManifests(t)
	c := m.container(t)
	for _, vm := range c.VolumeMounts {
		v := m.mounts(t)[vm.MountPath]
		if v.EmptyDir == nil && !vm.ReadOnly {
			t.Errorf("mount %s (%s) is writable: only the data emptyDir may be", vm.MountPath, vm.Name)
		}
		if vm.SubPath != "" || vm.SubPathExpr != "" {
			t.Errorf("mount %s uses a subPath: the kubelet never updates those", vm.MountPath)
		}
		if v.Secret != nil && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0) {
			t.Errorf("Secret volume %s: set a defaultMode without access for others", v.Name)
		}
	}
	keys := secretKeys(m.secret)
	for _, v := range m.deploy.Spec.Template.Spec.Volumes {
		switch {
		case v.Secret != nil:
			if v.Secret.SecretName != m.secret.Name {
				t.Errorf("volume %s mounts Secret %s, the example is %s", v.Name, v.Secret.SecretName, m.secret.Name)
			}
			for _, it := range v.Secret.Items {
				if _, ok := keys[it.Key]; !ok {
					t.Errorf("volume %s: the example Secret has no key %s", v.Name, it.Key)
				}
			}
		case v.ConfigMap != nil:
			if v.ConfigMap.Name != m.config.Name {
				t.Errorf("volume %s mounts ConfigMap %s, the manifest is %s", v.Name, v.ConfigMap.Name, m.config.Name)
			}
		}
	}
	for _, e := range c.Env {
		if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
			if r.SecretKeyRef.Name != m.secret.Name {
				t.Errorf("%s from Secret %s, the example is %s", e.Name, r.SecretKeyRef.Name, m.secret.Name)
			} else if _, ok := keys[r.SecretKeyRef.Key]; !ok {
				t.Errorf("%s from key %s, which the example Secret lacks", e.Name, r.SecretKeyRef.Key)
			}
		}
	}
	placeholder := regexp.MustCompile(`REPLACE_WITH_[A-Z0-9_]+`)
	for k, v := range keys {
		if !placeholder.MatchString(v) {
			t.Errorf("example Secret key %s holds no REPLACE_WITH_… placeholder: never publish a real value", k)
		}
	}
	if !strings.Contains(readFile(t, exampleSecretFile), "AN EXAMPLE, NOT A KEY") {
		t.Errorf("%s does not say it is an example", exampleSecretFile)
	}
}

func secretKeys(s *corev1.Secret) map[string]string {
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	for k, v := range s.StringData {
		out[k] = v
	}
	return out
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// decodeConfig reads a cipherd configuration file as `cipherd serve -config`
// does: YAML, unknown keys refused.
func decodeConfig(b []byte) (server.Config, error) {
	var cfg server.Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, err
	}
	return cfg, nil
}
