package cost

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// FOCUSColumns are the columns of a FOCUS 1.3 export, in order: the 23
// columns FOCUS 1.3 makes mandatory (the 21 of 1.2, whose ProviderName and
// PublisherName 1.3 deprecates but keeps, for readers that want them, then
// ServiceProviderName and HostProviderName), the split cost allocation
// columns, the conditional and recommended ones gpufleet fills, then its
// own (x_). testdata/focus-1.3-cost-and-usage.tsv holds the
// specification's list, which a test checks the export against.
var FOCUSColumns = []string{
	"BilledCost", "EffectiveCost", "ListCost", "ContractedCost",
	"BillingAccountId", "BillingAccountName", "BillingCurrency",
	"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
	"ChargeCategory", "ChargeClass", "ChargeDescription",
	"PricingQuantity", "PricingUnit",
	"InvoiceIssuerName", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
	"ServiceProviderName", "HostProviderName",

	"AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags",

	"ResourceId", "ResourceName", "ResourceType", "Tags",
	"ConsumedQuantity", "ConsumedUnit",
	"CommitmentDiscountId", "CommitmentDiscountCategory", "CommitmentDiscountStatus",
	"ChargeFrequency",

	"x_Team", "x_Pool", "x_Workload", "x_User",
	"x_GPUHours", "x_IdleGPUHours", "x_FailedGPUHours", "x_PreemptedGPUHours",
	"x_AcceleratorCost", "x_HostCost", "x_StorageCost", "x_NetworkCost", "x_LicenceCost",
}

// FOCUSMandatory are the columns FOCUS 1.3 requires.
var FOCUSMandatory = FOCUSColumns[:23]

// FOCUSAllocatedMethod is the AllocatedMethodId of a share of a GPU: the
// device's cost split among the workloads holding it in proportion to
// their milli-GPU (AllocatedMethodDetails' AllocatedRatio is the share).
const FOCUSAllocatedMethod = "gpufleet/gpu-share-by-milli-gpu"

// The index of each column of FOCUSColumns.
const (
	fBilled = iota
	fEffective
	fList
	fContracted
	fAccountID
	fAccountName
	fCurrency
	fBillingStart
	fBillingEnd
	fChargeStart
	fChargeEnd
	fCategory
	fClass
	fDescription
	fPricingQty
	fPricingUnit
	fIssuer
	fProvider
	fPublisher
	fServiceCategory
	fServiceName
	fServiceProvider
	fHostProvider
	fAllocMethod
	fAllocDetails
	fAllocID
	fAllocName
	fAllocTags
	fResID
	fResName
	fResType
	fTags
	fConsumed
	fConsumedUnit
	fCommitID
	fCommitCat
	fCommitStatus
	fFreq
	fTeam
	fPool
	fWorkload
	fUser
	fGPUH
	fIdleH
	fFailedH
	fPreemptedH
	fAccel // then one per component, in the order of nComp
)

// FOCUSTime is FOCUS's date-time format (UTC).
const FOCUSTime = "2006-01-02T15:04:05Z"

const (
	focusService  = "gpufleet GPU"
	focusCategory = "AI and Machine Learning"
	focusProvider = "gpufleet"
	focusUnit     = "GPU-Hours"

	focusStorageService  = "gpufleet storage"
	focusStorageCategory = "Storage"
	focusStorageUnit     = "GiB-Months" // the unit of StorageGiBMonth; a month is quantity.HoursPerMonth hours
)

// gibMonths converts byte-nanoseconds to GiB-months (for display).
func gibMonths(q u128) float64 { return q.float() / (1 << 30) / (quantity.HoursPerMonth * nsPerHour) }

type focusRow struct {
	start, end int64
	purchase   bool
	resource   string
	pool       string
	commit     int32
	cell       int32 // a tie-break (two volumes of one name in a period)
	cols       []string
}

