package spec

import (
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// TestLabelErrorsSayTheRule: a label key or value that breaks the rule
// says the rule.
func TestLabelErrorsSayTheRule(t *testing.T) {
	w := api.Workload{Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}, Labels: map[string]string{"team": "ünïcode", "bad key!": "x"},
		NodeSelector: map[string]string{"zone": "a b"}}
	got := map[string]string{}
	for _, e := range CheckWorkload(&w) {
		got[e.Field] += e.Problem
	}
	for _, f := range []string{"labels.team", "labels.bad key!", "nodeSelector.zone"} {
		if !strings.Contains(got[f], core.LabelRule) {
			t.Errorf("%s: %q, want the rule %q", f, got[f], core.LabelRule)
		}
	}
}

// A bad egress policy or destination of a workload's network names its
// field.
func TestCheckNetwork(t *testing.T) {
	w := api.Workload{Resources: api.Resources{GPUs: 1000}, Command: []string{"x"}, Network: &api.Network{Egress: "none", Allow: []string{"10.0.0.0/33"}}}
	got := map[string]string{}
	for _, f := range CheckWorkload(&w) {
		got[f.Field] = f.Problem
	}
	if got["network.egress"] == "" || got["network.allow[0]"] == "" {
		t.Errorf("a bad network: %v", got)
	}
}
