// Package gpu finds the GPUs of this machine with nvidia-smi, or makes
// simulated ones from a spec such as "4xH100-80GB". It runs nvidia-smi as
// argv, never through a shell.
package gpu

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/core"
)

// QueryArgs is the nvidia-smi query gpufleet runs.
var QueryArgs = []string{"--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"}

// ErrNoGPUs means no NVIDIA GPU was found (nvidia-smi missing or listing
// none).
var ErrNoGPUs = errors.New("no NVIDIA GPUs found")

// Discover lists the real GPUs with nvidia-smi.
func Discover(ctx context.Context) ([]core.GPU, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, ErrNoGPUs
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, QueryArgs...).Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	gpus, err := ParseNvidiaSMI(string(out))
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 {
		return nil, ErrNoGPUs
	}
	return gpus, nil
}

// ParseNvidiaSMI parses the CSV nvidia-smi prints for QueryArgs, e.g.
// "0, GPU-5f4e..., NVIDIA H100 80GB HBM3, 81559".
func ParseNvidiaSMI(out string) ([]core.GPU, error) {
	r := csv.NewReader(strings.NewReader(out))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = 4
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parse nvidia-smi output: %w", err)
	}
	var gpus []core.GPU
	for _, rec := range recs {
		idx, err := strconv.Atoi(strings.TrimSpace(rec[0]))
		if err != nil {
			return nil, fmt.Errorf("parse nvidia-smi output: index %q: %w", rec[0], err)
		}
		mem, err := strconv.ParseInt(strings.TrimSpace(rec[3]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse nvidia-smi output: memory %q: %w", rec[3], err)
		}
		gpus = append(gpus, core.GPU{Index: idx, UUID: strings.TrimSpace(rec[1]), Model: strings.TrimSpace(rec[2]), MemoryMiB: mem})
	}
	return gpus, nil
}

// Fake makes simulated GPUs for node from a spec. Their UUIDs are derived
// from the node name and index, so they are the same after a restart.
func Fake(node string, spec string) ([]core.GPU, error) {
	groups, err := config.ParseFakeGPUs(spec)
	if err != nil {
		return nil, err
	}
	var gpus []core.GPU
	for _, g := range groups {
		for range g.Count {
			i := len(gpus)
			h := sha256.Sum256([]byte(fmt.Sprintf("gpufleet-fake/%s/%d", node, i)))
			uuid := fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
			gpus = append(gpus, core.GPU{Index: i, UUID: uuid, Model: g.Model, MemoryMiB: g.MemoryMiB, Simulated: true})
		}
	}
	return gpus, nil
}
