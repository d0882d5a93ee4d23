package ledger

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Ledger reads costs from a store.
type Ledger struct {
	Store    *store.Store
	Currency string
	// FilePrices are the versions the configuration file gives; they are
	// never stored. One without EffectiveFrom applies from Since.
	FilePrices []api.Price
	// Since is when this server's store was made (its first team's
	// creation): nothing was billed before.
	Since time.Time
	// DefaultPool is the pool of a node that names none.
	DefaultPool string

	mu         sync.Mutex
	budgets    budgetCache
	gen        int    // counts the changes of budgets, so that a stale evaluation is not kept
	refreshing bool   // a background evaluation of the budgets runs
	refreshErr string // its last error, told by the next Gates
	acc        accrued
	reached    map[reachedKey]time.Time // when budgets of this month were spent
}

// Prices returns every price version, the file's and the stored ones, by
// pool and time, each with its GPUHourRate (cost.HourlyRate).
func (l *Ledger) Prices(ctx context.Context) ([]api.Price, error) {
	vs, err := l.Store.Prices(ctx)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(l.FilePrices)
	for i := range out {
		if out[i].EffectiveFrom.IsZero() {
			out[i].EffectiveFrom = l.Since
		}
	}
	for _, v := range vs {
		var p api.Price
		if err := json.Unmarshal(v.Spec, &p); err != nil {
			return nil, fmt.Errorf("stored price of pool %s: %w", v.Pool, err)
		}
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(a, b api.Price) int {
		if a.Pool != b.Pool {
			if a.Pool < b.Pool {
				return -1
			}
			return 1
		}
		return a.EffectiveFrom.Compare(b.EffectiveFrom)
	})
	for i := range out {
		out[i].GPUHourRate = cost.HourlyRate(out[i])
	}
	return out, nil
}

// AddPrice checks a new price version and stores it: valid, not in the
// past and after the pool's latest version (a new price applies from then
// on and never rewrites the past). An EffectiveFrom left zero means now.
// Problems are *api.Error-ready field errors (core.ErrInvalid).
func (l *Ledger) AddPrice(ctx context.Context, p api.Price, now time.Time) (api.Price, error) {
	if p.EffectiveFrom.IsZero() {
		p.EffectiveFrom = now
	}
	p.EffectiveFrom = p.EffectiveFrom.UTC().Truncate(time.Second)
	p.GPUHourRate = 0 // the server's to say, never stored
	if fe := cost.CheckPrice(p); len(fe) > 0 {
		return p, &FieldErrors{fe}
	}
	existing, err := l.Prices(ctx)
	if err != nil {
		return p, err
	}
	if fe := cost.CheckVersions(existing, p, now.Truncate(time.Second)); len(fe) > 0 {
		return p, &FieldErrors{fe}
	}
	spec, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	p.GPUHourRate = cost.HourlyRate(p)
	return p, l.Store.AddPrice(ctx, store.PriceVersion{Pool: p.Pool, EffectiveFrom: p.EffectiveFrom, CreatedAt: now, Spec: spec})
}

// FieldErrors is a refused price or budget, field by field.
type FieldErrors struct{ Fields []api.FieldError }

func (e *FieldErrors) Error() string {
	s := "invalid"
	for _, f := range e.Fields {
		s += "; " + f.Field + ": " + f.Problem
	}
	return s
}

// Unwrap makes it a core.ErrInvalid.
func (e *FieldErrors) Unwrap() error { return core.ErrInvalid }

