package plan

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/spec"
)

// Fleet is what the plan knows of the fleet: the nodes with their GPUs
// (what is free on each now), the pools' prices and how much work waits.
// The server builds it from its store; tests write it by hand.
type Fleet struct {
	Currency string
	Nodes    []Node
	// Prices is each pool's exact rate per GPU-hour in micro-units
	// (cost.GPUHourRate of the version in effect); a pool absent has no
	// price.
	Prices map[string]*big.Rat
	// Pending is the workloads waiting for GPUs now.
	Pending int
}

// Node is one node of the fleet.
type Node struct {
	Name   string
	Pool   string
	Region string
	// Schedulable: the node takes work now. Qualifying: it is being
	// registered or qualified, and will take work once it passes: its
	// GPUs count as capacity, none of it free now. Nodes that are neither
	// (cordoned, draining, failed, lost, not ready) are left out.
	Schedulable bool
	Qualifying  bool
	GPUs        []GPU
}

// GPU is one device of a node.
type GPU struct {
	Model     string
	MemoryMiB int64
	// Domain is the device's NVLink domain on its node.
	Domain int
	// Healthy: devices the platform judged unhealthy are left out.
	Healthy bool
	// FreeMilli is the share of the device nobody holds now (1000:
	// wholly free).
	FreeMilli int64
}

// group is the GPUs of one kind (pool, region, model, memory) across the
// schedulable nodes: the per-node NVLink domains they form.
type group struct {
	pool, region, model string
	mib                 int64
	// domains holds, per node and NVLink domain, the devices' free shares.
	domains [][]int64
	// qualifying counts the group's nodes being qualified.
	qualifying int
}

// key orders groups for a deterministic plan.
func (g *group) key() string { return fmt.Sprintf("%s/%s/%s/%020d", g.pool, g.region, g.model, g.mib) }

// largestDomain is the most devices one NVLink domain of the group has.
func (g *group) largestDomain() int {
	n := 0
	for _, d := range g.domains {
		n = max(n, len(d))
	}
	return n
}

// freeNow reports whether replicas domains each have gpus wholly free
// devices (or, for a fraction, one device with milli free).
func (g *group) freeNow(milli int64, replicas int) bool {
	if milli < 1000 {
		for _, d := range g.domains {
			for _, f := range d {
				if f >= milli {
					return true
				}
			}
		}
		return false
	}
	found := 0
	for _, d := range g.domains {
		whole := 0
		for _, f := range d {
			if f >= 1000 {
				whole++
			}
		}
		if int64(whole)*1000 >= milli {
			found++
		}
	}
	return found >= replicas
}

// domainsWith counts the domains of at least n devices.
func (g *group) domainsWith(n int) int {
	c := 0
	for _, d := range g.domains {
		if len(d) >= n {
			c++
		}
	}
	return c
}

