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
)

// FOCUSColumns are the columns of a FOCUS 1.2 export, in order: the 21
// mandatory columns as the specification lists them, then the conditional
// and recommended ones gpufleet fills, then its own (x_).
var FOCUSColumns = []string{
	"BilledCost", "EffectiveCost", "ListCost", "ContractedCost",
	"BillingAccountId", "BillingAccountName", "BillingCurrency",
	"BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
	"ChargeCategory", "ChargeClass", "ChargeDescription",
	"PricingQuantity", "PricingUnit",
	"InvoiceIssuerName", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",

	"ResourceId", "ResourceName", "ResourceType", "Tags",
	"ConsumedQuantity", "ConsumedUnit",
	"CommitmentDiscountId", "CommitmentDiscountCategory", "CommitmentDiscountStatus",
	"ChargeFrequency",

	"x_Team", "x_Pool", "x_Workload", "x_User",
	"x_GPUHours", "x_IdleGPUHours", "x_FailedGPUHours", "x_PreemptedGPUHours",
	"x_AcceleratorCost", "x_HostCost", "x_StorageCost", "x_NetworkCost", "x_LicenceCost",
}

// FOCUSMandatory are the columns FOCUS 1.2 requires.
var FOCUSMandatory = FOCUSColumns[:21]

// FOCUSTime is FOCUS's date-time format (UTC).
const FOCUSTime = "2006-01-02T15:04:05Z"

const (
	focusService  = "gpufleet GPU"
	focusCategory = "AI and Machine Learning"
	focusProvider = "gpufleet"
	focusUnit     = "GPU-Hours"

	focusStorageService  = "gpufleet storage"
	focusStorageCategory = "Storage"
	focusStorageUnit     = "GiB-Months" // the unit of StorageGiBMonth; a month is api.HoursPerMonth hours
)

// gibMonths converts byte-nanoseconds to GiB-months (for display).
func gibMonths(q u128) float64 { return q.float() / (1 << 30) / (api.HoursPerMonth * nsPerHour) }

type focusRow struct {
	start, end int64
	purchase   bool
	resource   string
	pool       string
	commit     int32
	cell       int32 // a tie-break (two volumes of one name in a period)
	cols       []string
}

