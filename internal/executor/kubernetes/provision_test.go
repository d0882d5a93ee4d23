package kubernetes

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/gpufleet/internal/core"
)

// newFakeProvisioner is a Provisioner on fake clients; withAPI says
// whether discovery lists the ProvisioningRequest resource.
func newFakeProvisioner(t *testing.T, withAPI bool) (*Provisioner, *fake.Clientset, *dynfake.FakeDynamicClient) {
	t.Helper()
	client := fake.NewClientset()
	if withAPI {
		client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
			GroupVersion: ProvisioningGroup + "/" + ProvisioningVersion,
			APIResources: []metav1.APIResource{{Name: ProvisioningResource, Namespaced: true, Kind: ProvisioningKind}},
		}}
	}
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ProvisioningGVR: ProvisioningKind + "List"})
	p, err := NewProvisioner(ProvisionerOptions{Client: client, Dynamic: dyn, NamespaceTemplate: "t-{team}"})
	if err != nil {
		t.Fatal(err)
	}
	return p, client, dyn
}

func TestProvisionNoAPI(t *testing.T) {
	p, client, _ := newFakeProvisioner(t, false)
	_, err := p.Provision(t.Context(), core.ProvisionRequest{Pool: "cloud", Team: "ml", Workload: "w1", GPUs: 1, Count: 1})
	if !errors.Is(err, ErrNoProvisioningAPI) {
		t.Fatalf("Provision without the CRD = %v; want ErrNoProvisioningAPI", err)
	}
	if !strings.Contains(err.Error(), "no ProvisioningRequest API") || !strings.Contains(err.Error(), "cloud") {
		t.Errorf("error %q: want it to say the API is missing and name the pool", err)
	}
	if list, _ := client.CoreV1().PodTemplates("t-ml").List(t.Context(), metav1.ListOptions{}); len(list.Items) != 0 {
		t.Errorf("pod templates made without the API: %d", len(list.Items))
	}
}

func TestProvisionValidate(t *testing.T) {
	p, _, _ := newFakeProvisioner(t, true)
	for _, tc := range []struct {
		req  core.ProvisionRequest
		want string
	}{
		{core.ProvisionRequest{Team: "ml", Workload: "w", GPUs: 1, Count: 1}, "pool"},
		{core.ProvisionRequest{Pool: "c", GPUs: 1, Count: 1}, "workload"},
		{core.ProvisionRequest{Pool: "c", Workload: "w", Count: 1}, "gpus"},
		{core.ProvisionRequest{Pool: "c", Workload: "w", GPUs: 1}, "count"},
	} {
		if _, err := p.Provision(t.Context(), tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Provision(%+v) = %v; want an error naming %s", tc.req, err, tc.want)
		}
	}
}

