package cost

import (
	"testing"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

func TestAmountsForPeople(t *testing.T) {
	m := func(s string) Money {
		v, err := quantity.ParseMoney(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		in, currency, amount, perUnit string
	}{
		{"0.627575", "USD", "0.63", "0.63"},
		{"0", "USD", "0.00", "0.00"},
		{"0.07228", "USD", "0.07", "0.07"},
		{"0.00007", "USD", "0.00", "0.00007"},
		{"0.000278", "USD", "0.00", "0.0003"},
		{"0.004999", "USD", "0.00", "0.005"},
		{"0.005", "USD", "0.01", "0.01"},
		{"0.000001", "USD", "0.00", "0.000001"},
		{"576000", "USD", "576000.00", "576000.00"},
		{"-1.005", "USD", "-1.01", "-1.01"},
		{"-0.004", "EUR", "0.00", "-0.004"},
		{"1234.5", "JPY", "1235", "1235"},
		{"0.4", "JPY", "0", "0.4"},
		{"1.2345", "KWD", "1.235", "1.235"},
		{"0.0004", "KWD", "0.000", "0.0004"},
		{"2.5", "", "2.50", "2.50"},
	} {
		if got := Amount(m(tc.in), tc.currency); got != tc.amount {
			t.Errorf("Amount(%s %s) = %q, want %q", tc.in, tc.currency, got, tc.amount)
		}
		if got := PerUnit(m(tc.in), tc.currency); got != tc.perUnit {
			t.Errorf("PerUnit(%s %s) = %q, want %q", tc.in, tc.currency, got, tc.perUnit)
		}
	}
	if got := WithCurrency(Amount(m("0.627575"), "USD"), "USD"); got != "0.63 USD" {
		t.Errorf("WithCurrency: %q", got)
	}
}

func TestGPUHoursForPeople(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0.00"}, {12.345, "12.35"}, {1, "1.00"}, {0.12345, "0.123"}, {0.0012345, "0.00123"},
		{0.5, "0.500"}, {0.09996, "0.100"}, {0.99951, "1.00"}, {576000, "576000.00"}, {0.000001, "0.00000100"},
	} {
		if got := GPUHours(tc.in); got != tc.want {
			t.Errorf("GPUHours(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
