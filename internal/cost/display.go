package cost

import (
	"math"
	"strconv"
	"strings"
)

// How amounts are shown to people (tables, the portal): one rule,
// written here and mirrored by the portal's money() (a browser test holds
// the two to the same answers). JSON, CSV and FOCUS keep the exact
// micro-units; a total is summed exactly before it is shown.
//
//   - Amount: the currency's minor units (2 decimals for USD and EUR, 0 for
//     JPY, 3 for KWD), rounded half-up from the exact micro-units:
//     0.627575 → "0.63", 576000 → "576000.00".
//   - PerUnit (a cost per output, a rate): the same, unless the minor
//     units would show a non-zero amount as 0: then down to its first
//     significant digit (at most six decimals), rounded there: 0.07228 →
//     "0.07", 0.00007 → "0.00007", 0.000278 → "0.0003".
//   - GPU-hours: two decimals from one up, three significant digits below
//     one: 12.345 → "12.35", 0.12345 → "0.123", 0.0012345 → "0.00123".

// Amount writes m in currency's minor units, rounded half-up: "0.63".
func Amount(m Money, currency string) string {
	return decimals(int64(m), MinorUnits(currency))
}

// PerUnit writes a per-unit figure (a cost per output, a rate) in
// currency's minor units, or, where that would read 0 for an amount that
// is not, to its first significant digit: "0.07", "0.00007".
func PerUnit(m Money, currency string) string {
	d := MinorUnits(currency)
	if m != 0 && rounded(int64(m), d) == 0 {
		// The decimals of its first significant digit, rounded there.
		for d++; d < 6 && truncated(int64(m), d) == 0; d++ {
		}
	}
	return decimals(int64(m), d)
}

// WithCurrency is s followed by the currency code: "0.63 USD".
func WithCurrency(s, currency string) string {
	if currency == "" {
		return s
	}
	return s + " " + currency
}

// rounded is |v| micro-units rounded half-up to d decimals, in units of
// 10^-d.
func rounded(v int64, d int) uint64 {
	u := uint64(v)
	if v < 0 {
		u = uint64(-v)
	}
	step := uint64(1)
	for range 6 - d {
		step *= 10
	}
	return (u + step/2) / step
}

// truncated is |v| micro-units truncated to d decimals, in units of
// 10^-d.
func truncated(v int64, d int) uint64 {
	u := uint64(v)
	if v < 0 {
		u = uint64(-v)
	}
	for range 6 - d {
		u /= 10
	}
	return u
}

// decimals writes micro-units v rounded half-up (away from zero) to d
// decimals, 0 ≤ d ≤ 6.
func decimals(v int64, d int) string {
	q := rounded(v, d)
	s := strconv.FormatUint(q, 10)
	if d > 0 {
		if len(s) <= d {
			s = strings.Repeat("0", d-len(s)+1) + s
		}
		s = s[:len(s)-d] + "." + s[len(s)-d:]
	}
	if v < 0 && q != 0 {
		s = "-" + s
	}
	return s
}

// GPUHours writes GPU-hours for people: two decimals from one up, three
// significant digits below one ("0.123", "0.00123"), "0.00" for none. The
// digits are |h| × 10^d rounded half away from zero, d the fewest
// decimals (from two) that give three digits; a rounding that carries to
// a fourth digit takes one decimal back (0.09996 is "0.100"). Only IEEE
// multiplications and rounding, so the portal's hours() gives the same
// digits.
func GPUHours(h float64) string {
	if math.IsNaN(h) || math.IsInf(h, 0) {
		return "-"
	}
	a := math.Abs(h)
	if a == 0 {
		return "0.00"
	}
	d := 2
	for d < 15 && a*math.Pow(10, float64(d)) < 100 {
		d++
	}
	n := math.Round(a * math.Pow(10, float64(d)))
	if d > 2 && n >= 1000 {
		d--
		n = math.Round(a * math.Pow(10, float64(d)))
	}
	s := strconv.FormatFloat(n, 'f', 0, 64)
	if len(s) <= d {
		s = strings.Repeat("0", d-len(s)+1) + s
	}
	s = s[:len(s)-d] + "." + s[len(s)-d:]
	if h < 0 {
		s = "-" + s
	}
	return s
}
