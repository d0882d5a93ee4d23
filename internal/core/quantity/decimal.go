package quantity

import (
	"fmt"
	"strconv"
	"strings"
)

// decimal is a fixed-point quantity written as a plain decimal: Milli
// (three decimals) and Money (six) are integer counts of its units.
type decimal struct {
	digits   int    // decimals kept
	word     string // "three": for the error of a number with more
	what     string // "quantity": for the error of an empty one
	maxWhole uint64 // the largest whole part accepted
}

// parse reads "2", "0.25", ".5", "-1.5": no exponent, no more decimals
// than it keeps (an error, never a rounding).
func (d decimal) parse(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty %s", d.what)
	}
	neg := false
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		s = s[1:]
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" && (!hasDot || frac == "") {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if len(frac) > d.digits {
		return 0, fmt.Errorf("%q has more than %s decimals", s, d.word)
	}
	var w uint64
	if whole != "" {
		v, err := strconv.ParseUint(whole, 10, 64)
		if err != nil || v > d.maxWhole {
			return 0, fmt.Errorf("%q is not a number or is too large", s)
		}
		w = v
	}
	var f uint64
	if frac != "" {
		v, err := strconv.ParseUint(frac+strings.Repeat("0", d.digits-len(frac)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", s)
		}
		f = v
	}
	m := int64(w)*d.scale() + int64(f)
	if neg {
		m = -m
	}
	return m, nil
}

func (d decimal) scale() int64 {
	s := int64(1)
	for range d.digits {
		s *= 10
	}
	return s
}

// format writes the shortest exact decimal: 2, 0.25, 0.000278.
func (d decimal) format(v int64) string {
	neg := v < 0
	u := uint64(v)
	if neg {
		u = uint64(-v)
	}
	sc := uint64(d.scale())
	s := strconv.FormatUint(u/sc, 10)
	if f := u % sc; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%0*d", d.digits, f), "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}
