package config

import (
	"fmt"
	"path/filepath"
)

// Qualification configures the node lifecycle's qualification.
type Qualification struct {
	// OnRegistration qualifies this machine's node before it takes work
	// (Registering → Validating → Ready); false registers it Ready.
	OnRegistration bool `json:"onRegistration"`
	// Level is the dcgmi diag run level at registration and on schedule
	// (1 to 3).
	Level int `json:"level"`
	// Every qualifies each node again this often; 0 turns it off.
	Every Duration `json:"every"`
	// RequireDCGM fails a node whose machine has no dcgmi; otherwise its
	// absence is recorded as not available.
	RequireDCGM bool `json:"requireDCGM"`
	// Policy is what a qualification does about work on the devices it
	// tests: "wait" for it to end, or "drain" it (stopped and requeued).
	Policy string `json:"policy"`
	// CUDAProbe is the absolute path of the CUDA probe
	// (cmd/gpufleet-cuda-probe) that qualification runs in the workloads'
	// sandbox on a node with NVIDIA GPUs; empty looks for
	// gpufleet-cuda-probe beside the server's binary, then for python3.
	CUDAProbe string `json:"cudaProbe,omitempty"`
}

// DefaultQualification qualifies at registration, at level 1, waiting.
func DefaultQualification() Qualification {
	return Qualification{OnRegistration: true, Level: 1, Policy: "wait"}
}

func (q Qualification) validate() []error {
	var errs []error
	if q.CUDAProbe != "" && !filepath.IsAbs(q.CUDAProbe) {
		errs = append(errs, fmt.Errorf("qualification.cudaProbe %q: want an absolute path", q.CUDAProbe))
	}
	if q.Level < 1 || q.Level > 3 {
		errs = append(errs, fmt.Errorf("qualification.level %d: want 1, 2 or 3", q.Level))
	}
	if q.Every.Duration < 0 {
		errs = append(errs, fmt.Errorf("qualification.every %s: must not be negative", q.Every))
	}
	if q.Policy != "wait" && q.Policy != "drain" {
		errs = append(errs, fmt.Errorf("qualification.policy %q: want \"wait\" or \"drain\"", q.Policy))
	}
	return errs
}
