package health

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A GPU's health.
const (
	Healthy = "Healthy"
	Suspect = "Suspect"
	Failed  = "Failed"
)

// Verdict reasons.
const (
	ReasonGPUCountMismatch = "GPUCountMismatch"
	ReasonGPUModelMismatch = "GPUModelMismatch"
	ReasonGPUUUIDMismatch  = "GPUUUIDMismatch"
	ReasonTopologyMismatch = "TopologyMismatch"
	ReasonDiagnosticFailed = "DiagnosticFailed"
	ReasonDCGMNotAvailable = "DCGMNotAvailable"
	ReasonCommandFailed    = "CommandFailed"
)

// Advertised is what a node says it has.
type Advertised struct {
	GPUs []core.GPU
}

// Evidence is what the qualification commands printed: each command's
// standard output and the error of running it (nil when it exited 0).
type Evidence struct {
	List    string // nvidia-smi -L
	ListErr error
	Topo    string // nvidia-smi topo -m
	TopoErr error
	// Discovery is dcgmi discovery --list.
	Discovery    string
	DiscoveryErr error
	// DCGMAvailable is false when dcgmi is not installed (or its host
	// engine cannot be reached); Discovery and Diag are then ignored.
	DCGMAvailable bool
	// Diag is dcgmi diag -r LEVEL -j. DiagErr counts only when Diag
	// holds no diagnostic: dcgmi diag exits non-zero when a test fails.
	Diag    []byte
	DiagErr error
	// CUDARan: the CUDA probe ran in the sandbox, exactly as a workload
	// runs; CUDA is what it printed (ParseCUDAProbe) and CUDAErr why it
	// did not finish or exited non-zero. Without it (no NVIDIA GPU, no
	// probe installed) nothing is checked.
	CUDARan bool
	CUDA    string
	CUDAErr error
}

// GPUVerdict is one advertised GPU's health after qualification.
type GPUVerdict struct {
	Index  int
	Health string
	// Reason and, in Message, the failing check ("memory: <warning>"
	// for a diagnostic); empty for a Healthy GPU.
	Reason  string
	Message string
}

// Verdict is the outcome of a node's qualification.
type Verdict struct {
	// Pass is false only for a failure of the node as a whole.
	Pass bool
	// Reason names the node's failure when Pass is false; when it is
	// true, the first thing worth noting (DCGMNotAvailable, or
	// DiagnosticFailed when some GPUs failed), or "".
	Reason  string
	Message string
	// GPUs holds every advertised GPU, by index.
	GPUs []GPUVerdict
}

type qualifier struct {
	v    Verdict
	byIx map[int]*GPUVerdict
}

// fail records a failure of the node (the first one gives the verdict's
// reason) and fails the GPUs it names.
func (q *qualifier) fail(reason, msg string, gpus ...int) {
	if q.v.Pass {
		q.v.Pass, q.v.Reason, q.v.Message = false, reason, msg
	}
	for _, i := range gpus {
		q.failGPU(i, reason, msg)
	}
}

// note records something that does not fail the node, unless a reason is
// already set.
func (q *qualifier) note(reason, msg string) {
	if q.v.Pass && q.v.Reason == "" {
		q.v.Reason, q.v.Message = reason, msg
	}
}

func (q *qualifier) failGPU(i int, reason, msg string) {
	g := q.byIx[i]
	if g == nil || g.Health == Failed {
		return
	}
	g.Health, g.Reason, g.Message = Failed, reason, msg
}

// Qualify checks a node's evidence against what it advertises; see the
// package documentation for the rules.
func Qualify(adv Advertised, ev Evidence, requireDCGM bool) Verdict {
	gpus := slices.Clone(adv.GPUs)
	slices.SortStableFunc(gpus, func(a, b core.GPU) int { return a.Index - b.Index })
	q := &qualifier{v: Verdict{Pass: true}, byIx: map[int]*GPUVerdict{}}
	q.v.GPUs = make([]GPUVerdict, len(gpus))
	for i, g := range gpus {
		q.v.GPUs[i] = GPUVerdict{Index: g.Index, Health: Healthy}
	}
	for i := range q.v.GPUs {
		q.byIx[q.v.GPUs[i].Index] = &q.v.GPUs[i]
	}
	q.checkList(gpus, ev)
	q.checkTopo(gpus, ev)
	q.checkCUDA(gpus, ev)
	q.checkDCGM(gpus, ev, requireDCGM)
	return q.v
}

