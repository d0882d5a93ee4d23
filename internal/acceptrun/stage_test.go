package acceptrun

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

// A load stage's workload takes the brief's data boundary as its network
// policy unless its spec has one; other stages' workloads do not.
func TestStageSpecCarriesTheDataBoundary(t *testing.T) {
	w := &api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"serve"}}
	run := &api.AcceptanceRun{ID: "ar-1", Team: "ml", Card: api.AcceptanceCard{Name: "c",
		Brief: &api.WorkloadBrief{DataBoundary: &api.DataBoundary{Egress: api.EgressDeny, Dependencies: []string{"10.0.0.0/8"}}}}}
	load := stageSpec(run, api.Stage{Name: "load", Type: api.StageLoad, Workload: w})
	if diff := cmp.Diff(&api.Network{Egress: api.EgressDeny, Allow: []string{"10.0.0.0/8"}}, load.Network); diff != "" {
		t.Errorf("the load stage's network (-want +got):\n%s", diff)
	}
	if smoke := stageSpec(run, api.Stage{Name: "smoke", Type: api.StageSmoke, Workload: w}); smoke.Network != nil {
		t.Errorf("the smoke stage's workload got a network: %+v", smoke.Network)
	}
	own := *w
	own.Network = &api.Network{Egress: api.EgressAllow}
	if got := stageSpec(run, api.Stage{Name: "load", Type: api.StageLoad, Workload: &own}); got.Network.Egress != api.EgressAllow {
		t.Errorf("the stage's own network was replaced: %+v", got.Network)
	}
	if w.Network != nil || w.Labels != nil {
		t.Errorf("stageSpec changed the card's spec: %+v", w)
	}
	var r Runner
	if note := r.egressNote(load); note != "network egress deny is carried to the workload (network.egress) but this server's executor does not enforce it" {
		t.Errorf("note %q", note)
	}
	r.EnforcesEgress = true
	if note := r.egressNote(load); note != "network egress deny enforced by the executor" {
		t.Errorf("note %q", note)
	}
}
