package cli

import (
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// A server of one machine is one cluster and one pool: get clusters and
// get pools say what it has and what running work holds of it (the
// cluster, this machine, reachable).
func TestLiveClustersAndPools(t *testing.T) {
	s := startLiveServer(t)
	id := strings.TrimSpace(s.must(t, "submit", "--gpus", "0.5", "--", "sleep", "30"))
	eventually(t, "the workload runs", func() string {
		var w api.Workload
		mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
		if w.Status.Phase != "Running" {
			return w.Status.Phase
		}
		return ""
	})
	var cs api.List[api.Cluster]
	mustJSON(t, s.must(t, "get", "clusters", "-o", "json"), &cs)
	if len(cs.Items) != 1 || cs.Items[0].Name != "local" || cs.Items[0].Executor != "local" || cs.Items[0].Nodes != 1 || cs.Items[0].GPUs != 4 ||
		cs.Items[0].Reachable == nil || !*cs.Items[0].Reachable {
		t.Errorf("clusters: %+v, want local, reachable, 1 node, 4 GPUs", cs.Items)
	}
	if table := s.must(t, "get", "clusters"); !strings.Contains(table, "REACHABLE") || !strings.Contains(table, "yes") {
		t.Errorf("get clusters:\n%s", table)
	}
	var ps api.List[api.Pool]
	mustJSON(t, s.must(t, "get", "pools", "-o", "json"), &ps)
	if len(ps.Items) != 1 {
		t.Fatalf("pools: %+v", ps.Items)
	}
	p := ps.Items[0]
	if p.Name != "local" || p.Kind != "owned" || p.GPUs != 4 || p.AllocatedGPUs != 500 || p.Nodes != 1 || p.Health != api.PoolHealthy {
		t.Errorf("pool: %+v", p)
	}
	if table := s.must(t, "get", "pools"); !strings.Contains(table, "HEALTH") || !strings.Contains(table, "0.5") {
		t.Errorf("get pools:\n%s", table)
	}
	s.must(t, "cancel", id)
}
