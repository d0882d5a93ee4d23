package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// FakeGPU is one group of simulated devices: Count devices of Model with
// MemoryMiB each.
type FakeGPU struct {
	Count     int
	Model     string
	MemoryMiB int64
}

var fakeRE = regexp.MustCompile(`^(\d+)x([A-Za-z][A-Za-z0-9]*)-(\d+)GB$`)

// ParseFakeGPUs parses "4xH100-80GB" or "2xH100-80GB,2xA10-24GB". The memory
// is taken as GiB, the way vendors name their cards (an "80GB" H100 has
// 81,920 MiB here).
func ParseFakeGPUs(spec string) ([]FakeGPU, error) {
	var out []FakeGPU
	total := 0
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		m := fakeRE.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("%q: want COUNTxMODEL-MEMGB, e.g. 4xH100-80GB", part)
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("%q: count must be 1 to 64", part)
		}
		gb, err := strconv.ParseInt(m[3], 10, 64)
		if err != nil || gb < 1 || gb > 4096 {
			return nil, fmt.Errorf("%q: memory must be 1 to 4096 GB", part)
		}
		total += n
		out = append(out, FakeGPU{Count: n, Model: m[2], MemoryMiB: gb * 1024})
	}
	if total > 64 {
		return nil, fmt.Errorf("at most 64 simulated GPUs on one node, not %d", total)
	}
	return out, nil
}
