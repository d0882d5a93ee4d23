package fairshare

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const unlimited = -1

func TestShares(t *testing.T) {
	const maxW = math.MaxInt64
	tests := []struct {
		name     string
		capacity int64
		teams    []Team
		want     map[string]int64
	}{
		{
			name:     "idle capacity is split by weight",
			capacity: 10000,
			teams: []Team{
				{Name: "a", Guaranteed: 1000, Limit: unlimited, Weight: 1, Demand: 10000},
				{Name: "b", Guaranteed: 1000, Limit: unlimited, Weight: 3, Demand: 10000},
			},
			want: map[string]int64{"a": 3000, "b": 7000},
		},
		{
			name:     "a team capped by its limit gives the rest to others",
			capacity: 9000,
			teams: []Team{
				{Name: "a", Limit: 2000, Weight: 1, Demand: 9000},
				{Name: "b", Limit: unlimited, Weight: 1, Demand: 9000},
				{Name: "c", Limit: unlimited, Weight: 1, Demand: 9000},
			},
			want: map[string]int64{"a": 2000, "b": 3500, "c": 3500},
		},
		{
			name:     "a team capped by its demand gives the rest to others",
			capacity: 9000,
			teams: []Team{
				{Name: "a", Limit: unlimited, Weight: 1, Demand: 1000},
				{Name: "b", Limit: unlimited, Weight: 1, Demand: 9000},
				{Name: "c", Limit: unlimited, Weight: 1, Demand: 9000},
			},
			want: map[string]int64{"a": 1000, "b": 4000, "c": 4000},
		},
		{
			name:     "guarantees larger than capacity are scaled down",
			capacity: 3000,
			teams: []Team{
				{Name: "a", Guaranteed: 4000, Limit: unlimited, Weight: 1, Demand: 4000},
				{Name: "b", Guaranteed: 2000, Limit: unlimited, Weight: 9, Demand: 9000},
			},
			want: map[string]int64{"a": 2000, "b": 1000},
		},
		{
			name:     "scaled-down guarantees never exceed demand",
			capacity: 3000,
			teams: []Team{
				{Name: "a", Guaranteed: 4000, Limit: unlimited, Weight: 1, Demand: 500},
				{Name: "b", Guaranteed: 4000, Limit: unlimited, Weight: 1, Demand: 9000},
			},
			want: map[string]int64{"a": 500, "b": 2500},
		},
		{
			name:     "a team without demand gets nothing",
			capacity: 8000,
			teams: []Team{
				{Name: "a", Guaranteed: 4000, Limit: unlimited, Weight: 5, Demand: 0},
				{Name: "b", Guaranteed: 1000, Limit: unlimited, Weight: 1, Demand: 9000},
			},
			want: map[string]int64{"a": 0, "b": 8000},
		},
		{
			name:     "unlimited limit",
			capacity: 16000,
			teams: []Team{
				{Name: "a", Guaranteed: 1000, Limit: unlimited, Weight: 1, Demand: 20000},
				{Name: "b", Guaranteed: 1000, Limit: 2000, Weight: 1, Demand: 20000},
			},
			want: map[string]int64{"a": 14000, "b": 2000},
		},
		{
			name:     "a guarantee is kept against a heavier weight",
			capacity: 10000,
			teams: []Team{
				{Name: "a", Guaranteed: 6000, Limit: unlimited, Weight: 1, Demand: 10000},
				{Name: "b", Limit: unlimited, Weight: 100, Demand: 10000},
			},
			// 4000 left: a 39.6, b 3960.4; the leftover unit goes to a.
			want: map[string]int64{"a": 6040, "b": 3960},
		},
		{
			name:     "leftover milli-GPU go to the largest remainders",
			capacity: 1000,
			teams: []Team{
				{Name: "a", Limit: unlimited, Weight: 1, Demand: 1000}, // 142.86
				{Name: "b", Limit: unlimited, Weight: 2, Demand: 1000}, // 285.71
				{Name: "c", Limit: unlimited, Weight: 4, Demand: 1000}, // 571.43
			},
			want: map[string]int64{"a": 143, "b": 286, "c": 571},
		},
		{
			name:     "equal remainders go to the first name, not the first in the input",
			capacity: 1000,
			teams: []Team{
				{Name: "c", Limit: unlimited, Weight: 1, Demand: 1000},
				{Name: "b", Limit: unlimited, Weight: 1, Demand: 1000},
				{Name: "a", Limit: unlimited, Weight: 1, Demand: 1000},
			},
			want: map[string]int64{"a": 334, "b": 333, "c": 333},
		},
		{
			name:     "a limit below the guarantee caps the guarantee",
			capacity: 10000,
			teams: []Team{
				{Name: "a", Guaranteed: 5000, Limit: 2000, Weight: 1, Demand: 8000},
				{Name: "b", Limit: unlimited, Weight: 1, Demand: 9000},
			},
			want: map[string]int64{"a": 2000, "b": 8000},
		},
		{
			name:     "a limit of zero gets nothing",
			capacity: 6000,
			teams: []Team{
				{Name: "a", Guaranteed: 1000, Limit: 0, Weight: 1, Demand: 5000},
				{Name: "b", Limit: unlimited, Weight: 1, Demand: 5000},
			},
			want: map[string]int64{"a": 0, "b": 5000},
		},
		{
			name:     "weights of zero or less count as one",
			capacity: 3000,
			teams: []Team{
				{Name: "a", Limit: unlimited, Weight: 0, Demand: 9000},
				{Name: "b", Limit: unlimited, Weight: -5, Demand: 9000},
				{Name: "c", Limit: unlimited, Weight: 1, Demand: 9000},
			},
			want: map[string]int64{"a": 1000, "b": 1000, "c": 1000},
		},
		{
			name:     "demand below capacity is met and the rest stays idle",
			capacity: 10000,
			teams: []Team{
				{Name: "a", Guaranteed: 500, Limit: unlimited, Weight: 1, Demand: 1000},
				{Name: "b", Limit: unlimited, Weight: 1, Demand: 2000},
			},
			want: map[string]int64{"a": 1000, "b": 2000},
		},
		{
			name:     "negative capacity, guarantees and demands count as zero",
			capacity: -5,
			teams: []Team{
				{Name: "a", Guaranteed: -1000, Limit: unlimited, Weight: 1, Demand: 1000},
				{Name: "b", Guaranteed: 1000, Limit: unlimited, Weight: 1, Demand: -1000},
			},
			want: map[string]int64{"a": 0, "b": 0},
		},
		{
			name:     "no teams give an empty map",
			capacity: 1000,
			want:     map[string]int64{},
		},
		{
			name:     "weights whose total passes 64 bits still divide exactly",
			capacity: 3001,
			teams: []Team{
				{Name: "a", Limit: unlimited, Weight: maxW, Demand: 9000},
				{Name: "b", Limit: unlimited, Weight: maxW, Demand: 9000},
				{Name: "c", Limit: unlimited, Weight: maxW, Demand: 9000},
			},
			want: map[string]int64{"a": 1001, "b": 1000, "c": 1000},
		},
		{
			name:     "quantities near the int64 limit do not overflow",
			capacity: math.MaxInt64,
			teams: []Team{
				{Name: "a", Guaranteed: math.MaxInt64, Limit: unlimited, Weight: 1, Demand: math.MaxInt64},
				{Name: "b", Guaranteed: math.MaxInt64, Limit: unlimited, Weight: 1, Demand: math.MaxInt64},
			},
			want: map[string]int64{"a": math.MaxInt64/2 + 1, "b": math.MaxInt64 / 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Shares(tt.capacity, tt.teams)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Shares(%d, …) mismatch (-want +got):\n%s", tt.capacity, diff)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	tests := []struct {
		name     string
		capacity int64
		teams    []Team
		want     []Line
	}{
		{
			name:     "each share splits into guarantee and borrowing and says why it stopped",
			capacity: 10000,
			teams: []Team{
				{Name: "c", Guaranteed: 3000, Limit: unlimited, Weight: 1, Demand: 20000},
				{Name: "b", Guaranteed: 1000, Limit: unlimited, Weight: 1, Demand: 2500},
				{Name: "a", Guaranteed: 2000, Limit: 3000, Weight: 1, Demand: 9000},
			},
			want: []Line{
				{Name: "a", Guaranteed: 2000, Borrowed: 1000, Share: 3000, Capped: CappedLimit},
				{Name: "b", Guaranteed: 1000, Borrowed: 1500, Share: 2500, Capped: CappedDemand},
				{Name: "c", Guaranteed: 3000, Borrowed: 1500, Share: 4500, Capped: ""},
			},
		},
		{
			name:     "scaled-down guarantees leave nothing to borrow",
			capacity: 1000,
			teams: []Team{
				{Name: "a", Guaranteed: 2000, Limit: unlimited, Weight: 1, Demand: 2000},
				{Name: "b", Guaranteed: 2000, Limit: unlimited, Weight: 1, Demand: 5000},
			},
			want: []Line{
				{Name: "a", Guaranteed: 500, Share: 500},
				{Name: "b", Guaranteed: 500, Share: 500},
			},
		},
		{
			name:     "a team that wants nothing is capped by demand",
			capacity: 1000,
			teams:    []Team{{Name: "a", Guaranteed: 2000, Limit: unlimited, Weight: 1}},
			want:     []Line{{Name: "a", Capped: CappedDemand}},
		},
		{
			name:     "demand equal to the limit reads as demand",
			capacity: 5000,
			teams:    []Team{{Name: "a", Limit: 2000, Weight: 1, Demand: 2000}},
			want:     []Line{{Name: "a", Borrowed: 2000, Share: 2000, Capped: CappedDemand}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Explain(tt.capacity, tt.teams)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Explain(%d, …) mismatch (-want +got):\n%s", tt.capacity, diff)
			}
		})
	}
}

func TestSharesPanicsOnDuplicateNames(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("Shares with a duplicate name did not panic")
		}
	}()
	Shares(1000, []Team{{Name: "a"}, {Name: "b"}, {Name: "a"}})
}

