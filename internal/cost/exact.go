package cost

import (
	"cmp"
	"math"
	"math/big"
	"math/bits"
	"slices"
)

// u128 is an unsigned 128-bit integer: the exact numerators the ledger
// accumulates (quantities such as milli-GPU × nanoseconds times an integer
// price multiplier).
type u128 struct{ hi, lo uint64 }

func mul64(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

// add returns a+b and whether it overflowed.
func (a u128) add(b u128) (u128, bool) {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, c2 := bits.Add64(a.hi, b.hi, c)
	return u128{hi, lo}, c2 != 0
}

// mul returns a×m and whether it overflowed.
func (a u128) mul(m uint64) (u128, bool) {
	h1, l1 := bits.Mul64(a.lo, m)
	h2, l2 := bits.Mul64(a.hi, m)
	hi, c := bits.Add64(h1, l2, 0)
	return u128{hi, l1}, h2 != 0 || c != 0
}

func (a u128) isZero() bool { return a.hi == 0 && a.lo == 0 }

func (a u128) big() *big.Int {
	x := new(big.Int).SetUint64(a.hi)
	x.Lsh(x, 64)
	return x.Or(x, new(big.Int).SetUint64(a.lo))
}

func (a u128) float() float64 { return float64(a.hi)*0x1p64 + float64(a.lo) }

// nsPerHour and the milli-GPU per GPU make a GPU-hour 3.6e15 milli-GPU
// nanoseconds.
const (
	nsPerHour         = 3_600_000_000_000
	milliNsPerGPUHour = 1000 * nsPerHour
)

// hours converts milli-GPU nanoseconds to GPU hours (for display).
func hours(q u128) float64 { return q.float() / milliNsPerGPUHour }

// term is a price expressed as an integer multiplier over its component's
// common denominator: an amount is m × quantity / L. mb holds the
// multiplier when it does not fit in 64 bits.
type term struct {
	m  uint64
	mb *big.Int
}

func (t term) zero() bool { return t.m == 0 && t.mb == nil }

func (t term) bigM() *big.Int {
	if t.mb != nil {
		return t.mb
	}
	return new(big.Int).SetUint64(t.m)
}

// scale is a component's common denominator L: every price of the
// component, as a fraction of a micro-unit per unit of quantity, is an
// integer multiple of 1/L.
type scale struct {
	L *big.Int
	l uint64 // L when it fits in 64 bits, else 0
}

// newScale makes the least common denominator of the given fractions.
func newScale(rs []*big.Rat) scale {
	L := big.NewInt(1)
	g := new(big.Int)
	for _, r := range rs {
		d := r.Denom()
		g.GCD(nil, nil, L, d)
		L.Mul(L, new(big.Int).Quo(d, g))
	}
	s := scale{L: L}
	if L.IsUint64() {
		s.l = L.Uint64()
	}
	return s
}

// term turns a fraction (micro-units per unit of quantity) into its
// multiplier over L.
func (s scale) term(r *big.Rat) term {
	if r == nil || r.Sign() <= 0 {
		return term{}
	}
	m := new(big.Int).Quo(s.L, r.Denom())
	m.Mul(m, r.Num())
	if m.IsUint64() {
		return term{m: m.Uint64()}
	}
	return term{mb: m}
}

// acc is an exact numerator over a component's L: a fast 128-bit part and,
// past 128 bits or for a multiplier beyond 64 bits, a big part; the value is
// their sum.
type acc struct {
	n u128
	b *big.Int
}

func (a *acc) add(t term, q u128) {
	if t.zero() || q.isZero() {
		return
	}
	if t.mb == nil {
		if p, of := q.mul(t.m); !of {
			if s, of := a.n.add(p); !of {
				a.n = s
				return
			}
		}
	}
	x := q.big()
	x.Mul(x, t.bigM())
	if a.b == nil {
		a.b = new(big.Int)
	}
	a.b.Add(a.b, x)
}

func (a *acc) addAcc(o *acc) {
	if s, of := a.n.add(o.n); !of {
		a.n = s
	} else {
		if a.b == nil {
			a.b = new(big.Int)
		}
		a.b.Add(a.b, o.n.big())
	}
	if o.b != nil {
		if a.b == nil {
			a.b = new(big.Int)
		}
		a.b.Add(a.b, o.b)
	}
}

func (a *acc) isZero() bool { return a.n.isZero() && (a.b == nil || a.b.Sign() == 0) }

// split is an exact amount divided by L: its floor in micro-units
// (saturated at the largest Money), its remainder exactly when L fits in 64
// bits, and a key that orders remainders (the remainder itself, or its top
// 64 bits as a fraction of L when L is larger).
type split struct {
	floor int64
	rem   uint64   // exact remainder when s.l != 0
	remB  *big.Int // exact remainder when s.l == 0
	key   uint64
}

func (s scale) split(a *acc) split {
	if a.b == nil && s.l != 0 {
		qhi, r := a.n.hi/s.l, a.n.hi%s.l
		qlo, rem := bits.Div64(r, a.n.lo, s.l)
		f := int64(math.MaxInt64)
		if qhi == 0 && qlo <= math.MaxInt64 {
			f = int64(qlo)
		}
		return split{floor: f, rem: rem, key: rem}
	}
	n := a.n.big()
	if a.b != nil {
		n.Add(n, a.b)
	}
	q, r := new(big.Int).QuoRem(n, s.L, new(big.Int))
	out := split{floor: math.MaxInt64}
	if q.IsInt64() {
		out.floor = q.Int64()
	}
	if s.l != 0 {
		out.rem = r.Uint64()
		out.key = out.rem
		return out
	}
	out.remB = r
	k := new(big.Int).Lsh(r, 64)
	out.key = k.Quo(k, s.L).Uint64()
	return out
}

// satAdd adds micro-units, saturating at the largest Money.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// apportion rounds the exact amounts as (their exact sum rounded half-up
// to a micro-unit when target is nil, else *target) and hands it out by
// the largest-remainder method: each amount gets its floor, and the micro-
// units left go one each to the amounts with the largest remainders (ties:
// the order of less(i, j), a total order of the amounts' keys). Σ out ==
// the total exactly. It returns the total.
func (s scale) apportion(sp []split, target *int64, less func(i, j int) int, out []int64) int64 {
	var floors int64
	var remSum u128
	var remBig *big.Int
	for i, x := range sp {
		out[i] = x.floor
		floors = satAdd(floors, x.floor)
		if s.l != 0 {
			var of bool
			if remSum, of = remSum.add(u128{0, x.rem}); of {
				panic("cost: remainder sum overflow") // needs 2^64 amounts
			}
		} else if x.remB != nil {
			if remBig == nil {
				remBig = new(big.Int)
			}
			remBig.Add(remBig, x.remB)
		}
	}
	var total int64
	if target != nil {
		total = *target
	} else {
		// round half-up: floor((2R + L) / 2L)
		R := remBig
		if s.l != 0 {
			R = remSum.big()
		}
		if R == nil {
			R = new(big.Int)
		}
		num := new(big.Int).Lsh(R, 1)
		num.Add(num, s.L)
		den := new(big.Int).Lsh(s.L, 1)
		num.Quo(num, den)
		total = satAdd(floors, num.Int64())
	}
	k := total - floors
	if k == 0 || len(sp) == 0 {
		return total
	}
	// Normally only the amounts with a remainder take a micro-unit (k is
	// at most their count); a given target may ask more or less of all.
	order := make([]int, 0, len(sp))
	for i := range sp {
		if sp[i].key != 0 || (sp[i].rem == 0 && sp[i].remB != nil && sp[i].remB.Sign() != 0) {
			order = append(order, i)
		}
	}
	if k < 0 || k > int64(len(order)) {
		order = order[:0]
		for i := range sp {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(i, j int) int {
		if c := cmp.Compare(sp[j].key, sp[i].key); c != 0 {
			return c
		}
		return less(i, j)
	})
	if k > 0 {
		// Normally k ≤ the amounts with a remainder; more only when a
		// target was given: then round and round again.
		for k > 0 {
			for _, i := range order {
				if k == 0 {
					break
				}
				out[i]++
				k--
			}
		}
		return total
	}
	// k < 0 (a target below the floors): take from the smallest
	// remainders, never below zero.
	for k < 0 {
		took := false
		for n := len(order) - 1; n >= 0 && k < 0; n-- {
			if i := order[n]; out[i] > 0 {
				out[i]--
				k++
				took = true
			}
		}
		if !took {
			break
		}
	}
	return total
}
