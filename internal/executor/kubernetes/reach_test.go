package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// nodeReports records what OnNodes hears.
type nodeReports struct {
	mu   sync.Mutex
	last []core.Node
	n    int
	hist [][]core.Node
}

func (r *nodeReports) put(nodes []core.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.n = slices.Clone(nodes), r.n+1
	r.hist = append(r.hist, r.last)
}

// since returns the reports from the i-th on.
func (r *nodeReports) since(i int) [][]core.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hist[min(i, len(r.hist)):])
}

func (r *nodeReports) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// all reports whether the last report holds every one of names with
// NotReady equal to notReady (and schedulable only when ready).
func (r *nodeReports) all(names []string, notReady bool) (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range names {
		i := slices.IndexFunc(r.last, func(n core.Node) bool { return string(n.Name) == name })
		if i < 0 {
			return false, "node " + name + " not reported"
		}
		if n := r.last[i]; n.NotReady != notReady || (notReady && n.Schedulable) {
			return false, "node " + name + " reported NotReady=" + boolStr(n.NotReady) + " Schedulable=" + boolStr(n.Schedulable)
		}
	}
	return true, ""
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	testwait.Until(t, d, what, cond)
	return time.Since(start)
}

// TestReachUnreachableAndBack: with the API server failing its checks, the
// cluster turns unreachable after UnreachableAfter (not before), every node
// is reported NotReady (even when the informer then hears the node is
// Ready), the executor reports no attempt Lost of its own (the node
// lifecycle decides, after its grace period), and Start and Stop fail at
// once with ErrUnreachable. When it answers again the nodes are reported
// Ready, the attempt stopped meanwhile has its pod deleted, and a pod no
// attempt owns is deleted and handed to OnOrphans.
func TestReachUnreachableAndBack(t *testing.T) {
	node := gpuNode("n1", 8, true, false)
	k := newFakeKubelet(t, node)
	down := k.cut("dial tcp 127.0.0.1:6443: connect: connection refused")
	var reports nodeReports
	var omu sync.Mutex
	var orphans []Orphan
	const every, after = 20 * time.Millisecond, 300 * time.Millisecond
	e := k.newExecutor(t, Options{ReachEvery: every, UnreachableAfter: after, OnNodes: reports.put,
		OnOrphans: func(o []Orphan) { omu.Lock(); orphans = append(orphans, o...); omu.Unlock() }})
	if _, err := e.DeleteOrphans(t.Context()); err != nil { // the server's start: adoption is over
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := e.Start(ctx, gpuTask("wl-run", "n1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, gpuTask("wl-stop", "n1", 1)); err != nil {
		t.Fatal(err)
	}
	if !e.Reachable() {
		t.Fatal("Reachable false before any failure")
	}

	down.Store(true)
	took := eventually(t, after+5*time.Second, "nodes NotReady", func() (bool, string) {
		ok, why := reports.all([]string{"n1"}, true)
		return ok, fmt.Sprintf("%s (reachable %v, %d reports, last error %v)", why, e.Reachable(), reports.count(), e.unreachableErr())
	})
	// The rule counts from the last answer, which a check starved by the
	// machine's load may have given well before the cut.
	e.mu.Lock()
	silent := time.Since(e.lastAnswer)
	e.mu.Unlock()
	if silent+50*time.Millisecond < after {
		t.Errorf("nodes NotReady %v after the last answer (%v after the cut), before UnreachableAfter %v", silent, took, after)
	}
	if e.Reachable() {
		t.Error("Reachable true while the checks fail")
	}
	if ns := e.Nodes(); len(ns) != 1 || !ns[0].NotReady || ns[0].Schedulable {
		t.Errorf("Nodes while unreachable: %+v", ns)
	}
	// The informer still says Ready (here it even hears an update): the
	// node stays NotReady.
	before := reports.count()
	up := node.DeepCopy()
	up.Labels["touched"] = "1"
	if _, err := k.client.CoreV1().Nodes().Update(ctx, up, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the update reported", func() (bool, string) {
		reports.mu.Lock()
		defer reports.mu.Unlock()
		return reports.n > before, "no report"
	})
	if ok, why := reports.all([]string{"n1"}, true); !ok {
		t.Errorf("after an informer update while unreachable: %s", why)
	}
	// Fail fast, and clearly.
	t0 := time.Now()
	err := e.Start(ctx, gpuTask("wl-new", "n1", 1))
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("Start while unreachable: %v, want ErrUnreachable", err)
	}
	err = e.Stop(ctx, "wl-stop", 1, time.Second)
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("Stop while unreachable: %v, want ErrUnreachable", err)
	}
	if _, err := e.Logs("wl-run"); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Logs while unreachable: %v, want ErrUnreachable", err)
	} else if msg := err.Error(); strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "dial tcp") {
		t.Errorf("Logs while unreachable: %q names the platform's addresses to a tenant", msg)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Start, Stop and Logs took %v while unreachable", d)
	}
	noExit(t, e, 100*time.Millisecond)
	// A leftover: a pod that no attempt here owns (its attempt was
	// requeued elsewhere meanwhile).
	gone := gpuTask("wl-gone", "n1", 1)
	leftover := buildPod(&e.opts, gone, "gpufleet-research", 0, replicaAssignments(gone)[0], 1)
	if _, err := k.client.CoreV1().Pods("gpufleet-research").Create(ctx, leftover, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("unreachable %v after the cut", took)

	down.Store(false)
	eventually(t, 2*time.Second, "nodes Ready again", func() (bool, string) { return reports.all([]string{"n1"}, false) })
	if !e.Reachable() {
		t.Error("Reachable false after the cluster answered")
	}
	x := exitOf(t, e)
	if x.WorkloadID != "wl-stop" {
		t.Errorf("exit %+v, want wl-stop's (stopped while unreachable)", x)
	}
	eventually(t, 2*time.Second, "the leftover pod handed to OnOrphans", func() (bool, string) {
		omu.Lock()
		defer omu.Unlock()
		return len(orphans) == 1 && orphans[0].Name == leftover.Name && orphans[0].Err == nil, "orphans: " + describeOrphans(orphans)
	})
	deleted := map[string]bool{}
	for _, a := range k.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			deleted[d.GetName()] = true
		}
	}
	if !deleted[leftover.Name] || !deleted[PodName("wl-stop", 1, 0, 1)] || deleted[PodName("wl-run", 1, 0, 1)] {
		t.Errorf("pods deleted: %v; want the leftover and wl-stop's, not wl-run's", deleted)
	}
	if p, err := k.client.CoreV1().Pods("gpufleet-research").Get(ctx, PodName("wl-run", 1, 0, 1), metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("wl-run's pod: %v, %v; want it running still", p.Status.Phase, err)
	}
}

