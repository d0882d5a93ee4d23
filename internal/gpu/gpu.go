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
	"github.com/gpufleet/gpufleet/internal/health"
)

// QueryArgs is the nvidia-smi query gpufleet runs.
var QueryArgs = []string{"--query-gpu=index,uuid,name,memory.total,pci.bus_id", "--format=csv,noheader,nounits"}

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
	discoverTopology(ctx, path, gpus)
	return gpus, nil
}

// ParseNvidiaSMI parses the CSV nvidia-smi prints for QueryArgs, e.g.
// "0, GPU-5f4e..., NVIDIA H100 80GB HBM3, 81559, 00000000:07:00.0" (the PCI
// bus ID, which maps a kernel log's Xid to its device, may be left out).
func ParseNvidiaSMI(out string) ([]core.GPU, error) {
	r := csv.NewReader(strings.NewReader(out))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parse nvidia-smi output: %w", err)
	}
	var gpus []core.GPU
	for i, rec := range recs {
		if len(rec) != 4 && len(rec) != 5 {
			return nil, fmt.Errorf("parse nvidia-smi output: line %d has %d fields, want 4 or 5", i+1, len(rec))
		}
		idx, err := strconv.Atoi(strings.TrimSpace(rec[0]))
		if err != nil {
			return nil, fmt.Errorf("parse nvidia-smi output: index %q: %w", rec[0], err)
		}
		mem, err := strconv.ParseInt(strings.TrimSpace(rec[3]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse nvidia-smi output: memory %q: %w", rec[3], err)
		}
		g := core.GPU{Index: idx, UUID: strings.TrimSpace(rec[1]), Model: strings.TrimSpace(rec[2]), MemoryMiB: mem}
		if len(rec) == 5 {
			g.PCIBusID = strings.TrimSpace(rec[4])
		}
		gpus = append(gpus, g)
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

// TopologyArgs is the nvidia-smi call that prints the device topology.
var TopologyArgs = []string{"topo", "-m"}

// discoverTopology sets each GPU's NVLink domain from nvidia-smi topo -m;
// on any failure the devices keep domain 0 (unknown, treated as flat).
func discoverTopology(ctx context.Context, path string, gpus []core.GPU) {
	out, err := exec.CommandContext(ctx, path, TopologyArgs...).Output()
	if err != nil {
		return
	}
	setDomains(gpus, string(out))
}

// setDomains sets each GPU's NVLink domain from the output of nvidia-smi
// topo -m, by internal/health's parser and its rule (GPUs joined by
// NVLink share a domain; without any NVLink all are in domain 0). On an
// output it cannot read, the GPUs keep their domains.
func setDomains(gpus []core.GPU, topo string) error {
	t, err := health.ParseTopo(topo)
	if err != nil {
		return err
	}
	for i := range gpus {
		gpus[i].Domain = t.Domains[gpus[i].Index]
	}
	return nil
}