func TestCompareDeficit(t *testing.T) {
	const m = math.MaxInt64
	tests := []struct {
		name           string
		aUsage, aShare int64
		bUsage, bShare int64
		want           int
	}{
		{"the lower usage-to-share ratio goes first", 1, 4, 1, 2, -1},
		{"equal ratios rank the same", 1, 2, 2, 4, 0},
		{"an idle team goes first", 0, 5, 1, 1000, -1},
		{"share 0 and usage 0 ranks first", 0, 0, 1, 1000, -1},
		{"idle teams rank the same whatever their shares", 0, 0, 0, 5, 0},
		{"usage over a share of 0 ranks last", 1, 0, 1000, 1, 1},
		{"among teams over a share of 0, less usage goes first", 5, 0, 7, 0, -1},
		{"negative values count as zero", -3, -3, 0, 0, 0},
		{"ratios near the int64 limit compare exactly", m - 1, m, m - 2, m - 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CompareDeficit(tt.aUsage, tt.aShare, tt.bUsage, tt.bShare)
			if sign(got) != tt.want {
				t.Errorf("CompareDeficit(%d, %d, %d, %d) = %d, want %d", tt.aUsage, tt.aShare, tt.bUsage, tt.bShare, got, tt.want)
			}
			if back := CompareDeficit(tt.bUsage, tt.bShare, tt.aUsage, tt.aShare); sign(back) != -tt.want {
				t.Errorf("CompareDeficit(%d, %d, %d, %d) = %d, want %d", tt.bUsage, tt.bShare, tt.aUsage, tt.aShare, back, -tt.want)
			}
		})
	}
}

