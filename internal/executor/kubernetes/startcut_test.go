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
