package control_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// unreachable is an executor whose Start fails because its cluster cannot
// be reached.
type unreachable struct{ executor.Executor }

func (unreachable) Start(context.Context, executor.Task) error {
	return fmt.Errorf("cluster cloud: %w", executor.ErrUnavailable)
}

// A start that fails because the cluster cannot be reached requeues the
// workload (reason ClusterUnreachable) instead of failing it.
func TestStartOnAnUnreachableClusterRequeues(t *testing.T) {
	h := newHarness(t)
	loop := control.New(h.options(unreachable{h.exec}))
	w := h.submit(nil)
	loop.Step(context.Background())
	got := h.get(w.ID)
	if got.Status.Phase != core.Pending || got.Status.Attempts != 1 || !strings.Contains(got.Status.Message, "cannot reach") {
		t.Fatalf("after a start on an unreachable cluster: %s %s (%s), attempts %d; want Pending again, requeued",
			got.Status.Phase, got.Status.Reason, got.Status.Message, got.Status.Attempts)
	}
	evs, err := h.store.Events(context.Background(), w.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs {
		found = found || e.Reason == control.ReasonUnreachable
	}
	if !found {
		t.Errorf("no %s event: %+v", control.ReasonUnreachable, evs)
	}
}
