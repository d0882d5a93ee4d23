package sched_test

import (
	"fmt"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// TestArrayCap: a job array capped at %3 never has more than three tasks
// running at once, whatever room there is; the others wait with
// ArrayLimit, and tasks of other arrays and other workloads are not held
// back by it.
func TestArrayCap(t *testing.T) {
	n := node("n1").gpus(8, h100).obj()
	task := func(array core.WorkloadID, i, maxRunning int) *workloadBuilder {
		b := job(string(core.ArrayTaskID(array, i))).team("a").class("training").gpus(1000).created(t0)
		b.w.Array = &core.ArrayTask{ID: array, Index: i, Start: 0, End: 9, MaxRunning: maxRunning}
		return b
	}
	for _, tc := range []struct {
		name    string
		running int // tasks of "wl-a" already running
		want    int // tasks of "wl-a" placed now
	}{
		{"none running", 0, 3},
		{"one running", 1, 2},
		{"at the cap", 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster{nodes: []*core.Node{n}, teams: []core.Team{team("a").guaranteed(8000).obj()}}
			for i := range tc.running {
				c.running = append(c.running, task("wl-a", i, 3).runs(n, i, t0).obj())
			}
			for i := tc.running; i < 10; i++ {
				c.pending = append(c.pending, task("wl-a", i, 3).obj())
			}
			// Another array, uncapped, and a plain job come after.
			c.pending = append(c.pending, task("wl-b", 0, 0).obj(), task("wl-b", 1, 0).obj(), job("plain").team("a").class("training").gpus(1000).created(t0).obj())
			plan := sched.Schedule(c.snapshot(), t0)
			placed := map[string]int{}
			for _, p := range plan.Placements {
				id := string(p.Workload)
				switch {
				case len(id) > 5 && id[:5] == "wl-a-":
					placed["a"]++
				case len(id) > 5 && id[:5] == "wl-b-":
					placed["b"]++
				default:
					placed[id]++
				}
			}
			if placed["a"] != tc.want {
				t.Errorf("placed %d tasks of the capped array, want %d (plan %+v)", placed["a"], tc.want, plan.Placements)
			}
			if placed["b"] != 2 || placed["plain"] != 1 {
				t.Errorf("others placed: %v, want both of wl-b and plain", placed)
			}
			limited := 0
			for _, d := range plan.Unplaced {
				if d.Reason == sched.ReasonArrayLimit {
					limited++
					if want := fmt.Sprintf("array wl-a runs 3 of its tasks, its cap (%%3)"); d.Message != want {
						t.Errorf("message %q, want %q", d.Message, want)
					}
				}
			}
			if limited != 10-tc.running-tc.want {
				t.Errorf("%d tasks wait with ArrayLimit, want %d", limited, 10-tc.running-tc.want)
			}
		})
	}
}

// TestArrayCapDemand: the tasks of a capped array beyond its cap are not
// demand for fair shares: an array of 100 tasks capped at 2 asks for 2
// GPUs of the team's share, and the other team's share takes the rest.
func TestArrayCapDemand(t *testing.T) {
	n := node("n1").gpus(8, h100).obj()
	c := cluster{nodes: []*core.Node{n}, teams: []core.Team{team("a").obj(), team("b").obj()}}
	for i := range 100 {
		b := job(string(core.ArrayTaskID("wl-a", i))).team("a").class("training").gpus(1000).created(t0)
		b.w.Array = &core.ArrayTask{ID: "wl-a", Index: i, End: 99, MaxRunning: 2}
		c.pending = append(c.pending, b.obj())
	}
	for i := range 10 {
		c.pending = append(c.pending, job(fmt.Sprintf("b%d", i)).team("b").class("training").gpus(1000).created(t0).obj())
	}
	plan := sched.Schedule(c.snapshot(), t0)
	shares := map[core.TeamName]int64{}
	for _, s := range plan.Shares {
		shares[s.Team] = s.FairShare
	}
	if shares["a"] != 2000 || shares["b"] != 6000 {
		t.Errorf("fair shares %v, want a 2000 (its cap) and b 6000", shares)
	}
}
