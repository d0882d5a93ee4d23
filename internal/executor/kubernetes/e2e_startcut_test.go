package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// cutClient is a client of the test's API server through a cutProxy, and
// the proxy.
func (x *e2e) cutClient(t *testing.T) (clientset.Interface, *cutProxy) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", x.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	cfg.Host = "https://" + proxy.addr()
	cfg.QPS, cfg.Burst = 100, 200
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client, proxy
}

// makePod creates the pod of replica 0 of an attempt of one GPU on node
// through the test's own client (not the proxy), in ns (made if missing),
// as a server before this one would have, and waits until it runs.
func (x *e2e) makePod(t *testing.T, o *Options, ns string, tk executor.Task) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	_, err := x.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{LabelManaged: "true"}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := buildPod(o, tk, ns, 0, replicaAssignments(tk)[0], 1)
	if _, err := x.client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	x.waitFor(30*time.Second, "pod "+p.Name+" Running", func() (bool, string) {
		got, err := x.pod(ns, p.Name)
		if err != nil {
			return false, err.Error()
		}
		return got.Status.Phase == corev1.PodRunning, string(got.Status.Phase)
	})
	return p
}

// TestE2EStartCut starts the executor (Options.StartUnreachable) while
// the proxy to the real API server is cut from the start: New returns
// within a check, the executor is unreachable, OnNodes hears the known
// nodes NotReady, Start fails with ErrUnreachable (not naming the API
// server: the error reaches the tenant),
// Adopt remembers the expected attempts and DeleteOrphans deletes nothing.
// Once the proxy is restored, with no new executor, the nodes are
// reported Ready, the expected attempt's pod is adopted and keeps running
// (and is deleted by Stop, its end reported as a stop), the expected
// attempt with no pod is Lost, and a pod no attempt owns is deleted and
// handed to OnOrphans. Without StartUnreachable, New fails naming the API
// server.
func TestE2EStartCut(t *testing.T) {
	x := newE2E(t, 2, 4)
	client, proxy := x.cutClient(t)
	proxy.setCut(true)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	var known []core.Node
	for _, name := range x.nodes {
		n, err := x.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gn, ok := GPUNode(n, NodeLabels{})
		if !ok {
			t.Fatalf("node %s: not a GPU node", name)
		}
		known = append(known, gn)
	}
	const every, after = 250 * time.Millisecond, 3 * time.Second
	opts := Options{Client: client, NamespaceTemplate: x.nsPrefix() + "{team}", NodeSelector: DefaultPoolLabel + "=" + x.id,
		PriorityClasses: []core.PriorityClass{{Name: "training", Value: 100}},
		ReachEvery:      every, UnreachableAfter: after, RequestTimeout: 2 * time.Second}
	ns := x.namespace("startcut")
	keep := x.makePod(t, &opts, ns, failoverTaskIn("wl-keep", "startcut", known[0]))
	orphan := x.makePod(t, &opts, ns, failoverTaskIn("wl-orphan", "startcut", known[1]))

	// One cluster alone: New fails, naming the API server.
	t0 := time.Now()
	_, err := New(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), proxy.addr()) {
		t.Fatalf("New of a cut cluster without StartUnreachable: %v, want an error naming %s", err, proxy.addr())
	}
	t.Logf("New without StartUnreachable failed in %v: %v", time.Since(t0).Round(time.Millisecond), err)

	var reports nodeReports
	var omu sync.Mutex
	var orphans []Orphan
	opts.StartUnreachable, opts.KnownNodes, opts.OnNodes = true, known, reports.put
	opts.OnOrphans = func(o []Orphan) { omu.Lock(); orphans = append(orphans, o...); omu.Unlock() }
	t0 = time.Now()
	e, err := New(ctx, opts)
	if err != nil {
		t.Fatalf("New with StartUnreachable of a cut cluster: %v", err)
	}
	if d := time.Since(t0); d > every+2*time.Second {
		t.Errorf("New took %v while cut, want about one check (%v)", d, every)
	}
	t.Logf("New returned in %v while cut", time.Since(t0).Round(time.Millisecond))
	if e.Reachable() {
		t.Error("Reachable at a start while cut")
	}
	if ok, why := reports.all(x.nodes, true); !ok {
		t.Errorf("OnNodes at a start while cut: %s, want the known nodes NotReady", why)
	}
	// The error reaches the tenant (the workload's status): it names not
	// the API server, which the server's log names.
	if err := e.Start(ctx, failoverTaskIn("wl-new", "startcut", known[0])); !errors.Is(err, ErrUnreachable) || strings.Contains(err.Error(), proxy.addr()) {
		t.Errorf("Start while cut: %v, want ErrUnreachable not naming %s", err, proxy.addr())
	} else {
		t.Logf("Start while cut: %v", err)
	}
	// The server's adoption: two attempts the store expects here, one of
	// which has no pod; then its orphan clean-up.
	for _, id := range []core.WorkloadID{"wl-keep", "wl-nopod"} {
		if ok, err := e.Adopt(ctx, failoverTaskIn(id, "startcut", known[0])); !ok || err != nil {
			t.Errorf("Adopt %s while cut: %v, %v; want it remembered (true)", id, ok, err)
		}
	}
	if o, err := e.DeleteOrphans(ctx); len(o) != 0 || err != nil {
		t.Errorf("DeleteOrphans while cut: %+v, %v; want nothing deleted", o, err)
	}
	var emu sync.Mutex
	exits := map[core.WorkloadID]executor.Exit{}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case x := <-e.Exits():
				emu.Lock()
				exits[x.WorkloadID] = x
				emu.Unlock()
			}
		}
	}()
	time.Sleep(4 * every) // a window of four checks in which no exit may be reported
	emu.Lock()
	if len(exits) > 0 {
		t.Errorf("exits while cut: %+v", exits)
	}
	emu.Unlock()
	for _, p := range []*corev1.Pod{keep, orphan} {
		if got, err := x.pod(ns, p.Name); err != nil || got.DeletionTimestamp != nil {
			t.Errorf("pod %s while cut: %v, deleting %v; want it left alone", p.Name, err, got.DeletionTimestamp)
		}
	}

	back := time.Now()
	proxy.setCut(false)
	x.waitFor(30*time.Second, "the nodes reported Ready", func() (bool, string) { return reports.all(x.nodes, false) })
	t.Logf("nodes Ready %v after the restore", time.Since(back).Round(time.Millisecond))
	if !e.Reachable() {
		t.Error("not Reachable once the nodes are reported Ready")
	}
	gone := func(name string) func() (bool, string) {
		return func() (bool, string) {
			p, err := x.pod(ns, name)
			if apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil) {
				return true, ""
			}
			return false, name + " still there"
		}
	}
	x.waitFor(30*time.Second, "the orphan pod deleted", gone(orphan.Name))
	t.Logf("orphan deleted %v after the restore", time.Since(back).Round(time.Millisecond))
	x.waitFor(10*time.Second, "OnOrphans heard the orphan", func() (bool, string) {
		omu.Lock()
		defer omu.Unlock()
		return len(orphans) > 0, fmt.Sprintf("OnOrphans heard %+v", orphans)
	})
	omu.Lock()
	if len(orphans) != 1 || orphans[0].Name != orphan.Name || orphans[0].Err != nil {
		t.Errorf("OnOrphans heard %+v, want only %s", orphans, orphan.Name)
	}
	omu.Unlock()
	x.waitFor(10*time.Second, "wl-nopod Lost", func() (bool, string) {
		emu.Lock()
		defer emu.Unlock()
		x, ok := exits["wl-nopod"]
		return ok && x.Reason == ReasonLost, fmt.Sprintf("exits %+v", exits)
	})
	// The expected attempt's pod is adopted: still running, its end not
	// reported, and Stop (which needs the executor to track it) deletes it.
	time.Sleep(4 * every) // four checks in which the adopted pod must stay
	if p, err := x.pod(ns, keep.Name); err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("the expected attempt's pod after the restore: %v %+v, want it Running", err, p)
	}
	emu.Lock()
	if x, ok := exits["wl-keep"]; ok {
		t.Errorf("wl-keep ended after the restore: %+v", x)
	}
	emu.Unlock()
	if err := e.Stop(ctx, "wl-keep", 1, 0); err != nil {
		t.Fatalf("Stop wl-keep: %v", err)
	}
	x.waitFor(30*time.Second, "wl-keep's pod deleted by Stop", gone(keep.Name))
	x.waitFor(30*time.Second, "wl-keep's end reported", func() (bool, string) {
		emu.Lock()
		defer emu.Unlock()
		_, ok := exits["wl-keep"]
		return ok, fmt.Sprintf("exits %+v", exits)
	})
	emu.Lock()
	if x := exits["wl-keep"]; x.Reason == ReasonLost {
		t.Errorf("wl-keep's exit %+v, want a stop, not Lost", x)
	}
	emu.Unlock()
	// And the executor now works as any: a new attempt starts.
	if err := e.Start(ctx, failoverTaskIn("wl-new", "startcut", known[1])); err != nil {
		t.Errorf("Start after the restore: %v", err)
	}
}