func describeOrphans(os []Orphan) string {
	var s string
	for _, o := range os {
		s += o.Namespace + "/" + o.Name + " "
	}
	return s
}

// TestReachNoCleanUpBeforeAdoption: a return before the server's own
// DeleteOrphans (its adoption is not over) deletes no pod.
func TestReachNoCleanUpBeforeAdoption(t *testing.T) {
	k := newFakeKubelet(t, gpuNode("n1", 8, true, false))
	down := k.cut("connection refused")
	var reports nodeReports
	e := k.newExecutor(t, Options{ReachEvery: 10 * time.Millisecond, UnreachableAfter: 50 * time.Millisecond, OnNodes: reports.put})
	tk := gpuTask("wl-prev", "n1", 1)
	p := buildPod(&e.opts, tk, "gpufleet-research", 0, replicaAssignments(tk)[0], 1)
	if _, err := k.client.CoreV1().Pods("gpufleet-research").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	eventually(t, 2*time.Second, "nodes NotReady", func() (bool, string) { return reports.all([]string{"n1"}, true) })
	down.Store(false)
	eventually(t, 2*time.Second, "nodes Ready", func() (bool, string) { return reports.all([]string{"n1"}, false) })
	// No event marks a deletion that does not happen: ten reach checks'
	// time is the window.
	time.Sleep(100 * time.Millisecond)
	for _, a := range k.client.Actions() {
		if a.GetVerb() == "delete" && a.GetResource().Resource == "pods" {
			t.Errorf("a pod deleted before adoption was over: %v", a)
		}
	}
}

func TestReachOptions(t *testing.T) {
	for _, o := range []Options{{ReachEvery: -1}, {UnreachableAfter: -time.Second}, {RequestTimeout: -1}} {
		o.Client = newFakeKubelet(t).client
		_, err := New(t.Context(), o)
		if err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
	o := Options{}
	if err := reachDefaults(&o); err != nil || o.ReachEvery != DefaultReachEvery || o.UnreachableAfter != DefaultUnreachableAfter || o.RequestTimeout != DefaultRequestTimeout {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}

// TestStartWithoutListRightsFailsAtOnce: a service account that may not
// list pods (or nodes) fails New at once, naming what it lacks, rather
// than waiting for ever for the informers' first list.
func TestStartWithoutListRightsFailsAtOnce(t *testing.T) {
	for _, resource := range []string{"pods", "nodes"} {
		t.Run(resource, func(t *testing.T) {
			k := newFakeKubelet(t, gpuNode("n1", 8, true, false))
			k.client.PrependReactor("list", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("system:serviceaccount:gpufleet:gpufleet cannot list "+resource))
			})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, err := New(ctx, Options{Client: k.client})
			if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "list "+resource) || ctx.Err() != nil {
				t.Errorf("New without the right to list %s: %v (ctx %v); want a Forbidden error naming it, at once", resource, err, ctx.Err())
			}
		})
	}
}
