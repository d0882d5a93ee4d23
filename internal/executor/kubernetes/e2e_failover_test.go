package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// cutProxy is a TCP proxy in front of the API server that can be cut: a
// cut closes every connection and holds new ones open without forwarding
// a byte (a network partition, not a refusal: a client that waits for an
// answer waits); restore closes the held ones and forwards again.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.closeAll() })
	go p.serve()
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = true
		cut := p.cut
		p.mu.Unlock()
		if cut {
			continue // held: read nothing, answer nothing
		}
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	defer p.drop(c)
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns[up] = true
	p.mu.Unlock()
	defer p.drop(up)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (p *cutProxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *cutProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	p.closeAll()
}

// TestE2EFailoverReach runs the executor against the real API server
// through a proxy that the test cuts: within UnreachableAfter and a check
// or two, OnNodes reports every node of the cluster NotReady; Start and
// Stop fail at once with ErrUnreachable; once the proxy is restored, the
// nodes are Ready again, the pod of the attempt stopped meanwhile is
// deleted, a leftover pod of an attempt that no longer runs here (made
// while the executor could not see it) is deleted and handed to
// OnOrphans, and the pod of the attempt still expected keeps running.
func TestE2EFailoverReach(t *testing.T) {
	x := newE2E(t, 3, 4)
	client, proxy := x.cutClient(t)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var reports nodeReports
	var omu sync.Mutex
	var orphans []Orphan
	const every, after = 250 * time.Millisecond, 3 * time.Second
	e, err := New(ctx, Options{Client: client, NamespaceTemplate: x.nsPrefix() + "{team}", NodeSelector: DefaultPoolLabel + "=" + x.id,
		ReachEvery: every, UnreachableAfter: after, RequestTimeout: 2 * time.Second, OnNodes: reports.put,
		OnOrphans: func(o []Orphan) { omu.Lock(); orphans = append(orphans, o...); omu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.DeleteOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	nodes := e.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("nodes: %+v, want the test's 3", nodes)
	}
	ns := x.namespace("failover")
	start := func(id core.WorkloadID, node core.Node) string {
		tk := failoverTask(id, node)
		if err := e.Start(ctx, tk); err != nil {
			t.Fatal(err)
		}
		return PodName(id, 1, 0, 1)
	}
	keep := start("wl-keep", nodes[0])
	stopped := start("wl-stop", nodes[1])
	lost := start("wl-lost", nodes[2])
	x.waitFor(30*time.Second, "pods Running", func() (bool, string) {
		for _, name := range []string{keep, stopped, lost} {
			p, err := x.pod(ns, name)
			if err != nil || p.Status.Phase != "Running" {
				return false, name + " not Running"
			}
		}
		return true, ""
	})

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
	names := x.nodes
	cut := time.Now()
	proxy.setCut(true)
	x.waitFor(after+5*time.Second, "every node reported NotReady", func() (bool, string) { return reports.all(names, true) })
	took := time.Since(cut)
	t.Logf("nodes NotReady %v after the cut (UnreachableAfter %v, ReachEvery %v)", took.Round(time.Millisecond), after, every)
	if took < after-every {
		t.Errorf("nodes NotReady %v after the cut, before UnreachableAfter %v", took, after)
	}
	if e.Reachable() {
		t.Error("Reachable while cut")
	}
	t0 := time.Now()
	if err := e.Start(ctx, failoverTask("wl-new", nodes[0])); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Start while cut: %v, want ErrUnreachable", err)
	} else {
		t.Logf("Start while cut: %v", err)
	}
	if err := e.Stop(ctx, "wl-stop", 1, 0); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Stop while cut: %v, want ErrUnreachable", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Start and Stop took %v while cut", d)
	}
	// The store requeued an attempt elsewhere meanwhile; its pod is left
	// on this cluster (made here behind the executor's back, through the
	// test's own client, which does not go through the proxy).
	gone := failoverTask("wl-gone", nodes[1])
	leftover := buildPod(&e.opts, gone, ns, 0, replicaAssignments(gone)[0], 1)
	if _, err := x.client.CoreV1().Pods(ns).Create(ctx, leftover, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// And a node goes down meanwhile: the executor must not report it
	// Ready on return from what its informer last heard.
	setNodeReady(t, x.client, x.nodes[2], false)
	time.Sleep(2 * every) // two checks in which the cut executor may report nothing
	if ok, why := reports.all(names, true); !ok {
		t.Errorf("while cut: %s", why)
	}
	emu.Lock()
	if len(exits) > 0 {
		t.Errorf("exits while cut: %+v; the executor leaves a lost cluster's attempts to the node lifecycle", exits)
	}
	emu.Unlock()
	fromRestore := reports.count()

	back := time.Now()
	proxy.setCut(false)
	x.waitFor(30*time.Second, "the nodes reported Ready", func() (bool, string) { return reports.all(names[:2], false) })
	t.Logf("nodes Ready %v after the restore", time.Since(back).Round(time.Millisecond))
	gonePod := func(name string) func() (bool, string) {
		return func() (bool, string) {
			p, err := x.pod(ns, name)
			if apierrors.IsNotFound(err) || (err == nil && (p.DeletionTimestamp != nil || p.Status.Phase == "Failed" || p.Status.Phase == "Succeeded")) {
				return true, ""
			}
			return false, name + " still there"
		}
	}
	x.waitFor(30*time.Second, "the leftover pod deleted", gonePod(leftover.Name))
	x.waitFor(30*time.Second, "the pod stopped while cut deleted", gonePod(stopped))
	// OnOrphans hears of the deletion after it is made: wait for it.
	x.waitFor(10*time.Second, "OnOrphans heard the leftover", func() (bool, string) {
		omu.Lock()
		defer omu.Unlock()
		return len(orphans) > 0, fmt.Sprintf("OnOrphans heard %+v", orphans)
	})
	omu.Lock()
	if len(orphans) != 1 || orphans[0].Name != leftover.Name || orphans[0].Err != nil {
		t.Errorf("OnOrphans heard %+v, want the leftover %s", orphans, leftover.Name)
	}
	omu.Unlock()
	if p, err := x.pod(ns, keep); err != nil || p.DeletionTimestamp != nil || p.Status.Phase != "Running" {
		t.Errorf("the attempt still expected: %v %v, want its pod Running", err, p)
	}
	if !e.Reachable() {
		t.Error("not Reachable after the restore")
	}
	for i, r := range reports.since(fromRestore) {
		for _, n := range r {
			if string(n.Name) == x.nodes[2] && !n.NotReady {
				t.Errorf("report %d after the restore: %s Ready, but it went down during the cut", i, n.Name)
			}
		}
	}
	// The node that went down is the informer's to handle, as ever: its
	// attempt is Lost and its pod deleted.
	x.waitFor(30*time.Second, "the attempt on the node gone down Lost", func() (bool, string) {
		emu.Lock()
		defer emu.Unlock()
		if x, ok := exits["wl-lost"]; ok && x.Reason == ReasonLost {
			return true, ""
		}
		return false, fmt.Sprintf("exits %+v", exits)
	})
	x.waitFor(30*time.Second, "the pod on the node gone down deleted", gonePod(lost))
	emu.Lock()
	if x, ok := exits["wl-stop"]; !ok || x.Reason == ReasonLost {
		t.Errorf("wl-stop's exit: %+v, %v; want it stopped", x, ok)
	}
	if _, ok := exits["wl-keep"]; ok {
		t.Errorf("wl-keep ended: %+v", exits["wl-keep"])
	}
	emu.Unlock()
}

func failoverTask(id core.WorkloadID, node core.Node) executor.Task {
	return executor.Task{WorkloadID: id, Attempt: 1, Team: "failover", Priority: "training", Image: e2eImage,
		Command: []string{"sleep", "infinity"}, GracePeriod: time.Second, Request: core.Request{MilliGPU: 1000},
		Assignments: []core.Assignment{{Node: node.Name, GPUIndex: 0, GPUUUID: node.GPUs[0].UUID, MilliGPU: 1000}}}
}
