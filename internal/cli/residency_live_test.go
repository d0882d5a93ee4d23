package cli

import (
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/config"
)

// A server configured with clusters (one, this machine, as pool eu-west)
// runs its work through the multi-cluster executor; a team's residency is
// its workloads' default, a workload's own wins, and a residency no node
// has is refused at submit naming residency, whether the workload's or the
// team's.
func TestLiveClusterConfigAndTeamResidency(t *testing.T) {
	s := startLiveServerWith(t, func(c *config.Config) {
		c.ClusterList = []config.Cluster{{Name: "onprem", Executor: "local", FakeGPUs: "4xH100-80GB"}}
		c.PoolList = []config.Pool{{Name: "onprem", Cluster: "onprem", Region: "eu-west", Kind: "owned"}}
	})
	var nodes api.List[api.Node]
	mustJSON(t, s.must(t, "get", "nodes", "-o", "json"), &nodes)
	if len(nodes.Items) != 1 || nodes.Items[0].Cluster != "onprem" || nodes.Items[0].Pool != "onprem" || nodes.Items[0].Region != "eu-west" {
		t.Fatalf("nodes: %+v", nodes.Items)
	}
	s.must(t, "create", "team", "eu", "--residency", "eu-west")
	id := strings.TrimSpace(s.must(t, "submit", "--team", "eu", "--gpus", "0.25", "--", "sh", "-c", "echo ran on $GPUFLEET_WORKLOAD_ID"))
	if r := s.run(t, s.admin, "wait", id, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait: %+v\n%s", r, s.must(t, "logs", id))
	}
	var w api.Workload
	mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
	if len(w.Residency) != 1 || w.Residency[0] != "eu-west" || len(w.Status.Placement) == 0 {
		t.Errorf("a workload of team eu: residency %v, placement %+v (want the team's eu-west)", w.Residency, w.Status.Placement)
	}
	if logs := s.must(t, "logs", id); !strings.Contains(logs, "ran on "+id) {
		t.Errorf("logs through the multi-cluster executor: %q", logs)
	}
	// A residency no node has, the team's or the workload's own.
	s.must(t, "set", "quota", "eu", "--residency", "eu-north")
	if r := s.run(t, s.admin, "submit", "--team", "eu", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "residency") {
		t.Errorf("a team residency no node has: %+v, want refused naming residency", r)
	}
	if r := s.run(t, s.admin, "submit", "--team", "eu", "--region", "eu-west", "--gpus", "0.25", "--", "true"); r.code != 0 {
		t.Errorf("the workload's own residency wins over the team's: %+v", r)
	}
	s.must(t, "set", "quota", "eu", "--residency", "")
	var tm api.Team
	for _, line := range []string{s.must(t, "get", "teams", "-o", "json")} {
		var l api.List[api.Team]
		mustJSON(t, line, &l)
		for _, x := range l.Items {
			if x.Name == "eu" {
				tm = x
			}
		}
	}
	if len(tm.Residency) != 0 {
		t.Errorf("after --residency \"\": %v, want none", tm.Residency)
	}
	if r := s.run(t, s.admin, "create", "team", "bad", "--residency", "eu west"); r.code == 0 || !strings.Contains(r.stderr, "residency") {
		t.Errorf("a bad region: %+v", r)
	}
}
