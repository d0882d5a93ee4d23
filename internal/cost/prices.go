package cost

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// PriceAt returns the version of pool's price in effect at t: the one with
// the latest EffectiveFrom at or before t (a zero EffectiveFrom is since
// always; of two versions from the same time the later in the slice). ok is
// false when the pool has no version in effect at t.
func PriceAt(prices []api.Price, pool string, t time.Time) (api.Price, bool) {
	var best api.Price
	ok := false
	for _, p := range prices {
		if p.Pool != pool || p.EffectiveFrom.After(t) {
			continue
		}
		if !ok || !p.EffectiveFrom.Before(best.EffectiveFrom) {
			best, ok = p, true
		}
	}
	return best, ok
}

// CheckVersions reports what a new version p would do wrong to the book of
// existing versions: a version of the same pool from the same time
// (versions never rewrite each other); and, when now is not zero (the API
// adds versions at now; a configuration file, which may list a pool's
// history, passes the zero time), an EffectiveFrom before now or not after
// the pool's latest version (a new price applies from then on and never
// rewrites the past). A zero EffectiveFrom with a non-zero now is before
// now: the caller sets it to now first. Each problem names effectiveFrom.
func CheckVersions(existing []api.Price, p api.Price, now time.Time) []api.FieldError {
	var errs []api.FieldError
	var latest time.Time
	have := false
	for _, e := range existing {
		if e.Pool != p.Pool {
			continue
		}
		if e.EffectiveFrom.Equal(p.EffectiveFrom) {
			errs = append(errs, api.FieldError{Field: "effectiveFrom", Problem: fmt.Sprintf(
				"pool %s already has a price version effective from %s; versions never rewrite each other", p.Pool, stamp(p.EffectiveFrom))})
		}
		if !have || e.EffectiveFrom.After(latest) {
			latest, have = e.EffectiveFrom, true
		}
	}
	if now.IsZero() {
		return errs
	}
	if p.EffectiveFrom.Before(now) {
		errs = append(errs, api.FieldError{Field: "effectiveFrom", Problem: fmt.Sprintf(
			"%s is in the past (now is %s): a new price applies from now on and never rewrites the past", stamp(p.EffectiveFrom), stamp(now))})
	}
	if have && p.EffectiveFrom.Before(latest) { // equal: the error above
		errs = append(errs, api.FieldError{Field: "effectiveFrom", Problem: fmt.Sprintf(
			"must be after pool %s's latest version, effective from %s", p.Pool, stamp(latest))})
	}
	return errs
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "the beginning (no effectiveFrom)"
	}
	return t.UTC().Format(time.RFC3339)
}

