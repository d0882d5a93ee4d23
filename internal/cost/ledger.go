package cost

import (
	"cmp"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// wl is a workload as the ledger sees it, or a volume (vol set; w then
// carries only its team).
type wl struct {
	w     *Workload
	vol   *Volume
	cells []cellRef
	// home is the pool of its earliest interval in the input (outputs,
	// network); first is its first attempt's earliest start (the licence
	// per workload).
	homeStart, firstStart int64
	home, firstPool       string
	hasHome, hasFirst     bool
	// counted: its retries, network egress and (a Succeeded job that
	// reported nothing) its one job belong to the window; outputs: it
	// reported outputs in the window.
	counted, outputs bool
}

type cellRef struct {
	pool string
	cell int32
}

// cell is what one workload cost in one pool (or a pool's idle capacity,
// wl == -1) over the whole window.
type cell struct {
	wl   int32
	pool string
}

// piece is a cell's part in one period, and, in an export, inside one
// reserved commitment (commit: its span) or outside any (-1).
type piece struct {
	period    int32
	cell      int32
	commit    int32
	a         [nComp]acc
	gpu       u128 // held milli-GPU ns
	failed    u128
	preempted u128
	idle      u128 // billed but unheld milli-GPU ns (idle cells)
	stor      u128 // a volume's byte ns
	// frac is the milli-GPU ns held of devices held in part (a share of
	// a GPU: Milli < 1000), fracDev those devices' ns × 1000 (the FOCUS
	// export's split cost allocation).
	frac, fracDev u128
}

type pieceKey struct{ period, cell, commit int32 }

// engine computes the exact pieces of an Input over periods.
type engine struct {
	in            *Input
	bk            *book
	from, to, now int64
	bounds        []int64 // bounds[0] = from < … < bounds[n] = to
	split         bool    // pieces per commitment (the export)
	simple        bool    // one period, no split: a piece is its cell
	wls           []wl
	wlIdx         map[core.WorkloadID]int32
	cells         []cell
	idle          map[string]int32
	pieces        []piece
	pieceIdx      map[pieceKey]int32
}

type event struct {
	t int64
	d int64
}

// run builds the engine's pieces. bounds are the periods' boundaries, from
// in.From to in.To.
func run(in *Input, bounds []int64, split bool) *engine {
	e := &engine{in: in, bk: newBook(in.Prices, in.Pools), from: nanos(in.From), to: nanos(in.To), now: nanos(in.Now),
		bounds: bounds, split: split, wlIdx: make(map[core.WorkloadID]int32, len(in.Workloads)), idle: map[string]int32{}}
	e.simple = len(bounds) == 2 && !split
	if !e.simple {
		e.pieceIdx = map[pieceKey]int32{}
	}
	bk := e.bk
	sweep, events := e.sweeps()
	e.wls = make([]wl, 0, len(in.Workloads))
	e.cells = make([]cell, 0, len(in.Workloads)+len(bk.names))
	if e.simple {
		e.pieces = make([]piece, 0, cap(e.cells))
	}

	lastID, lastW := core.WorkloadID(""), int32(-1)
	lastPoolName, lastPool := "", -1
	for i := range in.Intervals {
		iv := &in.Intervals[i]
		w := lastW
		if w < 0 || iv.Workload != lastID {
			w = e.workload(iv.Workload)
			lastID, lastW = iv.Workload, w
		}
		s := nanos(iv.Start)
		end := min(e.to, e.now)
		if !iv.End.IsZero() {
			end = nanos(iv.End)
		}
		x := &e.wls[w]
		if !x.hasHome || s < x.homeStart {
			x.home, x.homeStart, x.hasHome = iv.Pool, s, true
		}
		if iv.Attempt <= 1 && (!x.hasFirst || s < x.firstStart) {
			x.firstPool, x.firstStart, x.hasFirst = iv.Pool, s, true
		}
		a, b := max(s, e.from), min(end, e.to)
		if a >= b || iv.Milli <= 0 {
			continue
		}
		pool := lastPool
		if i == 0 || iv.Pool != lastPoolName {
			pool = bk.pool(iv.Pool)
			lastPoolName, lastPool = iv.Pool, pool
		}
		c := e.cellOf(w, iv.Pool)
		milli := uint64(iv.Milli)
		si := bk.spanAt(pool, a)
		p := e.periodAt(a)
		lastSi, lastPiece := -1, int32(-1)
		for t := a; t < b; {
			u := b
			if si >= 0 && bk.spans[si].end < u {
				u = bk.spans[si].end
			}
			if pe := e.bounds[p+1]; pe < u {
				u = pe
			}
			dt := uint64(u - t)
			q := mul64(milli, dt)
			commit := int32(-1)
			if e.split && si >= 0 && bk.spans[si].reserved {
				commit = int32(si)
			}
			pi := e.pieceOf(int32(p), c, commit)
			rest := pi
			if commit >= 0 && (iv.HostMilliCPU > 0 || iv.HostMemoryMiB > 0 || !bk.spans[si].licHour.zero()) {
				rest = e.pieceOf(int32(p), c, -1)
			}
			pc := &e.pieces[pi]
			pc.gpu, _ = pc.gpu.add(q)
			if milli < 1000 {
				pc.frac, _ = pc.frac.add(q)
				pc.fracDev, _ = pc.fracDev.add(mul64(1000, dt))
			}
			switch iv.Outcome {
			case OutcomeFailed:
				pc.failed, _ = pc.failed.add(q)
			case OutcomePreempted:
				pc.preempted, _ = pc.preempted.add(q)
			}
			if si >= 0 {
				sp := &bk.spans[si]
				pc.a[cAccel].add(sp.accel, q)
				pr := &e.pieces[rest]
				pr.a[cLicence].add(sp.licHour, q)
				if iv.HostMilliCPU > 0 {
					pr.a[cHost].add(sp.cpu, mul64(uint64(iv.HostMilliCPU), dt))
				}
				if iv.HostMemoryMiB > 0 {
					pr.a[cHost].add(sp.mem, mul64(uint64(iv.HostMemoryMiB), dt))
				}
			}
			lastSi, lastPiece = si, pi
			t = u
			if si >= 0 && t >= bk.spans[si].end {
				si++
			}
			if t >= e.bounds[p+1] {
				p++
			}
		}
		// The billing increment of the version at the clipped end rounds
		// the whole clipped duration up; what it adds is billed there.
		if lastSi >= 0 {
			if inc := bk.spans[lastSi].increment; inc > 0 {
				if r := (b - a) % inc; r != 0 {
					e.pieces[lastPiece].a[cAccel].add(bk.spans[lastSi].accel, mul64(milli, uint64(inc-r)))
				}
			}
		}
		if pool >= 0 && sweep[pool] {
			events[pool] = append(events[pool], event{a, int64(milli)}, event{b, -int64(milli)})
		}
	}
	for pi := range bk.names {
		if sweep[pi] {
			e.sweep(pi, events[pi])
		}
	}
	e.volumes()
	e.workloadCharges()
	return e
}

// sweeps says which pools bill committed capacity in the window (they need
// a sweep of their intervals' ends), with room for those ends.
func (e *engine) sweeps() ([]bool, [][]event) {
	bk := e.bk
	sweep := make([]bool, len(bk.names))
	for pi := range bk.names {
		for si := bk.first[pi]; si < bk.first[pi]+bk.count[pi]; si++ {
			s := &bk.spans[si]
			if s.committed && s.start < e.to && s.end > e.from {
				sweep[pi] = true
			}
		}
	}
	events := make([][]event, len(bk.names))
	if !slices.Contains(sweep, true) {
		return sweep, events
	}
	n := make([]int, len(bk.names))
	lastName, last := "", -1
	for i := range e.in.Intervals {
		if p := e.in.Intervals[i].Pool; i == 0 || p != lastName {
			lastName, last = p, bk.pool(p)
		}
		if last >= 0 {
			n[last] += 2
		}
	}
	for pi := range n {
		if sweep[pi] {
			events[pi] = make([]event, 0, n[pi])
		}
	}
	return sweep, events
}

// volumes bills each volume's storage: SizeBytes × its time in the window
// (up to Now while it exists), split at its pool's price versions and the
// periods. A volume is a cell of its own (on its team's rows), made even
// when its pool has no price.
func (e *engine) volumes() {
	bk := e.bk
	for i := range e.in.Volumes {
		v := &e.in.Volumes[i]
		end := min(e.to, e.now)
		if !v.Deleted.IsZero() {
			end = nanos(v.Deleted)
		}
		a, b := max(nanos(v.Created), e.from), min(end, e.to)
		if a >= b || v.SizeBytes <= 0 {
			continue
		}
		w := int32(len(e.wls))
		e.wls = append(e.wls, wl{w: &Workload{Team: v.Team}, vol: v})
		c := e.cellOf(w, v.Pool)
		size := uint64(v.SizeBytes)
		si := bk.spanAt(bk.pool(v.Pool), a)
		p := e.periodAt(a)
		for t := a; t < b; {
			u := b
			if si >= 0 && bk.spans[si].end < u {
				u = bk.spans[si].end
			}
			if pe := e.bounds[p+1]; pe < u {
				u = pe
			}
			q := mul64(size, uint64(u-t))
			pc := &e.pieces[e.pieceOf(int32(p), c, -1)]
			pc.stor, _ = pc.stor.add(q)
			if si >= 0 {
				pc.a[cStorage].add(bk.spans[si].storage, q)
			}
			t = u
			if si >= 0 && t >= bk.spans[si].end {
				si++
			}
			if t >= e.bounds[p+1] {
				p++
			}
		}
	}
}

// sweep bills a pool's committed capacity that nobody holds as its idle.
func (e *engine) sweep(pool int, evs []event) {
	bk := e.bk
	evs = sortEvents(evs)
	var held int64
	ei := 0
	si := bk.spanAt(pool, e.from)
	p := 0
	idle := int32(-1)
	for t := e.from; t < e.to; {
		for ei < len(evs) && evs[ei].t <= t {
			held += evs[ei].d
			ei++
		}
		u := e.to
		if ei < len(evs) && evs[ei].t < u {
			u = evs[ei].t
		}
		sp := &bk.spans[si]
		if sp.end < u {
			u = sp.end
		}
		if pe := e.bounds[p+1]; pe < u {
			u = pe
		}
		if sp.committed && sp.capMilli > held {
			q := mul64(uint64(sp.capMilli-held), uint64(u-t))
			if idle < 0 {
				idle = e.idleCell(bk.names[pool])
			}
			commit := int32(-1)
			if e.split && sp.reserved {
				commit = int32(si)
			}
			pi := e.pieceOf(int32(p), idle, commit)
			pc := &e.pieces[pi]
			pc.a[cAccel].add(sp.accel, q)
			pc.idle, _ = pc.idle.add(q)
		}
		t = u
		if t >= sp.end {
			si++
		}
		if t >= e.bounds[p+1] {
			p++
		}
	}
}

// workloadCharges adds what is charged once per workload: the licence per
// workload, network egress, and marks the workloads whose retries count
// (counted) and those with outputs in the window.
func (e *engine) workloadCharges() {
	for id, w := range e.in.Workloads {
		if _, ok := e.wlIdx[id]; !ok && w != nil && (e.counted(w) || e.outputsIn(w)) {
			e.workload(id)
		}
	}
	for i := range e.wls {
		x := &e.wls[i]
		if x.vol != nil {
			continue
		}
		w := x.w
		if x.hasFirst && x.firstStart >= e.from && x.firstStart < e.to {
			if si := e.bk.spanAt(e.bk.pool(x.firstPool), x.firstStart); si >= 0 {
				if t, ok := e.bk.spans[si].perWorkload[w.Kind]; ok {
					pi := e.pieceOf(int32(e.periodAt(x.firstStart)), e.cellOf(int32(i), x.firstPool), -1)
					e.pieces[pi].a[cLicence].add(t, u128{0, 1})
				}
			}
		}
		x.outputs = e.outputsIn(w)
		if x.outputs {
			e.cellOf(int32(i), x.home) // the cell its outputs count in
		}
		if !e.counted(w) {
			continue
		}
		x.counted = true
		at := e.now
		if !w.FinishedAt.IsZero() {
			at = nanos(w.FinishedAt)
		}
		c := e.cellOf(int32(i), x.home)
		pi := e.pieceOf(int32(e.periodAt(at)), c, -1)
		if w.EgressBytes > 0 && x.hasHome {
			if si := e.bk.spanAt(e.bk.pool(x.home), at); si >= 0 {
				e.pieces[pi].a[cNetwork].add(e.bk.spans[si].net, u128{0, uint64(w.EgressBytes)})
			}
		}
	}
}

// counted says whether a workload's retries and network egress (and the
// one job of a Succeeded job that reported nothing) belong to the window:
// it finished in [From, To), or it is active and the window reaches now
// (From ≤ Now ≤ To).
func (e *engine) counted(w *Workload) bool {
	if !w.FinishedAt.IsZero() {
		f := nanos(w.FinishedAt)
		return f >= e.from && f < e.to
	}
	return e.now >= e.from && e.now <= e.to
}

// outputsIn says whether a workload reported outputs in [From, To).
func (e *engine) outputsIn(w *Workload) bool {
	for i := range w.Outputs {
		if e.inWindow(w.Outputs[i].At) {
			return true
		}
	}
	return false
}

func (e *engine) inWindow(t time.Time) bool {
	n := nanos(t)
	return n >= e.from && n < e.to
}

func (e *engine) workload(id core.WorkloadID) int32 {
	if i, ok := e.wlIdx[id]; ok {
		return i
	}
	w := e.in.Workloads[id]
	if w == nil {
		w = &Workload{ID: id}
	}
	i := int32(len(e.wls))
	e.wls = append(e.wls, wl{w: w})
	e.wlIdx[id] = i
	return i
}

func (e *engine) cellOf(w int32, pool string) int32 {
	x := &e.wls[w]
	for _, r := range x.cells {
		if r.pool == pool {
			return r.cell
		}
	}
	c := e.newCell(cell{wl: w, pool: pool})
	x.cells = append(x.cells, cellRef{pool, c})
	return c
}

func (e *engine) idleCell(pool string) int32 {
	if c, ok := e.idle[pool]; ok {
		return c
	}
	c := e.newCell(cell{wl: -1, pool: pool})
	e.idle[pool] = c
	return c
}

func (e *engine) newCell(c cell) int32 {
	i := int32(len(e.cells))
	e.cells = append(e.cells, c)
	if e.simple {
		e.pieces = append(e.pieces, piece{cell: i, commit: -1})
	}
	return i
}

func (e *engine) pieceOf(period, c, commit int32) int32 {
	if e.simple {
		return c
	}
	k := pieceKey{period, c, commit}
	if i, ok := e.pieceIdx[k]; ok {
		return i
	}
	i := int32(len(e.pieces))
	e.pieces = append(e.pieces, piece{period: period, cell: c, commit: commit})
	e.pieceIdx[k] = i
	return i
}

// periodAt is the period holding t; To itself (an active workload's
// charges at now == To) is in the last.
func (e *engine) periodAt(t int64) int {
	n := len(e.bounds) - 1
	if n <= 1 {
		return 0
	}
	i, found := slices.BinarySearch(e.bounds, t)
	if !found {
		i--
	}
	return max(0, min(i, n-1))
}

// cellLess orders cells by key: workloads by ID then pool, then volumes
// by team, name, creation and pool (then input order), idle last.
func (e *engine) cellLess(a, b int32) int {
	ca, cb := &e.cells[a], &e.cells[b]
	if (ca.wl < 0) != (cb.wl < 0) {
		if ca.wl < 0 {
			return 1
		}
		return -1
	}
	if ca.wl >= 0 {
		va, vb := e.wls[ca.wl].vol, e.wls[cb.wl].vol
		if (va == nil) != (vb == nil) {
			if va != nil {
				return 1
			}
			return -1
		}
		if va != nil {
			if c := cmp.Or(cmp.Compare(va.Team, vb.Team), cmp.Compare(va.Name, vb.Name), va.Created.Compare(vb.Created), cmp.Compare(ca.pool, cb.pool)); c != 0 {
				return c
			}
			return cmp.Compare(ca.wl, cb.wl)
		}
		if c := cmp.Compare(e.wls[ca.wl].w.ID, e.wls[cb.wl].w.ID); c != 0 {
			return c
		}
	}
	return cmp.Compare(ca.pool, cb.pool)
}

// cellSums are the cells' exact accumulators over all their pieces.
type cellSums struct {
	a                            [][nComp]acc
	gpu, failed, preempted, idle []u128
}

func (e *engine) sums() cellSums {
	n := len(e.cells)
	s := cellSums{a: make([][nComp]acc, n), gpu: make([]u128, n), failed: make([]u128, n), preempted: make([]u128, n), idle: make([]u128, n)}
	for i := range e.pieces {
		p := &e.pieces[i]
		c := p.cell
		if e.simple {
			s.a[c] = p.a
		} else {
			for k := range nComp {
				s.a[c][k].addAcc(&p.a[k])
			}
		}
		s.gpu[c], _ = s.gpu[c].add(p.gpu)
		s.failed[c], _ = s.failed[c].add(p.failed)
		s.preempted[c], _ = s.preempted[c].add(p.preempted)
		s.idle[c], _ = s.idle[c].add(p.idle)
	}
	return s
}

// money rounds each component over the given accumulators (all the cells
// of a report, or a period's) and apportions it: out[i][c] are integers
// whose sum over i is the component's exact total rounded half-up.
func (e *engine) money(accs [][nComp]acc, cellOf func(i int) int32) [][nComp]int64 {
	n := len(accs)
	out := make([][nComp]int64, n)
	sp := make([]split, n)
	col := make([]int64, n)
	less := func(i, j int) int { return e.cellLess(cellOf(i), cellOf(j)) }
	for c := range nComp {
		any := false
		for i := range accs {
			if !accs[i][c].isZero() {
				any = true
				break
			}
		}
		if !any {
			continue
		}
		sc := e.bk.scales[c]
		for i := range accs {
			sp[i] = sc.split(&accs[i][c])
		}
		sc.apportion(sp, nil, less, col)
		for i := range out {
			out[i][c] = col[i]
		}
	}
	return out
}

// visible says whether the caller may see a cell.
func (e *engine) visible(c int32, vis Visibility) bool {
	x := &e.cells[c]
	if x.wl < 0 {
		return vis.All
	}
	return vis.All || vis.Teams[e.wls[x.wl].w.Team]
}

// rowName is a cell's row under a dimension.
func (e *engine) rowName(c int32, by string) string {
	x := &e.cells[c]
	if x.wl < 0 {
		return api.IdleRow
	}
	if v := e.wls[x.wl].vol; v != nil {
		switch by {
		case api.CostByTeam:
			return string(v.Team)
		case api.CostByPool:
			return x.pool
		case api.CostByWorkload:
			return VolumeRow(v.Team, v.Name)
		}
		return "(none)" // a volume has no owner or labels
	}
	w := e.wls[x.wl].w
	var s string
	switch by {
	case api.CostByTeam:
		s = string(w.Team)
	case api.CostByPool:
		s = x.pool
	case api.CostByWorkload:
		s = string(w.ID)
	case api.CostByUser:
		s = w.Owner
	default:
		s = w.Labels[by[len(api.CostByLabel):]]
	}
	if s == "" {
		return "(none)"
	}
	return s
}

// VolumeRow is a volume's row in a report by workload: "volume:TEAM/NAME".
func VolumeRow(team core.TeamName, name string) string {
	return "volume:" + VolumeID(team, name)
}

// VolumeID names a volume, TEAM/NAME: its FOCUS ResourceId.
func VolumeID(team core.TeamName, name string) string { return string(team) + "/" + name }

// sortEvents sorts events by time: a least-significant-digit radix sort
// (four passes of 16 bits), which beats a comparison sort on the millions
// of endpoints of a large window.
func sortEvents(evs []event) []event {
	if len(evs) < 256 {
		slices.SortFunc(evs, func(x, y event) int { return cmp.Compare(x.t, y.t) })
		return evs
	}
	tmp := make([]event, len(evs))
	var count [1 << 16]int
	for shift := uint(0); shift < 64; shift += 16 {
		clear(count[:])
		for _, x := range evs {
			count[(uint64(x.t)^1<<63)>>shift&0xffff]++
		}
		if count[(uint64(evs[0].t)^1<<63)>>shift&0xffff] == len(evs) {
			continue // every event has this digit
		}
		sum := 0
		for i, c := range count {
			count[i] = sum
			sum += c
		}
		for _, x := range evs {
			d := (uint64(x.t) ^ 1<<63) >> shift & 0xffff
			tmp[count[d]] = x
			count[d]++
		}
		evs, tmp = tmp, evs
	}
	return evs
}