// ExportFOCUS writes the window as FOCUS 1.3 CSV (a header, then one row a
// line) at granularity time.Hour or 24*time.Hour, and returns the number
// of data rows. account names the billing account (the server): it is the
// invoice issuer and the host provider too (gpufleet does not know which
// cloud, if any, runs a cluster), and the service provider is gpufleet.
//
// Rows, per charge period (the UTC hours or days of the window, cut by
// the window: start-inclusive, end-exclusive):
//   - Usage: one per workload and pool (ResourceId the workload's ID,
//     ResourceName its name), its cost in the period; a reserved pool's
//     workload has up to two, the accelerator time within the commitment
//     (CommitmentDiscountStatus Used, BilledCost 0, EffectiveCost its
//     amortised share) and the rest. When the workload held a fraction of
//     a device in the period (a GPU shared by share), the row is an
//     allocated charge: AllocatedMethodId FOCUSAllocatedMethod,
//     AllocatedResourceId and AllocatedResourceName the workload,
//     AllocatedTags its tags, AllocatedMethodDetails {"Elements":
//     [{"AllocatedRatio": its time-weighted share of those devices,
//     "UsageUnit": "GPU-Hours", "UsageQuantity": its GPU-hours on them}]};
//     otherwise the allocation columns are null.
//   - Usage, ResourceId "__idle__": a pool's billed capacity nobody held;
//     within a reserved commitment, Unused (BilledCost 0).
//   - Usage, ServiceCategory "Storage": one per volume (ResourceId
//     TEAM/NAME, ResourceType "Volume", x_Workload empty), its storage
//     in the period; PricingQuantity and ConsumedQuantity are its
//     GiB-months there (PricingUnit and ConsumedUnit "GiB-Months", a
//     month of quantity.HoursPerMonth hours), x_StorageCost its cost. A volume
//     whose pool has no price has rows of cost 0.
//   - Purchase: per reserved commitment (ResourceId and
//     CommitmentDiscountId "pool/P/reserved/T"), BilledCost what the
//     commitment bills in the period — its Used and Unused rows'
//     EffectiveCost, exactly; that includes any GPU time held beyond the
//     committed GPUs, billed at the reserved rate — EffectiveCost 0.
//
// A caller who does not see every team (vis not All) gets its teams' Usage
// rows only: no idle and no Purchase row (a commitment is the pool's), so
// its covered usage is billed on its own row (BilledCost = EffectiveCost).
//
// Σ BilledCost == Report(in, "workload", vis).Total.TotalCost exactly:
// each workload's (and the idle's) report amounts, per component, are
// apportioned over its rows by the largest-remainder method.
func ExportFOCUS(w io.Writer, in Input, granularity time.Duration, vis Visibility, account string) (rows int, err error) {
	if granularity != time.Hour && granularity != 24*time.Hour {
		return 0, fmt.Errorf("granularity %s: want an hour or a day", granularity)
	}
	if err := checkWindow(&in); err != nil {
		return 0, err
	}
	e := run(&in, periods(&in, granularity), true)
	x := &focusExport{e: e, vis: vis, account: cmp.Or(account, focusProvider), money: pieceMoney(e, vis), tags: make([]string, len(e.cells))}
	x.stamp()
	out := x.usageRows()
	out = append(out, x.purchaseRows()...)
	slices.SortFunc(out, func(a, b focusRow) int {
		if a.start != b.start {
			return cmp.Compare(a.start, b.start)
		}
		if a.purchase != b.purchase {
			if a.purchase {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.resource, b.resource), cmp.Compare(a.pool, b.pool), cmp.Compare(a.commit, b.commit), cmp.Compare(a.cell, b.cell))
	})
	cw := csv.NewWriter(w)
	if err := cw.Write(FOCUSColumns); err != nil {
		return 0, err
	}
	for _, r := range out {
		if err := cw.Write(r.cols); err != nil {
			return rows, err
		}
		rows++
	}
	cw.Flush()
	return rows, cw.Error()
}

// periods are the bounds of the charge periods of the window: the UTC
// hours or days it covers, cut by its ends.
func periods(in *Input, granularity time.Duration) []int64 {
	from, to := nanos(in.From), nanos(in.To)
	bounds := []int64{from}
	if from < to {
		t := nanos(in.From.UTC().Truncate(granularity))
		for t <= from {
			t += int64(granularity)
		}
		for ; t < to; t += int64(granularity) {
			bounds = append(bounds, t)
		}
	}
	return append(bounds, to)
}

// pieceMoney is each visible piece's money: the report's amounts of its
// cell (rounded once over the window), per component, apportioned over the
// cell's pieces by the largest-remainder method.
func pieceMoney(e *engine, vis Visibility) [][nComp]int64 {
	s := e.sums()
	cellMoney := e.money(s.a, func(i int) int32 { return int32(i) })
	byCell := make([][]int32, len(e.cells))
	for i := range e.pieces {
		c := e.pieces[i].cell
		byCell[c] = append(byCell[c], int32(i))
	}
	out := make([][nComp]int64, len(e.pieces))
	for c, idx := range byCell {
		if len(idx) == 0 || !e.visible(int32(c), vis) {
			continue
		}
		sp := make([]split, len(idx))
		col := make([]int64, len(idx))
		less := func(i, j int) int {
			a, b := &e.pieces[idx[i]], &e.pieces[idx[j]]
			return cmp.Or(cmp.Compare(a.period, b.period), cmp.Compare(a.commit, b.commit))
		}
		for k := range nComp {
			target := cellMoney[c][k]
			if target == 0 {
				continue
			}
			sc := e.bk.scales[k]
			for j, pi := range idx {
				sp[j] = sc.split(&e.pieces[pi].a[k])
			}
			sc.apportion(sp, &target, less, col)
			for j, pi := range idx {
				out[pi][k] = col[j]
			}
		}
	}
	return out
}

