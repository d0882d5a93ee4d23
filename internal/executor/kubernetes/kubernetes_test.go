package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/executortest"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

func TestConformance(t *testing.T) {
	var mu sync.Mutex // the subtests run in parallel
	kubelets := map[executor.Executor]*fakeKubelet{}
	executortest.Run(t, func(t *testing.T) executor.Executor {
		k := newFakeKubelet(t)
		e := k.newExecutor(t, Options{})
		mu.Lock()
		kubelets[e] = k
		mu.Unlock()
		return e
	}, executortest.Options{
		Finish: func(e executor.Executor, id core.WorkloadID, attempt, code int) {
			mu.Lock()
			k := kubelets[e]
			mu.Unlock()
			k.finish(t, id, attempt, code)
		},
		LateStartErrors: true,
		Confined: func(e executor.Executor, tk executor.Task) error {
			mu.Lock()
			k := kubelets[e]
			mu.Unlock()
			return confined(k, tk)
		},
	})
}

// confined checks that every pod of a task is set up to confine untrusted
// code: in its team's namespace, with no service account token, no host
// namespace or host path, no privilege escalation and no capabilities.
func confined(k *fakeKubelet, tk executor.Task) error {
	pods, err := k.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{
		LabelSelector: LabelWorkload + "=" + dnsLabel(string(tk.WorkloadID)),
	})
	if err != nil || len(pods.Items) == 0 {
		return fmt.Errorf("pods of %s: %v (%d found)", tk.WorkloadID, err, len(pods.Items))
	}
	var errs []error
	for _, p := range pods.Items {
		if want := "gpufleet-" + string(tk.Team); p.Namespace != want {
			errs = append(errs, fmt.Errorf("pod %s in namespace %s, want %s", p.Name, p.Namespace, want))
		}
		sp := p.Spec
		if sp.AutomountServiceAccountToken == nil || *sp.AutomountServiceAccountToken {
			errs = append(errs, fmt.Errorf("pod %s mounts a service account token", p.Name))
		}
		if sp.HostNetwork || sp.HostPID || sp.HostIPC {
			errs = append(errs, fmt.Errorf("pod %s shares a host namespace", p.Name))
		}
		for _, v := range sp.Volumes {
			if v.HostPath != nil {
				errs = append(errs, fmt.Errorf("pod %s mounts host path %s", p.Name, v.HostPath.Path))
			}
		}
		for _, c := range sp.Containers {
			sc := c.SecurityContext
			switch {
			case sc == nil:
				errs = append(errs, fmt.Errorf("container %s/%s has no security context", p.Name, c.Name))
			case sc.Privileged != nil && *sc.Privileged:
				errs = append(errs, fmt.Errorf("container %s/%s is privileged", p.Name, c.Name))
			case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
				errs = append(errs, fmt.Errorf("container %s/%s allows privilege escalation", p.Name, c.Name))
			case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
				errs = append(errs, fmt.Errorf("container %s/%s keeps capabilities", p.Name, c.Name))
			case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
				errs = append(errs, fmt.Errorf("container %s/%s has no RuntimeDefault seccomp profile", p.Name, c.Name))
			}
		}
	}
	return errors.Join(errs...)
}

func gpuTask(id core.WorkloadID, node string, gpus int) executor.Task {
	tk := executor.Task{WorkloadID: id, Attempt: 1, Team: "research", Priority: "training",
		Command: []string{"python", "train.py"}, GracePeriod: 30 * time.Second,
		Request: core.Request{MilliGPU: int64(gpus) * 1000}}
	for i := range gpus {
		tk.Assignments = append(tk.Assignments, core.Assignment{Node: core.NodeName(node), GPUIndex: i, GPUUUID: node + "/gpu" + itoa(i), MilliGPU: 1000})
	}
	return tk
}

