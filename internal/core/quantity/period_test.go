package quantity

import (
	"testing"
	"time"
)

// TestParsePeriod: Go durations, and days, months of HoursPerMonth and
// years of 8760 hours as whole numbers; anything else is refused.
func TestParsePeriod(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"8760h": 8760 * time.Hour, "90m": 90 * time.Minute, "30d": 720 * time.Hour,
		"36mo": 36 * HoursPerMonth * time.Hour, "1y": 8760 * time.Hour, " 12mo ": 12 * HoursPerMonth * time.Hour,
	} {
		if got, err := ParsePeriod(in); err != nil || got != want {
			t.Errorf("ParsePeriod(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1.5y", "-1d", "1w", "abc", "99999999999mo"} {
		if d, err := ParsePeriod(bad); err == nil {
			t.Errorf("ParsePeriod(%q) = %v, want an error", bad, d)
		}
	}
}