// ExportFOCUS writes the window as FOCUS 1.2 CSV (a header, then one row a
// line) at granularity time.Hour or 24*time.Hour, and returns the number
// of data rows. account names the billing account (the server).
//
// Rows, per charge period (the UTC hours or days of the window, cut by
// the window: start-inclusive, end-exclusive):
//   - Usage: one per workload and pool (ResourceId the workload's ID), its
//     cost in the period; a reserved pool's workload has up to two, the
//     accelerator time within the commitment (CommitmentDiscountStatus
//     Used, BilledCost 0, EffectiveCost its amortised share) and the rest.
//   - Usage, ResourceId "__idle__": a pool's billed capacity nobody held;
//     within a reserved commitment, Unused (BilledCost 0).
//   - Usage, ServiceCategory "Storage": one per volume (ResourceId
//     TEAM/NAME, ResourceType "Volume", x_Workload empty), its storage
//     in the period; PricingQuantity and ConsumedQuantity are its
//     GiB-months there (PricingUnit and ConsumedUnit "GiB-Months", a
//     month of api.HoursPerMonth hours), x_StorageCost its cost. A volume
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
		bounds = append(bounds, to)
	} else {
		bounds = append(bounds, to)
	}
	e := run(&in, bounds, true)
	s := e.sums()
	cellMoney := e.money(s.a, func(i int) int32 { return int32(i) })

	// Each cell's amounts over its pieces.
	byCell := make([][]int32, len(e.cells))
	for i := range e.pieces {
		c := e.pieces[i].cell
		byCell[c] = append(byCell[c], int32(i))
	}
	pieceMoney := make([][nComp]int64, len(e.pieces))
	for c, idx := range byCell {
		if len(idx) == 0 || !e.visible(int32(c), vis) {
			continue
		}
		sp := make([]split, len(idx))
		col := make([]int64, len(idx))
		less := func(i, j int) int {
			a, b := &e.pieces[idx[i]], &e.pieces[idx[j]]
			if x := cmp.Compare(a.period, b.period); x != 0 {
				return x
			}
			return cmp.Compare(a.commit, b.commit)
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
				pieceMoney[pi][k] = col[j]
			}
		}
	}

	acct := account
	if acct == "" {
		acct = focusProvider
	}
	// The periods' dates, written once.
	stamps := make([][4]string, len(e.bounds)-1)
	for p := range stamps {
		ps, pe := fromNanos(e.bounds[p]), fromNanos(e.bounds[p+1])
		ms := time.Date(ps.Year(), ps.Month(), 1, 0, 0, 0, 0, time.UTC)
		stamps[p] = [4]string{ms.Format(FOCUSTime), ms.AddDate(0, 1, 0).Format(FOCUSTime), ps.Format(FOCUSTime), pe.Format(FOCUSTime)}
	}
	base := func(period int32) []string {
		r := make([]string, len(FOCUSColumns))
		r[4], r[5], r[6] = acct, acct, in.Currency
		st := &stamps[period]
		r[7], r[8], r[9], r[10] = st[0], st[1], st[2], st[3]
		r[15] = focusUnit
		r[16], r[17], r[18], r[19], r[20] = acct, focusProvider, focusProvider, focusCategory, focusService
		return r
	}
	const (
		colResID = 21 + iota
		colResName
		colResType
		colTags
		colConsumed
		colConsumedUnit
		colCommitID
		colCommitCat
		colCommitStatus
		colFreq
		colTeam
		colPool
		colWorkload
		colUser
		colGPUH
		colIdleH
		colFailedH
		colPreemptedH
		colAccel
	)
	type pkey struct{ period, commit int32 }
	purchases := map[pkey]int64{}
	tags := make([]string, len(e.cells))
	var out []focusRow
	for i := range e.pieces {
		p := &e.pieces[i]
		if !e.visible(p.cell, vis) {
			continue
		}
		m := pieceMoney[i]
		var total int64
		for k := range nComp {
			total = satAdd(total, m[k])
		}
		if total == 0 && p.gpu.isZero() && p.idle.isZero() && p.stor.isZero() {
			continue
		}
		x := &e.cells[p.cell]
		start, end := e.bounds[p.period], e.bounds[p.period+1]
		r := base(p.period)
		billed := total
		covered := p.commit >= 0
		if covered && vis.All {
			billed = 0
			k := pkey{p.period, p.commit}
			purchases[k] = satAdd(purchases[k], total)
		}
		r[0], r[1], r[2], r[3] = Money(billed).String(), Money(total).String(), Money(total).String(), Money(total).String()
		r[11] = "Usage"
		r[colFreq] = "Usage-Based"
		r[colPool] = x.pool
		fr := focusRow{start: start, end: end, pool: x.pool, commit: p.commit, cell: p.cell}
		if tags[p.cell] == "" {
			t := map[string]string{"gpufleet/pool": x.pool}
			if x.wl >= 0 {
				w := e.wls[x.wl].w
				for k, v := range w.Labels {
					t[k] = v
				}
				t["gpufleet/team"] = string(w.Team)
				if v := e.wls[x.wl].vol; v != nil {
					t["gpufleet/volume"] = v.Name
				}
			}
			tj, _ := json.Marshal(t)
			tags[p.cell] = string(tj)
		}
		r[colTags] = tags[p.cell]
		if x.wl >= 0 && e.wls[x.wl].vol != nil {
			v := e.wls[x.wl].vol
			id := VolumeID(v.Team, v.Name)
			r[13] = fmt.Sprintf("storage of volume %s (%d bytes) in pool %s", id, v.SizeBytes, x.pool)
			q := num(gibMonths(p.stor))
			r[14], r[15], r[colConsumed], r[colConsumedUnit] = q, focusStorageUnit, q, focusStorageUnit
			r[19], r[20] = focusStorageCategory, focusStorageService
			r[colResID], r[colResName], r[colResType] = id, v.Name, "Volume"
			r[colTeam] = string(v.Team)
			fr.resource = id
		} else if x.wl < 0 {
			r[13] = "idle GPU time of pool " + x.pool + ": billed, held by no workload"
			r[14] = num(hours(p.idle))
			r[colResID], r[colResName], r[colResType] = api.IdleRow, "idle capacity of pool "+x.pool, "Idle capacity"
			r[colTeam] = api.IdleRow
			fr.resource = api.IdleRow
		} else {
			w := e.wls[x.wl].w
			r[13] = "GPU time of workload " + string(w.ID) + " in pool " + x.pool
			h := num(hours(p.gpu))
			r[14], r[colConsumed], r[colConsumedUnit] = h, h, focusUnit
			r[colResID], r[colResType] = string(w.ID), "Workload"
			r[colTeam], r[colWorkload], r[colUser] = string(w.Team), string(w.ID), w.Owner
			fr.resource = string(w.ID)
		}
		if covered {
			r[colCommitID], r[colCommitCat] = commitID(e, p.commit), "Usage"
			r[colCommitStatus] = "Used"
			if x.wl < 0 {
				r[colCommitStatus] = "Unused"
			}
		}
		r[colGPUH], r[colIdleH] = num(hours(p.gpu)), num(hours(p.idle))
		r[colFailedH], r[colPreemptedH] = num(hours(p.failed)), num(hours(p.preempted))
		for k := range nComp {
			r[colAccel+k] = Money(m[k]).String()
		}
		fr.cols = r
		out = append(out, fr)
	}
	for k, billed := range purchases {
		sp := &e.bk.spans[k.commit]
		start, end := e.bounds[k.period], e.bounds[k.period+1]
		ov := min(end, sp.end) - max(start, sp.start)
		r := base(k.period)
		b := Money(billed).String()
		r[0], r[1], r[2], r[3] = b, "0", b, b
		r[11] = "Purchase"
		pool := e.bk.names[sp.pool]
		r[13] = fmt.Sprintf("reserved commitment of %d GPUs in pool %s", sp.v.GPUs, pool)
		r[14] = num(hours(mul64(uint64(sp.capMilli), uint64(max(0, ov)))))
		id := commitID(e, k.commit)
		r[colResID], r[colResName], r[colResType] = id, "reserved GPUs of pool "+pool, "GPU commitment"
		tj, _ := json.Marshal(map[string]string{"gpufleet/pool": pool})
		r[colTags] = string(tj)
		r[colCommitID], r[colCommitCat] = id, "Usage"
		r[colFreq] = "Recurring"
		r[colPool] = pool
		out = append(out, focusRow{start: start, end: end, purchase: true, resource: id, pool: pool, commit: k.commit, cols: r})
	}
	slices.SortFunc(out, func(a, b focusRow) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		if a.purchase != b.purchase {
			if a.purchase {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.resource, b.resource); c != 0 {
			return c
		}
		if c := cmp.Compare(a.pool, b.pool); c != 0 {
			return c
		}
		if c := cmp.Compare(a.commit, b.commit); c != 0 {
			return c
		}
		return cmp.Compare(a.cell, b.cell)
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

func commitID(e *engine, si int32) string {
	sp := &e.bk.spans[si]
	from := "always"
	if !sp.v.EffectiveFrom.IsZero() {
		from = sp.v.EffectiveFrom.UTC().Format(FOCUSTime)
	}
	return fmt.Sprintf("pool/%s/reserved/%s", e.bk.names[sp.pool], from)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
