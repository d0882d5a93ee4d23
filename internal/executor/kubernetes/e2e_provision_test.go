package kubernetes

// End-to-end tests of the Provisioner against the real API server of
// hack/k8s-testenv.sh: the ProvisioningRequest CRD is installed from
// testdata (written from cluster-autoscaler's documented schema), and a
// small test autoscaler, run in the test, honours the contract as
// cluster-autoscaler would: for each request it reads the PodTemplate,
// makes Count KWOK GPU nodes of the template's pool and GPUs, and sets
// Provisioned=True; for the pool it is told cannot grow it sets
// Failed=True instead. Told which nodes gpufleet released, it also
// scales down as cluster-autoscaler does: a node it made that has no pod
// and that gpufleet released (here standing for cluster-autoscaler's
// "unneeded for scale-down-unneeded-time") is deleted.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/internal/burst"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/store"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installProvisioningCRD creates the CRD unless it exists and waits until
// the API server serves it.
func installProvisioningCRD(t *testing.T, x *e2e, dyn dynamic.Interface) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "provisioningrequest-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatalf("CRD yaml: %v", err)
	}
	crd := &unstructured.Unstructured{Object: obj}
	if _, err := dyn.Resource(crdGVR).Create(t.Context(), crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the ProvisioningRequest CRD: %v", err)
	}
	p, err := NewProvisioner(ProvisionerOptions{Client: x.client, Dynamic: dyn})
	if err != nil {
		t.Fatal(err)
	}
	x.waitFor(30*time.Second, "the ProvisioningRequest API served", func() (bool, string) {
		ok, err := p.HasAPI()
		return ok, fmt.Sprint(err)
	})
}

// testAutoscaler plays cluster-autoscaler for the requests in namespaces
// with prefix: it polls them and answers each once.
type testAutoscaler struct {
	x        *e2e
	dyn      dynamic.Interface
	prefix   string
	failPool string // requests for this pool fail
	// released, when set, says whether gpufleet released a node: an
	// empty released node of the autoscaler's is deleted.
	released func(node string) bool

	mu      sync.Mutex
	nodes   []string // made so far
	removed []string // deleted by scale-down
	seen    map[string]bool
}

func (a *testAutoscaler) run(ctx context.Context) {
	for ctx.Err() == nil {
		list, err := a.dyn.Resource(ProvisioningGVR).Namespace("").List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=true"})
		if err == nil {
			for i := range list.Items {
				pr := &list.Items[i]
				key := pr.GetNamespace() + "/" + pr.GetName()
				if !strings.HasPrefix(pr.GetNamespace(), a.prefix) || a.seen[key] {
					continue
				}
				if err := a.answer(ctx, pr); err != nil {
					a.x.t.Logf("test autoscaler: %s: %v", key, err)
					continue
				}
				a.seen[key] = true
			}
		}
		if a.released != nil {
			a.scaleDown(ctx)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scaleDown deletes the nodes it made that have no pod and that gpufleet
// released.
func (a *testAutoscaler) scaleDown(ctx context.Context) {
	a.mu.Lock()
	made := slices.Clone(a.nodes)
	a.mu.Unlock()
	for _, name := range made {
		a.mu.Lock()
		gone := slices.Contains(a.removed, name)
		a.mu.Unlock()
		if gone || !a.released(name) {
			continue
		}
		pods, err := a.x.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + name})
		if err != nil || len(pods.Items) > 0 {
			continue
		}
		if err := a.x.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			a.x.t.Logf("test autoscaler: delete node %s: %v", name, err)
			continue
		}
		a.mu.Lock()
		a.removed = append(a.removed, name)
		a.mu.Unlock()
	}
}