func TestCompareDeficitAgreesWithExactRatios(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	value := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return rng.Int64N(4)
		case 1:
			return math.MaxInt64 - rng.Int64N(4)
		default:
			return rng.Int64N(10000)
		}
	}
	// key is the documented order: finite ratios, then usage over a share
	// of 0 ordered by usage.
	key := func(usage, share int64) (inf bool, r *big.Rat) {
		if share == 0 {
			if usage == 0 {
				return false, new(big.Rat)
			}
			return true, big.NewRat(usage, 1)
		}
		return false, big.NewRat(usage, share)
	}
	for i := range 2000 {
		au, as, bu, bs := value(), value(), value(), value()
		aInf, ar := key(au, as)
		bInf, br := key(bu, bs)
		want := ar.Cmp(br)
		if aInf != bInf {
			want = map[bool]int{true: 1, false: -1}[aInf]
		}
		if got := CompareDeficit(au, as, bu, bs); sign(got) != want {
			t.Fatalf("case %d: CompareDeficit(%d, %d, %d, %d) = %d, want %d", i, au, as, bu, bs, got, want)
		}
	}
}

// TestWaterFillArithmetic checks that a water-fill whose weights total more
// than 64 bits (done in math/big) gives what the same fill with small
// weights (done in 128-bit integers) gives: scaling every weight by one
// factor changes no exact share and no order of remainders.
func TestWaterFillArithmetic(t *testing.T) {
	const factor = 1 << 61
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 1000 {
		n := 3 + rng.IntN(20)
		small, huge := make([]part, n), make([]part, n)
		var total uint64
		for j := range small {
			w := 1 + rng.Int64N(3)
			c := rng.Int64N(5) * 250
			if rng.IntN(3) == 0 {
				c = rng.Int64N(3000)
			}
			small[j] = part{cap: c, weight: w}
			huge[j] = part{cap: c, weight: w * factor}
			if c > 0 {
				total += uint64(w)
			}
		}
		if total < 8 { // the big path needs Σ weight·2^61 ≥ 2^64
			continue
		}
		room := rng.Int64N(10000)
		waterFill(room, small)
		waterFill(room, huge)
		if diff := cmp.Diff(gots(small), gots(huge)); diff != "" {
			t.Fatalf("case %d: room %d, parts %+v: fills differ (-128-bit +big):\n%s", i, room, small, diff)
		}
	}
}

