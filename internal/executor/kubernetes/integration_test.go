package kubernetes

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// TestIntegration drives the executor alone (no gpufleet server) against a
// real API server: GPUFLEET_K8S_KUBECONFIG names its kubeconfig
// (hack/k8s-testenv.sh up); it is skipped when the variable is unset. It
// makes its own KWOK GPU node; with KWOK no container really runs, so it
// checks placement, adoption and stop only.
func TestIntegration(t *testing.T) {
	x := newE2E(t, 1, 8)
	client := x.client
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	nodes, err := DiscoverNodes(ctx, client, NodeLabels{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(nodes, func(n core.Node) bool { return string(n.Name) == x.nodes[0] })
	if i < 0 || !nodes[i].Schedulable {
		t.Fatalf("node %s not discovered as a schedulable GPU node: %+v", x.nodes[0], nodes)
	}
	node := nodes[i]
	ns := x.namespace("integration")
	e, err := New(ctx, Options{Client: client, NamespaceTemplate: x.nsPrefix() + "{team}"})
	if err != nil {
		t.Fatal(err)
	}
	id := core.WorkloadID("wl-it-" + time.Now().Format("150405"))
	tk := executor.Task{WorkloadID: id, Attempt: 1, Team: "integration", Priority: "training",
		Command: []string{"sleep", "3600"}, GracePeriod: 2 * time.Second, Request: core.Request{MilliGPU: 1000},
		Assignments: []core.Assignment{{Node: node.Name, GPUIndex: 0, GPUUUID: node.GPUs[0].UUID, MilliGPU: 1000}}}
	if err := e.Start(ctx, tk); err != nil {
		t.Fatal(err)
	}
	name := PodName(id, 1, 0, 1)
	for {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s/%s: %v", ns, name, err)
		}
		if p.Spec.NodeName != string(node.Name) {
			t.Fatalf("pod on %q, want %q", p.Spec.NodeName, node.Name)
		}
		if p.Status.Phase == "Running" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod not Running: %s %s", p.Status.Phase, p.Status.Reason)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if ok, err := e.Adopt(ctx, tk); !ok || err != nil {
		t.Errorf("Adopt: (%v, %v)", ok, err)
	}
	if err := e.Stop(ctx, id, 1, tk.GracePeriod); err != nil {
		t.Fatal(err)
	}
	select {
	case x := <-e.Exits():
		if x.WorkloadID != id || (x.ExitCode != nil && *x.ExitCode == 0) {
			t.Errorf("exit: %+v", x)
		}
	case <-ctx.Done():
		t.Fatal("no exit after Stop")
	}
}