func TestStartCreatesNamespaceAndPodOnTheChosenNode(t *testing.T) {
	k := newFakeKubelet(t)
	e := k.newExecutor(t, Options{})
	if err := e.Start(t.Context(), gpuTask("wl-a", "gpu-7", 2)); err != nil {
		t.Fatal(err)
	}
	ns, err := k.client.CoreV1().Namespaces().Get(t.Context(), "gpufleet-research", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("namespace: %v", err)
	}
	if ns.Labels[LabelManaged] != "true" {
		t.Errorf("namespace labels: %v", ns.Labels)
	}
	p, err := k.client.CoreV1().Pods("gpufleet-research").Get(t.Context(), "wl-a-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod: %v", err)
	}
	if p.Spec.NodeName != "gpu-7" {
		t.Errorf("nodeName: got %q, want gpu-7", p.Spec.NodeName)
	}
	// A second workload of the team reuses the namespace.
	if err := e.Start(t.Context(), gpuTask("wl-b", "gpu-7", 1)); err != nil {
		t.Fatal(err)
	}
}

func TestOutcomesFromPodStates(t *testing.T) {
	k := newFakeKubelet(t)
	e := k.newExecutor(t, Options{})
	tests := []struct {
		id     core.WorkloadID
		change func(*corev1.Pod)
		want   string
	}{
		{"wl-oom", func(p *corev1.Pod) { setTerminated(p, 137, "OOMKilled") }, "reason=OOMKilled signal=SIGKILL"},
		{"wl-evicted", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		}, "reason=Evicted"},
		{"wl-pull", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "nope"`}}}}
		}, "reason=ImagePullBackOff"},
		{"wl-code", func(p *corev1.Pod) { setTerminated(p, 2, "Error") }, "code=2"},
	}
	for _, tt := range tests {
		if err := e.Start(t.Context(), gpuTask(tt.id, "n1", 1)); err != nil {
			t.Fatal(err)
		}
		k.update(t, tt.id, 1, tt.change)
		x := exitOf(t, e)
		if x.WorkloadID != tt.id || describe(x) != tt.want {
			t.Errorf("%s: got %s %q, want %q", tt.id, x.WorkloadID, describe(x), tt.want)
		}
	}
	// The stuck pod is deleted once its end is reported.
	waitGone(t, k, "gpufleet-research", "wl-pull-1")
	noExit(t, e, 200*time.Millisecond)
}

func describe(x executor.Exit) string {
	var parts []string
	if x.ExitCode != nil {
		parts = append(parts, "code="+itoa(*x.ExitCode))
	}
	if x.Reason != "" {
		parts = append(parts, "reason="+x.Reason)
	}
	if x.Signal != "" {
		parts = append(parts, "signal="+x.Signal)
	}
	return strings.Join(parts, " ")
}

func waitGone(t *testing.T, k *fakeKubelet, ns, name string) {
	t.Helper()
	testwait.Until(t, 5*time.Second, fmt.Sprintf("pod %s/%s to go", ns, name), func() (bool, string) {
		_, err := k.client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("still there: %v", err)
	})
}

func TestPodDeletedOutsideIsLost(t *testing.T) {
	k := newFakeKubelet(t)
	e := k.newExecutor(t, Options{})
	if err := e.Start(t.Context(), gpuTask("wl-x", "n1", 1)); err != nil {
		t.Fatal(err)
	}
	// Someone deletes the pod object outright (kubectl delete --force).
	if err := k.client.Tracker().Delete(podsGVR, "gpufleet-research", "wl-x-1"); err != nil {
		t.Fatal(err)
	}
	if x := exitOf(t, e); x.Reason != ReasonLost {
		t.Errorf("exit: got %+v, want reason Lost", x)
	}
}

func gpuNode(name string, gpus int, ready, cordoned bool) *corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", LabelGPUMemory: "81559", LabelGPUCount: itoa(gpus),
			"pool": "train", "region": "eu-west",
		}},
		Spec: corev1.NodeSpec{Unschedulable: cordoned},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI),
				corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
		},
	}
}

func TestNodeNotReadyMakesItsAttemptsLost(t *testing.T) {
	node := gpuNode("n1", 8, true, false)
	k := newFakeKubelet(t, node)
	e := k.newExecutor(t, Options{})
	if err := e.Start(t.Context(), gpuTask("wl-n", "n1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context(), gpuTask("wl-elsewhere", "n2", 1)); err != nil {
		t.Fatal(err)
	}
	down := node.DeepCopy()
	down.Status.Conditions[0].Status = corev1.ConditionUnknown
	if _, err := k.client.CoreV1().Nodes().UpdateStatus(t.Context(), down, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	x := exitOf(t, e)
	if x.WorkloadID != "wl-n" || x.Reason != ReasonLost {
		t.Errorf("exit: got %+v, want wl-n Lost", x)
	}
	waitGone(t, k, "gpufleet-research", "wl-n-1")
	noExit(t, e, 200*time.Millisecond)
}

func TestAdoptAfterRestartAndOrphans(t *testing.T) {
	k := newFakeKubelet(t)
	ctx, stop := context.WithCancel(t.Context())
	first, err := New(ctx, Options{Client: k.client})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []core.WorkloadID{"wl-keep", "wl-done", "wl-orphan"} {
		if err := first.Start(t.Context(), gpuTask(id, "n1", 1)); err != nil {
			t.Fatal(err)
		}
	}
	stop() // the control plane goes away; its pods stay
	k.finish(t, "wl-done", 1, 0)

	e := k.newExecutor(t, Options{})
	for _, tc := range []struct {
		id   core.WorkloadID
		want bool
	}{{"wl-keep", true}, {"wl-done", true}, {"wl-never", false}} {
		ok, err := e.Adopt(t.Context(), gpuTask(tc.id, "n1", 1))
		if err != nil || ok != tc.want {
			t.Errorf("Adopt(%s): got (%v, %v), want %v", tc.id, ok, err, tc.want)
		}
	}
	// The one that ended while nobody watched is reported at once.
	if x := exitOf(t, e); x.WorkloadID != "wl-done" || x.ExitCode == nil || *x.ExitCode != 0 {
		t.Errorf("exit: got %+v, want wl-done code 0", x)
	}
	// A pod of another gpufleet server (another namespace template) is
	// not this one's orphan.
	other := buildPod(defaults(), gpuTask("wl-other", "n1", 1), "fleet2-research", 0, nil, 1)
	if _, err := k.client.CoreV1().Pods(other.Namespace).Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	orphans, err := e.DeleteOrphans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) != 1 || orphans[0].Workload != "wl-orphan" || orphans[0].Team != "research" || orphans[0].Err != nil {
		t.Errorf("orphans: got %+v, want wl-orphan of research only", orphans)
	}
	if _, err := k.client.CoreV1().Pods(other.Namespace).Get(t.Context(), other.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("another server's pod: %v", err)
	}
	waitGone(t, k, "gpufleet-research", "wl-orphan-1")
	if _, err := k.client.CoreV1().Pods("gpufleet-research").Get(t.Context(), "wl-keep-1", metav1.GetOptions{}); err != nil {
		t.Errorf("adopted pod: %v", err)
	}
	// Adopting twice starts nothing twice; the adopted one ends once.
	if err := e.Start(t.Context(), gpuTask("wl-keep", "n1", 1)); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Start of an adopted attempt: got %v, want ErrExist", err)
	}
	k.finish(t, "wl-keep", 1, 3)
	if x := exitOf(t, e); x.WorkloadID != "wl-keep" || x.ExitCode == nil || *x.ExitCode != 3 {
		t.Errorf("exit: got %+v, want wl-keep code 3", x)
	}
	noExit(t, e, 200*time.Millisecond)
}

func TestGangEndsWithItsFirstFailure(t *testing.T) {
	k := newFakeKubelet(t)
	e := k.newExecutor(t, Options{})
	tk := gpuTask("wl-gang", "n1", 0)
	tk.Request = core.Request{MilliGPU: 1000, Replicas: 2}
	tk.Assignments = []core.Assignment{
		{Replica: 0, Node: "n1", GPUIndex: 0, GPUUUID: "n1/gpu0", MilliGPU: 1000},
		{Replica: 1, Node: "n2", GPUIndex: 3, GPUUUID: "n2/gpu3", MilliGPU: 1000},
	}
	if err := e.Start(t.Context(), tk); err != nil {
		t.Fatal(err)
	}
	p, err := k.client.CoreV1().Pods("gpufleet-research").Get(t.Context(), "wl-gang-1-r1", metav1.GetOptions{})
	if err != nil || p.Spec.NodeName != "n2" {
		t.Fatalf("replica 1: %v on %q, want node n2", err, p.Spec.NodeName)
	}
	p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
	if _, err := k.client.CoreV1().Pods(p.Namespace).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if x := exitOf(t, e); x.Reason != "Evicted" {
		t.Errorf("exit: got %+v, want Evicted", x)
	}
	waitGone(t, k, "gpufleet-research", "wl-gang-1-r0")
	noExit(t, e, 200*time.Millisecond)
}

func TestLogs(t *testing.T) {
	k := newFakeKubelet(t)
	e := k.newExecutor(t, Options{})
	if err := e.Start(t.Context(), gpuTask("wl-log", "n1", 1)); err != nil {
		t.Fatal(err)
	}
	var r io.ReadCloser
	testwait.Until(t, 5*time.Second, "the informer to see the pod", func() (bool, string) {
		var err error
		r, err = e.Logs("wl-log")
		return err == nil, fmt.Sprint(err)
	})
	b, _ := io.ReadAll(r)
	r.Close()
	// The fake clientset answers every log request with "fake logs".
	if !strings.Contains(string(b), "pod gpufleet-research/wl-log-1") || !strings.Contains(string(b), "fake logs") {
		t.Errorf("logs: got %q", b)
	}
}

func TestNodeDiscoveryAndWatch(t *testing.T) {
	k := newFakeKubelet(t, gpuNode("b", 8, true, false), gpuNode("a", 4, true, true), gpuNode("c", 2, false, false),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-only"}})
	keys := NodeLabels{Pool: "pool", Region: "region"}
	nodes, err := DiscoverNodes(t.Context(), k.client, keys)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		got = append(got, string(n.Name)+":"+itoa(len(n.GPUs))+":"+map[bool]string{true: "ok", false: "no"}[n.Schedulable])
	}
	if want := "a:4:no b:8:ok c:2:no"; strings.Join(got, " ") != want {
		t.Errorf("nodes: got %q, want %q", strings.Join(got, " "), want)
	}
	b := nodes[1]
	if b.GPUs[0].Model != "NVIDIA-H100-80GB-HBM3" || b.GPUs[0].MemoryMiB != 81559 || b.Pool != "train" || b.Region != "eu-west" ||
		b.MilliCPU != 64000 || b.MemoryMiB != 512<<10 || b.GPUs[7].UUID != "b/gpu7" {
		t.Errorf("node b: %+v", b)
	}

	seen := make(chan []core.Node, 16)
	e := k.newExecutor(t, Options{PoolLabel: "pool", RegionLabel: "region", OnNodes: func(ns []core.Node) { seen <- ns }})
	if len(e.Nodes()) != 3 {
		t.Errorf("Nodes: got %d, want 3", len(e.Nodes()))
	}
	if _, err := k.client.CoreV1().Nodes().Create(t.Context(), gpuNode("d", 8, true, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := k.client.CoreV1().Nodes().Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ns := <-seen:
			var names []string
			for _, n := range ns {
				names = append(names, string(n.Name))
			}
			if strings.Join(names, ",") == "b,c,d" {
				return
			}
		case <-deadline:
			t.Fatal("OnNodes never reported b,c,d")
		}
	}
}

func TestOwnsNamespace(t *testing.T) {
	for _, tc := range []struct {
		template, ns string
		want         bool
	}{
		{"gpufleet-{team}", "gpufleet-research", true},
		{"gpufleet-{team}", "gpufleet-", false},
		{"gpufleet-{team}", "fleet2-research", false},
		{"GF-{team}-jobs", "gf-research-jobs", true},
		{"GF-{team}-jobs", "gf-research", false},
		{"{team}", "anything", true},
	} {
		if got := ownsNamespace(tc.template, tc.ns); got != tc.want {
			t.Errorf("ownsNamespace(%q, %q) = %v, want %v", tc.template, tc.ns, got, tc.want)
		}
	}
}

func TestNodeSelector(t *testing.T) {
	k := newFakeKubelet(t)
	if _, err := New(t.Context(), Options{Client: k.client, NodeSelector: "a=b=c"}); err == nil || !strings.Contains(err.Error(), "kubernetes.nodeSelector") {
		t.Errorf("bad selector: got %v, want an error naming kubernetes.nodeSelector", err)
	}
}

func TestTaintsThatKeepPodsOff(t *testing.T) {
	// A Ready, uncordoned node is schedulable unless a taint keeps
	// gpufleet's pods off it: the node lifecycle's and cloud provider's,
	// or a NoExecute taint they do not tolerate (they would be evicted).
	// The taints a pod made by gpufleet tolerates do not.
	for _, tt := range []struct {
		taints      []corev1.Taint
		schedulable bool
	}{
		{nil, true},
		{[]corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}, false},
		{[]corev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}}, false},
		{[]corev1.Taint{{Key: "node.kubernetes.io/disk-pressure", Effect: corev1.TaintEffectNoSchedule}}, false},
		{[]corev1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}}, false},
		{[]corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}}, false},
		// What gpufleet's pods tolerate (nvidia.com/gpu, any effect), a
		// taint that dedicates GPU nodes, and one that only prefers:
		// none keeps them off.
		{[]corev1.Taint{{Key: string(ResourceGPU), Effect: corev1.TaintEffectNoExecute}}, true},
		{[]corev1.Taint{{Key: string(ResourceGPU), Value: "present", Effect: corev1.TaintEffectNoSchedule}}, true},
		{[]corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}, true},
		{[]corev1.Taint{{Key: "node.kubernetes.io/memory-pressure", Effect: corev1.TaintEffectPreferNoSchedule}}, true},
	} {
		n := gpuNode("n1", 8, true, false)
		n.Spec.Taints = tt.taints
		got, ok := GPUNode(n, NodeLabels{})
		if !ok {
			t.Fatal("not a GPU node")
		}
		if got.Schedulable != tt.schedulable || got.NotReady {
			t.Errorf("taints %v: schedulable %t, not ready %t; want schedulable %t, ready", tt.taints, got.Schedulable, got.NotReady, tt.schedulable)
		}
		if tolerated := podTolerates(t, n.Spec.Taints); tt.schedulable && !tolerated {
			t.Errorf("taints %v: a schedulable node whose NoExecute taints gpufleet's pod does not tolerate", tt.taints)
		}
	}
}

// podTolerates reports whether the pod gpufleet makes for a workload
// (buildPod) tolerates every NoExecute taint of taints
// (Toleration.ToleratesTaint, as the taint manager judges).
func podTolerates(t *testing.T, taints []corev1.Taint) bool {
	t.Helper()
	p := buildPod(defaults(), gpuTask("wl-t", "n1", 1), "gpufleet-research", 0, nil, 1)
	for i := range taints {
		if taints[i].Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), &taints[i], false) }) {
			return false
		}
	}
	return true
}