// A property is an invariant of Shares, checked on random inputs by
// TestSharesProperties and on fuzzed ones by FuzzShares.
type property struct {
	name  string
	check func(capacity int64, teams []Team) error
}

var properties = []property{
	{"every team gets a non-negative share and no one else gets any", func(capacity int64, teams []Team) error {
		got := Shares(capacity, teams)
		if len(got) != len(teams) {
			return fmt.Errorf("%d shares for %d teams", len(got), len(teams))
		}
		for _, tm := range teams {
			s, ok := got[tm.Name]
			if !ok || s < 0 {
				return fmt.Errorf("team %s: share %d (present %t)", tm.Name, s, ok)
			}
		}
		return nil
	}},
	{"shares never exceed capacity", func(capacity int64, teams []Team) error {
		sum := new(big.Int)
		for _, s := range Shares(capacity, teams) {
			sum.Add(sum, big.NewInt(s))
		}
		if sum.Cmp(big.NewInt(max(capacity, 0))) > 0 {
			return fmt.Errorf("Σ shares %s > capacity %d", sum, capacity)
		}
		return nil
	}},
	{"no team gets more than its demand or its limit", func(capacity int64, teams []Team) error {
		got := Shares(capacity, teams)
		for _, tm := range teams {
			if c := ceilingOf(tm); got[tm.Name] > c {
				return fmt.Errorf("team %s: share %d > min(demand, limit) %d", tm.Name, got[tm.Name], c)
			}
		}
		return nil
	}},
	{"guarantees are met when they fit", func(capacity int64, teams []Team) error {
		sum := new(big.Int)
		for _, tm := range teams {
			sum.Add(sum, big.NewInt(claimOf(tm)))
		}
		if sum.Cmp(big.NewInt(max(capacity, 0))) > 0 {
			return nil
		}
		got := Shares(capacity, teams)
		for _, tm := range teams {
			if c := claimOf(tm); got[tm.Name] < c {
				return fmt.Errorf("team %s: share %d < min(demand, guaranteed, limit) %d", tm.Name, got[tm.Name], c)
			}
		}
		return nil
	}},
	{"capacity is all used while some team wants more", func(capacity int64, teams []Team) error {
		got := Shares(capacity, teams)
		sum := new(big.Int)
		hungry := ""
		for _, tm := range teams {
			sum.Add(sum, big.NewInt(got[tm.Name]))
			if got[tm.Name] < ceilingOf(tm) {
				hungry = tm.Name
			}
		}
		if hungry != "" && sum.Cmp(big.NewInt(max(capacity, 0))) != 0 {
			return fmt.Errorf("team %s wants more but Σ shares %s != capacity %d", hungry, sum, capacity)
		}
		return nil
	}},
	{"the order of teams does not matter", func(capacity int64, teams []Team) error {
		want := Shares(capacity, teams)
		shuffled := append([]Team(nil), teams...)
		rand.New(rand.NewPCG(uint64(len(teams)), uint64(capacity))).Shuffle(len(shuffled), func(i, j int) {
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		})
		if diff := cmp.Diff(want, Shares(capacity, shuffled)); diff != "" {
			return fmt.Errorf("shuffled input gives other shares (-original +shuffled):\n%s", diff)
		}
		return nil
	}},
	{"raising a team's weight never lowers its share", func(capacity int64, teams []Team) error {
		before := Shares(capacity, teams)
		for i, tm := range teams {
			w := max(tm.Weight, 1)
			for _, raised := range []int64{w + 1, w * 2, math.MaxInt64} {
				if raised <= w { // overflowed, or already the most
					continue
				}
				more := append([]Team(nil), teams...)
				more[i].Weight = raised
				if after := Shares(capacity, more)[tm.Name]; after < before[tm.Name] {
					return fmt.Errorf("team %s: weight %d -> %d lowers share %d -> %d", tm.Name, tm.Weight, raised, before[tm.Name], after)
				}
			}
		}
		return nil
	}},
	{"each share is within one milli-GPU of the exact fair share", func(capacity int64, teams []Team) error {
		got := Shares(capacity, teams)
		exact := exactShares(capacity, teams)
		one := big.NewRat(1, 1)
		for _, tm := range teams {
			d := new(big.Rat).Sub(new(big.Rat).SetInt64(got[tm.Name]), exact[tm.Name])
			if d.Abs(d).Cmp(one) >= 0 {
				return fmt.Errorf("team %s: share %d, exact %s", tm.Name, got[tm.Name], exact[tm.Name].FloatString(3))
			}
		}
		return nil
	}},
	{"explain lines add up to the shares", func(capacity int64, teams []Team) error {
		got := Shares(capacity, teams)
		byName := map[string]Team{}
		for _, tm := range teams {
			byName[tm.Name] = tm
		}
		for _, l := range Explain(capacity, teams) {
			tm := byName[l.Name]
			if l.Share != got[l.Name] || l.Guaranteed+l.Borrowed != l.Share || l.Guaranteed < 0 || l.Borrowed < 0 || l.Guaranteed > claimOf(tm) {
				return fmt.Errorf("line %+v, share %d, claim %d", l, got[l.Name], claimOf(tm))
			}
			want := ""
			switch {
			case l.Share == max(tm.Demand, 0):
				want = CappedDemand
			case l.Share == ceilingOf(tm):
				want = CappedLimit
			}
			if l.Capped != want {
				return fmt.Errorf("line %+v: capped %q, want %q", l, l.Capped, want)
			}
		}
		return nil
	}},
}

