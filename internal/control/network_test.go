package control_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A workload's network policy reaches the executor with its attempt, so
// that an executor that controls the workload's network can enforce it.
func TestTaskCarriesTheNetworkPolicy(t *testing.T) {
	h := newHarness(t)
	want := core.Network{Egress: core.EgressDeny, Allow: []string{"10.0.0.0/8", "huggingface.co:443"}}
	w := h.submit(func(w *core.Workload) { w.Network = want })
	h.start()
	h.waitRunning(w.ID, 1)
	tk, ok := h.task(h.exec, w.ID, 1)
	if !ok {
		t.Fatal("the fake runs no attempt of the workload")
	}
	if diff := cmp.Diff(want, tk.Network); diff != "" {
		t.Errorf("the task's network (-want +got):\n%s", diff)
	}
}
