package cost

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

func checkBy(by string) error {
	switch by {
	case api.CostByTeam, api.CostByPool, api.CostByWorkload, api.CostByUser:
		return nil
	}
	if k, ok := strings.CutPrefix(by, api.CostByLabel); ok && k != "" {
		return nil
	}
	return fmt.Errorf("by %q is not a dimension: one of team, pool, workload, user or label:KEY", by)
}

func checkWindow(in *Input) error {
	if in.From.After(in.To) {
		return fmt.Errorf("from %s is after to %s", in.From.UTC().Format(time.RFC3339), in.To.UTC().Format(time.RFC3339))
	}
	return nil
}

// reportCells is the ledger of the whole window, cell by cell: each
// component rounded once over all the cells and apportioned to them.
type reportCells struct {
	e     *engine
	s     cellSums
	money [][nComp]int64
}

func ledgerOf(in *Input) *reportCells {
	e := run(in, []int64{nanos(in.From), nanos(in.To)}, false)
	s := e.sums()
	return &reportCells{e: e, s: s, money: e.money(s.a, func(i int) int32 { return int32(i) })}
}

// row accumulates a report row exactly.
type row struct {
	name                         string
	money                        [nComp]int64
	gpu, failed, preempted, idle u128
	accepted, rejected, retries  int64
	units                        map[string]bool
}

func (r *row) addMoney(m [nComp]int64) {
	for c := range nComp {
		r.money[c] = satAdd(r.money[c], m[c])
	}
}

func (r *row) addWorkload(w *Workload) {
	if w.Attempts > 1 {
		r.retries += int64(w.Attempts - 1)
	}
	unit := ""
	switch {
	case w.Reported:
		r.accepted += w.Outputs.Accepted
		r.rejected += w.Outputs.Rejected
		unit = w.Outputs.Unit
	case w.Phase == core.Succeeded:
		r.accepted++
		unit = "job"
	}
	if unit != "" {
		if r.units == nil {
			r.units = map[string]bool{}
		}
		r.units[unit] = true
	}
}

func (r *row) merge(o *row) {
	r.addMoney(o.money)
	r.gpu, _ = r.gpu.add(o.gpu)
	r.failed, _ = r.failed.add(o.failed)
	r.preempted, _ = r.preempted.add(o.preempted)
	r.idle, _ = r.idle.add(o.idle)
	r.accepted += o.accepted
	r.rejected += o.rejected
	r.retries += o.retries
	for u := range o.units {
		if r.units == nil {
			r.units = map[string]bool{}
		}
		r.units[u] = true
	}
}

func (r *row) wire() api.CostRow {
	out := api.CostRow{
		Name:              r.name,
		GPUHours:          hours(r.gpu),
		AcceleratorCost:   Money(r.money[cAccel]),
		HostCost:          Money(r.money[cHost]),
		StorageCost:       Money(r.money[cStorage]),
		NetworkCost:       Money(r.money[cNetwork]),
		LicenceCost:       Money(r.money[cLicence]),
		AcceptedOutputs:   r.accepted,
		RejectedOutputs:   r.rejected,
		IdleGPUHours:      hours(r.idle),
		FailedGPUHours:    hours(r.failed),
		PreemptedGPUHours: hours(r.preempted),
		Retries:           r.retries,
	}
	var total int64
	for c := range nComp {
		total = satAdd(total, r.money[c])
	}
	out.TotalCost = Money(total)
	switch len(r.units) {
	case 0:
	case 1:
		for u := range r.units {
			out.Unit = u
		}
	default:
		out.Unit = "mixed"
	}
	// A cost per output of several units (images and jobs) would mean
	// nothing: it is null, as without outputs.
	if r.accepted > 0 && len(r.units) <= 1 {
		m := Money(perOutput(total, r.accepted))
		out.CostPerAcceptedOutput = &m
	}
	return out
}

// perOutput is total / accepted rounded half-up to a micro-unit.
func perOutput(total, accepted int64) int64 {
	if total <= 0 || accepted <= 0 {
		return 0
	}
	// (2·total + accepted) / (2·accepted), in 128 bits.
	hi, lo := bits.Mul64(uint64(total), 2)
	lo, c := bits.Add64(lo, uint64(accepted), 0)
	hi += c
	q, _ := bits.Div64(hi, lo, 2*uint64(accepted))
	return int64(q)
}

// rows groups the visible cells into rows by dimension.
func (rc *reportCells) rows(by string, vis Visibility) []*row {
	e := rc.e
	byName := map[string]*row{}
	var out []*row
	get := func(name string) *row {
		r := byName[name]
		if r == nil {
			r = &row{name: name}
			byName[name] = r
			out = append(out, r)
		}
		return r
	}
	for i := range e.cells {
		c := int32(i)
		if !e.visible(c, vis) {
			continue
		}
		r := get(e.rowName(c, by))
		r.addMoney(rc.money[i])
		r.gpu, _ = r.gpu.add(rc.s.gpu[i])
		r.failed, _ = r.failed.add(rc.s.failed[i])
		r.preempted, _ = r.preempted.add(rc.s.preempted[i])
		r.idle, _ = r.idle.add(rc.s.idle[i])
	}
	for i := range e.wls {
		x := &e.wls[i]
		if !x.counted {
			continue
		}
		c := e.cellOf(int32(i), x.home) // exists: workloadCharges made it
		if !e.visible(c, vis) {
			continue
		}
		get(e.rowName(c, by)).addWorkload(x.w)
	}
	return out
}

