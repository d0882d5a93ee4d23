package usage

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The nvidia-smi queries the Nvidia sampler runs.
var (
	GPUQueryArgs  = []string{"--query-gpu=index,uuid,utilization.gpu,memory.used", "--format=csv,noheader,nounits"}
	AppsQueryArgs = []string{"--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"}
)

// TaskProcess is a running task as the local executor knows it: its main
// process (the leader of its process group) and its supervisor (the leader
// of its session).
type TaskProcess struct {
	WorkloadID core.WorkloadID
	Attempt    int
	PID        int
	ShimPID    int
}

// Nvidia samples the real GPUs of one node with nvidia-smi.
type Nvidia struct {
	Node core.NodeName
	// Path is nvidia-smi's path; "nvidia-smi" in $PATH when empty.
	Path string
	// Timeout bounds each nvidia-smi run; 10 s when zero.
	Timeout time.Duration
	// Tasks lists the running tasks of this node.
	Tasks func() []TaskProcess
	// Run runs nvidia-smi with args and returns its standard output;
	// exec.CommandContext when nil (tests give recorded output).
	Run func(ctx context.Context, path string, args []string) ([]byte, error)
	// Group returns a process's group and session; from /proc when nil.
	Group func(pid int) (pgid, sid int, ok bool)
	// Parent returns a process's parent; from /proc when nil.
	Parent func(pid int) (ppid int, ok bool)
	Now    func() time.Time
}

var _ Sampler = (*Nvidia)(nil)

// Sample implements Sampler. A workload's utilisation is the mean, over
// its devices on this node, of the device's utilisation where one of its
// processes runs and 0 where none does: nvidia-smi does not split a
// device's utilisation among the processes sharing it, so a fractional
// workload sharing a busy GPU counts as busy as long as it has a process
// there. Its memory is what its processes hold.
func (n *Nvidia) Sample(ctx context.Context, snap *core.Snapshot) (core.Sample, error) {
	now := time.Now
	if n.Now != nil {
		now = n.Now
	}
	out := core.Sample{At: now(), Workloads: map[core.WorkloadID]core.WorkloadSample{}}
	b, err := n.run(ctx, GPUQueryArgs)
	if err != nil {
		return out, err
	}
	gpus, err := ParseGPUQuery(string(b))
	if err != nil {
		return out, err
	}
	byUUID := map[string]int{}
	for i := range gpus {
		gpus[i].Node = n.Node
		byUUID[gpus[i].UUID] = gpus[i].Index
	}
	out.GPUs = gpus
	b, err = n.run(ctx, AppsQueryArgs)
	if err != nil {
		return out, err
	}
	apps, err := ParseAppsQuery(string(b))
	if err != nil {
		return out, err
	}
	// Which task each process belongs to.
	owner := map[int]TaskProcess{}
	if n.Tasks != nil {
		for _, t := range n.Tasks() {
			if t.ShimPID > 0 {
				owner[t.ShimPID] = t
			}
			if t.PID > 0 {
				owner[t.PID] = t
			}
		}
	}
	group := n.Group
	if group == nil {
		group = procGroup
	}
	parent := n.Parent
	if parent == nil {
		parent = procParent
	}
	// ownerOf finds the task of a process: it is the task's main process
	// or supervisor, or in the session or process group of one; or else
	// one of its ancestors is. A process that starts a session of its own
	// (Jupyter starts each kernel so) is found through its parents.
	ownerOf := func(pid int) (TaskProcess, bool) {
		for range maxAncestors {
			if t, ok := owner[pid]; ok {
				return t, true
			}
			if pgid, sid, found := group(pid); found {
				if t, ok := owner[sid]; ok {
					return t, true
				}
				if t, ok := owner[pgid]; ok {
					return t, true
				}
			}
			ppid, found := parent(pid)
			if !found || ppid <= 1 {
				break
			}
			pid = ppid
		}
		return TaskProcess{}, false
	}
	type key struct {
		id    core.WorkloadID
		index int
	}
	mem := map[key]int64{}
	present := map[key]bool{}
	for _, a := range apps {
		idx, ok := byUUID[a.UUID]
		if !ok {
			continue
		}
		t, ok := ownerOf(a.PID)
		if !ok {
			continue
		}
		k := key{t.WorkloadID, idx}
		mem[k] += a.MemoryMiB
		present[k] = true
	}
	util := map[int]float64{}
	for _, g := range gpus {
		util[g.Index] = g.Utilization
	}
	for _, w := range snap.Running {
		ws := core.WorkloadSample{ID: w.ID, Attempt: w.Status.Attempts, PerGPUMemoryMiB: map[core.GPURef]int64{}}
		var devices int
		seen := map[int]bool{}
		for _, a := range w.Status.Placement {
			if a.Node != n.Node || seen[a.GPUIndex] {
				continue
			}
			seen[a.GPUIndex] = true
			devices++
			k := key{w.ID, a.GPUIndex}
			if present[k] {
				ws.Utilization += util[a.GPUIndex]
			}
			ws.MemoryUsedMiB += mem[k]
			ws.PerGPUMemoryMiB[core.GPURef{Node: n.Node, Index: a.GPUIndex}] = mem[k]
		}
		if devices == 0 {
			continue
		}
		ws.Utilization /= float64(devices)
		out.Workloads[w.ID] = ws
	}
	return out, nil
}