func commandError(cmd string, err error) string {
	return fmt.Sprintf("%s: %v", cmd, err)
}

// 1. nvidia-smi -L: the same GPUs, by index, with the same models and
// UUIDs.
func (q *qualifier) checkList(gpus []core.GPU, ev Evidence) {
	if ev.ListErr != nil {
		q.fail(ReasonCommandFailed, commandError("nvidia-smi -L", ev.ListErr))
		return
	}
	listed, err := ParseNvidiaSMIList(ev.List)
	if err != nil {
		q.fail(ReasonCommandFailed, err.Error())
		return
	}
	byIx := map[int]ListedGPU{}
	for _, l := range listed {
		byIx[l.Index] = l
	}
	if len(listed) != len(gpus) {
		q.fail(ReasonGPUCountMismatch, fmt.Sprintf("nvidia-smi -L lists %d GPUs, the node advertises %d", len(listed), len(gpus)))
		return
	}
	var models, uuids []string
	var badModel, badUUID, missing []int
	for _, g := range gpus {
		l, ok := byIx[g.Index]
		if !ok {
			missing = append(missing, g.Index)
			continue
		}
		if !sameModel(l.Model, g.Model) {
			badModel = append(badModel, g.Index)
			models = append(models, fmt.Sprintf("GPU %d is %q, the node advertises %q", g.Index, l.Model, g.Model))
		}
		if !strings.EqualFold(l.UUID, g.UUID) {
			badUUID = append(badUUID, g.Index)
			uuids = append(uuids, fmt.Sprintf("GPU %d has UUID %s, the node advertises %s", g.Index, l.UUID, g.UUID))
		}
	}
	switch {
	case len(missing) > 0:
		q.fail(ReasonGPUCountMismatch, fmt.Sprintf("nvidia-smi -L does not list advertised GPU %s", joinInts(missing)), missing...)
	case len(models) > 0:
		q.fail(ReasonGPUModelMismatch, "nvidia-smi -L: "+strings.Join(models, "; "), badModel...)
	case len(uuids) > 0:
		q.fail(ReasonGPUUUIDMismatch, "nvidia-smi -L: "+strings.Join(uuids, "; "), badUUID...)
	}
}

