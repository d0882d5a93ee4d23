package fairshare

import (
	"cmp"
	"fmt"
	"math/big"
	"math/bits"
	"slices"
	"strings"
)

// Team is one team's quota and demand, in milli-GPU.
type Team struct {
	// Name identifies the team. Names must be unique within one call.
	Name string
	// Guaranteed is the share the team is always entitled to, up to what
	// it wants, as long as all guarantees fit in capacity. Negative counts
	// as 0.
	Guaranteed int64
	// Limit is the most the team may hold, borrowing included. Negative
	// means unlimited; 0 means the team gets nothing.
	Limit int64
	// Weight is the team's pull on capacity beyond the guarantees,
	// relative to the other teams. Values of 0 or less count as 1.
	Weight int64
	// Demand is what the team holds now plus what it has pending: its
	// total want. Negative counts as 0.
	Demand int64
}

// Why a share stopped growing, in Line.Capped. An empty Capped means
// capacity ran out first.
const (
	CappedDemand = "demand" // the team got all it wants
	CappedLimit  = "limit"  // the team wants more but is at its Limit
)

// Line explains one team's share: how much of it comes from the guarantee,
// how much is borrowed, and why it is not larger.
type Line struct {
	Name       string
	Guaranteed int64  // part of Share covered by the team's guarantee
	Borrowed   int64  // part of Share taken from capacity beyond guarantees
	Share      int64  // Guaranteed + Borrowed
	Capped     string // CappedDemand, CappedLimit, or "" when capacity ran out
}

// Shares divides capacity (milli-GPU) among teams and returns each team's
// fair share by name. Every team in the input has an entry, 0 included.
//
//  1. Each team claims min(Demand, Guaranteed, Limit). If the claims fit in
//     capacity, each team gets its claim. If not, capacity is water-filled
//     by guarantee: each team gets the same fraction of its Guaranteed,
//     never more than its claim, and nothing is left to borrow.
//  2. What remains goes to the teams that want more, in proportion to
//     Weight, never lifting a team above min(Demand, Limit). What a team
//     cannot use is redistributed to the others, until the capacity is
//     spent or every team has all it may hold.
//  3. Both divisions are exact in integers: each team gets the floor of its
//     exact share, and the milli-GPU left over go one at a time to the
//     teams with the largest fractional remainder, ties by name.
//
// So Σ shares ≤ capacity; each share ≤ min(Demand, Limit); each share ≥
// min(Demand, Guaranteed, Limit) when those claims fit in capacity; and
// Σ shares == capacity whenever some team still wants more and may hold it.
// The result does not depend on the order of teams. Shares panics if two
// teams have the same name.
func Shares(capacity int64, teams []Team) map[string]int64 {
	lines := Explain(capacity, teams)
	m := make(map[string]int64, len(lines))
	for _, l := range lines {
		m[l.Name] = l.Share
	}
	return m
}

