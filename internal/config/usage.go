package config

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Usage configures GPU utilisation sampling, idle reclaim and GPU memory
// enforcement (docs/OBSERVABILITY.md).
type Usage struct {
	// SampleInterval is the time between two samples; 0 turns sampling
	// (and so idle reclaim and memory enforcement) off.
	SampleInterval Duration `json:"sampleInterval"`
	// History is how long the usage history of GET /api/v1/usage is kept
	// in memory (at most 24h is served).
	History Duration `json:"history"`
	// NvidiaSMI is the nvidia-smi the sampler runs for real GPUs; empty
	// means the one in $PATH.
	NvidiaSMI string `json:"nvidiaSMI,omitempty"`
	// DCGMURL, when set, reads utilisation from an NVIDIA DCGM exporter's
	// metrics at this URL instead (for the kubernetes executor, whose pods'
	// processes gpufleet cannot see).
	DCGMURL string `json:"dcgmURL,omitempty"`
	// Idle are the idle reclaim rules. The rule naming the workload's
	// team wins over one naming only its kind, which wins over one naming
	// neither. A rule with no timeout turns reclaim off for what it
	// matches. Never applied to the production class.
	Idle []IdleRule `json:"idle"`
	// Memory enforces the GPU memory share of fractional workloads.
	Memory MemoryRule `json:"memory"`
}

// IdleRule stops workloads of a kind and team (empty: any) whose GPUs stay
// below Threshold (a fraction, 0.05 = 5%) for Timeout, after a Warning
// event Warning before.
type IdleRule struct {
	Kind      string   `json:"kind,omitempty"`
	Team      string   `json:"team,omitempty"`
	Threshold float64  `json:"threshold"`
	Timeout   Duration `json:"timeout"`
	Warning   Duration `json:"warning"`
}

// MemoryRule: Enforce stops a fractional workload whose sampled GPU memory
// is above its share, after GraceSamples more samples over it (0: at the
// first), with a Warning event first.
type MemoryRule struct {
	Enforce      bool `json:"enforce"`
	GraceSamples int  `json:"graceSamples"`
}

// DefaultUsage samples every 10 s, keeps 24 h of history, reclaims
// notebooks idle (below 5%) for an hour with a warning 10 minutes before,
// and enforces the memory share at the first sample over it.
func DefaultUsage() Usage {
	return Usage{
		SampleInterval: Duration{10 * time.Second},
		History:        Duration{24 * time.Hour},
		Idle:           []IdleRule{{Kind: "notebook", Threshold: 0.05, Timeout: Duration{time.Hour}, Warning: Duration{10 * time.Minute}}},
		Memory:         MemoryRule{Enforce: true},
	}
}

func (u Usage) validate() []error {
	var errs []error
	if u.SampleInterval.Duration < 0 {
		errs = append(errs, errors.New("usage.sampleInterval: must not be negative"))
	}
	if u.History.Duration < 0 {
		errs = append(errs, errors.New("usage.history: must not be negative"))
	} else if u.History.Duration > 0 && u.History.Duration < u.SampleInterval.Duration {
		errs = append(errs, fmt.Errorf("usage.history %s: must be at least the sample interval (%s)", u.History.Duration, u.SampleInterval.Duration))
	}
	if u.DCGMURL != "" {
		if p, err := url.Parse(u.DCGMURL); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("usage.dcgmURL %q: want an http(s) URL", u.DCGMURL))
		}
	}
	if u.Memory.GraceSamples < 0 {
		errs = append(errs, errors.New("usage.memory.graceSamples: must not be negative"))
	}
	seen := map[[2]string]bool{}
	for i, r := range u.Idle {
		at := fmt.Sprintf("usage.idle[%d]", i)
		switch r.Kind {
		case "", "job", "service", "notebook":
		default:
			errs = append(errs, fmt.Errorf("%s.kind %q: want job, service or notebook (or none for all)", at, r.Kind))
		}
		if r.Threshold < 0 || r.Threshold > 1 || r.Threshold != r.Threshold {
			errs = append(errs, fmt.Errorf("%s.threshold %v: want a fraction from 0 to 1", at, r.Threshold))
		}
		if r.Timeout.Duration < 0 || r.Warning.Duration < 0 {
			errs = append(errs, fmt.Errorf("%s: timeout and warning must not be negative", at))
		} else if r.Timeout.Duration > 0 && r.Warning.Duration >= r.Timeout.Duration {
			errs = append(errs, fmt.Errorf("%s.warning %s: must be shorter than the timeout (%s)", at, r.Warning.Duration, r.Timeout.Duration))
		}
		k := [2]string{r.Kind, r.Team}
		if seen[k] {
			errs = append(errs, fmt.Errorf("%s: another rule has the same kind %q and team %q", at, r.Kind, r.Team))
		}
		seen[k] = true
	}
	return errs
}
