package cost

import (
	"cmp"
	"fmt"
	"maps"
	"math/big"
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
	name, wname, stage           string
	money                        [nComp]int64
	gpu, failed, preempted, idle u128
	retries                      int64
	units                        map[string]*unitSums
	eff                          core.Efficiency
}

// unitSums are a row's outputs of one unit; own is the money of the
// workloads whose accepted outputs in the row are of this unit alone.
type unitSums struct {
	accepted, rejected, unaccepted, acceptance int64
	own                                        int64
}

func (r *row) unit(u string) *unitSums {
	if r.units == nil {
		r.units = map[string]*unitSums{}
	}
	x := r.units[u]
	if x == nil {
		x = &unitSums{}
		r.units[u] = x
	}
	return x
}

func (r *row) addMoney(m [nComp]int64) {
	for c := range nComp {
		r.money[c] = satAdd(r.money[c], m[c])
	}
}

func (r *row) addCell(m [nComp]int64, s *cellSums, i int) {
	r.addMoney(m)
	r.gpu, _ = r.gpu.add(s.gpu[i])
	r.failed, _ = r.failed.add(s.failed[i])
	r.preempted, _ = r.preempted.add(s.preempted[i])
	r.idle, _ = r.idle.add(s.idle[i])
}

// outputUnit is the unit of outputs reported without one.
const outputUnit = "output"

// unitCount is a workload's outputs of one unit in a window.
type unitCount struct {
	unit                                       string
	accepted, rejected, unaccepted, acceptance int64
}

// outputsOf is what a workload's outputs add to its row in the window:
// each report recorded in [From, To), and, for a Succeeded job that never
// reported any and finished in the window (counted), one accepted "job".
// A stage of an acceptance card counts its accepted outputs as
// acceptance; a workload that failed, as unaccepted.
func (e *engine) outputsOf(x *wl) []unitCount {
	w := x.w
	var out []unitCount
	add := func(unit string, acc, rej int64) {
		if unit == "" {
			unit = outputUnit
		}
		i := slices.IndexFunc(out, func(c unitCount) bool { return c.unit == unit })
		if i < 0 {
			out = append(out, unitCount{unit: unit})
			i = len(out) - 1
		}
		c := &out[i]
		switch {
		case acceptanceStage(w) != "":
			c.acceptance += acc
		case w.Phase == core.Failed:
			c.unaccepted += acc
			c.rejected += rej
		default:
			c.accepted += acc
			c.rejected += rej
		}
	}
	if x.outputs {
		for _, o := range w.Outputs {
			if e.inWindow(o.At) {
				add(o.Unit, o.Accepted, o.Rejected)
			}
		}
	}
	if x.counted && !w.Reported && w.Phase == core.Succeeded {
		add("job", 1, 0)
	}
	return out
}

// soleUnit is the one unit of a workload's accepted outputs, "" when it
// has none or several.
func soleUnit(cs []unitCount) string {
	u := ""
	for _, c := range cs {
		if c.accepted > 0 {
			if u != "" {
				return ""
			}
			u = c.unit
		}
	}
	return u
}

// acceptanceStage is "RUN/STAGE" for the workload of an acceptance card's
// stage, "" for any other.
func acceptanceStage(w *Workload) string {
	run := w.Labels[core.LabelAcceptanceRun]
	if run == "" {
		return ""
	}
	return run + "/" + w.Labels[core.LabelAcceptanceStage]
}

func (r *row) addOutputs(cs []unitCount) {
	for _, c := range cs {
		u := r.unit(c.unit)
		u.accepted += c.accepted
		u.rejected += c.rejected
		u.unaccepted += c.unaccepted
		u.acceptance += c.acceptance
	}
}

func (r *row) total() int64 {
	var total int64
	for c := range nComp {
		total = satAdd(total, r.money[c])
	}
	return total
}