func (n *Nvidia) run(ctx context.Context, args []string) ([]byte, error) {
	path := n.Path
	if path == "" {
		path = "nvidia-smi"
	}
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	run := n.Run
	if run == nil {
		run = func(ctx context.Context, path string, args []string) ([]byte, error) {
			return exec.CommandContext(ctx, path, args...).Output()
		}
	}
	b, err := run(ctx, path, args)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi %s: %w", args[0], err)
	}
	return b, nil
}

// ParseGPUQuery parses what nvidia-smi prints for GPUQueryArgs, one line
// per GPU: "0, GPU-5f4e..., 37, 1024". A GPU whose figures are not numbers
// ("[N/A]", "[GPU requires reset]") is returned with Err set.
func ParseGPUQuery(s string) ([]core.GPUSample, error) {
	recs, err := readCSV(s, 4)
	if err != nil {
		return nil, fmt.Errorf("parse nvidia-smi --query-gpu: %w", err)
	}
	var out []core.GPUSample
	for _, r := range recs {
		idx, err := strconv.Atoi(r[0])
		if err != nil {
			return nil, fmt.Errorf("parse nvidia-smi --query-gpu: index %q is not a number", r[0])
		}
		g := core.GPUSample{Index: idx, UUID: r[1]}
		u, err1 := strconv.ParseFloat(r[2], 64)
		m, err2 := strconv.ParseInt(r[3], 10, 64)
		switch {
		case err1 != nil || u < 0 || u > 100:
			g.Err = "utilization.gpu " + r[2]
		case err2 != nil || m < 0:
			g.Err = "memory.used " + r[3]
		default:
			g.Utilization, g.MemoryUsedMiB = u/100, m
		}
		out = append(out, g)
	}
	return out, nil
}

// App is one process using a GPU.
type App struct {
	PID       int
	UUID      string
	MemoryMiB int64
}

// ParseAppsQuery parses what nvidia-smi prints for AppsQueryArgs, one line
// per process on a GPU: "12345, GPU-5f4e..., 2048". Memory that nvidia-smi
// cannot tell ("[N/A]", as under MIG or without the right) counts 0. Older
// versions print "No running processes found" when there is none.
func ParseAppsQuery(s string) ([]App, error) {
	if strings.Contains(s, "No running processes found") {
		return nil, nil
	}
	recs, err := readCSV(s, 3)
	if err != nil {
		return nil, fmt.Errorf("parse nvidia-smi --query-compute-apps: %w", err)
	}
	var out []App
	for _, r := range recs {
		pid, err := strconv.Atoi(r[0])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("parse nvidia-smi --query-compute-apps: pid %q is not a number", r[0])
		}
		m, err := strconv.ParseInt(r[2], 10, 64)
		if err != nil || m < 0 {
			m = 0
		}
		out = append(out, App{PID: pid, UUID: r[1], MemoryMiB: m})
	}
	return out, nil
}

func readCSV(s string, fields int) ([][]string, error) {
	r := csv.NewReader(strings.NewReader(s))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = fields
	recs, err := r.ReadAll()
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
	}
	return recs, nil
}

// procGroup reads a process's group and session from /proc/PID/stat.
func procGroup(pid int) (pgid, sid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	return ParseProcStat(string(b))
}

// maxAncestors bounds the walk up a process's parents.
const maxAncestors = 64

// procParent reads a process's parent from /proc/PID/stat.
func procParent(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	f, ok := statFields(string(b), 2)
	if !ok {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}

// ParseProcStat reads the process group and session from a /proc/PID/stat
// line: "pid (comm) state ppid pgrp session ...", where comm may hold
// spaces and parentheses.
func ParseProcStat(s string) (pgid, sid int, ok bool) {
	f, ok := statFields(s, 4)
	if !ok {
		return 0, 0, false
	}
	pg, err1 := strconv.Atoi(f[2])
	se, err2 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return pg, se, true
}

// statFields returns the fields of a /proc/PID/stat line after comm
// (state, ppid, pgrp, session, ...), when there are at least n.
func statFields(s string, n int) ([]string, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(s[i+1:])
	return f, len(f) >= n
}
