package control_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
)

// xidSampler reports, at each sample, the next of a GPU's last Xid values.
type xidSampler struct{ seq []int }

func (s *xidSampler) Sample(context.Context, *core.Snapshot) (core.Sample, error) {
	x := s.seq[0]
	if len(s.seq) > 1 {
		s.seq = s.seq[1:]
	}
	return core.Sample{GPUs: []core.GPUSample{{Node: "n1", Index: 2, Xid: x}}}, nil
}

// A GPU's last Xid that changes between samples is told once; what the
// first sample shows is history, not an event.
func TestMonitorTellsNewXids(t *testing.T) {
	h := newHarness(t)
	var told []int
	m := control.NewMonitor(control.MonitorOptions{Store: h.store, Sampler: &xidSampler{seq: []int{48, 48, 0, 79, 79, 13}}, Now: h.clock.Now,
		OnXid: func(_ context.Context, node core.NodeName, gpu, code int, _ string) error {
			if node != "n1" || gpu != 2 {
				t.Errorf("xid on %s/%d", node, gpu)
			}
			told = append(told, code)
			return nil
		}})
	for range 6 {
		m.Step(context.Background())
	}
	if diff := cmp.Diff([]int{79, 13}, told); diff != "" {
		t.Errorf("Xids told (-want +got):\n%s", diff)
	}
}