// focusExport is an export being written.
type focusExport struct {
	e       *engine
	vis     Visibility
	account string
	money   [][nComp]int64
	stamps  [][4]string // each period's billing and charge period bounds
	tags    []string    // each cell's Tags, made once
}

// stamp writes the periods' dates once.
func (x *focusExport) stamp() {
	b := x.e.bounds
	x.stamps = make([][4]string, len(b)-1)
	for p := range x.stamps {
		ps, pe := fromNanos(b[p]), fromNanos(b[p+1])
		ms := time.Date(ps.Year(), ps.Month(), 1, 0, 0, 0, 0, time.UTC)
		x.stamps[p] = [4]string{ms.Format(FOCUSTime), ms.AddDate(0, 1, 0).Format(FOCUSTime), ps.Format(FOCUSTime), pe.Format(FOCUSTime)}
	}
}

// base is a row of period with what every row says.
func (x *focusExport) base(period int32) []string {
	r := make([]string, len(FOCUSColumns))
	r[fAccountID], r[fAccountName], r[fCurrency] = x.account, x.account, x.e.in.Currency
	st := &x.stamps[period]
	r[fBillingStart], r[fBillingEnd], r[fChargeStart], r[fChargeEnd] = st[0], st[1], st[2], st[3]
	r[fPricingUnit] = focusUnit
	r[fIssuer], r[fProvider], r[fPublisher], r[fServiceCategory], r[fServiceName] = x.account, focusProvider, focusProvider, focusCategory, focusService
	r[fServiceProvider], r[fHostProvider] = focusProvider, x.account
	return r
}

// cellTags is a cell's Tags: its workload's labels, team and pool (a
// volume's name), as a JSON object.
func (x *focusExport) cellTags(c int32) string {
	if x.tags[c] != "" {
		return x.tags[c]
	}
	e := x.e
	cl := &e.cells[c]
	t := map[string]string{"gpufleet/pool": cl.pool}
	if cl.wl >= 0 {
		w := e.wls[cl.wl].w
		for k, v := range w.Labels {
			t[k] = v
		}
		t["gpufleet/team"] = string(w.Team)
		if v := e.wls[cl.wl].vol; v != nil {
			t["gpufleet/volume"] = v.Name
		}
	}
	tj, _ := json.Marshal(t)
	x.tags[c] = string(tj)
	return x.tags[c]
}

// usageRows are the Usage rows of the visible pieces: workloads', volumes'
// and the pools' idle capacity.
func (x *focusExport) usageRows() []focusRow {
	e := x.e
	var out []focusRow
	for i := range e.pieces {
		p := &e.pieces[i]
		if !e.visible(p.cell, x.vis) {
			continue
		}
		m := x.money[i]
		var total int64
		for k := range nComp {
			total = satAdd(total, m[k])
		}
		if total == 0 && p.gpu.isZero() && p.idle.isZero() && p.stor.isZero() {
			continue
		}
		cl := &e.cells[p.cell]
		r := x.base(p.period)
		billed := total
		if p.commit >= 0 && x.vis.All {
			billed = 0 // billed on the commitment's Purchase row
		}
		r[fBilled], r[fEffective], r[fList], r[fContracted] = Money(billed).String(), Money(total).String(), Money(total).String(), Money(total).String()
		r[fCategory], r[fFreq], r[fPool], r[fTags] = "Usage", "Usage-Based", cl.pool, x.cellTags(p.cell)
		fr := focusRow{start: e.bounds[p.period], end: e.bounds[p.period+1], pool: cl.pool, commit: p.commit, cell: p.cell}
		switch {
		case cl.wl >= 0 && e.wls[cl.wl].vol != nil:
			v := e.wls[cl.wl].vol
			id := VolumeID(v.Team, v.Name)
			r[fDescription] = fmt.Sprintf("storage of volume %s (%d bytes) in pool %s", id, v.SizeBytes, cl.pool)
			q := num(gibMonths(p.stor))
			r[fPricingQty], r[fPricingUnit], r[fConsumed], r[fConsumedUnit] = q, focusStorageUnit, q, focusStorageUnit
			r[fServiceCategory], r[fServiceName] = focusStorageCategory, focusStorageService
			r[fResID], r[fResName], r[fResType], r[fTeam] = id, v.Name, "Volume", string(v.Team)
			fr.resource = id
		case cl.wl < 0:
			r[fDescription] = "idle GPU time of pool " + cl.pool + ": billed, held by no workload"
			r[fPricingQty] = num(hours(p.idle))
			r[fResID], r[fResName], r[fResType], r[fTeam] = api.IdleRow, "idle capacity of pool "+cl.pool, "Idle capacity", api.IdleRow
			fr.resource = api.IdleRow
		default:
			w := e.wls[cl.wl].w
			name := cmp.Or(w.Name, string(w.ID))
			r[fDescription] = "GPU time of workload " + string(w.ID) + " in pool " + cl.pool
			h := num(hours(p.gpu))
			r[fPricingQty], r[fConsumed], r[fConsumedUnit] = h, h, focusUnit
			r[fResID], r[fResName], r[fResType] = string(w.ID), name, "Workload"
			r[fTeam], r[fWorkload], r[fUser] = string(w.Team), string(w.ID), w.Owner
			fr.resource = string(w.ID)
			if !p.frac.isZero() {
				x.allocated(r, p, string(w.ID), name, x.cellTags(p.cell))
			}
		}
		if p.commit >= 0 {
			r[fCommitID], r[fCommitCat], r[fCommitStatus] = commitID(e, p.commit), "Usage", "Used"
			if cl.wl < 0 {
				r[fCommitStatus] = "Unused"
			}
		}
		r[fGPUH], r[fIdleH] = num(hours(p.gpu)), num(hours(p.idle))
		r[fFailedH], r[fPreemptedH] = num(hours(p.failed)), num(hours(p.preempted))
		for k := range nComp {
			r[fAccel+k] = Money(m[k]).String()
		}
		fr.cols = r
		out = append(out, fr)
	}
	return out
}