// Report groups the ledger of in by a dimension: api.CostByTeam, CostByPool,
// CostByWorkload (a row's name is the workload's ID), CostByUser or
// "label:KEY"; a workload without the value falls in the row "(none)".
// Rows are sorted by total cost, highest first, then by name. The caller
// sees the rows of the teams vis allows (in a pool row, only their part);
// the idle row (api.IdleRow) only when vis.All. Total is the sum of the
// rows shown. An unknown dimension is an error naming it; so is From after
// To.
func Report(in Input, by string, vis Visibility) (api.CostReport, error) {
	rep := api.CostReport{Currency: in.Currency, From: in.From, To: in.To, By: by, Items: []api.CostRow{}}
	if err := checkBy(by); err != nil {
		return rep, err
	}
	if err := checkWindow(&in); err != nil {
		return rep, err
	}
	rc := ledgerOf(&in)
	rows := rc.rows(by, vis)
	var total row
	for _, r := range rows {
		total.merge(r)
		rep.Items = append(rep.Items, r.wire())
	}
	slices.SortFunc(rep.Items, func(a, b api.CostRow) int {
		if c := cmp.Compare(b.TotalCost, a.TotalCost); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	rep.Total = total.wire()
	return rep, nil
}

// MaxSeriesPoints bounds a series.
const MaxSeriesPoints = 2000

// Series is the report's rows' total cost in each step of [From, To) (the
// last step ends at To), for a stacked plot. Each step is a report of its
// own: its components are rounded once over the step and apportioned to
// its rows, so a row's steps add up to its report total within a few
// micro-units, not always exactly. A network charge or a licence per
// workload falls in the step of its instant. step must be at least a
// minute and make at most MaxSeriesPoints steps.
func Series(in Input, by string, step time.Duration, vis Visibility) (api.CostSeries, error) {
	out := api.CostSeries{Currency: in.Currency, From: in.From, To: in.To, By: by, Step: shortDuration(step), Points: []api.CostSeriesPoint{}}
	if err := checkBy(by); err != nil {
		return out, err
	}
	if err := checkWindow(&in); err != nil {
		return out, err
	}
	if step < time.Minute {
		return out, fmt.Errorf("step %s is shorter than a minute", step)
	}
	from, to := nanos(in.From), nanos(in.To)
	if n := (to - from + int64(step) - 1) / int64(step); n > MaxSeriesPoints {
		return out, fmt.Errorf("step %s makes %d points over the window; at most %d", step, n, MaxSeriesPoints)
	}
	if from == to {
		return out, nil
	}
	bounds := []int64{from}
	for t := from; t < to; {
		t = min(to, t+int64(step))
		bounds = append(bounds, t)
	}
	e := run(&in, bounds, false)
	n := len(bounds) - 1
	byPeriod := make([][]int32, n)
	for i := range e.pieces {
		p := e.pieces[i].period
		byPeriod[p] = append(byPeriod[p], int32(i))
	}
	for p := range n {
		idx := byPeriod[p]
		accs := make([][nComp]acc, len(idx))
		for j, pi := range idx {
			accs[j] = e.pieces[pi].a
		}
		m := e.money(accs, func(j int) int32 { return e.pieces[idx[j]].cell })
		pt := api.CostSeriesPoint{Start: fromNanos(bounds[p]), Items: map[string]Money{}}
		for j, pi := range idx {
			c := e.pieces[pi].cell
			if !e.visible(c, vis) {
				continue
			}
			var t int64
			for k := range nComp {
				t = satAdd(t, m[j][k])
			}
			name := e.rowName(c, by)
			pt.Items[name] = Money(satAdd(int64(pt.Items[name]), t))
		}
		out.Points = append(out.Points, pt)
	}
	return out, nil
}

// shortDuration writes a duration as Go does, without trailing zero units:
// "1h", "1h30m", "90s" → "1m30s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// Totals is each (team, pool)'s total cost in the window (every
// component), with the pools' idle under team api.IdleRow: the values of
// the counter gpufleet_cost_total{team,pool}. The amounts are the report's
// (rounded once over the window, apportioned), so they add up to the
// report's total.
func Totals(in Input) map[[2]string]Money {
	out := map[[2]string]Money{}
	if in.From.After(in.To) {
		return out
	}
	rc := ledgerOf(&in)
	e := rc.e
	for i := range e.cells {
		x := &e.cells[i]
		team := api.IdleRow
		if x.wl >= 0 {
			team = string(e.wls[x.wl].w.Team)
		}
		var t int64
		for c := range nComp {
			t = satAdd(t, rc.money[i][c])
		}
		k := [2]string{team, x.pool}
		out[k] = Money(satAdd(int64(out[k]), t))
	}
	return out
}