func (r *row) wire() api.CostRow {
	out := api.CostRow{
		Name:              r.name,
		WorkloadName:      r.wname,
		AcceptanceStage:   r.stage,
		GPUHours:          hours(r.gpu),
		AcceleratorCost:   Money(r.money[cAccel]),
		HostCost:          Money(r.money[cHost]),
		StorageCost:       Money(r.money[cStorage]),
		NetworkCost:       Money(r.money[cNetwork]),
		LicenceCost:       Money(r.money[cLicence]),
		TotalCost:         Money(r.total()),
		IdleGPUHours:      hours(r.idle),
		FailedGPUHours:    hours(r.failed),
		PreemptedGPUHours: hours(r.preempted),
		Retries:           r.retries,
		OutputsByUnit:     []api.UnitOutputs{},
	}
	if r.eff.Measured > 0 {
		eff := Efficiency(r.eff)
		out.Efficiency = &eff
	}
	names := slices.Sorted(maps.Keys(r.units))
	// What the row cost beyond the workloads of one unit is shared by
	// the units in proportion to their own cost (equally when none has
	// any), so that Σ costPerAccepted × accepted is the row's total.
	var own, withAccepted int64
	for _, n := range names {
		if u := r.units[n]; u.accepted > 0 {
			own = satAdd(own, u.own)
			withAccepted++
		}
	}
	shared := max(0, int64(out.TotalCost)-own)
	var counted []string // units with accepted or rejected outputs
	for _, n := range names {
		u := r.units[n]
		out.AcceptedOutputs += u.accepted
		out.RejectedOutputs += u.rejected
		out.UnacceptedOutputs += u.unaccepted
		out.AcceptanceOutputs += u.acceptance
		if u.accepted > 0 || u.rejected > 0 {
			counted = append(counted, n)
		}
		uo := api.UnitOutputs{Unit: n, Accepted: u.accepted, Rejected: u.rejected, Unaccepted: u.unaccepted, Acceptance: u.acceptance}
		if u.accepted > 0 {
			c := new(big.Rat).SetInt64(u.own)
			switch {
			case own > 0:
				c.Add(c, new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(shared), big.NewInt(u.own)), big.NewInt(own)))
			default:
				c.Add(c, big.NewRat(shared, withAccepted))
			}
			m := Money(roundHalfUp(c.Quo(c, new(big.Rat).SetInt64(u.accepted))))
			uo.CostPerAccepted = &m
		}
		out.OutputsByUnit = append(out.OutputsByUnit, uo)
	}
	switch len(counted) {
	case 0:
	case 1:
		out.Unit = counted[0]
	default:
		out.Unit = "mixed"
	}
	// One cost per accepted output for the row when its accepted outputs
	// are of one unit; a cost per image-or-job would mean nothing.
	if withAccepted == 1 && out.AcceptedOutputs > 0 {
		m := Money(perOutput(int64(out.TotalCost), out.AcceptedOutputs))
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

// rows groups the visible cells into rows by dimension, and returns their
// total too (accumulated cell by cell, so that it is the same whatever the
// dimension).
func (rc *reportCells) rows(by string, vis Visibility) ([]*row, *row) {
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
	total := &row{}
	// Each workload's outputs, and the one unit its cost goes to (in the
	// row its outputs count in).
	outs := make([][]unitCount, len(e.wls))
	sole := make([]string, len(e.wls))
	home := make([]int32, len(e.wls))
	for i := range e.wls {
		x := &e.wls[i]
		home[i] = -1
		if (!x.counted && !x.outputs) || x.vol != nil {
			continue
		}
		c := e.cellOf(int32(i), x.home) // exists: workloadCharges made it
		if !e.visible(c, vis) {
			continue
		}
		outs[i] = e.outputsOf(x)
		sole[i], home[i] = soleUnit(outs[i]), c
		r := get(e.rowName(c, by))
		if x.counted && x.w.Attempts > 1 {
			r.retries += int64(x.w.Attempts - 1)
			total.retries += int64(x.w.Attempts - 1)
		}
		r.addOutputs(outs[i])
		total.addOutputs(outs[i])
	}
	for i := range e.cells {
		c := int32(i)
		if !e.visible(c, vis) {
			continue
		}
		name := e.rowName(c, by)
		r := get(name)
		r.addCell(rc.money[i], &rc.s, i)
		total.addCell(rc.money[i], &rc.s, i)
		x := &e.cells[i]
		if x.wl < 0 || e.wls[x.wl].vol != nil {
			continue
		}
		if by == api.CostByWorkload {
			w := e.wls[x.wl].w
			r.wname, r.stage = w.Name, acceptanceStage(w)
		}
		if u := sole[x.wl]; u != "" {
			var m int64
			for k := range nComp {
				m = satAdd(m, rc.money[i][k])
			}
			total.unit(u).own += m
			if name == e.rowName(home[x.wl], by) {
				r.unit(u).own += m
			}
		}
	}
	rc.addEfficiency(func(c int32) *row { return get(e.rowName(c, by)) }, total, vis)
	return out, total
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
	rows, total := rc.rows(by, vis)
	for _, r := range rows {
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
