package quantity

import (
	"fmt"
	"strings"
)

// MaxSizeBytes is the largest storage size ParseSizeBytes reads, and so
// the largest volume: 1 PiB.
const MaxSizeBytes = 1 << 50

// maxSizeNumber bounds the number of a size before its unit multiplies
// it (16 Mi of any unit), so that its thousandths times the largest unit
// (TiB, 2^20 MiB) stay far from wrapping an int64.
const maxSizeNumber = 16 << 20

// MemoryUnits says which units ParseMemoryMiB accepts and what they mean,
// for help texts and errors.
const MemoryUnits = "MiB, GiB or TiB (also written M, G, T, Mi, Gi, Ti, MB, GB, TB, in any case), " +
	"all powers of 1024: 1G = 1GB = 1GiB = 1024MiB; a bare number is MiB"

// memoryUnits maps each unit, lowercased, to its size in MiB. Every unit is
// binary, however it is spelt: people who type GB for GPU memory mean GiB
// (an "80 GB" GPU reports 81920 MiB), and one rule is easier to remember
// than Kubernetes' two (there G is 10^9 and Gi 2^30).
var memoryUnits = map[string]int64{
	"": 1, "m": 1, "mi": 1, "mb": 1, "mib": 1,
	"g": 1 << 10, "gi": 1 << 10, "gb": 1 << 10, "gib": 1 << 10,
	"t": 1 << 20, "ti": 1 << 20, "tb": 1 << 20, "tib": 1 << 20,
}

// ParseMemoryMiB parses a memory size such as "20GiB", "20GB", "512MiB",
// "1.5T" or a bare number of MiB into MiB (see MemoryUnits: every unit is a
// power of 1024, whatever its case or spelling). It is the one parser of
// sizes: CLI flags and the MiB fields of workload files use it. A size
// that is not a whole number of MiB, or not positive, is an error.
func ParseMemoryMiB(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.LastIndexFunc(s, func(r rune) bool { return r >= '0' && r <= '9' || r == '.' })
	num, unit := strings.TrimSpace(s[:i+1]), strings.TrimSpace(s[i+1:])
	mul, ok := memoryUnits[strings.ToLower(unit)]
	if !ok || num == "" {
		return 0, fmt.Errorf("want a size such as 20GiB, 20GB or 512MiB: a number and one of the units %s", MemoryUnits)
	}
	q, err := ParseMilli(num)
	if err != nil {
		return 0, fmt.Errorf("want a size such as 20GiB, 20GB or 512MiB: %w", err)
	}
	if q <= 0 {
		return 0, fmt.Errorf("a memory size must be positive")
	}
	if q > maxSizeNumber*1000 { // keeps the product below from wrapping
		return 0, fmt.Errorf("%s is too large", s)
	}
	v := int64(q) * mul
	if v%1000 != 0 {
		return 0, fmt.Errorf("%s is not a whole number of MiB (%s MiB)", s, Milli(v))
	}
	return v / 1000, nil
}

// ParseSizeBytes reads a storage size such as "100GiB" (ParseMemoryMiB's
// units, a whole number of MiB) into bytes, at most MaxSizeBytes.
func ParseSizeBytes(s string) (int64, error) {
	mib, err := ParseMemoryMiB(s)
	if err != nil {
		return 0, err
	}
	if mib > MaxSizeBytes>>20 {
		return 0, fmt.Errorf("%s is over 1 PiB", s)
	}
	return mib << 20, nil
}