// sameModel compares model names without case, surrounding or repeated
// spaces, or a leading "NVIDIA ".
func sameModel(a, b string) bool {
	norm := func(s string) string {
		s = strings.Join(strings.Fields(strings.ToLower(s)), " ")
		return strings.TrimPrefix(s, "nvidia ")
	}
	return norm(a) == norm(b)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// 2. nvidia-smi topo -m: the advertised NVLink domains partition the GPUs
// as the topology does.
func (q *qualifier) checkTopo(gpus []core.GPU, ev Evidence) {
	if ev.TopoErr != nil {
		q.fail(ReasonCommandFailed, commandError("nvidia-smi topo -m", ev.TopoErr))
		return
	}
	t, err := ParseTopo(ev.Topo)
	if err != nil {
		q.fail(ReasonCommandFailed, err.Error())
		return
	}
	var missing []int
	for _, g := range gpus {
		if _, ok := t.Domains[g.Index]; !ok {
			missing = append(missing, g.Index)
		}
	}
	if len(missing) > 0 {
		q.fail(ReasonTopologyMismatch, fmt.Sprintf("nvidia-smi topo -m does not show advertised GPU %s", joinInts(missing)), missing...)
		return
	}
	if !t.NVLink {
		// A node without NVLink is flat: it may advertise its GPUs in one
		// domain, or each in a domain of its own, but no GPUs as linked
		// apart from the others.
		if allOneDomain(gpus) || allApart(gpus) {
			return
		}
		for i, a := range gpus {
			for _, b := range gpus[i+1:] {
				if a.Domain == b.Domain {
					q.fail(ReasonTopologyMismatch, fmt.Sprintf("GPUs %d and %d are advertised in NVLink domain %d, nvidia-smi topo -m links them by %s",
						a.Index, b.Index, a.Domain, t.Link[[2]int{a.Index, b.Index}]))
					return
				}
			}
		}
	}
	for i, a := range gpus {
		for _, b := range gpus[i+1:] {
			advSame := a.Domain == b.Domain
			topoSame := t.Domains[a.Index] == t.Domains[b.Index]
			if advSame == topoSame {
				continue
			}
			var msg string
			if topoSame {
				msg = fmt.Sprintf("GPUs %d and %d share an NVLink domain in nvidia-smi topo -m, the node advertises domains %d and %d", a.Index, b.Index, a.Domain, b.Domain)
			} else {
				msg = fmt.Sprintf("GPUs %d and %d are advertised in NVLink domain %d, nvidia-smi topo -m links them by %s", a.Index, b.Index, a.Domain, t.Link[[2]int{a.Index, b.Index}])
			}
			q.fail(ReasonTopologyMismatch, msg)
			return
		}
	}
}

// allApart reports whether no two GPUs are advertised in one domain.
func allApart(gpus []core.GPU) bool {
	seen := map[int]bool{}
	for _, g := range gpus {
		if seen[g.Domain] {
			return false
		}
		seen[g.Domain] = true
	}
	return true
}

func allOneDomain(gpus []core.GPU) bool {
	for _, g := range gpus {
		if g.Domain != gpus[0].Domain {
			return false
		}
	}
	return true
}

// 3. dcgmi: discovery finds the advertised GPUs, and no diagnostic result
// is Fail.
func (q *qualifier) checkDCGM(gpus []core.GPU, ev Evidence, requireDCGM bool) {
	if !ev.DCGMAvailable {
		if requireDCGM {
			q.fail(ReasonDCGMNotAvailable, "dcgmi is not available and qualification.requireDCGM is set")
		} else {
			q.note(ReasonDCGMNotAvailable, "dcgmi is not available: no diagnostics ran")
		}
		return
	}
	// DCGM GPU ID -> GPU index, by UUID; an ID whose UUID dcgmi does not
	// print (or that is not advertised) is taken as the index.
	toIndex := map[int]int{}
	if ev.DiscoveryErr != nil {
		q.fail(ReasonCommandFailed, commandError("dcgmi discovery --list", ev.DiscoveryErr))
	} else if found, err := ParseDCGMDiscovery(ev.Discovery); err != nil {
		q.fail(ReasonCommandFailed, err.Error())
	} else {
		byUUID := map[string]int{}
		for _, g := range gpus {
			byUUID[strings.ToLower(g.UUID)] = g.Index
		}
		for _, f := range found {
			if ix, ok := byUUID[strings.ToLower(f.UUID)]; ok && f.UUID != "" {
				toIndex[f.ID] = ix
			}
		}
		if len(found) != len(gpus) {
			q.fail(ReasonGPUCountMismatch, fmt.Sprintf("dcgmi discovery finds %d GPUs, the node advertises %d", len(found), len(gpus)))
		}
	}
	d, err := ParseDCGMDiag(ev.Diag)
	if err != nil {
		if ev.DiagErr != nil {
			err = errors.Join(ev.DiagErr, err)
		}
		q.fail(ReasonCommandFailed, commandError("dcgmi diag", err))
		return
	}
	failedGPUs := 0
	for _, r := range d.Results {
		if r.Status != DiagFail {
			continue
		}
		msg := r.Test + ": failed"
		if len(r.Warnings) > 0 {
			msg = r.Test + ": " + strings.Join(r.Warnings, "; ")
		}
		targets := []int{}
		if r.GPU < 0 {
			for _, g := range gpus {
				targets = append(targets, g.Index)
			}
		} else if ix, ok := toIndex[r.GPU]; ok {
			targets = append(targets, ix)
		} else {
			targets = append(targets, r.GPU)
		}
		for _, ix := range targets {
			if g := q.byIx[ix]; g != nil && g.Health != Failed {
				failedGPUs++
				q.failGPU(ix, ReasonDiagnosticFailed, msg)
			}
		}
	}
	if d.RuntimeError != "" {
		q.fail(ReasonCommandFailed, "dcgmi diag: "+d.RuntimeError)
		return
	}
	if failedGPUs > 0 {
		var failed []int
		for _, g := range q.v.GPUs {
			if g.Reason == ReasonDiagnosticFailed {
				failed = append(failed, g.Index)
			}
		}
		q.note(ReasonDiagnosticFailed, fmt.Sprintf("dcgmi diag failed GPU %s", joinInts(failed)))
	}
}
