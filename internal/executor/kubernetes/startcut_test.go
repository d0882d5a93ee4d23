package kubernetes

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// TestStartUnreachableFenced: a leader (fencing token 5) starts while its
// cluster fails every check, with pods of an earlier term (token 3) in
// it: those of the attempts the server adopts meanwhile (one running,
// one asked to stop), and one of no attempt. New returns; the known node
// is reported NotReady; nothing is deleted. When the cluster answers, the
// running attempt's pod is adopted, though its token is older (it is not
// taken for a deposed leader's late start), the stopped attempt's pod is
// deleted and its end reported, the expected attempt with no pod is Lost,
// and only the pod of no attempt goes to OnOrphans.
func TestStartUnreachableFenced(t *testing.T) {
	node := gpuNode("n1", 8, true, false)
	o := &Options{NamespaceTemplate: DefaultNamespaceTemplate, DefaultImage: DefaultImage}
	pod := func(id core.WorkloadID) *corev1.Pod {
		tk := gpuTask(id, "n1", 1)
		p := buildPod(o, tk, "gpufleet-research", 0, replicaAssignments(tk)[0], 1)
		p.Labels[LabelFence] = "3"
		p.UID = types.UID(id) // as the API server gives every pod one
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
		return p
	}
	keep, stop, orphan := pod("wl-keep"), pod("wl-stop"), pod("wl-orphan")
	k := newFakeKubelet(t, node, keep, stop, orphan)
	down := k.cut("dial tcp 127.0.0.1:6443: i/o timeout")
	down.Store(true)
	known, _ := GPUNode(node, NodeLabels{})
	var reports nodeReports
	var omu sync.Mutex
	var orphans []Orphan
	ctx := t.Context()
	e, err := New(ctx, Options{Client: k.client, StartUnreachable: true, KnownNodes: []core.Node{known}, Fence: func() int64 { return 5 },
		ReachEvery: 20 * time.Millisecond, OnNodes: reports.put,
		OnOrphans: func(o []Orphan) { omu.Lock(); orphans = append(orphans, o...); omu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if e.Reachable() {
		t.Error("Reachable before the cluster answered")
	}
	if ok, why := reports.all([]string{"n1"}, true); !ok {
		t.Errorf("OnNodes before the cluster answered: %s", why)
	}
	if r := e.Nodes(); len(r) != 1 || !r[0].NotReady || r[0].Schedulable {
		t.Errorf("Nodes before the cluster answered: %+v, want n1 NotReady", r)
	}
	for _, id := range []core.WorkloadID{"wl-keep", "wl-stop", "wl-nopod"} {
		if ok, err := e.Adopt(ctx, gpuTask(id, "n1", 1)); !ok || err != nil {
			t.Fatalf("Adopt %s: %v %v, want it remembered", id, ok, err)
		}
	}
	if o, err := e.DeleteOrphans(ctx); len(o) != 0 || err != nil {
		t.Errorf("DeleteOrphans before the cluster answered: %+v %v", o, err)
	}
	if err := e.Stop(ctx, "wl-stop", 1, 0); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Stop before the cluster answered: %v, want ErrUnreachable", err)
	}
	if err := e.Start(ctx, gpuTask("wl-new", "n1", 1)); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Start before the cluster answered: %v, want ErrUnreachable", err)
	}
	// Its pods are not known yet: the logs say why, not that there are none.
	if rc, err := e.Logs("wl-keep"); !errors.Is(err, ErrUnreachable) {
		if rc != nil {
			rc.Close()
		}
		t.Errorf("Logs before the cluster answered: %v, want ErrUnreachable", err)
	}
	noExit(t, e, 100*time.Millisecond)

	down.Store(false)
	exits := map[core.WorkloadID]executor.Exit{}
	eventually(t, 10*time.Second, "the ends of wl-stop and wl-nopod", func() (bool, string) {
		select {
		case x := <-e.Exits():
			exits[x.WorkloadID] = x
		default:
		}
		_, a := exits["wl-stop"]
		_, b := exits["wl-nopod"]
		return a && b, fmt.Sprintf("exits %+v, reachable %v", exits, e.Reachable())
	})
	if x := exits["wl-nopod"]; x.Reason != ReasonLost {
		t.Errorf("wl-nopod's end: %+v, want Lost", x)
	}
	if x := exits["wl-stop"]; x.Reason == ReasonLost {
		t.Errorf("wl-stop's end: %+v, want a stop", x)
	}
	eventually(t, 5*time.Second, "OnOrphans", func() (bool, string) {
		omu.Lock()
		defer omu.Unlock()
		return len(orphans) > 0, "none yet"
	})
	omu.Lock()
	if len(orphans) != 1 || orphans[0].Name != orphan.Name {
		t.Errorf("orphans %+v, want only %s", orphans, orphan.Name)
	}
	omu.Unlock()
	if ok, why := reports.all([]string{"n1"}, false); !ok {
		t.Errorf("OnNodes after the cluster answered: %s", why)
	}
	noExit(t, e, 100*time.Millisecond)
	if p, err := k.client.CoreV1().Pods("gpufleet-research").Get(ctx, keep.Name, metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("wl-keep's pod: %v %+v, want it Running", err, p)
	}
	if _, err := k.client.CoreV1().Pods("gpufleet-research").Get(ctx, orphan.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the orphan: %v, want it deleted", err)
	}
	// Adopted: Stop finds its pod.
	if err := e.Stop(ctx, "wl-keep", 1, 0); err != nil {
		t.Fatal(err)
	}
	if x := exitOf(t, e); x.WorkloadID != "wl-keep" || x.Reason == ReasonLost {
		t.Errorf("wl-keep's end after Stop: %+v", x)
	}
}

// TestOrphanReportedOnce: an orphan pod deleted and seen gone by the
// informer is not deleted and reported again by a clean-up whose list of
// pods was read before it went (the cluster's return lists the pods from
// the API server while the informer deletes a deposed leader's late start:
// both found it, and it was audited twice, 2 runs in 40 under load).
func TestOrphanReportedOnce(t *testing.T) {
	o := &Options{NamespaceTemplate: DefaultNamespaceTemplate, DefaultImage: DefaultImage}
	tk := gpuTask("wl-orphan", "n1", 1)
	orphan := buildPod(o, tk, "gpufleet-research", 0, replicaAssignments(tk)[0], 1)
	orphan.Labels[LabelFence] = "3"
	orphan.UID = "first"
	orphan.Status.Phase = corev1.PodRunning
	k := newFakeKubelet(t, gpuNode("n1", 8, true, false), orphan)
	e := k.newExecutor(t, Options{Fence: func() int64 { return 5 }})
	// The list a clean-up read, before the deletion.
	list, err := k.client.CoreV1().Pods(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{LabelSelector: LabelManaged + "=true"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("pods: %v %d, want the orphan", err, len(list.Items))
	}
	stale := []*corev1.Pod{&list.Items[0]}
	if got, err := e.DeleteOrphans(t.Context()); err != nil || len(got) != 1 {
		t.Fatalf("DeleteOrphans: %+v %v, want the orphan", got, err)
	}
	eventually(t, 5*time.Second, "the informer sees the orphan go", func() (bool, string) {
		pods, _ := e.pods.List(labelsManaged())
		return len(pods) == 0, fmt.Sprintf("%d pods in the cache", len(pods))
	})
	if again, err := e.deleteOrphans(t.Context(), stale); len(again) != 0 || err != nil {
		t.Errorf("the clean-up with the list read before: %+v %v, want nothing (deleted and reported once)", again, err)
	}
	// A new pod of the same name is another orphan (of this term's
	// token: the informer leaves it to the clean-up).
	late := orphan.DeepCopy()
	late.UID, late.ResourceVersion, late.Labels[LabelFence] = "late", "", "5"
	if _, err := k.client.CoreV1().Pods(late.Namespace).Create(t.Context(), late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.deleteOrphans(t.Context(), []*corev1.Pod{late}); len(got) != 1 || err != nil {
		t.Errorf("a new pod of the same name: %+v %v, want it an orphan", got, err)
	}
}
