package usage

import (
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Tracker keeps the latest sample of each GPU and running workload, and the
// history of the cluster's totals, one point per sample, for a bounded
// time. It is safe for concurrent use.
type Tracker struct {
	interval time.Duration
	mu       sync.RWMutex
	at       time.Time
	gpus     map[core.GPURef]core.GPUSample
	wls      map[core.WorkloadID]core.WorkloadSample
	idle     map[core.WorkloadID]time.Time
	ring     []core.UsagePoint
	next     int
	full     bool
}

// NewTracker keeps keep of history at one point per interval.
func NewTracker(interval, keep time.Duration) *Tracker {
	n := max(1, int(keep/max(interval, time.Millisecond)))
	return &Tracker{interval: interval, ring: make([]core.UsagePoint, n)}
}

// Interval is the time between two points.
func (t *Tracker) Interval() time.Duration { return t.interval }

// Record stores a sample, the cluster's point at that time and, per
// workload, since when it has been below its idle threshold. It keeps
// s.Workloads and idleSince: the caller must not change them afterwards.
func (t *Tracker) Record(s core.Sample, p core.UsagePoint, idleSince map[core.WorkloadID]time.Time) {
	gpus := make(map[core.GPURef]core.GPUSample, len(s.GPUs))
	for _, g := range s.GPUs {
		gpus[core.GPURef{Node: g.Node, Index: g.Index}] = g
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.at, t.gpus, t.wls, t.idle = s.At, gpus, s.Workloads, idleSince
	t.ring[t.next] = p
	t.next = (t.next + 1) % len(t.ring)
	if t.next == 0 {
		t.full = true
	}
}

// GPU returns the latest sample of a GPU.
func (t *Tracker) GPU(node core.NodeName, index int) (core.GPUSample, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.gpus[core.GPURef{Node: node, Index: index}]
	return g, ok
}

// GPUs returns the latest sample of every GPU.
func (t *Tracker) GPUs() []core.GPUSample {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]core.GPUSample, 0, len(t.gpus))
	for _, g := range t.gpus {
		out = append(out, g)
	}
	return out
}

// Workload returns the latest sample of a workload's attempt, when it was
// taken, and since when the workload has been idle (nil when it is not).
func (t *Tracker) Workload(id core.WorkloadID, attempt int) (s core.WorkloadSample, at time.Time, idleSince *time.Time, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s, ok = t.wls[id]
	if !ok || s.Attempt != attempt {
		return core.WorkloadSample{}, time.Time{}, nil, false
	}
	if v, idle := t.idle[id]; idle {
		idleSince = &v
	}
	return s, t.at, idleSince, true
}

// History returns the points of the last window before now, oldest first.
func (t *Tracker) History(window time.Duration, now time.Time) []core.UsagePoint {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []core.UsagePoint
	n, start := t.next, 0
	if t.full {
		n, start = len(t.ring), t.next
	}
	from := now.Add(-window)
	for i := range n {
		p := t.ring[(start+i)%len(t.ring)]
		if !p.Time.Before(from) {
			out = append(out, p)
		}
	}
	return out
}
