package quantity

import (
	"strings"
	"testing"
)

// TestParseMemoryMiB: the units people type, in any case, all powers of
// 1024; a bad size says what is accepted.
func TestParseMemoryMiB(t *testing.T) {
	good := map[string]int64{
		"512": 512, "512M": 512, "512MiB": 512, "512Mi": 512, "512MB": 512, "512mb": 512, "512 MiB": 512,
		"20G": 20480, "20GB": 20480, "20GiB": 20480, "20Gi": 20480, "20gb": 20480, "20gib": 20480, "20g": 20480,
		"1.5G": 1536, "0.5GiB": 512, "1T": 1 << 20, "1TB": 1 << 20, "1TiB": 1 << 20, "1ti": 1 << 20,
	}
	for in, want := range good {
		got, err := ParseMemoryMiB(in)
		if err != nil || got != want {
			t.Errorf("ParseMemoryMiB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	// --memory 8G and --gpu-memory 8GB mean the same.
	a, _ := ParseMemoryMiB("8G")
	b, _ := ParseMemoryMiB("8GB")
	if a != b || a != 8192 {
		t.Errorf("8G = %d MiB, 8GB = %d MiB; want both 8192", a, b)
	}
	bad := map[string]string{
		"":             "want a size such as 20GiB",
		"GiB":          "want a size such as 20GiB",
		"20 gigs":      "one of the units MiB, GiB or TiB (also written M, G, T, Mi, Gi, Ti, MB, GB, TB, in any case)",
		"20KiB":        "all powers of 1024",
		"20PB":         "a bare number is MiB",
		"0G":           "must be positive",
		"-1G":          "must be positive",
		"0.1G":         "not a whole number of MiB (102.4 MiB)",
		"1.2345G":      "more than three decimals",
		"1e3":          "not a number",
		"99999999999T": "too large",
	}
	for in, want := range bad {
		_, err := ParseMemoryMiB(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMemoryMiB(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}
