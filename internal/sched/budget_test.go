package sched_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// A team whose hard budget is spent starts no preemptible work; its
// production work and other teams' work still start.
func TestBudgetExceededHoldsPreemptibleWork(t *testing.T) {
	n4 := node("n1").gpus(4, "H100").obj()
	c := cluster{
		nodes: []*core.Node{n4},
		teams: []core.Team{team("a").guaranteed(2000).obj(), team("b").obj()},
		pending: []*core.Workload{
			job("a-train").team("a").class("training").gpus(1000).created(t0).obj(),
			job("a-prod").team("a").class("production").gpus(1000).created(t0).obj(),
			job("b-train").team("b").class("training").gpus(1000).created(t0).obj(),
		},
	}
	snap := c.snapshot()
	snap.BudgetExceeded = map[core.TeamName]string{"a": "team a spent 120 of its 100 USD budget"}
	plan := sched.Schedule(snap, t0)
	placed, _, waiting := outcome(plan)
	var names []string
	for _, p := range placed {
		names = append(names, strings.Fields(p)[0])
	}
	if diff := cmp.Diff([]string{"a-prod", "b-train"}, names); diff != "" {
		t.Errorf("placed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a-train": sched.ReasonBudgetExceeded}, waiting); diff != "" {
		t.Errorf("waiting (-want +got):\n%s", diff)
	}
	for _, d := range plan.Unplaced {
		if d.Workload == "a-train" && d.Message != "team a spent 120 of its 100 USD budget" {
			t.Errorf("message %q", d.Message)
		}
	}
	// Without the budget, all three start.
	snap = c.snapshot()
	if placed, _, _ := outcome(sched.Schedule(snap, t0)); len(placed) != 3 {
		t.Errorf("without a spent budget: placed %v, want all three", placed)
	}
}
