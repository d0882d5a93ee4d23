package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// haDoc is one YAML document of deploy/kubernetes/ha, decoded strictly into
// the type of its kind.
type haDoc struct {
	file string
	kind string
	obj  any
}

// haDocs decodes every document of the files of deploy/kubernetes/ha that
// kustomization.yaml lists, and returns them with that list.
func haDocs(t *testing.T) (resources []string, docs []haDoc) {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy", "kubernetes", "ha")
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Namespace  string   `json:"namespace"`
		Resources  []string `json:"resources"`
		Images     []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("ha/kustomization.yaml: %v", err)
	}
	if k.Kind != "Kustomization" || k.Namespace != "gpufleet" {
		t.Fatalf("ha/kustomization.yaml: kind %q namespace %q, want Kustomization in gpufleet", k.Kind, k.Namespace)
	}
	for _, r := range k.Resources {
		d, err := decodeHA(filepath.Join(dir, r))
		if err != nil {
			t.Fatalf("ha/kustomization.yaml resource %s: %v", r, err)
		}
		docs = append(docs, d...)
	}
	return k.Resources, docs
}

// decodeHA decodes the documents of one manifest file by their kinds.
func decodeHA(file string) ([]haDoc, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []haDoc
	for i, doc := range strings.Split(string(b), "\n---") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("document %d: %v", i, err)
		}
		var obj any
		switch tm.Kind {
		case "Namespace":
			obj = &corev1.Namespace{}
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "Service":
			obj = &corev1.Service{}
		case "Secret":
			obj = &corev1.Secret{}
		case "PersistentVolumeClaim":
			obj = &corev1.PersistentVolumeClaim{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "PriorityClass":
			obj = &schedulingv1.PriorityClass{}
		case "Deployment":
			obj = &appsv1.Deployment{}
		case "PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		default:
			return nil, fmt.Errorf("document %d: unexpected kind %q", i, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %v", i, tm.Kind, err)
		}
		out = append(out, haDoc{file: filepath.Base(file), kind: tm.Kind, obj: obj})
	}
	return out, nil
}