func TestSharesProperties(t *testing.T) {
	for _, p := range properties {
		t.Run(p.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(20250102, 1))
			for i := range 1000 {
				capacity, teams := randomCase(rng)
				if err := p.check(capacity, teams); err != nil {
					t.Fatalf("case %d: capacity %d, teams %+v:\n%v", i, capacity, teams, err)
				}
			}
		})
	}
}

func FuzzShares(f *testing.F) {
	f.Add(int64(10000), []byte{10, 15, 1, 100, 20, 0xff, 3, 50})
	f.Add(int64(3000), []byte{56, 16, 17, 56, 36, 16, 17, 106, 0, 0, 0, 0})
	f.Add(int64(-1), []byte{0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 16, 0xfe, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0})
	f.Add(int64(math.MaxInt64), []byte{0xfe, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, capacity int64, data []byte) {
		teams := decodeTeams(data)
		var errs []error
		for _, p := range properties {
			if err := p.check(capacity, teams); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("capacity %d, teams %+v:\n%v", capacity, teams, err)
		}
	})
}

func BenchmarkShares(b *testing.B) {
	for _, n := range []int{50, 1000} {
		b.Run("teams="+strconv.Itoa(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(n)))
			teams := make([]Team, n)
			for i := range teams {
				teams[i] = Team{
					Name:       fmt.Sprintf("team-%04d", i),
					Guaranteed: rng.Int64N(1000),
					Limit:      []int64{unlimited, 500 + rng.Int64N(4000)}[rng.IntN(2)],
					Weight:     1 + rng.Int64N(10),
					Demand:     rng.Int64N(3000),
				}
			}
			capacity := int64(n) * 800 // contended: demand averages 1500 a team
			b.ReportAllocs()
			for b.Loop() {
				Shares(capacity, teams)
			}
		})
	}
}