func (a *testAutoscaler) answer(ctx context.Context, pr *unstructured.Unstructured) error {
	sets, _, _ := unstructured.NestedSlice(pr.Object, "spec", "podSets")
	class, _, _ := unstructured.NestedString(pr.Object, "spec", "provisioningClassName")
	if len(sets) != 1 || class != ClassAtomicScaleUp {
		return fmt.Errorf("podSets %v class %q: want one pod set of %s", sets, class, ClassAtomicScaleUp)
	}
	set := sets[0].(map[string]any)
	count, _, _ := unstructured.NestedInt64(set, "count")
	tplName, _, _ := unstructured.NestedString(set, "podTemplateRef", "name")
	tpl, err := a.x.client.CoreV1().PodTemplates(pr.GetNamespace()).Get(ctx, tplName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pool := tpl.Template.Spec.NodeSelector[DefaultPoolLabel]
	q := tpl.Template.Spec.Containers[0].Resources.Limits[ResourceGPU]
	cond := map[string]any{
		"type": "Provisioned", "status": "True", "reason": "Provisioned",
		"message": fmt.Sprintf("%d nodes of pool %s", count, pool),
	}
	if pool == a.failPool {
		cond = map[string]any{"type": "Failed", "status": "True", "reason": "CapacityUnavailable", "message": "pool " + pool + " cannot grow"}
	} else {
		for range count {
			a.mu.Lock()
			name := fmt.Sprintf("%s-pr%d", a.x.id, len(a.nodes))
			a.mu.Unlock()
			if _, err := a.x.client.CoreV1().Nodes().Create(ctx, kwokNode(name, pool, int(q.Value())), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			a.mu.Lock()
			a.nodes = append(a.nodes, name)
			a.mu.Unlock()
		}
	}
	cond["lastTransitionTime"] = time.Now().UTC().Format(time.RFC3339)
	accepted := map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "accepted", "lastTransitionTime": cond["lastTransitionTime"]}
	if err := unstructured.SetNestedSlice(pr.Object, []any{accepted, cond}, "status", "conditions"); err != nil {
		return err
	}
	_, err = a.dyn.Resource(ProvisioningGVR).Namespace(pr.GetNamespace()).UpdateStatus(ctx, pr, metav1.UpdateOptions{})
	return err
}

func TestE2EProvision(t *testing.T) {
	x := newE2E(t, 0, 0)
	dyn, err := Dynamic(x.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	installProvisioningCRD(t, x, dyn)

	pool, failPool := x.id+"-burst", x.id+"-full"
	a := &testAutoscaler{x: x, dyn: dyn, prefix: x.nsPrefix(), failPool: failPool, seen: map[string]bool{}}
	actx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.run(actx) }()
	t.Cleanup(func() {
		stop()
		<-done
		x.nodes = append(x.nodes, a.nodes...) // x.cleanup, registered before, runs after this
	})

	e, err := New(t.Context(), Options{
		Client: x.client, NamespaceTemplate: x.nsPrefix() + "{team}",
		NodeSelector: DefaultPoolLabel + " in (" + pool + "," + failPool + ")",
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Provisioner(dyn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	t.Run("Provisioned", func(t *testing.T) {
		req := core.ProvisionRequest{Pool: pool, Team: "ml", Workload: "wl-burst1", GPUs: 2, Count: 3, GPUModel: "NVIDIA-H100-80GB-HBM3", MilliCPU: 4000, MemoryMiB: 8192}
		name, err := p.Provision(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ns := p.Namespace("ml")
		var msg string
		x.waitFor(30*time.Second, "Provisioned", func() (bool, string) {
			st, m, err := p.ProvisionStatus(ctx, req, name)
			msg = m
			return st == core.ProvisionProvisioned, fmt.Sprintf("state %q %q %v", st, m, err)
		})
		if !strings.Contains(msg, "3 nodes") {
			t.Errorf("message %q: want the autoscaler's", msg)
		}
		// The executor sees the new nodes as GPU nodes of the pool.
		x.waitFor(30*time.Second, "3 nodes of the pool", func() (bool, string) {
			var got []string
			for _, n := range e.Nodes() {
				if n.Pool == pool && len(n.GPUs) == 2 && n.Schedulable {
					got = append(got, string(n.Name))
				}
			}
			return len(got) == 3, fmt.Sprintf("nodes %v", got)
		})
		// A second Provision of the same workload and pool (a server
		// that restarted) finds the request rather than make another.
		again, err := p.Provision(ctx, req)
		if err != nil || again != name {
			t.Errorf("Provision again = %q, %v; want %q", again, err, name)
		}
		if err := p.DeleteProvision(ctx, req, name); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(ProvisioningGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("request after DeleteProvision: %v; want NotFound", err)
		}
		if _, err := x.client.CoreV1().PodTemplates(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("pod template after DeleteProvision: %v; want NotFound", err)
		}
		if st, _, err := p.ProvisionStatus(ctx, req, name); err != nil || st != core.ProvisionFailed {
			t.Errorf("status of a deleted request = %q, %v; want Failed", st, err)
		}
		if err := p.DeleteProvision(ctx, req, name); err != nil {
			t.Errorf("DeleteProvision twice: %v", err)
		}
	})

	t.Run("Failed", func(t *testing.T) {
		req := core.ProvisionRequest{Pool: failPool, Team: "ml", Workload: "wl-burst2", GPUs: 8, Count: 1}
		name, err := p.Provision(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var msg string
		x.waitFor(30*time.Second, "Failed", func() (bool, string) {
			st, m, err := p.ProvisionStatus(ctx, req, name)
			msg = m
			return st == core.ProvisionFailed, fmt.Sprintf("state %q %q %v", st, m, err)
		})
		if !strings.Contains(msg, "CapacityUnavailable") || !strings.Contains(msg, "cannot grow") {
			t.Errorf("message %q: want the Failed condition's reason and message", msg)
		}
		for _, n := range e.Nodes() {
			if n.Pool == failPool {
				t.Errorf("node %s in the pool that failed", n.Name)
			}
		}
		// A failed request is not taken again: a new one is made.
		again, err := p.Provision(ctx, req)
		if err != nil || again == name {
			t.Errorf("Provision after Failed = %q, %v; want a new request", again, err)
		}
	})
}

// TestE2EProvisionElastic runs control's Elastic reconciler on the real
// Provisioner: the cheaper pool fails, the next one is asked and
// provisions, the executor sees its nodes; the workload's end withdraws
// the request from the API server.
func TestE2EProvisionElastic(t *testing.T) {
	x := newE2E(t, 0, 0)
	dyn, err := Dynamic(x.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	installProvisioningCRD(t, x, dyn)
	pool, failPool := x.id+"-burst", x.id+"-full"
	a := &testAutoscaler{x: x, dyn: dyn, prefix: x.nsPrefix(), failPool: failPool, seen: map[string]bool{}}
	actx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.run(actx) }()
	t.Cleanup(func() {
		stop()
		<-done
		x.nodes = append(x.nodes, a.nodes...)
	})
	ctx := t.Context()
	e, err := New(ctx, Options{
		Client: x.client, NamespaceTemplate: x.nsPrefix() + "{team}",
		NodeSelector: DefaultPoolLabel + " in (" + pool + "," + failPool + ")",
	})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := e.Provisioner(dyn)
	if err != nil {
		t.Fatal(err)
	}

	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "gpufleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	if err := st.CreateTeam(ctx, core.NewTeam("ml", now)); err != nil {
		t.Fatal(err)
	}
	w, _, err := st.CreateWorkload(ctx, &core.Workload{Spec: core.Spec{Name: "train", Team: "ml", Owner: "alice", Kind: core.KindJob,
		Priority: "training", Request: core.Request{MilliGPU: 4000, Replicas: 2}, Command: []string{"train"}}}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyPlan(ctx, core.Plan{Unplaced: []core.Decision{{Workload: w.ID, Reason: sched.ReasonUnschedulable, Message: "no capacity"}}}, now); err != nil {
		t.Fatal(err)
	}
	el := burst.NewElastic(st, burst.ElasticOptions{
		Policy: sched.BurstPolicy{Classes: []string{"training"}},
		Pools: map[string]burst.ElasticPool{
			failPool: {Kind: core.PoolBurst, Region: "us-east", Price: 1},
			pool:     {Kind: core.PoolBurst, Region: "us-east", Price: 2},
		},
		Provisioners: map[string]burst.Provisioner{"": kp},
		Timeout:      time.Minute,
	})
	var seen []string
	x.waitFor(60*time.Second, "the second pool provisioned", func() (bool, string) {
		if err := el.Step(ctx); err != nil {
			return false, err.Error()
		}
		r := el.Requests()
		if len(r) == 1 && (len(seen) == 0 || seen[len(seen)-1] != r[0].Pool) {
			seen = append(seen, r[0].Pool)
		}
		return len(r) == 1 && r[0].Pool == pool && r[0].State == core.ProvisionProvisioned, fmt.Sprintf("requests %+v", r)
	})
	if want := []string{failPool, pool}; !slices.Equal(seen, want) {
		t.Errorf("pools asked %v; want %v (the cheaper one failed)", seen, want)
	}
	x.waitFor(30*time.Second, "2 nodes of 4 GPUs in the pool", func() (bool, string) {
		var got []string
		for _, n := range e.Nodes() {
			if n.Pool == pool && len(n.GPUs) == 4 && n.Schedulable {
				got = append(got, string(n.Name))
			}
		}
		return len(got) == 2, fmt.Sprintf("nodes %v", got)
	})
	name := el.Requests()[0].Name
	ns := kp.Namespace("ml")

	if _, err := st.RequestStop(ctx, w.ID, "Cancelled", "done", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := el.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(ProvisioningGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("request of an ended workload: %v; want it deleted", err)
	}
	list, err := dyn.Resource(ProvisioningGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("requests left in %s: %v %v; want none (the failed one withdrawn too)", ns, list, err)
	}
}

// nodeSync writes the executor's nodes to the store as the server's sync
// does (internal/app's nodeSync): every node as burst, a node that left
// the cluster written again not schedulable.
type nodeSync struct {
	t     *testing.T
	e     *Executor
	st    *store.Store
	known map[core.NodeName]core.Node
}

func (s *nodeSync) sync() {
	s.t.Helper()
	ctx := s.t.Context()
	seen := map[core.NodeName]bool{}
	for _, n := range s.e.Nodes() {
		n.PoolKind = core.PoolBurst
		seen[n.Name] = true
		if old, ok := s.known[n.Name]; ok && reflect.DeepEqual(old.Labels, n.Labels) && old.Schedulable == n.Schedulable && old.NotReady == n.NotReady {
			continue
		}
		if err := s.st.PutNode(ctx, n); err != nil {
			s.t.Fatal(err)
		}
		s.known[n.Name] = n
	}
	for name, old := range s.known {
		if seen[name] || !old.Schedulable {
			continue
		}
		old.Schedulable, old.UpdatedAt = false, time.Now().UTC()
		if err := s.st.PutNode(ctx, old); err != nil {
			s.t.Fatal(err)
		}
		s.known[name] = old
	}
}

// TestE2EProvisionIdleRelease runs control's Elastic reconciler and
// Releaser on the real Provisioner and API server: a workload's request
// brings a node, the workload's pod runs there and ends, the node is
// released once idle for idleRelease (not while the pod runs), the test
// autoscaler removes the empty released node, and the next workload that
// waits takes the gone node back once and then gets a new node asked for.
func TestE2EProvisionIdleRelease(t *testing.T) {
	x := newE2E(t, 0, 0)
	dyn, err := Dynamic(x.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	installProvisioningCRD(t, x, dyn)
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "gpufleet.db"))
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the test autoscaler stops (a cleanup registered before
	// its own runs after it): the autoscaler reads node states.
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTeam(ctx, core.NewTeam("ml", time.Now())); err != nil {
		t.Fatal(err)
	}
	// state is read by the test autoscaler's goroutine too: an error is
	// reported, not fatal there.
	state := func(node string) (core.NodeState, string) {
		ns, _, err := st.NodeStatus(context.Background(), core.NodeName(node))
		if err != nil {
			t.Errorf("state of %s: %v", node, err)
			return "", ""
		}
		return ns.State, ns.Reason
	}
	released := func(node string) bool {
		s, r := state(node)
		return s == core.NodeCordoned && r == burst.ReasonIdleReleased
	}

	pool := x.id + "-burst"
	a := &testAutoscaler{x: x, dyn: dyn, prefix: x.nsPrefix(), seen: map[string]bool{}, released: released}
	actx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.run(actx) }()
	t.Cleanup(func() {
		stop()
		<-done
		x.nodes = append(x.nodes, a.nodes...)
	})
	e, err := New(ctx, Options{Client: x.client, NamespaceTemplate: x.nsPrefix() + "{team}", NodeSelector: DefaultPoolLabel + "=" + pool})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := e.Provisioner(dyn)
	if err != nil {
		t.Fatal(err)
	}
	ns := &nodeSync{t: t, e: e, st: st, known: map[core.NodeName]core.Node{}}
	policy := sched.BurstPolicy{Classes: []string{"training"}}
	el := burst.NewElastic(st, burst.ElasticOptions{
		Policy:       policy,
		Pools:        map[string]burst.ElasticPool{pool: {Kind: core.PoolBurst, Price: 1}},
		Provisioners: map[string]burst.Provisioner{"": kp},
	})
	const idle = 3 * time.Second
	rel := burst.NewReleaser(st, burst.ReleaseOptions{After: idle, Policy: policy})
	step := func() {
		t.Helper()
		ns.sync()
		if err := el.Step(ctx); err != nil {
			t.Fatalf("Elastic.Step: %v", err)
		}
		if err := rel.Step(ctx); err != nil {
			t.Fatalf("Releaser.Step: %v", err)
		}
	}
	waiting := func() *core.Workload {
		t.Helper()
		w, _, err := st.CreateWorkload(ctx, &core.Workload{Spec: core.Spec{Name: "train", Team: "ml", Owner: "alice", Kind: core.KindJob,
			Priority: "training", Request: core.Request{MilliGPU: 4000}, Command: sleepCmd()}}, nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.ApplyPlan(ctx, core.Plan{Unplaced: []core.Decision{{Workload: w.ID, Reason: sched.ReasonUnschedulable, Message: "no capacity"}}}, time.Now()); err != nil {
			t.Fatal(err)
		}
		return w
	}
	// schedulable lists the pool's nodes the scheduler may place on.
	schedulable := func() []core.Node {
		snap, err := st.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []core.Node
		for _, n := range snap.Nodes {
			if n.Pool == pool && n.Schedulable {
				out = append(out, *n)
			}
		}
		return out
	}
	requests := func() int {
		list, err := dyn.Resource(ProvisioningGVR).Namespace(kp.Namespace("ml")).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}

	// 1. A request brings a node; the workload's pod runs there.
	w1 := waiting()
	var node core.Node
	x.waitFor(60*time.Second, "a node provisioned for the first workload", func() (bool, string) {
		step()
		got := schedulable()
		if len(got) == 1 && len(got[0].GPUs) == 4 {
			node = got[0]
			return true, ""
		}
		return false, fmt.Sprintf("requests %+v, nodes %v", el.Requests(), got)
	})
	var as []core.Assignment
	for _, g := range node.GPUs {
		as = append(as, core.Assignment{Node: node.Name, GPUIndex: g.Index, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB})
	}
	res, err := st.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w1.ID, Assignments: as}}}, time.Now())
	if err != nil || res[0].Err != nil {
		t.Fatalf("place: %v %v", err, res[0].Err)
	}
	tk := executor.Task{WorkloadID: w1.ID, Attempt: 1, Team: "ml", Priority: "training", Image: e2eImage, Command: sleepCmd(),
		GracePeriod: time.Second, Request: w1.Request, Assignments: as}
	if err := e.Start(ctx, tk); err != nil {
		t.Fatal(err)
	}
	pod := PodName(w1.ID, 1, 0, 1)
	x.waitFor(30*time.Second, "the pod Running", func() (bool, string) {
		p, err := x.pod(kp.Namespace("ml"), pod)
		return err == nil && p.Status.Phase == "Running", fmt.Sprint(err)
	})
	step()
	if n := requests(); n != 0 {
		t.Errorf("%d provisioning requests once the workload runs; want it withdrawn", n)
	}

	// 2. Not released while the pod runs, released once idle.
	for range 2 * int(idle/time.Second) {
		time.Sleep(time.Second) // the release's idle time runs on the server's clock
		step()
	}
	if s, r := state(string(node.Name)); s != core.NodeReady || released(string(node.Name)) {
		t.Fatalf("node %s is %s (%s) while its pod runs", node.Name, s, r)
	}
	if err := e.Stop(ctx, w1.ID, 1, time.Second); err != nil {
		t.Fatal(err)
	}
	x.waitFor(30*time.Second, "the pod gone", func() (bool, string) {
		_, err := x.pod(kp.Namespace("ml"), pod)
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// The idle time counts from the end the store records, which Finish
	// is given here (taken after it returns, the end would be later by
	// the write's own time, and the release seem early on a busy machine).
	ended := time.Now()
	if _, err := st.Finish(ctx, w1.ID, 1, core.Cancelled, "Cancelled", "stopped", nil, ended); err != nil {
		t.Fatal(err)
	}
	x.waitFor(30*time.Second, "the node released", func() (bool, string) {
		step()
		s, r := state(string(node.Name))
		return released(string(node.Name)), fmt.Sprintf("%s (%s)", s, r)
	})
	if d := time.Since(ended); d < idle {
		t.Errorf("released %s after the work ended; want idleRelease %s at least", d, idle)
	}

	// 3. The autoscaler removes the empty released node.
	x.waitFor(30*time.Second, "the released node deleted", func() (bool, string) {
		_, err := x.client.CoreV1().Nodes().Get(ctx, string(node.Name), metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	x.waitFor(30*time.Second, "the executor sees it gone", func() (bool, string) {
		for _, n := range e.Nodes() {
			if n.Name == node.Name {
				return false, "still listed"
			}
		}
		return true, ""
	})

	// 4. The next workload takes the gone node back (its cluster no
	// longer lists it: not schedulable), then gets a new node asked for.
	waiting()
	ns.sync()
	if err := el.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if n := requests(); n != 0 {
		t.Fatalf("%d provisioning requests while a released node may hold the work; want none yet", n)
	}
	if err := rel.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if s, r := state(string(node.Name)); s != core.NodeReady || r != burst.ReasonTakenBack {
		t.Fatalf("gone node %s is %s (%s); want it taken back", node.Name, s, r)
	}
	var fresh core.Node
	x.waitFor(60*time.Second, "a new node provisioned for the second workload", func() (bool, string) {
		step()
		got := schedulable()
		if len(got) == 1 && got[0].Name != node.Name {
			fresh = got[0]
			return true, ""
		}
		return false, fmt.Sprintf("requests %+v, nodes %v", el.Requests(), got)
	})
	t.Logf("released %s, removed; took it back, then got %s", node.Name, fresh.Name)
	time.Sleep(idle + time.Second) // the idle time under test, on the server's clock
	step()
	if s, r := state(string(node.Name)); s != core.NodeReady || r != burst.ReasonTakenBack {
		t.Errorf("gone node %s is %s (%s) later; want it left taken back, not released again", node.Name, s, r)
	}
}
