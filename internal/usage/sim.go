package usage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// EnvSimUsageFile names the file where a workload on simulated GPUs writes
// its own utilisation and memory.
const EnvSimUsageFile = "GPUFLEET_SIM_USAGE_FILE"

// Sim samples simulated GPUs: each workload reports its own figures in its
// usage file (see ParseSimUsage). A GPU's utilisation is the sum of those
// of the workloads on it, at most 1; its memory is theirs, each workload's
// memory divided evenly among its devices.
type Sim struct {
	// File returns the usage file of a workload's attempt ("" when it has
	// none).
	File func(id core.WorkloadID, attempt int) string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

var _ Sampler = (*Sim)(nil)

// Sample implements Sampler. It reports only simulated GPUs and the
// workloads placed on them.
func (s *Sim) Sample(_ context.Context, snap *core.Snapshot) (core.Sample, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	out := core.Sample{At: now(), Workloads: map[core.WorkloadID]core.WorkloadSample{}}
	idx := map[core.GPURef]int{}
	for _, n := range snap.Nodes {
		for _, g := range n.GPUs {
			if !g.Simulated {
				continue
			}
			idx[core.GPURef{Node: n.Name, Index: g.Index}] = len(out.GPUs)
			out.GPUs = append(out.GPUs, core.GPUSample{Node: n.Name, Index: g.Index, UUID: g.UUID})
		}
	}
	for _, w := range snap.Running {
		var refs []core.GPURef
		for _, a := range w.Status.Placement {
			if _, ok := idx[core.GPURef{Node: a.Node, Index: a.GPUIndex}]; ok {
				refs = append(refs, core.GPURef{Node: a.Node, Index: a.GPUIndex})
			}
		}
		if len(refs) == 0 {
			continue
		}
		var u SimUsage
		if s.File != nil {
			if path := s.File(w.ID, w.Status.Attempts); path != "" {
				u = readSimUsage(path)
			}
		}
		ws := core.WorkloadSample{ID: w.ID, Attempt: w.Status.Attempts, Utilization: u.Utilization, MemoryUsedMiB: u.MemoryMiB,
			PerGPUMemoryMiB: map[core.GPURef]int64{}}
		n := int64(len(refs))
		for i, r := range refs {
			mem := u.MemoryMiB / n
			if i == 0 {
				mem += u.MemoryMiB % n
			}
			ws.PerGPUMemoryMiB[r] += mem
			g := &out.GPUs[idx[r]]
			g.Utilization = min(1, Round(g.Utilization+u.Utilization))
			g.MemoryUsedMiB += mem
		}
		out.Workloads[w.ID] = ws
	}
	return out, nil
}

// SimUsage is what a workload on simulated GPUs says it uses.
type SimUsage struct {
	Utilization float64
	MemoryMiB   int64
}

// maxSimFile bounds what is read of a usage file.
const maxSimFile = 4 << 10

// readSimUsage reads a usage file. The workload owns it, so only a regular
// file is read, not through a link: a FIFO would block the open until a
// writer came (stalling the monitor for every workload), and a link would
// make the server read a file of its choice. Anything else reads as 0.
func readSimUsage(path string) SimUsage {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return SimUsage{}
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return SimUsage{}
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxSimFile))
	u, _ := ParseSimUsage(string(b))
	return u
}

// ParseSimUsage reads "utilization=0.8 memoryMiB=2048": key=value pairs
// separated by spaces or newlines, in any order, each optional.
// utilization is a fraction from 0 to 1 (a value above 1 is taken as a
// percentage when at most 100); memoryMiB is a whole number of MiB. Unknown
// keys are ignored, so that a workload may write more; a malformed value is
// an error, and the figures read until then are returned with it.
func ParseSimUsage(s string) (SimUsage, error) {
	var u SimUsage
	var errs []error
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("%q: want key=value", f))
			continue
		}
		switch strings.ToLower(k) {
		case "utilization", "utilisation", "util":
			x, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
			if err != nil || x < 0 || x > 100 || x != x {
				errs = append(errs, fmt.Errorf("utilization %q: want a fraction from 0 to 1", v))
				continue
			}
			if x > 1 || strings.HasSuffix(v, "%") {
				x /= 100
			}
			u.Utilization = x
		case "memorymib", "memory":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("memoryMiB %q: want a whole number of MiB", v))
				continue
			}
			u.MemoryMiB = n
		}
	}
	return u, errors.Join(errs...)
}
