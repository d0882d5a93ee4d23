package control_test

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// A workload's network policy reaches the executor with its attempt, so
// that an executor that controls the workload's network can enforce it.
func TestTaskCarriesTheNetworkPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		want := core.Network{Egress: core.EgressDeny, Allow: []string{"10.0.0.0/8", "huggingface.co:443"}}
		w := h.submit(func(w *core.Workload) { w.Network = want })
		h.start()
		h.waitRunning(w.ID, 1)
		// The attempt the fake was given, whether it still runs or not: the
		// store says Running once the placement is committed, before the
		// launcher's Start.
		var tk executor.Task
		h.until("the fake given attempt 1", func() (bool, string) {
			var ok bool
			tk, ok = h.exec.Task(w.ID)
			return ok && tk.Attempt == 1, fmt.Sprintf("it has %+v", tk)
		})
		if diff := cmp.Diff(want, tk.Network); diff != "" {
			t.Errorf("the task's network (-want +got):\n%s", diff)
		}
	})
}