// randomCase draws a capacity and teams that mix small round numbers
// (ties, exact fits) with odd ones, zeros, negatives and values near the
// int64 limit.
func randomCase(rng *rand.Rand) (int64, []Team) {
	quantity := func() int64 {
		switch p := rng.IntN(100); {
		case p < 45:
			return rng.Int64N(9) * 500
		case p < 85:
			return rng.Int64N(20000)
		case p < 92:
			return -rng.Int64N(1000)
		case p < 96:
			return 0
		default:
			return math.MaxInt64 - rng.Int64N(1000)
		}
	}
	n := rng.IntN(9)
	if rng.IntN(8) == 0 {
		n = rng.IntN(40)
	}
	teams := make([]Team, n)
	for i, name := range rng.Perm(n) {
		tm := Team{Name: fmt.Sprintf("t%02d", name), Guaranteed: quantity(), Limit: unlimited, Demand: quantity()}
		if rng.IntN(5) < 3 {
			tm.Limit = quantity()
		}
		switch p := rng.IntN(10); {
		case p < 6:
			tm.Weight = 1 + rng.Int64N(4)
		case p < 7:
			tm.Weight = -rng.Int64N(3)
		case p < 9:
			tm.Weight = 1 + rng.Int64N(1000)
		default:
			tm.Weight = math.MaxInt64 - rng.Int64N(1000)
		}
		teams[i] = tm
	}
	capacity := quantity() * int64(1+rng.IntN(4))
	if capacity < 0 && rng.IntN(2) == 0 {
		capacity = math.MaxInt64 - rng.Int64N(1000)
	}
	return capacity, teams
}