// Input gathers the ledger's input for [from, to) as of now.
func (l *Ledger) Input(ctx context.Context, from, to, now time.Time) (cost.Input, error) {
	in := cost.Input{From: from, To: to, Now: now, Currency: l.Currency}
	var err error
	if in.Prices, err = l.Prices(ctx); err != nil {
		return in, err
	}
	nodes, err := l.Store.Nodes(ctx)
	if err != nil {
		return in, err
	}
	poolOf := map[core.NodeName]string{}
	gpus := map[string]int{}
	for _, n := range nodes {
		p := cmp.Or(n.Pool, l.DefaultPool)
		poolOf[n.Name] = p
		gpus[p] += len(n.GPUs)
	}
	for p, n := range gpus {
		in.Pools = append(in.Pools, cost.PoolGPUs{Pool: p, GPUs: n})
	}
	slices.SortFunc(in.Pools, func(a, b cost.PoolGPUs) int {
		if a.Pool < b.Pool {
			return -1
		}
		return 1
	})
	allocs, err := l.Store.AllocationsBetween(ctx, from, to)
	if err != nil {
		return in, err
	}
	// The workloads that held devices or reported outputs in the window.
	outs, err := l.Store.OutputsBetween(ctx, from, to)
	if err != nil {
		return in, err
	}
	var ids []core.WorkloadID
	seen := map[core.WorkloadID]bool{}
	for _, a := range allocs {
		if !seen[a.WorkloadID] {
			seen[a.WorkloadID] = true
			ids = append(ids, a.WorkloadID)
		}
	}
	for _, o := range outs {
		if !seen[o.Workload] {
			seen[o.Workload] = true
			ids = append(ids, o.Workload)
		}
	}
	ws, err := l.Store.WorkloadsByID(ctx, ids)
	if err != nil {
		return in, err
	}
	in.Workloads = make(map[core.WorkloadID]*cost.Workload, len(ws))
	for id, w := range ws {
		cw := &cost.Workload{ID: id, Name: w.Name, Team: w.Team, Owner: w.Owner, Kind: string(w.Kind), Labels: w.Labels,
			Attempts: w.Status.Attempts, Phase: w.Status.Phase}
		if w.Status.FinishedAt != nil {
			cw.FinishedAt = *w.Status.FinishedAt
		}
		if o := w.Status.Outputs; o != nil {
			cw.Reported = o.Accepted != 0 || o.Rejected != 0 || o.Unit != ""
			cw.EgressBytes = o.EgressBytes
		}
		in.Workloads[id] = cw
	}
	for _, o := range outs {
		if cw := in.Workloads[o.Workload]; cw != nil {
			cw.Outputs = append(cw.Outputs, cost.Output{At: o.At, Unit: o.Unit, Accepted: o.Accepted, Rejected: o.Rejected})
		}
	}
	// Host resources are billed once per replica of each attempt: on the
	// replica's first device interval.
	type replicaKey struct {
		id               core.WorkloadID
		attempt, replica int
	}
	hosted := map[replicaKey]bool{}
	in.Intervals = make([]cost.Interval, 0, len(allocs))
	for _, a := range allocs {
		// The pool the node was in when the interval began; for older
		// intervals, the node's pool now.
		iv := cost.Interval{Workload: a.WorkloadID, Attempt: a.Attempt, Pool: cmp.Or(a.Pool, poolOf[a.Node], l.DefaultPool), Node: a.Node,
			GPU: a.GPUIndex, Milli: a.MilliGPU, Start: a.Start, Outcome: cost.Outcome(a.Outcome)}
		if a.End != nil {
			iv.End = *a.End
		}
		k := replicaKey{a.WorkloadID, a.Attempt, a.Replica}
		if w := ws[a.WorkloadID]; w != nil && !hosted[k] {
			hosted[k] = true
			iv.HostMilliCPU, iv.HostMemoryMiB = w.Request.MilliCPU, w.Request.MemoryMiB
		}
		in.Intervals = append(in.Intervals, iv)
	}
	// Volumes have no pool: they are billed in the default pool.
	vols, err := l.Store.VolumeHistory(ctx, from, to)
	if err != nil {
		return in, err
	}
	in.Volumes = make([]cost.Volume, 0, len(vols))
	for _, v := range vols {
		in.Volumes = append(in.Volumes, cost.Volume{Team: v.Team, Name: v.Name, Pool: l.DefaultPool, SizeBytes: v.SizeBytes,
			Created: v.CreatedAt, Deleted: v.DeletedAt})
	}
	return in, nil
}

// Report is cost.Report over the store for [from, to) as of now, with the
// efficiency of the attempts that ran in the window (which bills nothing,
// so that series, exports and budgets go without it).
func (l *Ledger) Report(ctx context.Context, by string, from, to, now time.Time, vis cost.Visibility) (api.CostReport, error) {
	in, err := l.Input(ctx, from, to, now)
	if err != nil {
		return api.CostReport{}, err
	}
	if in.Attempts, err = l.Store.AttemptsBetween(ctx, from, to); err != nil {
		return api.CostReport{}, err
	}
	return cost.Report(in, by, vis)
}

// Series is cost.Series over the store for [from, to) as of now.
func (l *Ledger) Series(ctx context.Context, by string, step time.Duration, from, to, now time.Time, vis cost.Visibility) (api.CostSeries, error) {
	in, err := l.Input(ctx, from, to, now)
	if err != nil {
		return api.CostSeries{}, err
	}
	return cost.Series(in, by, step, vis)
}

// ExportFOCUS is cost.ExportFOCUS over the store for [from, to) as of
// now, billed by account.
func (l *Ledger) ExportFOCUS(ctx context.Context, w io.Writer, granularity time.Duration, from, to, now time.Time, vis cost.Visibility, account string) error {
	in, err := l.Input(ctx, from, to, now)
	if err != nil {
		return err
	}
	_, err = cost.ExportFOCUS(w, in, granularity, vis, account)
	return err
}
