package quantity

import (
	"encoding/json"
	"testing"
)

// TestMilli: decimals up to three, written back as the shortest decimal;
// JSON numbers and quoted decimals read the same; exponents and a fourth
// decimal are refused.
func TestMilli(t *testing.T) {
	for in, want := range map[string]Milli{"2": 2000, "0.25": 250, ".5": 500, "1.5": 1500, "-0.25": -250, "0.001": 1} {
		got, err := ParseMilli(in)
		if err != nil || got != want {
			t.Errorf("ParseMilli(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for m, want := range map[Milli]string{2000: "2", 250: "0.25", 1500: "1.5", 1: "0.001", -250: "-0.25", 0: "0"} {
		if got := m.String(); got != want {
			t.Errorf("Milli(%d) = %q, want %q", int64(m), got, want)
		}
	}
	for _, bad := range []string{"", "1.2345", ".", "1e3", "0x10", "1,5"} {
		if _, err := ParseMilli(bad); err == nil {
			t.Errorf("ParseMilli(%q) accepted", bad)
		}
	}
	for in, want := range map[string]Milli{`0.25`: 250, `"0.25"`: 250, `2`: 2000} {
		var m Milli
		if err := json.Unmarshal([]byte(in), &m); err != nil || m != want {
			t.Errorf("json %s = %d, %v; want %d", in, m, err, want)
		}
	}
	for _, bad := range []string{`1e3`, `"1e3"`, `0.0001`, `true`} {
		var m Milli
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("json %s accepted as %d", bad, m)
		}
	}
}