func TestProvisionObjects(t *testing.T) {
	p, client, dyn := newFakeProvisioner(t, true)
	ctx := t.Context()
	req := core.ProvisionRequest{
		Pool: "cloud", Team: "ml", Workload: "wl-Abc", GPUs: 4, Count: 2, GPUModel: "NVIDIA H100 80GB HBM3",
		NodeSelector: map[string]string{"zone": "a", "gpufleet.io/region": "us-east"}, MilliCPU: 8000, MemoryMiB: 1024,
	}
	name, err := p.Provision(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "gpufleet-wl-abc-cloud-") {
		t.Errorf("name %q: want gpufleet-wl-abc-cloud-...", name)
	}
	pr, err := dyn.Resource(ProvisioningGVR).Namespace("t-ml").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{LabelManaged: "true", LabelWorkload: "wl-abc", LabelTeam: "ml", LabelPoolOf: "cloud"}
	if diff := cmp.Diff(wantLabels, pr.GetLabels()); diff != "" {
		t.Errorf("request labels (-want +got):\n%s", diff)
	}
	wantSpec := map[string]any{
		"provisioningClassName": ClassAtomicScaleUp,
		"podSets":               []any{map[string]any{"podTemplateRef": map[string]any{"name": name}, "count": int64(2)}},
	}
	if diff := cmp.Diff(wantSpec, pr.Object["spec"]); diff != "" {
		t.Errorf("request spec (-want +got):\n%s", diff)
	}
	tpl, err := client.CoreV1().PodTemplates("t-ml").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantLabels, tpl.Labels); diff != "" {
		t.Errorf("template labels (-want +got):\n%s", diff)
	}
	wantSel := map[string]string{DefaultPoolLabel: "cloud", "zone": "a", LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}
	if diff := cmp.Diff(wantSel, tpl.Template.Spec.NodeSelector); diff != "" {
		t.Errorf("node selector (-want +got):\n%s", diff)
	}
	c := tpl.Template.Spec.Containers[0].Resources
	if g := c.Limits[ResourceGPU]; g.Value() != 4 {
		t.Errorf("gpu limit %v; want 4", g.String())
	}
	if cpu, mem := c.Requests[corev1.ResourceCPU], c.Requests[corev1.ResourceMemory]; cpu.MilliValue() != 8000 || mem.Value() != 1<<30 {
		t.Errorf("requests cpu %s memory %s; want 8 and 1Gi", cpu.String(), mem.String())
	}
	if len(tpl.OwnerReferences) != 1 || tpl.OwnerReferences[0].Kind != ProvisioningKind || tpl.OwnerReferences[0].Name != name {
		t.Errorf("template owners %+v; want the request", tpl.OwnerReferences)
	}
	if ns, err := client.CoreV1().Namespaces().Get(ctx, "t-ml", metav1.GetOptions{}); err != nil || ns.Labels[LabelManaged] != "true" {
		t.Errorf("namespace t-ml: %v %v; want it made and labelled", ns, err)
	}

	// Pending until the autoscaler says otherwise, then its verdict.
	if st, _, err := p.ProvisionStatus(ctx, req, name); err != nil || st != core.ProvisionPending {
		t.Errorf("status of a new request = %q, %v; want Pending", st, err)
	}
	setConditions(t, dyn, pr, cond("Accepted", "True", "Ok", ""), cond("Provisioned", "True", "Done", "2 nodes"))
	if st, msg, err := p.ProvisionStatus(ctx, req, name); err != nil || st != core.ProvisionProvisioned || msg != "Provisioned: Done: 2 nodes" {
		t.Errorf("status = %q %q %v; want Provisioned with the condition's words", st, msg, err)
	}
	if err := p.DeleteProvision(ctx, req, name); err != nil {
		t.Fatal(err)
	}
	// A pool known by its configured selector: the template selects its
	// labels, not gpufleet's pool label.
	req.PoolSelector = map[string]string{"cloud.google.com/gke-nodepool": "h100-burst"}
	req.GPUModel = ""
	other, err := p.Provision(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	tpl2, err := client.CoreV1().PodTemplates("t-ml").Get(ctx, other, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSel = map[string]string{"cloud.google.com/gke-nodepool": "h100-burst", "zone": "a"}
	if diff := cmp.Diff(wantSel, tpl2.Template.Spec.NodeSelector); diff != "" {
		t.Errorf("node selector of a pool with a selector (-want +got):\n%s", diff)
	}
	if st, _, err := p.ProvisionStatus(ctx, req, name); err != nil || st != core.ProvisionFailed {
		t.Errorf("status of a deleted request = %q, %v; want Failed", st, err)
	}
	if _, err := client.CoreV1().PodTemplates("t-ml").Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Error("the template outlived DeleteProvision")
	}
}

func cond(typ, status, reason, msg string) any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg}
}

func setConditions(t *testing.T, dyn *dynfake.FakeDynamicClient, pr *unstructured.Unstructured, conds ...any) {
	t.Helper()
	pr = pr.DeepCopy()
	if err := unstructured.SetNestedSlice(pr.Object, conds, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(ProvisioningGVR).Namespace(pr.GetNamespace()).UpdateStatus(t.Context(), pr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestProvisionStateOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		conds []any
		want  core.ProvisionState
		msg   string
	}{
		{"none", nil, core.ProvisionPending, ""},
		{"accepted", []any{cond("Accepted", "True", "Ok", "queued")}, core.ProvisionPending, "Accepted: Ok: queued"},
		{"not yet", []any{cond("Provisioned", "False", "Waiting", "scaling up")}, core.ProvisionPending, "Provisioned: Waiting: scaling up"},
		{"provisioned", []any{cond("Provisioned", "True", "Done", "")}, core.ProvisionProvisioned, "Provisioned: Done"},
		{"booking expired keeps the nodes", []any{cond("Provisioned", "True", "Done", ""), cond("BookingExpired", "True", "Expired", "")}, core.ProvisionProvisioned, "Provisioned: Done"},
		{"failed wins", []any{cond("Provisioned", "True", "Done", ""), cond("Failed", "True", "OutOfStock", "no H100")}, core.ProvisionFailed, "Failed: OutOfStock: no H100"},
		{"revoked", []any{cond("Provisioned", "True", "Done", ""), cond("CapacityRevoked", "True", "Gone", "")}, core.ProvisionFailed, "CapacityRevoked: Gone"},
		{"failed false", []any{cond("Failed", "False", "No", "")}, core.ProvisionPending, ""},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": tc.conds}}}
		if tc.conds == nil {
			obj.Object = map[string]any{}
		}
		st, msg := stateOf(obj)
		if st != tc.want || msg != tc.msg {
			t.Errorf("%s: stateOf = %q %q; want %q %q", tc.name, st, msg, tc.want, tc.msg)
		}
	}
}