// Advise plans a brief on a fleet: it resolves the brief (Resolve; its
// errors are api.FieldErrors naming the field), estimates the memory
// (Memory) and lists the candidates, least exclusive first (Less), with
// a verdict and what the work needs. now is the clock, passed in: the
// verdict says when a deadline has passed or the expected duration,
// started now, would end after it.
func Advise(b api.WorkloadBrief, f Fleet, now time.Time) (api.Plan, error) {
	rb, err := Resolve(b)
	if err != nil {
		return api.Plan{}, err
	}
	est := Memory(rb)
	p := api.Plan{Brief: rb, Currency: f.Currency, Memory: est, Candidates: []api.PlanCandidate{}}

	// 1. Group the usable GPUs by kind, within the residency.
	groups, regions := groupFleet(f, rb.Residency)

	// 2. For each kind, the scopes from least exclusive up to the first
	//    that fits.
	for _, g := range groups {
		p.Candidates = append(p.Candidates, scopes(rb, est, g, f)...)
	}
	slices.SortStableFunc(p.Candidates, Less)

	// 3. The verdict and what the work needs.
	largest := int64(0)
	for _, g := range groups {
		largest = max(largest, g.mib)
	}
	p.Needs = needs(est, largest)
	switch best := Best(&p); {
	case best != nil:
		ask := fmt.Sprintf("%s × %s (%s) in pool %s", best.GPUs, best.GPUModel, gib(best.GPUMemoryMiB<<20), best.Pool)
		if best.Replicas > 1 {
			ask = fmt.Sprintf("%d nodes of %s × %s (%s) in pool %s", best.Replicas, best.GPUs, best.GPUModel, gib(best.GPUMemoryMiB<<20), best.Pool)
		}
		switch best.Scope {
		case api.ScopeFraction:
			p.Verdict = "fits in a fraction of one GPU: ask for " + ask
		case api.ScopeGPU:
			p.Verdict = "fits on one GPU: ask for " + ask
		default:
			p.Verdict = "needs more than one GPU: ask for " + ask
		}
		if best.ExpectedWait == "0s" {
			p.Verdict += "; free now"
		} else {
			p.Verdict += "; busy now, the wait is unknown"
		}
		p.Verdict += speedVerdict(p, best)
	case len(f.Nodes) == 0:
		p.Verdict = "the fleet has no nodes: nothing fits; it needs " + p.Needs
	case len(groups) == 0 && len(rb.Residency) > 0:
		p.Verdict = fmt.Sprintf("no schedulable GPU is in the residency regions (%s; the fleet has %s): nothing fits; it needs %s",
			strings.Join(rb.Residency, ", "), strings.Join(regions, ", "), p.Needs)
	case len(groups) == 0:
		p.Verdict = "the fleet has no healthy GPU on a node that takes work: nothing fits; it needs " + p.Needs
	default:
		p.Verdict = "nothing in the fleet fits: it needs " + p.Needs
	}
	// 4. The deadline, judged against now and the expected duration.
	if dl := rb.Targets.Deadline; dl != nil {
		d, _ := quantity.ParsePeriod(rb.ExpectedDuration)
		switch {
		case !dl.After(now):
			p.Verdict += "; the deadline " + dl.UTC().Format(time.RFC3339) + " has passed"
		case rb.ExpectedDuration != "" && now.Add(d).After(*dl):
			p.Verdict += "; started now, the expected " + rb.ExpectedDuration + " ends after the deadline " + dl.UTC().Format(time.RFC3339)
		}
	}
	return p, nil
}

// speedVerdict is what the verdict says of the targets on the best
// candidate, from its speed estimate: reachable there, out of reach on
// every candidate that fits, and whether smaller ones that fit looked too
// slow. "" when no target could be estimated.
func speedVerdict(p api.Plan, best *api.PlanCandidate) string {
	s := best.Speed
	if s == nil || s.Reachable == nil {
		return ""
	}
	if !*s.Reachable {
		return "; but the targets look out of reach on every candidate that fits (" + s.Why + "; an estimate the load stage measures)"
	}
	out := "; the targets look reachable there (" + s.Why + "; an estimate the load stage measures)"
	for i := range p.Candidates {
		if c := &p.Candidates[i]; c == best {
			break
		} else if c.Fits {
			return out + "; smaller allocations fit but look too slow for them"
		}
	}
	return out
}

