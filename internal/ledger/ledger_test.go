package ledger

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/store"
)

var t0 = time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)

func setup(t *testing.T) (*store.Store, *Ledger) {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenWith(ctx, filepath.Join(t.TempDir(), "gpufleet.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	n := core.Node{Name: "n1", Pool: "east", Schedulable: true, MilliCPU: 8000, MemoryMiB: 65536,
		GPUs: []core.GPU{{Index: 0, UUID: "g0", Model: "H100", MemoryMiB: 81920}, {Index: 1, UUID: "g1", Model: "H100", MemoryMiB: 81920}}}
	if err := st.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	return st, &Ledger{Store: st, Currency: "USD", DefaultPool: "local", Since: t0}
}

// run places a 2-GPU workload asking 4 CPUs at start and finishes it at end.
func run(t *testing.T, st *store.Store, start, end time.Time) core.WorkloadID {
	t.Helper()
	ctx := context.Background()
	w, _, err := st.CreateWorkload(ctx, &core.Workload{CreatedAt: start, Spec: core.Spec{Team: "a", Owner: "ann", Priority: "training",
		Command: []string{"x"}, Request: core.Request{MilliGPU: 2000, MilliCPU: 4000}}}, nil, start)
	if err != nil {
		t.Fatal(err)
	}
	as := []core.Assignment{{Node: "n1", GPUIndex: 0, GPUUUID: "g0", MilliGPU: 1000, MemoryMiB: 81920}, {Node: "n1", GPUIndex: 1, GPUUUID: "g1", MilliGPU: 1000, MemoryMiB: 81920}}
	if res, err := st.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: as}}}, start); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	zero := 0
	if _, err := st.Finish(ctx, w.ID, 1, core.Succeeded, "Completed", "", &zero, end); err != nil {
		t.Fatal(err)
	}
	return w.ID
}

func TestInputKeepsThePoolAnIntervalBeganIn(t *testing.T) {
	ctx := context.Background()
	st, l := setup(t)
	id := run(t, st, t0, t0.Add(time.Hour))
	// The node moves to another pool afterwards.
	ns, _ := st.Nodes(ctx)
	n := ns[0]
	n.Pool = "west"
	if err := st.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	in, err := l.Input(ctx, t0, t0.Add(2*time.Hour), t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Intervals) != 2 {
		t.Fatalf("%d intervals, want one per device", len(in.Intervals))
	}
	host := int64(0)
	for _, iv := range in.Intervals {
		if iv.Pool != "east" || iv.Workload != id {
			t.Errorf("interval %+v: want pool east, where it ran", iv)
		}
		host += iv.HostMilliCPU
	}
	if host != 4000 {
		t.Errorf("host CPU over the intervals %d, want the replica's 4000 once", host)
	}
	if w := in.Workloads[id]; w == nil || w.Owner != "ann" || w.Phase != core.Succeeded || w.Attempts != 1 {
		t.Errorf("workload %+v", w)
	}
	if len(in.Pools) != 1 || in.Pools[0] != (cost.PoolGPUs{Pool: "west", GPUs: 2}) {
		t.Errorf("pools %+v", in.Pools)
	}
}

func TestPricesAndReport(t *testing.T) {
	ctx := context.Background()
	st, l := setup(t)
	l.FilePrices = []api.Price{{Pool: "east", Kind: api.PriceOnDemand, Rate: 3600 * quantity.MoneyUnit}}
	run(t, st, t0, t0.Add(10*time.Second))
	ps, err := l.Prices(ctx)
	if err != nil || len(ps) != 1 || !ps[0].EffectiveFrom.Equal(t0) {
		t.Fatalf("prices %+v %v: want the file's version from the store's birth", ps, err)
	}
	rep, err := l.Report(ctx, api.CostByTeam, t0, t0.Add(time.Minute), t0.Add(time.Minute), cost.Visibility{All: true})
	if err != nil {
		t.Fatal(err)
	}
	// Two GPUs for 10 s at one unit per GPU-second.
	if rep.Total.AcceleratorCost != 20*quantity.MoneyUnit {
		t.Errorf("accelerator cost %s, want 20", rep.Total.AcceleratorCost)
	}
	// A new version: not in the past, not at an existing version's time.
	now := t0.Add(time.Hour)
	if _, err := l.AddPrice(ctx, api.Price{Pool: "east", Kind: api.PriceOnDemand, Rate: 1, EffectiveFrom: t0.Add(time.Minute)}, now); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("a version in the past: %v", err)
	}
	p, err := l.AddPrice(ctx, api.Price{Pool: "east", Kind: api.PriceOnDemand, Rate: 2 * quantity.MoneyUnit}, now)
	if err != nil || !p.EffectiveFrom.Equal(now) {
		t.Fatalf("a version from now: %+v %v", p, err)
	}
	if ps, _ := l.Prices(ctx); len(ps) != 2 {
		t.Errorf("prices after adding one: %+v", ps)
	}
}

