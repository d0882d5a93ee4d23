package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// units is n whole units of money.
func units(n float64) quantity.Money { return quantity.Money(n * float64(quantity.MoneyUnit)) }

func moneyPtr(m quantity.Money) *quantity.Money { return &m }

// perSecond is 3600 per GPU-hour: one unit per GPU-second.
var perSecond = units(3600)

func TestReplayCostOnDemandPerPolicy(t *testing.T) {
	// Four quarter-GPU tasks of 100 s on one GPU. gpufleet holds 4 × ¼ ×
	// 100 = 100 GPU-seconds; the reservation baseline holds a whole GPU
	// per task, 400 GPU-seconds. At one unit per GPU-second, on-demand
	// bills no idle time.
	cfg := ReplayConfig{Nodes: []core.Node{node("n1", 1)}, Prices: []api.Price{{Pool: ReplayDefaultPool, Kind: api.PriceOnDemand, Rate: perSecond}}, Currency: "EUR"}
	for i := range 4 {
		cfg.Tasks = append(cfg.Tasks, task(fmt.Sprintf("q%d", i), 250, 0, 100))
	}
	runs, err := ReplayPolicies(context.Background(), cfg, []string{ReplayGPUFleet, ReplayReservation})
	if err != nil {
		t.Fatal(err)
	}
	want := func(gpuSeconds float64) *ReplayCost {
		total := units(gpuSeconds)
		return &ReplayCost{Currency: "EUR", Total: total, AcceleratorCost: total, GPUHours: gpuSeconds / 3600,
			CompletedTasks: 4, CostPerCompletedTask: moneyPtr(total / 4),
			ByTeam: []api.CostRow{{Name: "default", GPUHours: gpuSeconds / 3600, AcceleratorCost: total, TotalCost: total,
				AcceptedOutputs: 4, Unit: "job", CostPerAcceptedOutput: moneyPtr(total / 4),
				OutputsByUnit: []api.UnitOutputs{{Unit: "job", Accepted: 4, CostPerAccepted: moneyPtr(total / 4)}}}}}
	}
	for i, w := range []*ReplayCost{want(100), want(400)} {
		if diff := cmp.Diff(w, runs[i].Cost, approx); diff != "" {
			t.Errorf("%s: cost (-want +got):\n%s", runs[i].Policy, diff)
		}
	}

	// Without prices there is no cost.
	cfg.Prices = nil
	if res := replay(t, cfg); res.Cost != nil {
		t.Errorf("cost without prices: %+v", res.Cost)
	}
}

func TestReplayCostOwnedBillsIdleGPUs(t *testing.T) {
	// Two owned GPUs from 0 to 100 s: a whole-GPU task holds one for 100 s,
	// a quarter-GPU task a quarter of one for 50 s. Owned GPUs are billed
	// held or not: 200 GPU-seconds, of which 200 − 112.5 = 87.5 idle.
	res := replay(t, ReplayConfig{
		Nodes:  []core.Node{node("n1", 2)},
		Tasks:  []trace.Task{task("whole", 1000, 0, 100), task("quarter", 250, 0, 50)},
		Prices: []api.Price{{Pool: ReplayDefaultPool, Kind: api.PriceOwned, PerGPUHour: perSecond}},
	})
	want := &ReplayCost{Currency: "USD", Total: units(200), AcceleratorCost: units(200), IdleCost: units(87.5),
		GPUHours: 112.5 / 3600, IdleGPUHours: 87.5 / 3600, CompletedTasks: 2, CostPerCompletedTask: moneyPtr(units(100)),
		ByTeam: []api.CostRow{
			{Name: "default", GPUHours: 112.5 / 3600, AcceleratorCost: units(112.5), TotalCost: units(112.5),
				AcceptedOutputs: 2, Unit: "job", CostPerAcceptedOutput: moneyPtr(units(56.25)),
				OutputsByUnit: []api.UnitOutputs{{Unit: "job", Accepted: 2, CostPerAccepted: moneyPtr(units(56.25))}}},
			{Name: api.IdleRow, AcceleratorCost: units(87.5), TotalCost: units(87.5), IdleGPUHours: 87.5 / 3600, OutputsByUnit: []api.UnitOutputs{}},
		}}
	if diff := cmp.Diff(want, res.Cost, approx); diff != "" {
		t.Errorf("cost (-want +got):\n%s", diff)
	}
	if got := res.Cost.IdleShare(); got != 87.5/200 {
		t.Errorf("idle share %g, want %g", got, 87.5/200)
	}
}