// groupFleet gathers the healthy GPUs of the nodes that take work or are
// being qualified by kind (those of qualifying nodes never free), leaving
// out regions outside the residency (when it names any). It returns the
// groups in key order and every region the fleet has, for messages.
func groupFleet(f Fleet, residency []string) ([]*group, []string) {
	byKey := map[string]*group{}
	var regions []string
	for _, n := range f.Nodes {
		r := n.Region
		if r == "" {
			r = "(none)"
		}
		if !slices.Contains(regions, r) {
			regions = append(regions, r)
		}
		if !(n.Schedulable || n.Qualifying) || (len(residency) > 0 && !slices.Contains(residency, n.Region)) {
			continue
		}
		perDomain := map[string][]int64{}
		var order []string
		for _, d := range n.GPUs {
			if !d.Healthy || d.MemoryMiB <= 0 {
				continue
			}
			g := &group{pool: n.Pool, region: n.Region, model: d.Model, mib: d.MemoryMiB}
			k := g.key()
			if byKey[k] == nil {
				byKey[k] = g
			}
			dk := fmt.Sprintf("%s#%d", k, d.Domain)
			if _, ok := perDomain[dk]; !ok {
				order = append(order, dk)
			}
			free := min(max(d.FreeMilli, 0), 1000)
			if !n.Schedulable {
				free = 0
			}
			perDomain[dk] = append(perDomain[dk], free)
		}
		counted := map[string]bool{}
		for _, dk := range order {
			k := dk[:strings.LastIndexByte(dk, '#')]
			byKey[k].domains = append(byKey[k].domains, perDomain[dk])
			if !n.Schedulable && !counted[k] {
				byKey[k].qualifying++
				counted[k] = true
			}
		}
	}
	groups := make([]*group, 0, len(byKey))
	for _, g := range byKey {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *group) int { return cmp.Compare(a.key(), b.key()) })
	slices.Sort(regions)
	return groups, regions
}

// scopes lists one group's candidates, least exclusive first, up to the
// first that fits and does not look too slow for the brief's targets
// (Speed): a fraction of one GPU (by memory share, rounded up to
// a quarter), one GPU, 2, 4 or 8 GPUs in one NVLink domain, then nodes of
// the group's largest domain.
func scopes(b api.WorkloadBrief, est api.MemoryEstimate, g *group, f Fleet) []api.PlanCandidate {
	var out []api.PlanCandidate
	cap1 := usable(g.mib)
	add := func(scope string, milli int64, replicas int, need, given int64, fits bool, why string) bool {
		c := api.PlanCandidate{Scope: scope, GPUs: quantity.Milli(milli).String(), GPUModel: g.model, GPUMemoryMiB: g.mib,
			Pool: g.pool, Region: g.region, Fits: fits, ExpectedWait: "unknown"}
		if replicas > 1 {
			c.Replicas = replicas
		}
		if given > 0 {
			c.HeadroomRatio = float64(given-need) / float64(given)
		}
		c.CostPerHour, c.CostPerUnit, c.Unit = price(b, f, g.pool, milli*int64(max(replicas, 1)))
		c.Speed = Speed(b, est, g.model, g.mib, milli*int64(max(replicas, 1)))
		switch {
		case !fits:
			c.ExpectedWait = "never"
		case g.freeNow(milli, max(replicas, 1)):
			c.ExpectedWait = "0s"
		case g.qualifying > 0:
			why += fmt.Sprintf("; no such capacity is free now (%d workloads wait; %d nodes of it are being qualified): the wait depends on when qualification and running work end", f.Pending, g.qualifying)
		default:
			why += fmt.Sprintf("; no such capacity is free now (%d workloads wait): the wait depends on when running work ends", f.Pending)
		}
		c.Why = why
		out = append(out, c)
		// A candidate that fits but looks too slow for the targets does
		// not end the search: a larger one may reach them.
		return fits && !tooSlow(c.Speed)
	}
	// slow reports whether milli-GPUs of the group look too slow for the
	// brief's targets.
	slow := func(milli int64) bool { return tooSlow(Speed(b, est, g.model, g.mib, milli)) }
	need1 := perGPU(est, 1)
	memWord := func(n int64) string { return fmt.Sprintf("needs %s per GPU", gib(perGPU(est, n))) }

	// A fraction: the memory share rounded up to a quarter, below one.
	quarters := (need1*4 + cap1 - 1) / cap1
	if quarters <= 3 {
		share := int64(quarters) * 250
		given := (g.mib << 20) * share / 1000
		if add(api.ScopeFraction, share, 1, need1, given, true,
			fmt.Sprintf("%s; %s of one %s GPU gives %s (%s after %d%% headroom)", memWord(1), quantity.Milli(share), gib(g.mib<<20), gib(given), gib(given*9/10), headroomTenths*10)) {
			return out
		}
	} else if add(api.ScopeFraction, 750, 1, need1, (g.mib<<20)*3/4, false,
		fmt.Sprintf("%s; 0.75 of one %s GPU gives %s after headroom", memWord(1), gib(g.mib<<20), gib(cap1*3/4))) {
		return out
	}
	// One GPU.
	if add(api.ScopeGPU, 1000, 1, need1, g.mib<<20, need1 <= cap1,
		fmt.Sprintf("%s; one %s GPU gives %s after headroom", memWord(1), gib(g.mib<<20), gib(cap1))) {
		return out
	}
	// Several GPUs of one NVLink domain.
	largest := g.largestDomain()
	for _, n := range []int64{2, 4, 8} {
		need := perGPU(est, n)
		fitsMem := need <= cap1
		if (!fitsMem || slow(n*1000)) && n < 8 {
			continue
		}
		why := fmt.Sprintf("%s across %d GPUs; each %s GPU gives %s after headroom", memWord(n), n, gib(g.mib<<20), gib(cap1))
		fits := fitsMem && int64(largest) >= n
		if fitsMem && !fits {
			why += fmt.Sprintf("; but no node of pool %s has %d such GPUs in one NVLink domain (at most %d)", g.pool, n, largest)
		}
		if add(api.ScopeNode, n*1000, 1, need, g.mib<<20, fits, why) {
			return out
		}
		break
	}
	// Several nodes, each with the group's largest domain.
	if largest == 0 {
		return out
	}
	per := int64(largest)
	for r := 2; r <= spec.MaxReplicas; r++ {
		need := perGPU(est, per*int64(r))
		if (need > cap1 || slow(per*int64(r)*1000)) && r < spec.MaxReplicas {
			continue
		}
		why := fmt.Sprintf("%s across %d nodes × %d GPUs; each %s GPU gives %s after headroom", memWord(per*int64(r)), r, per, gib(g.mib<<20), gib(cap1))
		have := g.domainsWith(largest)
		fits := need <= cap1 && have >= r
		if need <= cap1 && !fits {
			why += fmt.Sprintf("; but pool %s has only %d nodes with %d such GPUs in one NVLink domain", g.pool, have, per)
		}
		add(api.ScopeNodes, per*1000, r, need, g.mib<<20, fits, why)
		break
	}
	return out
}