func TestBudgetGates(t *testing.T) {
	ctx := context.Background()
	st, l := setup(t)
	l.FilePrices = []api.Price{{Pool: "east", Kind: api.PriceOnDemand, Rate: 3600 * quantity.MoneyUnit}}
	now := time.Now().UTC()
	run(t, st, now.Add(-20*time.Second), now.Add(-10*time.Second))
	if _, err := l.SetBudget(ctx, "a", api.Budget{Monthly: 10 * quantity.MoneyUnit, Hard: true}); err != nil {
		t.Fatal(err)
	}
	gates, err := l.Gates(ctx, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	if g := gates["a"]; !g.Exceeded || g.Month != now.Format("2006-01") {
		t.Errorf("gates %+v: want team a's hard budget of 10 spent (20)", gates)
	}
	if _, err := l.SetBudget(ctx, "nosuch", api.Budget{Monthly: 1}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("a budget for a missing team: %v", err)
	}
	if err := l.DeleteBudget(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if gates, _ := l.Gates(ctx, time.Now().UTC()); len(gates) != 0 {
		t.Errorf("gates after the budget is gone: %+v", gates)
	}
}

// A budget's run-out time is never in the past: a forecast that an earlier
// evaluation made and the clock has passed is left out; once the budget is
// spent, the status says since when instead.
func TestBudgetRunsOutInTheFutureOrSaysSinceWhen(t *testing.T) {
	ctx := context.Background()
	st, l := setup(t)
	l.FilePrices = []api.Price{{Pool: "east", Kind: api.PriceOnDemand, Rate: 3600 * quantity.MoneyUnit}}
	// Two GPUs from t0, still held: 2 units a second.
	w, _, err := st.CreateWorkload(ctx, &core.Workload{CreatedAt: t0, Spec: core.Spec{Team: "a", Owner: "ann", Priority: "training",
		Command: []string{"x"}, Request: core.Request{MilliGPU: 2000}}}, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	as := []core.Assignment{{Node: "n1", GPUIndex: 0, GPUUUID: "g0", MilliGPU: 1000, MemoryMiB: 81920}, {Node: "n1", GPUIndex: 1, GPUUUID: "g1", MilliGPU: 1000, MemoryMiB: 81920}}
	if res, err := st.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: as}}}, t0); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if _, err := l.SetBudget(ctx, "a", api.Budget{Monthly: 210 * quantity.MoneyUnit, Hard: true}); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(100 * time.Second) // spent 200 of 210: 5 s left
	bs, err := l.Budgets(ctx, at, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b := bs["a"]; b.Spent != 200*quantity.MoneyUnit || b.ExhaustedAt == nil || !b.ExhaustedAt.Equal(at.Add(5*time.Second)) || b.ExhaustedSince != nil {
		t.Fatalf("at t0+100s: %+v, want 200 spent, running out 5 s later", b)
	}
	if b := budgetsAt(t, l, at.Add(2*time.Second), time.Hour)["a"]; b.ExhaustedAt == nil || !b.ExhaustedAt.Equal(at.Add(5*time.Second)) {
		t.Errorf("2 s later, from the same evaluation: runs out at %v, want t0+105s", b.ExhaustedAt)
	}
	if b := budgetsAt(t, l, at.Add(10*time.Second), time.Hour)["a"]; b.ExhaustedAt != nil {
		t.Errorf("10 s later, from the same evaluation: runs out at %v, in the past", b.ExhaustedAt)
	}
	b := budgetsAt(t, l, at.Add(20*time.Second), 0)["a"]
	if b.ExhaustedAt != nil || b.ExhaustedSince == nil || !b.ExhaustedSince.Equal(t0.Add(105*time.Second)) || !b.Exceeded {
		t.Errorf("evaluated 20 s later: runs out at %v, spent since %v, want since t0+105s", b.ExhaustedAt, b.ExhaustedSince)
	}
}

// budgetsAt is l.Budgets as of now from an evaluation at most maxAge old.
func budgetsAt(t *testing.T, l *Ledger, now time.Time, maxAge time.Duration) map[core.TeamName]api.BudgetStatus {
	t.Helper()
	bs, err := l.Budgets(context.Background(), now, maxAge)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// Gates never waits for an evaluation of the budgets: it answers the last
// one and, once that is BudgetRefresh old, starts the next in the
// background, whose answer the next Gates gives. In a synctest bubble the
// refresh is done once every goroutine waits (synctest.Wait), and the
// evaluation's age is on the bubble's clock.
func TestGatesRefreshInTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		time.Sleep(time.Hour) // the bubble's clock: 01:00 on the first of a month
		st, l := setup(t)
		now := time.Now().UTC()
		l.FilePrices = []api.Price{{Pool: "east", Kind: api.PriceOnDemand, Rate: 3600 * quantity.MoneyUnit}}
		l.Since = now.Add(-time.Minute)                                // the file's price applies from then
		run(t, st, now.Add(-20*time.Second), now.Add(-10*time.Second)) // 2 GPUs for 10 s: 20
		if _, err := l.SetBudget(ctx, "a", api.Budget{Monthly: 30 * quantity.MoneyUnit, Hard: true}); err != nil {
			t.Fatal(err)
		}
		exceeded := func() bool {
			t.Helper()
			gates, err := l.Gates(ctx, time.Now().UTC())
			if err != nil {
				t.Fatal(err)
			}
			return gates["a"].Exceeded
		}
		if exceeded() {
			t.Fatal("20 of a budget of 30 spent: exceeded, want not")
		}
		run(t, st, now.Add(-10*time.Second), now) // 20 more: 40 of 30
		synctest.Wait()
		if exceeded() {
			t.Error("exceeded by an evaluation younger than BudgetRefresh, which Gates should have answered")
		}
		time.Sleep(BudgetRefresh) // the bubble's clock: the evaluation is that old
		if exceeded() {
			t.Error("Gates waited for the refresh, want the last evaluation at once")
		}
		synctest.Wait() // the refresh Gates started is done
		if !exceeded() {
			t.Error("not exceeded after the refresh: 40 of 30 spent")
		}
	})
}
