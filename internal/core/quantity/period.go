package quantity

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HoursPerMonth is the month a monthly price and a depreciation in months
// are counted in: a twelfth of 8760 hours.
const HoursPerMonth = 730

// ParsePeriod parses a duration as Go writes it ("8760h", "90m") or in days,
// months of HoursPerMonth or years of 8760 hours ("30d", "36mo", "1y").
func ParsePeriod(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for _, u := range []struct {
		suffix string
		hours  int64
	}{{"mo", HoursPerMonth}, {"d", 24}, {"y", 8760}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 32)
			if err != nil || v < 0 {
				return 0, fmt.Errorf("%q is not a whole number of %s", s, u.suffix)
			}
			return time.Duration(v*u.hours) * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 8760h, 30d, 36mo or 1y", s)
	}
	return d, nil
}
