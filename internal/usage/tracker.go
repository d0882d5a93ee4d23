package usage

import (
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Tracker keeps the latest sample of each GPU and running workload, the
// history of the cluster's totals, one point per sample, for a bounded
// time, and each workload's own history, bounded too (MaxWorkloadPoints,
// MaxTrackedWorkloads). It is safe for concurrent use.
type Tracker struct {
	interval time.Duration
	keep     time.Duration
	mu       sync.RWMutex
	at       time.Time
	gpus     map[core.GPURef]core.GPUSample
	wls      map[core.WorkloadID]core.WorkloadSample
	idle     map[core.WorkloadID]time.Time
	ring     []core.UsagePoint
	next     int
	full     bool
	// hist is each workload's history; maxPoints and maxWorkloads bound
	// it (MaxWorkloadPoints and MaxTrackedWorkloads; tests lower them).
	hist         map[core.WorkloadID]*workloadHistory
	maxPoints    int
	maxWorkloads int
}

// The bounds of the workloads' histories: each keeps its last
// MaxWorkloadPoints samples (4 hours at the default 10 s interval, and never
// more than the cluster's history), and at most MaxTrackedWorkloads
// workloads have one; beyond that, the histories of the workloads sampled
// longest ago go first. A history also goes once its workload has not been
// sampled for the tracker's keep time. At most about 35 MB in all.
const (
	MaxWorkloadPoints   = 1440
	MaxTrackedWorkloads = 1024
)

// workloadHistory is a ring of one workload's points.
type workloadHistory struct {
	points []core.WorkloadUsagePoint
	next   int // where the next point goes once points is full
	last   time.Time
}

func (h *workloadHistory) add(p core.WorkloadUsagePoint, limit int) {
	h.last = p.Time
	if len(h.points) < limit {
		h.points = append(h.points, p)
		return
	}
	h.points[h.next] = p
	h.next = (h.next + 1) % len(h.points)
}

// NewTracker keeps keep of history at one point per interval.
func NewTracker(interval, keep time.Duration) *Tracker {
	n := max(1, int(keep/max(interval, time.Millisecond)))
	return &Tracker{interval: interval, keep: keep, ring: make([]core.UsagePoint, n),
		hist: map[core.WorkloadID]*workloadHistory{}, maxPoints: min(n, MaxWorkloadPoints), maxWorkloads: MaxTrackedWorkloads}
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
	t.recordWorkloads(s)
}

// recordWorkloads adds each sampled workload's point to its history, and
// drops the histories beyond the bounds.
func (t *Tracker) recordWorkloads(s core.Sample) {
	for id, w := range s.Workloads {
		h := t.hist[id]
		if h == nil {
			h = &workloadHistory{}
			t.hist[id] = h
		}
		h.add(core.WorkloadUsagePoint{Time: s.At, Attempt: w.Attempt, Utilization: w.Utilization, MemoryUsedMiB: w.MemoryUsedMiB}, t.maxPoints)
	}
	for id, h := range t.hist {
		if s.At.Sub(h.last) > t.keep {
			delete(t.hist, id)
		}
	}
	for len(t.hist) > t.maxWorkloads {
		var oldest core.WorkloadID
		for id, h := range t.hist {
			if o := t.hist[oldest]; o == nil || h.last.Before(o.last) || h.last.Equal(o.last) && id < oldest {
				oldest = id
			}
		}
		delete(t.hist, oldest)
	}
}

// WorkloadHistory returns a workload's points of the last window before
// now, oldest first, every attempt's (each point names its attempt); none
// when the workload was never sampled or its history was dropped.
func (t *Tracker) WorkloadHistory(id core.WorkloadID, window time.Duration, now time.Time) []core.WorkloadUsagePoint {
	t.mu.RLock()
	defer t.mu.RUnlock()
	h := t.hist[id]
	if h == nil {
		return nil
	}
	from := now.Add(-window)
	var out []core.WorkloadUsagePoint
	for i := range h.points {
		p := h.points[(h.next+i)%len(h.points)]
		if !p.Time.Before(from) && !p.Time.After(now) {
			out = append(out, p)
		}
	}
	return out
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

// Workloads returns the latest sample of each workload sampled in the
// last round.
func (t *Tracker) Workloads() []core.WorkloadSample {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]core.WorkloadSample, 0, len(t.wls))
	for _, w := range t.wls {
		out = append(out, w)
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