// price is a candidate's cost per hour (milli-GPU × the pool's rate per
// GPU-hour) and per unit: one completed unit at the throughput target, or
// else the whole run over the expected duration. Each is computed exactly
// and rounded half up to a micro-unit once. nil without a price (or,
// per unit, without a target or a duration).
func price(b api.WorkloadBrief, f Fleet, pool string, milli int64) (perHour, perUnit *quantity.Money, unit string) {
	rate, ok := f.Prices[pool]
	if !ok || rate == nil {
		return nil, nil, ""
	}
	hourly := new(big.Rat).Mul(rate, big.NewRat(milli, 1000))
	h := quantity.Money(roundHalfUp(hourly))
	perHour = &h
	switch {
	case b.Targets.ThroughputPerSecond > 0:
		unitsPerHour := new(big.Rat).SetFloat64(b.Targets.ThroughputPerSecond)
		unitsPerHour.Mul(unitsPerHour, big.NewRat(3600, 1))
		u := quantity.Money(roundHalfUp(new(big.Rat).Quo(hourly, unitsPerHour)))
		unit = b.Targets.Unit
		if unit == "" {
			unit = "request"
		}
		return perHour, &u, unit
	case b.ExpectedDuration != "":
		d, err := quantity.ParsePeriod(b.ExpectedDuration)
		if err != nil || d <= 0 {
			return perHour, nil, ""
		}
		run := new(big.Rat).Mul(hourly, big.NewRat(int64(d/time.Second), 3600))
		u := quantity.Money(roundHalfUp(run))
		return perHour, &u, "run"
	}
	return perHour, nil, ""
}