// allocated fills a workload row's split cost allocation columns: it held
// a share of devices (p.frac milli-GPU ns of them over p.fracDev device
// ns).
func (x *focusExport) allocated(r []string, p *piece, id, name, tags string) {
	ratio := 0.0
	if !p.fracDev.isZero() {
		ratio = p.frac.float() / p.fracDev.float()
	}
	d := `{"Elements":[{"AllocatedRatio":` + num(ratio) + `,"UsageUnit":"` + focusUnit + `","UsageQuantity":` + num(hours(p.frac)) + `}]}`
	r[fAllocMethod], r[fAllocDetails], r[fAllocID], r[fAllocName], r[fAllocTags] = FOCUSAllocatedMethod, d, id, name, tags
}

// purchaseRows are the reserved commitments' Purchase rows, one per
// commitment and period, for a caller who sees every team.
func (x *focusExport) purchaseRows() []focusRow {
	if !x.vis.All {
		return nil
	}
	e := x.e
	type pkey struct{ period, commit int32 }
	purchases := map[pkey]int64{}
	for i := range e.pieces {
		p := &e.pieces[i]
		if p.commit < 0 || !e.visible(p.cell, x.vis) {
			continue
		}
		var total int64
		for k := range nComp {
			total = satAdd(total, x.money[i][k])
		}
		if total == 0 && p.gpu.isZero() && p.idle.isZero() && p.stor.isZero() {
			continue // no Usage row either
		}
		k := pkey{p.period, p.commit}
		purchases[k] = satAdd(purchases[k], total)
	}
	var out []focusRow
	for k, billed := range purchases {
		sp := &e.bk.spans[k.commit]
		start, end := e.bounds[k.period], e.bounds[k.period+1]
		ov := min(end, sp.end) - max(start, sp.start)
		r := x.base(k.period)
		b := Money(billed).String()
		r[fBilled], r[fEffective], r[fList], r[fContracted] = b, "0", b, b
		r[fCategory] = "Purchase"
		pool := e.bk.names[sp.pool]
		r[fDescription] = fmt.Sprintf("reserved commitment of %d GPUs in pool %s", sp.v.GPUs, pool)
		r[fPricingQty] = num(hours(mul64(uint64(sp.capMilli), uint64(max(0, ov)))))
		id := commitID(e, k.commit)
		r[fResID], r[fResName], r[fResType] = id, "reserved GPUs of pool "+pool, "GPU commitment"
		tj, _ := json.Marshal(map[string]string{"gpufleet/pool": pool})
		r[fTags] = string(tj)
		r[fCommitID], r[fCommitCat] = id, "Usage"
		r[fFreq], r[fPool] = "Recurring", pool
		out = append(out, focusRow{start: start, end: end, purchase: true, resource: id, pool: pool, commit: k.commit, cols: r})
	}
	return out
}

func commitID(e *engine, si int32) string {
	sp := &e.bk.spans[si]
	from := "always"
	if !sp.v.EffectiveFrom.IsZero() {
		from = sp.v.EffectiveFrom.UTC().Format(FOCUSTime)
	}
	return fmt.Sprintf("pool/%s/reserved/%s", e.bk.names[sp.pool], from)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
