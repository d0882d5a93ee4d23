package apiserver

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// UsageSource is the utilisation tracker as the API reads it
// (usage.Tracker).
type UsageSource interface {
	// Workload returns the latest sample of a workload's attempt, when it
	// was taken and since when the workload has been idle.
	Workload(id core.WorkloadID, attempt int) (s core.WorkloadSample, at time.Time, idleSince *time.Time, ok bool)
	// GPU returns the latest sample of a GPU.
	GPU(node core.NodeName, index int) (core.GPUSample, bool)
	// History returns the points of the last window, oldest first.
	History(window time.Duration, now time.Time) []core.UsagePoint
	// WorkloadHistory returns a workload's points of the last window,
	// oldest first.
	WorkloadHistory(id core.WorkloadID, window time.Duration, now time.Time) []core.WorkloadUsagePoint
	// Interval is the time between two points.
	Interval() time.Duration
}

// MaxUsageWindow bounds ?window= of GET /usage.
const MaxUsageWindow = 24 * time.Hour

// usageHistory answers the cluster's use over time: totals only, no team
// names, so any caller may read it.
func (s *Server) usageHistory(c *call) (reply, error) {
	window, err := usageWindow(c)
	if err != nil {
		return reply{}, err
	}
	out := api.UsageHistory{Points: []api.UsagePoint{}}
	if u := s.opts.Usage; u != nil {
		out.IntervalSeconds = u.Interval().Seconds()
		for _, p := range u.History(window, s.opts.Now()) {
			out.Points = append(out.Points, api.UsagePoint(p))
		}
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// usageWindow reads ?window= of the usage routes: 1h by default.
func usageWindow(c *call) (time.Duration, error) {
	v := c.r.URL.Query().Get("window")
	if v == "" {
		return time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Second || d > MaxUsageWindow {
		return 0, invalid("window", "must be a duration from 1s to %s, such as 30m or 6h", "24h")
	}
	return d, nil
}

// workloadUsage answers a workload's GPU use over time, to those who may
// read the workload (404 to others, as for the workload itself).
func (s *Server) workloadUsage(c *call) (reply, error) {
	window, err := usageWindow(c)
	if err != nil {
		return reply{}, err
	}
	w, err := s.workload(c)
	if err != nil {
		return reply{}, err
	}
	out := api.WorkloadUsageHistory{Points: []api.WorkloadUsagePoint{}}
	if u := s.opts.Usage; u != nil {
		out.IntervalSeconds = u.Interval().Seconds()
		for _, p := range u.WorkloadHistory(w.ID, window, s.opts.Now()) {
			out.Points = append(out.Points, api.WorkloadUsagePoint{Time: p.Time.UTC(), Attempt: p.Attempt,
				GPUUtilization: p.Utilization, GPUMemoryUsedMiB: p.MemoryUsedMiB})
		}
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// metrics serves the Prometheus metrics; the table lets only admins here.
func (s *Server) metrics(w http.ResponseWriter, c *call) error {
	if s.opts.Metrics == nil {
		return fmt.Errorf("no metrics on this server: %w", core.ErrUnavailable)
	}
	s.opts.Metrics.ServeHTTP(w, c.r)
	return nil
}

// withLive sets what is known of a running workload only while it runs on
// its wire form: its sampled usage and its network address.
func (s *Server) withLive(out *api.Workload, w *core.Workload) *api.Workload {
	if w.Status.Phase != core.Running {
		return out
	}
	if a, ok := s.opts.Endpoints.(AddressSource); ok {
		if addr, ok := a.Address(w.ID, w.Status.Attempts); ok {
			out.Status.Address = addr
		}
	}
	if s.opts.Usage == nil {
		return out
	}
	smp, at, idle, ok := s.opts.Usage.Workload(w.ID, w.Status.Attempts)
	if !ok {
		return out
	}
	out.Status.Usage = &api.WorkloadUsage{GPUUtilization: smp.Utilization, GPUMemoryUsedMiB: smp.MemoryUsedMiB, SampledAt: at.UTC(), IdleSince: idle}
	return out
}

// AddressSource says at which address a workload's attempt is reached,
// where it has one of its own (a network namespace on the local
// executor).
type AddressSource interface {
	Address(id core.WorkloadID, attempt int) (string, bool)
}

// withGPUUsage sets a GPU's sampled use and health on its wire form.
//
// With hide, the figures stay out (health is still given): the device holds
// a workload of a team the caller cannot see, whose use is that team's
// business.
func (s *Server) withGPUUsage(g *api.GPU, n *core.Node, hide bool) {
	g.Healthy = n.Schedulable
	if s.opts.Usage == nil {
		return
	}
	smp, ok := s.opts.Usage.GPU(n.Name, g.Index)
	if !ok {
		return
	}
	if smp.Err != "" {
		g.Healthy = false
		return
	}
	if hide {
		return
	}
	u, m := smp.Utilization, smp.MemoryUsedMiB
	g.Utilization, g.MemoryUsedMiB = &u, &m
}
