package kubernetes

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// TestNodesBeforeStart: an executor that New returned before its cluster
// answered (StartUnreachable) gives its known nodes from Nodes, NotReady
// and unschedulable, sorted by name, and the nodes its cluster lists
// once it answers, ready: Nodes is what OnNodes hears at every time.
func TestNodesBeforeStart(t *testing.T) {
	node := gpuNode("n1", 8, true, false)
	k := newFakeKubelet(t, node)
	down := k.cut("dial tcp 127.0.0.1:6443: i/o timeout")
	down.Store(true)
	n1, _ := GPUNode(node, NodeLabels{})
	gone := n1
	gone.Name = "n0" // known to the store, gone from the cluster
	e, err := New(t.Context(), Options{Client: k.client, StartUnreachable: true, KnownNodes: []core.Node{n1, gone},
		ReachEvery: 20 * time.Millisecond, OnNodes: func([]core.Node) {}})
	if err != nil {
		t.Fatal(err)
	}
	ns := e.Nodes()
	if len(ns) != 2 || ns[0].Name != "n0" || ns[1].Name != "n1" {
		t.Fatalf("Nodes before the cluster answered: %+v, want n0 and n1, the known nodes", ns)
	}
	for _, n := range ns {
		if !n.NotReady || n.Schedulable {
			t.Errorf("Nodes before the cluster answered: %s NotReady %v, schedulable %v, want NotReady and unschedulable", n.Name, n.NotReady, n.Schedulable)
		}
	}
	if n1.NotReady || !n1.Schedulable {
		t.Errorf("Nodes changed Options.KnownNodes: %+v", n1)
	}
	down.Store(false)
	testwait.Until(t, 10*time.Second, "n1 ready in Nodes, as the cluster lists it, once it answered", func() (bool, string) {
		ns = e.Nodes()
		return len(ns) == 1 && ns[0].Name == "n1" && !ns[0].NotReady && ns[0].Schedulable, fmt.Sprintf("%+v", ns)
	})
}
