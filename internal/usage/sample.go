package usage

import (
	"context"
	"math"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Sampler takes one sample of the GPUs of snap's nodes and of its running
// workloads.
type Sampler interface {
	Sample(ctx context.Context, snap *core.Snapshot) (core.Sample, error)
}

// Multi merges the samples of several samplers (one for simulated GPUs,
// one for real ones). A failing sampler's error is returned with what the
// others saw.
type Multi []Sampler

// Sample implements Sampler.
func (m Multi) Sample(ctx context.Context, snap *core.Snapshot) (core.Sample, error) {
	out := core.Sample{Workloads: map[core.WorkloadID]core.WorkloadSample{}}
	var firstErr error
	for _, s := range m {
		got, err := s.Sample(ctx, snap)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		out.At = got.At
		out.GPUs = append(out.GPUs, got.GPUs...)
		for id, w := range got.Workloads {
			out.Workloads[id] = w
		}
	}
	return out, firstErr
}

// Point computes the cluster's totals at one sample: its GPUs, what is
// allocated (fractions counted), used (the sum of sampled utilisation),
// idle (nothing allocated), running and pending workloads and the mean wait
// of the pending ones.
func Point(snap *core.Snapshot, s core.Sample, now time.Time) core.UsagePoint {
	p := core.UsagePoint{Time: now.UTC(), Running: len(snap.Running), Pending: len(snap.Pending)}
	var milli int64
	for _, n := range snap.Nodes {
		p.GPUs += len(n.GPUs)
		u := snap.Usage[n.Name]
		for _, g := range n.GPUs {
			var used int64
			if u != nil {
				used = u.GPUs[g.Index].MilliGPU
			}
			milli += used
			if used == 0 {
				p.IdleGPUs++
			}
		}
	}
	p.AllocatedGPUs = float64(milli) / 1000
	for _, g := range s.GPUs {
		p.UsedGPUs += g.Utilization
	}
	p.UsedGPUs = Round(p.UsedGPUs)
	if len(snap.Pending) > 0 {
		var sum time.Duration
		for _, w := range snap.Pending {
			if d := now.Sub(w.CreatedAt); d > 0 {
				sum += d
			}
		}
		p.QueueWaitSeconds = sum.Seconds() / float64(len(snap.Pending))
	}
	return p
}

// Round rounds a sum of utilisations to six decimals, so that 0.6 + 0.3
// reads 0.9 in the API and the metrics rather than 0.8999999999999999.
func Round(x float64) float64 { return math.Round(x*1e6) / 1e6 }