func TestReplayCostPoolsAndVersions(t *testing.T) {
	// n1 is in pool h100, priced at one unit per GPU-second and twice that
	// from 50 s of virtual time; n2 names no pool (ReplayDefaultPool) and
	// has no price. Two whole-GPU tasks run 0-100 s, one on each node: the
	// one on n1 costs 50 + 100, the other nothing.
	n1 := node("n1", 1)
	n1.Pool = "h100"
	res := replay(t, ReplayConfig{
		Nodes: []core.Node{n1, node("n2", 1)},
		Tasks: []trace.Task{task("a", 1000, 0, 100), task("b", 1000, 0, 100)},
		Prices: []api.Price{
			{Pool: "h100", Kind: api.PriceOnDemand, Rate: perSecond},
			{Pool: "h100", Kind: api.PriceOnDemand, Rate: 2 * perSecond, EffectiveFrom: ReplayEpoch.Add(50 * time.Second)},
		},
	})
	c := res.Cost
	if c == nil {
		t.Fatal("no cost")
	}
	got := struct {
		Total, PerTask quantity.Money
		Completed      int64
		GPUHours       float64
		Unpriced       []string
	}{c.Total, *c.CostPerCompletedTask, c.CompletedTasks, c.GPUHours, c.UnpricedPools}
	want := got
	want.Total, want.PerTask, want.Completed, want.GPUHours, want.Unpriced = units(150), units(75), 2, 200.0/3600, []string{ReplayDefaultPool}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestReplayCostRefusesBadPrices(t *testing.T) {
	base := ReplayConfig{Nodes: []core.Node{node("n1", 1)}, Tasks: []trace.Task{task("a", 1000, 0, 10)}}
	tests := []struct {
		name   string
		prices []api.Price
		want   string
	}{
		{"no rate", []api.Price{{Pool: "local", Kind: api.PriceOnDemand}}, "prices[0].rate: is required"},
		{"unknown kind", []api.Price{{Pool: "local", Kind: "spot", Rate: 1}}, "prices[0].kind"},
		{"two versions from the same time", []api.Price{{Pool: "local", Kind: api.PriceOnDemand, Rate: 1}, {Pool: "local", Kind: api.PriceOwned, PerGPUHour: 1}},
			"prices[1].effectiveFrom: pool local already has a price version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Prices = tc.prices
			_, err := Replay(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestReplayPoolsAndOnDemandPrices(t *testing.T) {
	a, b := node("a", 1), node("b", 1)
	a.Pool = "spot"
	nodes := []core.Node{b, a, node("c", 2)}
	if diff := cmp.Diff([]string{"local", "spot"}, ReplayPools(nodes)); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	want := []api.Price{{Pool: "local", Kind: api.PriceOnDemand, Rate: 7}, {Pool: "spot", Kind: api.PriceOnDemand, Rate: 7}}
	if diff := cmp.Diff(want, OnDemandPrices(nodes, 7)); diff != "" {
		t.Errorf("prices (-want +got):\n%s", diff)
	}
}

// TestReplayCostProperty replays random traces on one team (so nothing is
// preempted) and checks the cost against the tasks by hand. At one unit per
// GPU-second: on-demand bills what the tasks hold, each task's share (a
// whole GPU under the reservation baseline when it asks for a fraction)
// times its runtime; owned bills every GPU from the first submission to the
// last completion, and what no task held is idle. Every task completes and
// counts one.
func TestReplayCostProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gpus := rapid.IntRange(1, 3).Draw(t, "gpus")
		policy := rapid.SampledFrom([]string{ReplayGPUFleet, ReplayReservation}).Draw(t, "policy")
		owned := rapid.Bool().Draw(t, "owned")
		n := rapid.IntRange(1, 8).Draw(t, "tasks")
		cfg := ReplayConfig{Nodes: []core.Node{node("n1", gpus)}, Policy: policy}
		if owned {
			cfg.Prices = []api.Price{{Pool: ReplayDefaultPool, Kind: api.PriceOwned, PerGPUHour: perSecond}}
		} else {
			cfg.Prices = []api.Price{{Pool: ReplayDefaultPool, Kind: api.PriceOnDemand, Rate: perSecond}}
		}
		var heldMilliSeconds int64
		for i := range n {
			milli := rapid.SampledFrom([]int64{100, 250, 500, 1000}).Draw(t, "milli")
			sec := rapid.IntRange(0, 50).Draw(t, "submitted")
			run := rapid.IntRange(1, 100).Draw(t, "runtime")
			cfg.Tasks = append(cfg.Tasks, task(fmt.Sprintf("t%d", i), milli, float64(sec), float64(run)))
			held := milli
			if policy == ReplayReservation {
				held = 1000
			}
			heldMilliSeconds += held * int64(run)
		}
		res, err := Replay(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := res.Cost
		if c == nil || res.Completed != n || res.Preemptions != 0 {
			t.Fatalf("cost %v, %d of %d completed, %d preemptions; want a cost and all completed, none preempted", c, res.Completed, n, res.Preemptions)
		}
		// A milli-GPU-second at one unit per GPU-second is 1000 micro-units.
		held := quantity.Money(heldMilliSeconds) * 1000
		want := struct{ Total, Accelerator, Idle quantity.Money }{held, held, 0}
		if owned {
			billed := quantity.Money(int64(gpus)*int64(res.Makespan)) * quantity.MoneyUnit
			want = struct{ Total, Accelerator, Idle quantity.Money }{billed, billed, billed - held}
		}
		got := struct{ Total, Accelerator, Idle quantity.Money }{c.Total, c.AcceleratorCost, c.IdleCost}
		if got != want {
			t.Fatalf("cost %+v, want %+v (makespan %gs)", got, want, res.Makespan)
		}
		if c.CompletedTasks != int64(n) || c.CostPerCompletedTask == nil {
			t.Fatalf("%d completed tasks, per task %v; want %d and a cost", c.CompletedTasks, c.CostPerCompletedTask, n)
		}
		if per, want := *c.CostPerCompletedTask, (2*c.Total+quantity.Money(n))/(2*quantity.Money(n)); per != want {
			t.Fatalf("cost per completed task %v, want %v / %d rounded half-up = %v", per, c.Total, n, want)
		}
		if d := c.GPUHours - float64(heldMilliSeconds)/1000/3600; d > 1e-9 || d < -1e-9 {
			t.Fatalf("GPU-hours %g, want %g", c.GPUHours, float64(heldMilliSeconds)/1000/3600)
		}
	})
}
