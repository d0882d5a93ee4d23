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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/core"
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
	domains, err := ParseTopology(string(out))
	if err != nil {
		return
	}
	for i := range gpus {
		gpus[i].Domain = domains[gpus[i].Index]
	}
}

// ParseTopology reads the matrix nvidia-smi topo -m prints and returns, per
// GPU index, its NVLink domain: GPUs joined by NVLink ("NV4", "NV18", ...),
// directly or through others, share a domain, numbered from 0 in order of
// their lowest GPU index. Without any NVLink every GPU is in domain 0 (the
// topology gives no reason to prefer some GPUs over others).
func ParseTopology(out string) (map[int]int, error) {
	lines := strings.Split(out, "\n")
	var cols []int // GPU index of each matrix column
	parent := map[int]int{}
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	nvlink := false
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if cols == nil {
			if !strings.HasPrefix(fields[0], "GPU") {
				continue
			}
			for _, f := range fields {
				n, ok := strings.CutPrefix(f, "GPU")
				idx, err := strconv.Atoi(n)
				if !ok || err != nil {
					break
				}
				cols = append(cols, idx)
				parent[idx] = idx
			}
			continue
		}
		row, ok := strings.CutPrefix(fields[0], "GPU")
		if !ok {
			continue
		}
		from, err := strconv.Atoi(row)
		if err != nil || len(fields) < 1+len(cols) {
			continue
		}
		if _, known := parent[from]; !known {
			return nil, fmt.Errorf("topology: row GPU%d is not a column", from)
		}
		for j, to := range cols {
			link := fields[1+j]
			if strings.HasPrefix(link, "NV") {
				nvlink = true
				parent[find(from)] = find(to)
			}
		}
	}
	if cols == nil {
		return nil, errors.New("topology: no GPU columns in nvidia-smi topo -m output")
	}
	domains := make(map[int]int, len(cols))
	if !nvlink {
		for _, c := range cols {
			domains[c] = 0
		}
		return domains, nil
	}
	sorted := slices.Clone(cols)
	slices.Sort(sorted)
	ids := map[int]int{}
	for _, c := range sorted {
		root := find(c)
		if _, ok := ids[root]; !ok {
			ids[root] = len(ids)
		}
		domains[c] = ids[root]
	}
	return domains, nil
}
