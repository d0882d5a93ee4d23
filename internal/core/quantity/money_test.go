package quantity

import "testing"

func TestMoney(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Money
		str  string
	}{{"8", 8 * MoneyUnit, "8"}, {"0.5", 500_000, "0.5"}, {".000001", 1, "0.000001"}, {"576000", 576000 * MoneyUnit, "576000"}, {"-2.25", -2_250_000, "-2.25"}} {
		got, err := ParseMoney(tc.in)
		if err != nil || got != tc.want || got.String() != tc.str {
			t.Errorf("ParseMoney(%q) = %d (%s), %v; want %d (%s)", tc.in, got, got, err, tc.want, tc.str)
		}
	}
	for _, bad := range []string{"", "1e3", "1.0000001", "abc", "1,5", "99999999999999"} {
		if _, err := ParseMoney(bad); err == nil {
			t.Errorf("ParseMoney(%q) accepted", bad)
		}
	}
	if got := Money(12_500_000).Fixed(); got != "12.50" {
		t.Errorf("Fixed: %q", got)
	}
}