// Explain divides capacity exactly as Shares does and returns one Line per
// team, in name order, for answering "why is my share X". It panics if two
// teams have the same name.
func Explain(capacity int64, teams []Team) []Line {
	ts := slices.Clone(teams)
	slices.SortFunc(ts, func(a, b Team) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(ts); i++ {
		if ts[i].Name == ts[i-1].Name {
			panic(fmt.Sprintf("fairshare: duplicate team name %q", ts[i].Name))
		}
	}
	capacity = max(capacity, 0)

	// ceiling is the most each team may hold: min(Demand, Limit).
	ceiling := make([]int64, len(ts))
	parts := make([]part, len(ts))
	claimed, fit := int64(0), true // Σ claims, while it fits in capacity
	for i, t := range ts {
		ceiling[i] = max(t.Demand, 0)
		if t.Limit >= 0 {
			ceiling[i] = min(ceiling[i], t.Limit)
		}
		parts[i] = part{cap: min(ceiling[i], max(t.Guaranteed, 0)), weight: max(t.Guaranteed, 1)}
		if fit = fit && parts[i].cap <= capacity-claimed; fit {
			claimed += parts[i].cap
		}
	}

	// 1. Guarantees, scaled down by a water-fill when they do not fit.
	guaranteed := make([]int64, len(ts))
	room := capacity
	if fit {
		for i, p := range parts {
			guaranteed[i] = p.cap
		}
		room -= claimed
	} else {
		waterFill(capacity, parts)
		for i, p := range parts {
			guaranteed[i] = p.got
		}
		room = 0
	}

	// 2 and 3. The rest, by weight, up to each team's ceiling.
	for i, t := range ts {
		parts[i] = part{cap: ceiling[i] - guaranteed[i], weight: max(t.Weight, 1)}
	}
	waterFill(room, parts)

	lines := make([]Line, len(ts))
	for i, t := range ts {
		l := Line{Name: t.Name, Guaranteed: guaranteed[i], Borrowed: parts[i].got}
		l.Share = l.Guaranteed + l.Borrowed
		switch {
		case l.Share == max(t.Demand, 0):
			l.Capped = CappedDemand
		case l.Share == ceiling[i]:
			l.Capped = CappedLimit
		}
		lines[i] = l
	}
	return lines
}

// CompareDeficit orders teams for the scheduler by usage/fairShare, the
// team furthest below its fair share first. It returns a negative number
// when team a should go before team b, a positive one when after, and 0
// when they rank the same; callers end the chain with a name compare.
//
//  1. The ratio usage/share, lowest first, compared exactly in integers
//     (no floats). Usage 0 is ratio 0 whatever the share, so a team with
//     share 0 and usage 0 ranks first, level with every other idle team.
//     Usage above a share of 0 is an infinite ratio and ranks last.
//  2. Among infinite ratios, lower usage first.
//
// Negative arguments count as 0. The ordering only ranks; the scheduler
// still checks limits before admitting anything.
func CompareDeficit(aUsage, aShare, bUsage, bShare int64) int {
	aUsage, aShare = max(aUsage, 0), max(aShare, 0)
	bUsage, bShare = max(bUsage, 0), max(bShare, 0)
	aInf, bInf := aUsage > 0 && aShare == 0, bUsage > 0 && bShare == 0
	switch {
	case aInf && bInf:
		return cmp.Compare(aUsage, bUsage)
	case aInf:
		return 1
	case bInf:
		return -1
	case aUsage == 0 || bUsage == 0:
		return cmp.Compare(min(aUsage, 1), min(bUsage, 1))
	}
	// aUsage/aShare vs bUsage/bShare, all positive.
	return cmpProducts(aUsage, bShare, bUsage, aShare)
}

// part is one team's place in a water-fill.
type part struct {
	cap    int64 // the most this fill may give the team, ≥ 0
	weight int64 // the team's pull, ≥ 1
	got    int64 // what the fill gave it
}

// waterFill divides room among parts in proportion to weight, never giving
// a part more than its cap, and sets each part's got. It spends all of room
// unless every part reaches its cap. parts are in name order: the index is
// the final tie-break.
func waterFill(room int64, parts []part) {
	for i := range parts {
		parts[i].got = 0
	}
	if room <= 0 {
		return
	}

	// 1. If every cap fits, give every cap.
	open := make([]int, 0, len(parts))
	need, fit := int64(0), true // Σ caps, while it fits in room
	for i, p := range parts {
		if p.cap > 0 {
			open = append(open, i)
			if fit = fit && p.cap <= room-need; fit {
				need += p.cap
			}
		}
	}
	if fit {
		for _, i := range open {
			parts[i].got = parts[i].cap
		}
		return
	}

	// 2. Otherwise the parts that fill up first are those with the
	// smallest cap/weight; walk them in that order.
	slices.SortFunc(open, func(a, b int) int {
		if c := cmpProducts(parts[a].cap, parts[b].weight, parts[b].cap, parts[a].weight); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var total uint64
	for _, i := range open {
		var carry uint64
		if total, carry = bits.Add64(total, uint64(parts[i].weight), 0); carry != 0 {
			fillBig(room, parts, open)
			return
		}
	}
	fillFast(room, total, parts, open)
}

// fillFast is steps 3 and 4 of a water-fill whose total weight fits in 64
// bits; products are taken in 128 bits.
//
//  3. A part is capped when its cap is within its proportional offer,
//     cap ≤ room·weight/total: it gets its cap and leaves the rest to the
//     others. The first part that is not capped ends the walk, since every
//     later one has a larger cap/weight.
//  4. The uncapped parts share what is left by weight: floors first, then
//     the leftover to the largest remainders.
func fillFast(room int64, total uint64, parts []part, open []int) {
	r := uint64(room)
	k := 0
	for ; k < len(open); k++ {
		p := &parts[open[k]]
		capHi, capLo := bits.Mul64(uint64(p.cap), total)
		offerHi, offerLo := bits.Mul64(r, uint64(p.weight))
		if capHi > offerHi || capHi == offerHi && capLo > offerLo {
			break
		}
		p.got = p.cap
		r -= uint64(p.cap)
		total -= uint64(p.weight)
	}
	// The walk never caps every part: Σ cap > room. So total > 0, and the
	// quotient r·weight/total ≤ r fits in 64 bits.
	rest := open[k:]
	rems := make([]uint64, len(rest))
	left := r
	for j, i := range rest {
		hi, lo := bits.Mul64(r, uint64(parts[i].weight))
		q, rem := bits.Div64(hi, lo, total)
		parts[i].got = int64(q)
		rems[j] = rem
		left -= q
	}
	handOut(parts, rest, int64(left), func(a, b int) int { return cmp.Compare(rems[b], rems[a]) })
}

// fillBig is fillFast for a total weight beyond 64 bits, in math/big.
func fillBig(room int64, parts []part, open []int) {
	total := new(big.Int)
	for _, i := range open {
		total.Add(total, big.NewInt(parts[i].weight))
	}
	r := room
	var lhs, rhs, w big.Int
	k := 0
	for ; k < len(open); k++ {
		p := &parts[open[k]]
		w.SetInt64(p.weight)
		lhs.Mul(lhs.SetInt64(p.cap), total)
		rhs.Mul(rhs.SetInt64(r), &w)
		if lhs.Cmp(&rhs) > 0 {
			break
		}
		p.got = p.cap
		r -= p.cap
		total.Sub(total, &w)
	}
	rest := open[k:]
	rems := make([]big.Int, len(rest))
	left := r
	var q big.Int
	for j, i := range rest {
		rhs.Mul(rhs.SetInt64(r), w.SetInt64(parts[i].weight))
		q.QuoRem(&rhs, total, &rems[j])
		parts[i].got = q.Int64()
		left -= parts[i].got
	}
	handOut(parts, rest, left, func(a, b int) int { return rems[b].Cmp(&rems[a]) })
}

// handOut gives one more milli-GPU to each of the first left parts of rest
// in order of byRemainder (which compares positions in rest, largest
// remainder first), ties by name. left is below len(rest).
func handOut(parts []part, rest []int, left int64, byRemainder func(a, b int) int) {
	if left <= 0 {
		return
	}
	order := make([]int, len(rest))
	for j := range order {
		order[j] = j
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := byRemainder(a, b); c != 0 {
			return c
		}
		return cmp.Compare(rest[a], rest[b])
	})
	for _, j := range order[:left] {
		parts[rest[j]].got++
	}
}

// cmpProducts compares a·b with c·d for non-negative a, b, c, d, exactly.
func cmpProducts(a, b, c, d int64) int {
	xHi, xLo := bits.Mul64(uint64(a), uint64(b))
	yHi, yLo := bits.Mul64(uint64(c), uint64(d))
	if c := cmp.Compare(xHi, yHi); c != 0 {
		return c
	}
	return cmp.Compare(xLo, yLo)
}