// Time in the ledger is int64 nanoseconds since the Unix epoch, clamped:
// the zero time (a version since always) is the smallest.
const (
	minNs = math.MinInt64
	maxNs = math.MaxInt64
)

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func nanos(t time.Time) int64 {
	switch {
	case t.IsZero() || t.Before(minTime):
		return minNs
	case t.After(maxTime):
		return maxNs
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// span is a stretch of a pool's time under one price version: a version,
// or the part of a reserved version within its term (committed) or after
// it. A span without a version is a time the pool has no price.
type span struct {
	pool      int
	start     int64
	end       int64
	v         *api.Price
	committed bool  // billed whether used or not: reserved within its term, monthly, owned
	capMilli  int64 // the committed capacity: reserved GPUs, or the pool's devices, in milli-GPU
	reserved  bool  // a reserved commitment (FOCUS Purchase rows)
	increment int64 // on-demand billing increment, ns (0: per nanosecond)

	accel, licHour, cpu, mem, net, storage term
	perWorkload                            map[string]term
}

// Components of a cost.
const (
	cAccel = iota
	cHost
	cStorage
	cNetwork
	cLicence
	nComp
)

var (
	ratGPUHour = big.NewInt(milliNsPerGPUHour)
	// ratByteMonth is a GiB-month in byte-nanoseconds: 2^30 bytes ×
	// quantity.HoursPerMonth hours, the month of monthly prices.
	ratByteMonth = new(big.Int).Mul(big.NewInt(1<<30), big.NewInt(quantity.HoursPerMonth*nsPerHour))
)

// rates are a version's prices as exact fractions of a micro-unit per unit
// of the quantity each is billed on.
type rates struct {
	accel, licHour, cpu, mem, net, storage *big.Rat
	perWorkload                            map[string]*big.Rat
}

func frac(num Money, den *big.Int) *big.Rat {
	if num <= 0 {
		return nil
	}
	return new(big.Rat).SetFrac(big.NewInt(int64(num)), den)
}

func ratesOf(p *api.Price) rates {
	var r rates
	if g := GPUHourRate(*p); g.Sign() > 0 {
		r.accel = g.Quo(g, new(big.Rat).SetInt(ratGPUHour)) // per milli-GPU ns
	}
	r.licHour = frac(p.LicenceGPUHour, ratGPUHour)
	r.cpu = frac(p.CPUCoreHour, ratGPUHour) // milli-CPU ns: 1000 × ns per hour too
	r.mem = frac(p.MemoryGiBHour, new(big.Int).Mul(big.NewInt(1024), big.NewInt(nsPerHour)))
	r.net = frac(p.EgressGiB, big.NewInt(1<<30))
	r.storage = frac(p.StorageGiBMonth, ratByteMonth) // per byte-ns
	for k, m := range p.LicencePerWorkload {
		if m > 0 {
			if r.perWorkload == nil {
				r.perWorkload = map[string]*big.Rat{}
			}
			r.perWorkload[k] = new(big.Rat).SetInt64(int64(m))
		}
	}
	return r
}

// book is the price versions of an Input as spans per pool, with each
// component's common denominator.
type book struct {
	scales [nComp]scale
	spans  []span
	pools  map[string]int // pool name → index into poolSpans
	names  []string
	first  []int // pool index → its first span; spans of a pool are contiguous and cover all time
	count  []int
}

func newBook(prices []api.Price, devices []PoolGPUs) *book {
	b := &book{pools: map[string]int{}}
	byPool := map[string][]*api.Price{}
	for i := range prices {
		p := &prices[i]
		if _, ok := b.pools[p.Pool]; !ok {
			b.pools[p.Pool] = len(b.names)
			b.names = append(b.names, p.Pool)
		}
		byPool[p.Pool] = append(byPool[p.Pool], p)
	}
	gpus := map[string]int64{}
	for _, d := range devices {
		gpus[d.Pool] += int64(d.GPUs)
	}
	var rs [nComp][]*big.Rat
	type pending struct {
		s span
		r rates
	}
	var all []pending
	for pi, name := range b.names {
		vs := byPool[name]
		slices.SortStableFunc(vs, func(x, y *api.Price) int { return x.EffectiveFrom.Compare(y.EffectiveFrom) })
		// Of versions from the same time, the last wins (PriceAt).
		var keep []*api.Price
		for i, v := range vs {
			if i+1 < len(vs) && vs[i+1].EffectiveFrom.Equal(v.EffectiveFrom) {
				continue
			}
			keep = append(keep, v)
		}
		b.first = append(b.first, len(all))
		cur := int64(minNs)
		for i, v := range keep {
			start := nanos(v.EffectiveFrom)
			end := int64(maxNs)
			if i+1 < len(keep) {
				end = nanos(keep[i+1].EffectiveFrom)
			}
			if start > cur {
				all = append(all, pending{s: span{pool: pi, start: cur, end: start}})
			}
			r := ratesOf(v)
			s := span{pool: pi, start: start, end: end, v: v}
			switch v.Kind {
			case api.PriceOnDemand:
				if d, err := time.ParseDuration(v.BillingIncrement); err == nil && d > 0 {
					s.increment = int64(d)
				}
				all = append(all, pending{s, r})
			case api.PriceMonthly, api.PriceOwned:
				s.committed, s.capMilli = true, gpus[name]*1000
				all = append(all, pending{s, r})
			case api.PriceReserved:
				termEnd := int64(maxNs)
				if d, err := quantity.ParsePeriod(v.Term); err == nil && d > 0 && start != minNs {
					if start <= maxNs-int64(d) {
						termEnd = start + int64(d)
					}
				}
				c := s
				c.committed, c.reserved, c.capMilli = true, true, int64(v.GPUs)*1000
				if termEnd < end {
					c.end = termEnd
					all = append(all, pending{c, r})
					after := s
					after.start = termEnd
					all = append(all, pending{after, r})
				} else {
					all = append(all, pending{c, r})
				}
			default:
				all = append(all, pending{s: span{pool: pi, start: start, end: end}})
			}
			cur = end
		}
		if cur < maxNs {
			all = append(all, pending{s: span{pool: pi, start: cur, end: maxNs}})
		}
		b.count = append(b.count, len(all)-b.first[pi])
	}
	for _, p := range all {
		r := p.r
		for c, x := range [nComp]*big.Rat{cAccel: r.accel, cLicence: r.licHour, cHost: r.cpu, cNetwork: r.net, cStorage: r.storage} {
			if x != nil {
				rs[c] = append(rs[c], x)
			}
		}
		if r.mem != nil {
			rs[cHost] = append(rs[cHost], r.mem)
		}
		for _, x := range r.perWorkload {
			rs[cLicence] = append(rs[cLicence], x)
		}
	}
	for c := range nComp {
		b.scales[c] = newScale(rs[c])
	}
	b.spans = make([]span, len(all))
	for i, p := range all {
		s := p.s
		s.accel = b.scales[cAccel].term(p.r.accel)
		s.licHour = b.scales[cLicence].term(p.r.licHour)
		s.cpu = b.scales[cHost].term(p.r.cpu)
		s.mem = b.scales[cHost].term(p.r.mem)
		s.net = b.scales[cNetwork].term(p.r.net)
		s.storage = b.scales[cStorage].term(p.r.storage)
		for k, x := range p.r.perWorkload {
			if s.perWorkload == nil {
				s.perWorkload = map[string]term{}
			}
			s.perWorkload[k] = b.scales[cLicence].term(x)
		}
		b.spans[i] = s
	}
	return b
}

// spanAt returns the index of pool's span holding t, or -1 when the pool
// has no price at all.
func (b *book) spanAt(pool int, t int64) int {
	if pool < 0 {
		return -1
	}
	lo, n := b.first[pool], b.count[pool]
	ss := b.spans[lo : lo+n]
	i, _ := slices.BinarySearchFunc(ss, t, func(s span, t int64) int {
		switch {
		case s.end <= t:
			return -1
		case s.start > t:
			return 1
		}
		return 0
	})
	if i >= n {
		i = n - 1
	}
	return lo + i
}

// pool returns the index of a pool with prices, or -1.
func (b *book) pool(name string) int {
	if i, ok := b.pools[name]; ok {
		return i
	}
	return -1
}