// TestDeployHA checks deploy/kubernetes/ha: three servers on a PostgreSQL
// store whose URL and secrets key come from Secrets, no claim for a SQLite
// file, ready on /readyz, spread over nodes, a disruption budget, a Service
// in front of them all, and the base's other manifests unchanged.
func TestDeployHA(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(root, "deploy", "kubernetes", "ha")
	resources, docs := haDocs(t)

	// Every manifest of the directory is a resource, except the example
	// Secrets, which must never be applied with the rest.
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		switch listed := slices.Contains(resources, name); {
		case name == "kustomization.yaml":
		case name == "postgres-secret.example.yaml":
			if listed {
				t.Errorf("ha/kustomization.yaml lists %s: its placeholders would reach the cluster", name)
			}
		case !listed:
			t.Errorf("ha/%s is not in ha/kustomization.yaml's resources", name)
		}
	}

	// The manifests shared with the base are the base's, byte for byte.
	for _, name := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "priorityclasses.yaml", "service.yaml"} {
		base, err := os.ReadFile(filepath.Join(root, "deploy", "kubernetes", name))
		if err != nil {
			t.Fatal(err)
		}
		ha, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(base, ha) {
			t.Errorf("ha/%s differs from deploy/kubernetes/%s: copy it again", name, name)
		}
	}

	var (
		dep   *appsv1.Deployment
		pdb   *policyv1.PodDisruptionBudget
		svc   *corev1.Service
		kinds []string
	)
	for _, d := range docs {
		kinds = append(kinds, d.kind)
		switch o := d.obj.(type) {
		case *appsv1.Deployment:
			dep = o
		case *policyv1.PodDisruptionBudget:
			pdb = o
		case *corev1.Service:
			svc = o
		case *corev1.PersistentVolumeClaim:
			t.Errorf("ha/%s: PersistentVolumeClaim %s: the store is PostgreSQL, no claim is needed", d.file, o.Name)
		case *corev1.Secret:
			t.Errorf("ha/%s: Secret %s among the resources: make the Secrets out of band (postgres-secret.example.yaml)", d.file, o.Name)
		}
	}
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	if want := []string{"ClusterRole", "ClusterRoleBinding", "Deployment", "Namespace", "PodDisruptionBudget", "PriorityClass", "Service", "ServiceAccount"}; !slices.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}

	// The Deployment.
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		t.Errorf("Deployment replicas %v, want 3", dep.Spec.Replicas)
	}
	if dep.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		t.Error("Deployment strategy Recreate: stops every server at once")
	}
	pod := dep.Spec.Template
	podLabels := labels.Set(pod.Labels)
	if sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("Deployment selector %v does not match its pods' labels %v (%v)", dep.Spec.Selector, pod.Labels, err)
	}
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "gpufleet" {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		t.Fatal("Deployment: no container gpufleet")
	}
	var store *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == "GPUFLEET_STORE" {
			store = &c.Env[i]
		}
	}
	switch {
	case store == nil:
		t.Error("container gpufleet: no env GPUFLEET_STORE")
	case store.Value != "" || store.ValueFrom == nil || store.ValueFrom.SecretKeyRef == nil:
		t.Errorf("env GPUFLEET_STORE %+v: want it from a Secret, never a literal", store)
	case store.ValueFrom.SecretKeyRef.Name != "gpufleet-postgres" || store.ValueFrom.SecretKeyRef.Key != "url":
		t.Errorf("env GPUFLEET_STORE from Secret %s key %s, want gpufleet-postgres key url", store.ValueFrom.SecretKeyRef.Name, store.ValueFrom.SecretKeyRef.Key)
	}
	var keyFile string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--store") || strings.Contains(a, "postgres") {
			t.Errorf("container gpufleet arg %q: the store's URL belongs in $GPUFLEET_STORE, not in the command line", a)
		}
		if v, ok := strings.CutPrefix(a, "--secrets-key-file="); ok {
			keyFile = v
		}
	}
	if !slices.Contains(c.Args, "--executor=kubernetes") {
		t.Errorf("container gpufleet args %v: want --executor=kubernetes (the local executor runs on its own machine only)", c.Args)
	}
	if keyFile == "" {
		t.Fatalf("container gpufleet args %v: no --secrets-key-file (required with PostgreSQL)", c.Args)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "http" {
		t.Errorf("container gpufleet readinessProbe %+v: want GET /readyz on port http", p)
	}

	// The key reaches --secrets-key-file from Secret gpufleet-secrets-key
	// (key secrets.key, defaultMode 0400): the file's volume is the one an
	// init container writes it to with mode 0600, from that Secret's
	// volume.
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
		if v.PersistentVolumeClaim != nil {
			t.Errorf("volume %s is a claim: the store is PostgreSQL, --data needs an emptyDir only", v.Name)
		}
	}
	mountOf := func(c corev1.Container, file string) (string, bool) {
		for _, m := range c.VolumeMounts {
			if path.Dir(file) == path.Clean(m.MountPath) {
				return m.Name, true
			}
		}
		return "", false
	}
	keyVol, ok := mountOf(*c, keyFile)
	if !ok {
		t.Fatalf("--secrets-key-file=%s: no volume mounted at %s", keyFile, path.Dir(keyFile))
	}
	var copied bool
	for _, ic := range pod.Spec.InitContainers {
		if len(ic.Command) != 5 || ic.Command[0] != "install" || ic.Command[1] != "-m" || ic.Command[2] != "0600" || ic.Command[4] != keyFile {
			continue
		}
		if v, ok := mountOf(ic, ic.Command[4]); !ok || v != keyVol {
			t.Errorf("init container %s writes %s outside volume %s", ic.Name, ic.Command[4], keyVol)
		}
		src, ok := mountOf(ic, ic.Command[3])
		if !ok {
			t.Fatalf("init container %s reads %s from no volume", ic.Name, ic.Command[3])
		}
		s := volumes[src].Secret
		switch {
		case s == nil:
			t.Errorf("init container %s reads the key from volume %s, not a Secret", ic.Name, src)
		case s.SecretName != "gpufleet-secrets-key":
			t.Errorf("volume %s: Secret %s, want gpufleet-secrets-key", src, s.SecretName)
		case s.DefaultMode == nil || *s.DefaultMode != 0o400:
			t.Errorf("volume %s: defaultMode %v, want 0400", src, s.DefaultMode)
		case len(s.Items) != 1 || s.Items[0].Key != "secrets.key" || s.Items[0].Path != path.Base(ic.Command[3]):
			t.Errorf("volume %s: items %+v, want key secrets.key at %s", src, s.Items, path.Base(ic.Command[3]))
		}
		copied = true
	}
	if !copied {
		t.Errorf("no init container installs the secrets key at %s with mode 0600", keyFile)
	}
	if v := volumes[keyVol]; v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("volume %s of the secrets key: want an emptyDir in memory, got %+v", keyVol, v.VolumeSource)
	}

	// Spread by node where the cluster can.
	var spread bool
	if a := pod.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(w.PodAffinityTerm.LabelSelector)
			if err == nil && w.PodAffinityTerm.TopologyKey == corev1.LabelHostname && sel.Matches(podLabels) {
				spread = true
			}
		}
	}
	if !spread {
		t.Error("Deployment: no preferred pod anti-affinity by kubernetes.io/hostname over its own pods")
	}

	// The budget and the Service cover every server.
	if pdb == nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget %+v: want maxUnavailable 1", pdb)
	} else if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not match the servers' pods (%v)", pdb.Spec.Selector, err)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service selector %v does not match the servers' pods", svc.Spec.Selector)
	}

	// No resource holds a database URL (hence no password).
	for _, r := range resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.ToLower(string(b)); strings.Contains(s, "postgres://") || strings.Contains(s, "postgresql://") {
			t.Errorf("ha/%s holds a database URL: it belongs in Secret gpufleet-postgres", r)
		}
	}
}