// decodeTeams turns fuzz bytes into at most 16 teams of four fields each
// (TestSharesProperties covers larger sets; small ones keep each run fast
// enough for the fuzzer to minimise what it finds).
// A byte below 0xf0 is a small value (scaled by 100 for quantities); 0xf0
// and above is followed by up to eight bytes of a full int64.
func decodeTeams(data []byte) []Team {
	next := func(scale int64) int64 {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		if b < 0xf0 {
			return (int64(b) - 16) * scale
		}
		var v uint64
		for k := 0; k < 8 && len(data) > 0; k++ {
			v = v<<8 | uint64(data[0])
			data = data[1:]
		}
		return int64(v)
	}
	var teams []Team
	for len(data) > 0 && len(teams) < 16 {
		teams = append(teams, Team{
			Name:       fmt.Sprintf("t%02d", len(teams)),
			Guaranteed: next(100),
			Limit:      next(100),
			Weight:     next(1),
			Demand:     next(100),
		})
	}
	return teams
}

// ceilingOf is the most tm may hold: min(Demand, Limit).
func ceilingOf(tm Team) int64 {
	c := max(tm.Demand, 0)
	if tm.Limit >= 0 {
		c = min(c, tm.Limit)
	}
	return c
}

// claimOf is what tm's guarantee covers: min(Demand, Guaranteed, Limit).
func claimOf(tm Team) int64 { return min(ceilingOf(tm), max(tm.Guaranteed, 0)) }

// exactShares is the reference: the same two divisions in exact rationals,
// by the textbook loop (offer everyone their weighted part of what is
// left, give the teams whose need is within the offer all they need,
// repeat), written independently of waterFill.
func exactShares(capacity int64, teams []Team) map[string]*big.Rat {
	capacity = max(capacity, 0)
	n := len(teams)
	claims, weights := make([]*big.Rat, n), make([]*big.Rat, n)
	claimed := new(big.Rat)
	for i, tm := range teams {
		claims[i] = new(big.Rat).SetInt64(claimOf(tm))
		weights[i] = new(big.Rat).SetInt64(max(tm.Guaranteed, 1))
		claimed.Add(claimed, claims[i])
	}
	room := new(big.Rat).SetInt64(capacity)
	base := claims
	if claimed.Cmp(room) > 0 {
		base = exactFill(room, claims, weights)
		room = new(big.Rat)
	} else {
		room.Sub(room, claimed)
	}
	needs := make([]*big.Rat, n)
	for i, tm := range teams {
		needs[i] = new(big.Rat).Sub(new(big.Rat).SetInt64(ceilingOf(tm)), base[i])
		weights[i] = new(big.Rat).SetInt64(max(tm.Weight, 1))
	}
	extra := exactFill(room, needs, weights)
	out := make(map[string]*big.Rat, n)
	for i, tm := range teams {
		out[tm.Name] = new(big.Rat).Add(base[i], extra[i])
	}
	return out
}

func exactFill(room *big.Rat, needs, weights []*big.Rat) []*big.Rat {
	got := make([]*big.Rat, len(needs))
	var open []int
	for i := range needs {
		got[i] = new(big.Rat)
		if needs[i].Sign() > 0 {
			open = append(open, i)
		}
	}
	room = new(big.Rat).Set(room)
	for len(open) > 0 && room.Sign() > 0 {
		total := new(big.Rat)
		for _, i := range open {
			total.Add(total, weights[i])
		}
		var still []int
		for _, i := range open {
			offer := new(big.Rat).Mul(room, weights[i])
			offer.Quo(offer, total)
			if needs[i].Cmp(offer) <= 0 {
				got[i].Set(needs[i])
			} else {
				still = append(still, i)
			}
		}
		if len(still) == len(open) {
			for _, i := range open {
				got[i].Mul(room, weights[i])
				got[i].Quo(got[i], total)
			}
			break
		}
		for _, i := range open {
			if got[i].Sign() > 0 {
				room.Sub(room, got[i])
			}
		}
		open = still
	}
	return got
}

func gots(parts []part) []int64 {
	out := make([]int64, len(parts))
	for i, p := range parts {
		out[i] = p.got
	}
	return out
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}