func failoverTaskIn(id core.WorkloadID, team core.TeamName, node core.Node) executor.Task {
	tk := failoverTask(id, node)
	tk.Team = team
	return tk
}

// proxyKubeconfig writes a copy of the test's kubeconfig whose clusters
// are reached through addr, and returns its path.
func (x *e2e) proxyKubeconfig(t *testing.T, addr string) string {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(x.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.Server = "https://" + addr
	}
	path := filepath.Join(x.data, "kubeconfig-proxy")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterOf is the cluster name's row of `gpufleet get clusters -o json`.
func (x *e2e) clusterOf(name string) api.Cluster {
	x.t.Helper()
	var cs api.List[api.Cluster]
	if err := json.Unmarshal(x.cli("get", "clusters", "-o", "json"), &cs); err != nil {
		x.t.Fatalf("get clusters -o json: %v", err)
	}
	for _, c := range cs.Items {
		if c.Name == name {
			return c
		}
	}
	x.t.Fatalf("get clusters: no cluster %s in %+v", name, cs.Items)
	return api.Cluster{}
}

// cutServer is the world of the TestE2EStartCutServer tests: a server of
// two clusters, this machine and the test's Kubernetes cluster reached
// through proxy, with workload id running as pod podName in ns, stopped;
// a pod no workload owns (leftover) left in the cluster; the proxy cut
// and the server started again.
type cutServer struct {
	x           *e2e
	proxy       *cutProxy
	id, podName string
	ns          string
	leftover    *corev1.Pod
	kubeNode    string
}

func newCutServer(t *testing.T) *cutServer {
	x := newE2E(t, 1, 4)
	c := &cutServer{x: x, kubeNode: x.nodes[0]}
	_, c.proxy = x.cutClient(t)
	kubeconfig := x.proxyKubeconfig(t, c.proxy.addr())
	sel := DefaultPoolLabel + "=" + x.id
	extra := map[string]any{
		"executor": "local",
		"kubernetes": map[string]any{
			"namespaceTemplate": x.nsPrefix() + "{team}",
			"nodeSelector":      sel,
			"defaultImage":      e2eImage,
		},
		"clusters": []map[string]any{
			{"name": "onprem", "executor": "local", "fakeGPUs": "1xH100-80GB"},
			{"name": "cloud", "executor": "kubernetes", "kubeconfig": kubeconfig},
		},
		"pools": []map[string]any{
			{"name": "onprem", "cluster": "onprem", "region": "eu-west", "kind": "owned"},
			{"name": "cloud", "cluster": "cloud", "region": "us-east", "kind": "owned", "nodeSelector": sel},
		},
	}
	x.srv = x.startIn(x.data, extra)
	if cl := x.clusterOf("cloud"); cl.Nodes != 1 || cl.ReadyNodes != 1 {
		t.Fatalf("cluster cloud before the cut: %+v, want its node ready", cl)
	}
	c.id = x.cliSubmit("--pool", "cloud", "--priority", "training", "--gpus", "1", "--", "sleep", "600")
	x.waitPhase(30*time.Second, api.PhaseRunning, c.id)
	c.ns = x.namespace("default")
	c.podName = PodName(coreID(c.id), 1, 0, 1)
	x.waitFor(30*time.Second, "pod "+c.podName+" Running", func() (bool, string) {
		p, err := x.pod(c.ns, c.podName)
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	x.srv.stop(t)

	o := Options{NamespaceTemplate: x.nsPrefix() + "{team}", DefaultImage: e2eImage}
	o.PoolLabel, o.RegionLabel = DefaultPoolLabel, DefaultRegionLabel
	node, err := x.client.CoreV1().Nodes().Get(t.Context(), c.kubeNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gn, _ := GPUNode(node, NodeLabels{})
	c.leftover = x.makePod(t, &o, c.ns, failoverTaskIn("wl-leftover", "default", gn))
	c.proxy.setCut(true)

	t0 := time.Now()
	x.srv = x.startIn(x.data, extra)
	t.Logf("server served %v after its start with the cluster cut", time.Since(t0).Round(time.Millisecond))
	return c
}

// gone reports whether the pod is deleted or being deleted.
func (c *cutServer) gone(name string) func() (bool, string) {
	return func() (bool, string) {
		p, err := c.x.pod(c.ns, name)
		if apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil) {
			return true, ""
		}
		return false, fmt.Sprintf("%s: err %v", name, err)
	}
}

// TestE2EStartCutServer: the real gpufleet binary with two clusters (see
// newCutServer), started while the Kubernetes one is cut. It serves, with
// that cluster's node NotReady (get clusters: no ready node), the
// workload still Running and no pod deleted; this machine takes work.
// Once the proxy is restored, with no restart, the node is Ready again,
// the workload's pod is adopted (still Running; cancel deletes it) and
// the leftover pod is deleted as an orphan.
func TestE2EStartCutServer(t *testing.T) {
	c := newCutServer(t)
	x := c.x
	if cl := x.clusterOf("cloud"); cl.Nodes != 1 || cl.ReadyNodes != 0 {
		t.Errorf("cluster cloud while cut: %+v, want its node not ready", cl)
	} else {
		t.Logf("get clusters while cut:\n%s", x.cli("get", "clusters"))
	}
	if cl := x.clusterOf("onprem"); cl.ReadyNodes != 1 {
		t.Errorf("cluster onprem while cloud is cut: %+v, want its node ready", cl)
	}
	if w := x.workloads()[c.id]; w.Status.Phase != api.PhaseRunning || w.Status.Attempts != 1 {
		t.Errorf("%s while cut: %s attempt %d (%s), want Running attempt 1", c.id, w.Status.Phase, w.Status.Attempts, w.Status.Message)
	}
	// Work that fits this machine still runs here.
	local := x.cliSubmit("--pool", "onprem", "--priority", "training", "--gpus", "1", "--", "sleep", "600")
	x.waitPhase(30*time.Second, api.PhaseRunning, local)
	for _, name := range []string{c.podName, c.leftover.Name} {
		if p, err := x.pod(c.ns, name); err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s while cut: %v, want it left alone", name, err)
		}
	}

	back := time.Now()
	c.proxy.setCut(false)
	x.waitFor(30*time.Second, "cluster cloud's node ready", func() (bool, string) {
		cl := x.clusterOf("cloud")
		return cl.ReadyNodes == 1, fmt.Sprintf("%+v", cl)
	})
	t.Logf("cluster cloud ready %v after the restore", time.Since(back).Round(time.Millisecond))
	x.waitFor(30*time.Second, "the leftover pod deleted", c.gone(c.leftover.Name))
	if p, err := x.pod(c.ns, c.podName); err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("the workload's pod after the restore: %v %+v, want it Running", err, p)
	}
	if w := x.workloads()[c.id]; w.Status.Phase != api.PhaseRunning || w.Status.Attempts != 1 {
		t.Errorf("%s after the restore: %s attempt %d (%s), want Running attempt 1", c.id, w.Status.Phase, w.Status.Attempts, w.Status.Message)
	}
	x.cli("cancel", c.id)
	x.waitPhase(30*time.Second, api.PhaseCancelled, c.id)
	x.waitFor(30*time.Second, "the workload's pod deleted by cancel", c.gone(c.podName))
	x.cli("cancel", local)
}

// TestE2EStartCutServerLost: as TestE2EStartCutServer, but the cut lasts
// past the node lifecycle's grace (LostAfter, RequeueAfter): the node the
// store knew is Lost and the workload requeued, the way of a cluster lost
// while running; on the restore its old pod is deleted (it must not run
// twice), and so is the leftover.
func TestE2EStartCutServerLost(t *testing.T) {
	c := newCutServer(t)
	x := c.x
	cut := time.Now()
	nodeState := func() string {
		var nodes api.List[api.Node]
		if err := json.Unmarshal(x.cli("get", "nodes", "-o", "json"), &nodes); err != nil {
			t.Fatalf("get nodes -o json: %v", err)
		}
		for _, n := range nodes.Items {
			if n.Name == c.kubeNode {
				return n.State
			}
		}
		return "absent"
	}
	x.waitFor(90*time.Second, "node "+c.kubeNode+" Lost", func() (bool, string) {
		st := nodeState()
		return st == string(core.NodeLost), st
	})
	t.Logf("node Lost %v after the server's start", time.Since(cut).Round(time.Second))
	x.waitFor(90*time.Second, c.id+" requeued", func() (bool, string) {
		w := x.workloads()[c.id]
		return w.Status.Phase == api.PhasePending, fmt.Sprintf("%s (%s: %s)", w.Status.Phase, w.Status.Reason, w.Status.Message)
	})
	t.Logf("%s requeued %v after the server's start: %s", c.id, time.Since(cut).Round(time.Second), x.workloads()[c.id].Status.Message)
	for _, name := range []string{c.podName, c.leftover.Name} {
		if p, err := x.pod(c.ns, name); err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s while cut: %v, want it left alone (nobody can reach it)", name, err)
		}
	}
	back := time.Now()
	c.proxy.setCut(false)
	x.waitFor(30*time.Second, "the old attempt's pod deleted", c.gone(c.podName))
	x.waitFor(30*time.Second, "the leftover pod deleted", c.gone(c.leftover.Name))
	t.Logf("both pods deleted %v after the restore", time.Since(back).Round(time.Millisecond))
	x.waitFor(30*time.Second, "node "+c.kubeNode+" out of Lost", func() (bool, string) {
		st := nodeState()
		return st != string(core.NodeLost), st
	})
	t.Logf("node %s after the restore: %s", c.kubeNode, nodeState())
	x.cli("cancel", c.id)
}