// roundHalfUp rounds a non-negative rational to the nearest integer,
// halves up; a value beyond int64 saturates.
func roundHalfUp(r *big.Rat) int64 {
	num := new(big.Int).Lsh(r.Num(), 1)
	num.Add(num, r.Denom())
	num.Quo(num, new(big.Int).Lsh(r.Denom(), 1))
	if !num.IsInt64() {
		return 1<<63 - 1
	}
	return num.Int64()
}

// scopeRank is a scope's place in api.Scopes.
func scopeRank(s string) int {
	if i := slices.Index(api.Scopes, s); i >= 0 {
		return i
	}
	return len(api.Scopes)
}

// TotalMilli is the GPUs a candidate holds, in milli-GPU (gpus ×
// replicas).
func TotalMilli(c api.PlanCandidate) int64 {
	m, err := quantity.ParseMilli(c.GPUs)
	if err != nil {
		return 0
	}
	return int64(m) * int64(max(c.Replicas, 1))
}

// Less orders candidates, least exclusive first:
//
//  1. by scope: a fraction, one GPU, one node, several nodes;
//  2. fewer GPUs in all (gpus × replicas);
//  3. those that fit before those that do not;
//  4. cheaper per hour (no price last);
//  5. by pool, region, model and GPU memory, for a deterministic order.
func Less(a, b api.PlanCandidate) int {
	if c := cmp.Compare(scopeRank(a.Scope), scopeRank(b.Scope)); c != 0 {
		return c
	}
	if c := cmp.Compare(TotalMilli(a), TotalMilli(b)); c != 0 {
		return c
	}
	if a.Fits != b.Fits {
		if a.Fits {
			return -1
		}
		return 1
	}
	cost := func(c api.PlanCandidate) quantity.Money {
		if c.CostPerHour == nil {
			return quantity.MaxMoney * 1000
		}
		return *c.CostPerHour
	}
	if c := cmp.Compare(cost(a), cost(b)); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Region, b.Region), cmp.Compare(a.GPUModel, b.GPUModel), cmp.Compare(a.GPUMemoryMiB, b.GPUMemoryMiB))
}

// needs says what the work needs in terms of GPUs of mib MiB (the fleet's
// largest; 80 GiB when it has none): one GPU of at least some size when
// one of the largest holds it, else the fewest of them in one NVLink
// domain, else nodes of 8.
func needs(est api.MemoryEstimate, mib int64) string {
	if mib <= 0 {
		mib = 80 << 10
	}
	cap1 := usable(mib)
	need1 := perGPU(est, 1)
	if need1 <= cap1 {
		least := (need1*10 + 9) / (10 - headroomTenths)
		return fmt.Sprintf("one GPU with at least %s (%s with %d%% headroom)", gib(least), gib(need1), headroomTenths*10)
	}
	for _, n := range []int64{2, 4, 8} {
		if perGPU(est, n) <= cap1 {
			return fmt.Sprintf("at least %d × %s in one NVLink domain (%s each, with %d%% headroom)", n, gib(mib<<20), gib(perGPU(est, n)), headroomTenths*10)
		}
	}
	for r := int64(2); r <= spec.MaxReplicas; r++ {
		if perGPU(est, 8*r) <= cap1 {
			return fmt.Sprintf("at least %d nodes of 8 × %s in one NVLink domain each (%s per GPU)", r, gib(mib<<20), gib(perGPU(est, 8*r)))
		}
	}
	return fmt.Sprintf("more than %d nodes of 8 × %s", spec.MaxReplicas, gib(mib<<20))
}

// gib writes bytes as GiB with one decimal (binary, as GPUs report
// memory: an "80 GB" GPU is 80 GiB here).
func gib(bytes int64) string {
	tenths := (bytes*10 + 1<<29) >> 30
	if tenths%10 == 0 {
		return fmt.Sprintf("%d GiB", tenths/10)
	}
	return fmt.Sprintf("%d.%d GiB", tenths/10, tenths%10)
}