// TestDeployHAExampleSecret checks that postgres-secret.example.yaml makes
// the two Secrets the Deployment reads, with placeholders only: a URL whose
// password is PASSWORD and a key gpufleet refuses (not 64 hex digits).
func TestDeployHAExampleSecret(t *testing.T) {
	docs, err := decodeHA(filepath.Join(repoRoot(t), "deploy", "kubernetes", "ha", "postgres-secret.example.yaml"))
	if err != nil {
		t.Fatalf("postgres-secret.example.yaml: %v", err)
	}
	got := map[string]map[string]string{}
	for _, d := range docs {
		s, ok := d.obj.(*corev1.Secret)
		if !ok {
			t.Fatalf("postgres-secret.example.yaml: a %s, want Secrets only", d.kind)
		}
		if len(s.Data) != 0 {
			t.Errorf("Secret %s: data (base64) hides what it holds: use stringData placeholders", s.Name)
		}
		got[s.Name] = s.StringData
	}
	url := got["gpufleet-postgres"]["url"]
	if !strings.HasPrefix(url, "postgres://USER:PASSWORD@HOST:") {
		t.Errorf("Secret gpufleet-postgres url %q: want a placeholder postgres://USER:PASSWORD@HOST:...", url)
	}
	key, ok := got["gpufleet-secrets-key"]["secrets.key"]
	if !ok || strings.Trim(key, "0123456789abcdefABCDEF") == "" {
		t.Errorf("Secret gpufleet-secrets-key secrets.key %q: want a placeholder that is no key", key)
	}
}

// TestDeployHAKustomize renders deploy/kubernetes/ha with kubectl kustomize,
// where kubectl is installed: the image is set and every object is in
// namespace gpufleet (but the cluster-scoped ones).
func TestDeployHAKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed: deploy/kubernetes/ha not rendered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectl, "kustomize", filepath.Join(repoRoot(t), "deploy", "kubernetes", "ha")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/kubernetes/ha: %v\n%s", err, out)
	}
	var deployments int
	for _, doc := range strings.Split(string(out), "\n---") {
		var o struct {
			metav1.TypeMeta   `json:",inline"`
			metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered document: %v", err)
		}
		switch o.Kind {
		case "Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass":
			continue
		case "Deployment":
			deployments++
			var d appsv1.Deployment
			if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
				t.Fatal(err)
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/gpufleet/gpufleet:latest" {
				t.Errorf("rendered Deployment image %q", img)
			}
		}
		if o.Namespace != "gpufleet" {
			t.Errorf("rendered %s %s in namespace %q, want gpufleet", o.Kind, o.Name, o.Namespace)
		}
	}
	if deployments != 1 {
		t.Errorf("rendered %d Deployments, want 1", deployments)
	}
}
