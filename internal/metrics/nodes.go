package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpufleet/gpufleet/internal/core"
)

var (
	descNodeState = prometheus.NewDesc("gpufleet_node_state",
		"1 for the lifecycle state each node is in (Registering, Validating, Ready, Cordoned, Draining, Failed, Lost), 0 for the others.",
		[]string{"node", "state"}, nil)
	descGPUHealth = prometheus.NewDesc("gpufleet_gpu_health",
		"1 for the health each GPU has (Healthy, Suspect, Failed), 0 for the others.",
		[]string{"node", "gpu", "state"}, nil)
	descXid = prometheus.NewDesc("gpufleet_gpu_xid_errors_total",
		"Xid errors each GPU reported since the server started, by code.",
		[]string{"node", "gpu", "xid"}, nil)
)

// XidCount is how many Xid errors of a code a device reported.
type XidCount struct {
	Node  core.NodeName
	GPU   int
	Xid   int
	Count int64
}

// nodeMetrics writes the node lifecycle's gauges from a snapshot.
func nodeMetrics(ch chan<- prometheus.Metric, snap *core.Snapshot, xids []XidCount) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, n := range snap.Nodes {
		state := n.State
		if state == "" {
			state = core.NodeReady
		}
		for _, s := range core.NodeStates {
			gauge(descNodeState, bit(s == state), string(n.Name), string(s))
		}
		for _, g := range n.GPUs {
			h := g.Health
			if h == "" {
				h = core.GPUHealthy
			}
			for _, s := range core.GPUHealths {
				gauge(descGPUHealth, bit(s == h), string(n.Name), strconv.Itoa(g.Index), s)
			}
		}
	}
	for _, x := range xids {
		ch <- prometheus.MustNewConstMetric(descXid, prometheus.CounterValue, float64(x.Count), string(x.Node), strconv.Itoa(x.GPU), strconv.Itoa(x.Xid))
	}
}
