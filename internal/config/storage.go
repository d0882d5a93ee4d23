package config

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// Storage configures team volumes and datasets.
type Storage struct {
	// TeamLimit bounds the sizes of each team's volumes together ("1TiB");
	// empty: no limit. Teams overrides it per team.
	TeamLimit string            `json:"teamLimit,omitempty"`
	Teams     map[string]string `json:"teams,omitempty"`
	// Datasets are the host directories workloads may mount read-only
	// (mounts: [{dataset: NAME, path: /data}]), by name.
	Datasets map[string]string `json:"datasets,omitempty"`
}

// Limit returns a team's storage limit in bytes, -1 for none. Validate
// has checked the sizes.
func (s Storage) Limit(team string) int64 {
	v, ok := s.Teams[team]
	if !ok {
		v = s.TeamLimit
	}
	if v == "" {
		return -1
	}
	b, err := quantity.ParseSizeBytes(v)
	if err != nil {
		return -1
	}
	return b
}

func (s Storage) validate() []error {
	var errs []error
	if s.TeamLimit != "" {
		if _, err := quantity.ParseSizeBytes(s.TeamLimit); err != nil {
			errs = append(errs, fmt.Errorf("storage.teamLimit %q: %w", s.TeamLimit, err))
		}
	}
	for _, t := range sortedKeys(s.Teams) {
		if _, err := quantity.ParseSizeBytes(s.Teams[t]); err != nil {
			errs = append(errs, fmt.Errorf("storage.teams.%s %q: %w", t, s.Teams[t], err))
		}
	}
	for _, n := range sortedKeys(s.Datasets) {
		p := s.Datasets[n]
		switch {
		case !core.ValidName(n):
			errs = append(errs, fmt.Errorf("storage.datasets.%s: a dataset's name is lowercase letters, digits and '-'", n))
		case !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/":
			errs = append(errs, fmt.Errorf("storage.datasets.%s %q: want an absolute, clean host path other than /", n, p))
		}
	}
	return errs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
