package sched_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// guaranteedIn adds a guarantee of milli-GPU in one pool.
func guaranteedIn(t core.Team, pool string, milli int64) core.Team {
	if t.GuaranteedByPool == nil {
		t.GuaranteedByPool = map[string]int64{}
	}
	t.GuaranteedByPool[pool] = milli
	return t
}

// TestPoolGuarantee: a team's guarantee in a pool reclaims from a team that
// borrows there, apart from the team's other work; work bound to another
// pool, or to none, counts against the total guarantee as before.
func TestPoolGuarantee(t *testing.T) {
	// No fair-share reclaim: only the guarantee rule may reclaim here.
	opts := sched.Options{StarvationAfter: 10 * time.Minute, MinRuntime: 5 * time.Minute}
	now := t0.Add(time.Hour)
	pa := node("pa").gpus(8, "H100").pool("a").obj()
	pb := node("pb").gpus(8, "H100").pool("b").obj()
	owner := guaranteedIn(team("owner").guaranteed(8000).obj(), "a", 8000)
	cases := []struct {
		name        string
		c           cluster
		wantVictims []string
		wantWaiting map[string]string
	}{{
		name: "work bound to the pool reclaims its guarantee there",
		c: cluster{
			nodes: []*core.Node{pa, pb},
			teams: []core.Team{owner, team("borrower").obj()},
			running: []*core.Workload{
				// owner's pool-b work fills its total guarantee.
				job("owner-b").team("owner").class("training").gpus(8000).created(t0).runs(pb, 0, minute(1)).obj(),
				job("borrow-a").team("borrower").class("training").gpus(8000).created(t0).runs(pa, 0, minute(1)).obj(),
			},
			pending: []*core.Workload{job("want-a").team("owner").class("training").gpus(8000).selector(core.LabelPool, "a").created(now).obj()},
		},
		wantVictims: []string{"borrow-a Reclaimed for want-a"},
		wantWaiting: map[string]string{"want-a": sched.ReasonPreempting},
	}, {
		name: "work bound to another pool is not covered",
		c: cluster{
			nodes: []*core.Node{pa, pb},
			teams: []core.Team{owner, team("borrower").obj()},
			running: []*core.Workload{
				// owner's pool-a work, within its pool guarantee, still
				// counts in its total.
				job("owner-a").team("owner").class("training").gpus(8000).created(t0).runs(pa, 0, minute(1)).obj(),
				job("borrow-b").team("borrower").class("training").gpus(8000).created(t0).runs(pb, 0, minute(1)).obj(),
			},
			pending: []*core.Workload{
				job("want-b").team("owner").class("training").gpus(8000).selector(core.LabelPool, "b").created(now).obj(),
			},
		},
		wantWaiting: map[string]string{"want-b": sched.ReasonUnschedulable},
	}, {
		name: "the team's work in the pool is within its pool guarantee, whatever its other work",
		c: cluster{
			nodes: []*core.Node{pa, pb},
			teams: []core.Team{owner, team("other").guaranteed(8000).obj()},
			running: []*core.Workload{
				// By the total alone owner-a (started later) would be
				// over quota: 4+8 GPUs against 8.
				job("owner-b").team("owner").class("training").gpus(4000).created(t0).runs(pb, 0, minute(1)).obj(),
				job("owner-a").team("owner").class("training").gpus(8000).created(t0).runs(pa, 0, minute(2)).obj(),
			},
			// other is within its total guarantee, yet finds nothing over
			// quota in pool a to reclaim.
			pending: []*core.Workload{job("other-a").team("other").class("training").gpus(8000).selector(core.LabelPool, "a").created(now).obj()},
		},
		wantWaiting: map[string]string{"other-a": sched.ReasonUnschedulable},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := opts.Schedule(tc.c.snapshot(), now)
			_, victims, waiting := outcome(plan)
			if diff := cmp.Diff(tc.wantVictims, victims); diff != "" {
				t.Errorf("preemptions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantWaiting, waiting); diff != "" {
				t.Errorf("waiting reasons (-want +got):\n%s", diff)
			}
		})
	}
}
