package usage

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpufleet/gpufleet/internal/core"
)

// DCGM reads the GPUs' utilisation and memory from an NVIDIA DCGM exporter
// (or a Prometheus federating several): DCGM_FI_DEV_GPU_UTIL (percent) and
// DCGM_FI_DEV_FB_USED (MiB), one series per GPU, labelled with the node
// (Hostname, which the exporter's chart sets to the node name) and the
// device index (gpu). It serves the Kubernetes executor, whose workloads
// run in pods that gpufleet cannot see the processes of.
//
// A workload's utilisation is the mean of its GPUs'; its memory is counted
// only on the GPUs it holds alone (the exporter does not split a shared
// device's memory among pods), so memory enforcement does not act on
// fractional workloads sampled this way.
type DCGM struct {
	// URL is the exporter's metrics endpoint, e.g.
	// http://dcgm-exporter.gpu-operator:9400/metrics.
	URL string
	// Client does the request; http.DefaultClient when nil.
	Client *http.Client
	// Timeout bounds one read; 10 s when zero.
	Timeout time.Duration
	Now     func() time.Time
}

var _ Sampler = (*DCGM)(nil)

// Sample implements Sampler.
func (d *DCGM) Sample(ctx context.Context, snap *core.Snapshot) (core.Sample, error) {
	now := time.Now
	if d.Now != nil {
		now = d.Now
	}
	out := core.Sample{At: now(), Workloads: map[core.WorkloadID]core.WorkloadSample{}}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
	if err != nil {
		return out, fmt.Errorf("dcgm exporter: %w", err)
	}
	c := d.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return out, fmt.Errorf("dcgm exporter: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("dcgm exporter %s: %s", d.URL, resp.Status)
	}
	gpus, err := ParseDCGM(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return out, err
	}
	return dcgmSample(out, snap, gpus), nil
}

// ParseDCGM reads a DCGM exporter's text exposition and returns one sample
// per GPU it reports.
func ParseDCGM(r io.Reader) ([]core.GPUSample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse dcgm exporter metrics: %w", err)
	}
	byRef := map[core.GPURef]*core.GPUSample{}
	var order []core.GPURef
	read := func(name string, set func(g *core.GPUSample, v float64)) {
		for _, m := range fams[name].GetMetric() {
			var node, gpu, uuid string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "Hostname":
					node = l.GetValue()
				case "gpu":
					gpu = l.GetValue()
				case "UUID":
					uuid = l.GetValue()
				}
			}
			idx, err := strconv.Atoi(gpu)
			if err != nil || node == "" {
				continue
			}
			ref := core.GPURef{Node: core.NodeName(node), Index: idx}
			g := byRef[ref]
			if g == nil {
				g = &core.GPUSample{Node: ref.Node, Index: idx, UUID: uuid}
				byRef[ref] = g
				order = append(order, ref)
			}
			set(g, value(m))
		}
	}
	read("DCGM_FI_DEV_GPU_UTIL", func(g *core.GPUSample, v float64) { g.Utilization = min(1, max(0, v/100)) })
	read("DCGM_FI_DEV_FB_USED", func(g *core.GPUSample, v float64) { g.MemoryUsedMiB = int64(v) })
	read("DCGM_FI_DEV_XID_ERROR", func(g *core.GPUSample, v float64) { g.Xid = int(v) })
	out := make([]core.GPUSample, 0, len(order))
	for _, r := range order {
		out = append(out, *byRef[r])
	}
	return out, nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// dcgmSample derives the workloads' samples from the GPUs'.
func dcgmSample(out core.Sample, snap *core.Snapshot, gpus []core.GPUSample) core.Sample {
	out.GPUs = gpus
	byRef := map[core.GPURef]core.GPUSample{}
	for _, g := range gpus {
		byRef[core.GPURef{Node: g.Node, Index: g.Index}] = g
	}
	holders := map[core.GPURef]int{}
	for _, w := range snap.Running {
		seen := map[core.GPURef]bool{}
		for _, a := range w.Status.Placement {
			r := core.GPURef{Node: a.Node, Index: a.GPUIndex}
			if !seen[r] {
				seen[r] = true
				holders[r]++
			}
		}
	}
	for _, w := range snap.Running {
		ws := core.WorkloadSample{ID: w.ID, Attempt: w.Status.Attempts}
		seen := map[core.GPURef]bool{}
		n := 0
		for _, a := range w.Status.Placement {
			r := core.GPURef{Node: a.Node, Index: a.GPUIndex}
			g, ok := byRef[r]
			if !ok || seen[r] {
				continue
			}
			seen[r] = true
			n++
			ws.Utilization += g.Utilization
			if holders[r] == 1 {
				ws.MemoryUsedMiB += g.MemoryUsedMiB
			}
		}
		if n == 0 {
			continue // the exporter does not report its GPUs: no sample
		}
		ws.Utilization /= float64(n)
		out.Workloads[w.ID] = ws
	}
	return out
}
