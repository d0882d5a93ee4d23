package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpufleet/gpufleet/internal/executor"
)

// Each attempt runs in a cgroup of its own, nested under a cgroup of the
// server's slot (gpufleet<slot>) under the server's own cgroup, through
// the kernel's files (cgroup v2, or the v1 hierarchies of memory, cpu,
// cpuacct, pids and freezer where the host still mounts them so): a memory
// limit (the workload's request, else what the server's slot may use: the
// node's memory less local.reserve, which bounds all its tasks together,
// so that none can starve the server), a CPU quota from its CPU request
// and an equal weight without one, a bound on its processes. The sandbox's
// init joins it before anything of the task runs; the supervisor reads,
// when the task has ended, whether the OOM killer struck, the peak memory
// and the CPU time, and removes it.

// DefaultPidsMax bounds the processes (threads included) of an attempt.
const DefaultPidsMax = 4096

// slotCPUWeight is the CPU weight of all the slot's tasks together
// (cgroup v2's scale, where 100 is the default; cpu.shares 256 on v1):
// under contention the server, at the default weight, gets four times the
// CPU its tasks get together, so a task that spins or forks without end
// slows the API little. With no contention the tasks use every core.
const slotCPUWeight = 25

// cgroupControllers are the v1 hierarchies an attempt gets a cgroup in.
var cgroupControllers = []string{"memory", "cpu", "cpuacct", "pids", "freezer"}

// cgroupDir is one cgroup: its directory and, on v1, its controller ("" on
// v2, whose one hierarchy has them all).
type cgroupDir struct {
	Controller string `json:"controller,omitempty"`
	Dir        string `json:"dir"`
}

// cgroups are the server's slot's parent cgroups, where attempts get
// theirs.
type cgroups struct {
	v2      bool
	parents []cgroupDir
	// memMax is the memory all tasks together may use, in bytes.
	memMax int64
	// rel is the memory parent's path from its hierarchy's root, which a
	// container runtime with the cgroupfs manager takes as a cgroup
	// parent ("" when unknown).
	rel string
}

// cgLimits are an attempt's limits.
type cgLimits struct {
	memBytes int64 // 0: the slot's
	milliCPU int64 // 0: no quota, the default weight
	pidsMax  int64
}

// newCgroups makes the slot's parent cgroups under the server's own, with
// memMax bytes for all its tasks.
func newCgroups(slot int, memMax int64) (*cgroups, error) {
	name := bridgePrefix + strconv.Itoa(slot)
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	c := &cgroups{memMax: memMax}
	if dir, ok := own[""]; ok && isCgroup2(dir) {
		c.v2 = true
		parent, err := v2Parent(dir, name)
		if err != nil {
			return nil, err
		}
		c.parents = []cgroupDir{{Dir: parent}}
		c.rel = relativeCgroup(parent, "")
		if err := errors.Join(writeCg(parent, "memory.max", strconv.FormatInt(memMax, 10)),
			writeCg(parent, "cpu.weight", strconv.Itoa(slotCPUWeight))); err != nil {
			return nil, err
		}
		return c, nil
	}
	for _, ctl := range cgroupControllers {
		base, ok := own[ctl]
		if !ok {
			return nil, fmt.Errorf("cgroups: no %s hierarchy mounted", ctl)
		}
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroups: %w", err)
		}
		c.parents = append(c.parents, cgroupDir{Controller: ctl, Dir: dir})
	}
	if err := errors.Join(writeCg(c.parent("memory"), "memory.limit_in_bytes", strconv.FormatInt(memMax, 10)),
		writeCg(c.parent("cpu"), "cpu.shares", strconv.Itoa(slotCPUWeight*1024/100))); err != nil {
		return nil, err
	}
	c.rel = relativeCgroup(c.parent("memory"), "memory")
	return c, nil
}

// relativeCgroup is dir's path from the root of ctl's hierarchy ("" for
// the v2 one); "" when no mount of it holds dir.
func relativeCgroup(dir, ctl string) string {
	mounts, err := cgroupMounts()
	if err != nil {
		return ""
	}
	root, ok := mounts[ctl]
	if !ok {
		return ""
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return ""
	}
	return "/" + rel
}

// containerArgs are a container runtime's flags that give a container the
// limits an attempt's cgroup would have, under the slot's parent cgroup:
// the runtime makes the container's cgroup itself, so the container is
// bounded by both its own limits and the slot's.
func (c *cgroups) containerArgs(l cgLimits) []string {
	mem := l.memBytes
	if mem <= 0 || mem > c.memMax {
		mem = c.memMax
	}
	var args []string
	if c.rel != "" {
		args = append(args, "--cgroup-parent", c.rel)
	}
	b := strconv.FormatInt(mem, 10)
	args = append(args, "--memory", b, "--memory-swap", b, "--pids-limit", strconv.FormatInt(l.pidsMax, 10))
	if l.milliCPU > 0 {
		args = append(args, "--cpus", strconv.FormatFloat(float64(l.milliCPU)/1000, 'f', 3, 64))
	}
	return args
}

func (c *cgroups) parent(ctl string) string {
	for _, p := range c.parents {
		if p.Controller == ctl {
			return p.Dir
		}
	}
	return ""
}

// create makes the attempt's cgroup (name: "<workload>-<attempt>") with
// its limits, empty and fresh (one left by an earlier try is removed
// first).
func (c *cgroups) create(name string, l cgLimits) ([]cgroupDir, error) {
	mem := l.memBytes
	if mem <= 0 || mem > c.memMax {
		mem = c.memMax
	}
	var out []cgroupDir
	for _, p := range c.parents {
		dir := filepath.Join(p.Dir, name)
		killCgroup([]cgroupDir{{Controller: p.Controller, Dir: dir}})
		os.Remove(dir)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("cgroups: %w", err)
		}
		out = append(out, cgroupDir{Controller: p.Controller, Dir: dir})
	}
	set := func(ctl, file, value string) error {
		for _, d := range out {
			if d.Controller == ctl {
				return writeCg(d.Dir, file, value)
			}
		}
		return nil
	}
	weight := int64(1024)
	quota := "-1"
	if l.milliCPU > 0 {
		weight = max(2, l.milliCPU*1024/1000)
		quota = strconv.FormatInt(l.milliCPU*100, 10) // of a 100 ms period
	}
	var errs []error
	if c.v2 {
		w := 1 + (weight-2)*9999/262142
		cpuMax := "max 100000"
		if quota != "-1" {
			cpuMax = quota + " 100000"
		}
		errs = append(errs, set("", "memory.max", strconv.FormatInt(mem, 10)), set("", "cpu.weight", strconv.FormatInt(max(1, w), 10)),
			set("", "cpu.max", cpuMax), set("", "pids.max", strconv.FormatInt(l.pidsMax, 10)))
	} else {
		errs = append(errs, set("memory", "memory.limit_in_bytes", strconv.FormatInt(mem, 10)),
			set("cpu", "cpu.shares", strconv.FormatInt(weight, 10)), set("cpu", "cpu.cfs_period_us", "100000"),
			set("cpu", "cpu.cfs_quota_us", quota), set("pids", "pids.max", strconv.FormatInt(l.pidsMax, 10)))
		// Swap, where it is accounted, is no way around the limit.
		set("memory", "memory.memsw.limit_in_bytes", strconv.FormatInt(mem, 10))
	}
	if err := errors.Join(errs...); err != nil {
		removeCgroup(out)
		return nil, err
	}
	return out, nil
}

// joinCgroups moves the calling process into each cgroup (the sandbox's
// init, before anything of the task runs; its children follow).
func joinCgroups(dirs []cgroupDir) error {
	pid := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		if err := writeCg(d.Dir, "cgroup.procs", pid); err != nil {
			return fmt.Errorf("sandbox: join %w", err)
		}
	}
	return nil
}

// cgStats is what an attempt's cgroup counted.
type cgStats struct {
	OOMKills   int64
	PeakBytes  int64
	CPUSeconds float64
	LimitBytes int64
}

// readCgStats reads the attempt's counters: OOM kills, peak memory, CPU
// time, and its memory limit.
func readCgStats(dirs []cgroupDir) cgStats {
	var s cgStats
	for _, d := range dirs {
		switch d.Controller {
		case "":
			s.OOMKills = keyedValue(filepath.Join(d.Dir, "memory.events"), "oom_kill")
			s.PeakBytes = fileInt(filepath.Join(d.Dir, "memory.peak"))
			s.CPUSeconds = float64(keyedValue(filepath.Join(d.Dir, "cpu.stat"), "usage_usec")) / 1e6
			s.LimitBytes = fileInt(filepath.Join(d.Dir, "memory.max"))
		case "memory":
			s.OOMKills = keyedValue(filepath.Join(d.Dir, "memory.oom_control"), "oom_kill")
			s.PeakBytes = fileInt(filepath.Join(d.Dir, "memory.max_usage_in_bytes"))
			s.LimitBytes = fileInt(filepath.Join(d.Dir, "memory.limit_in_bytes"))
		case "cpuacct":
			s.CPUSeconds = float64(fileInt(filepath.Join(d.Dir, "cpuacct.usage"))) / 1e9
		}
	}
	return s
}

// killCgroup kills every process of the cgroups and waits (at most 5 s)
// until they are gone: cgroup.kill on v2; on v1, the freezer holds them
// still while each is sent SIGKILL, so none forks away meanwhile.
func killCgroup(dirs []cgroupDir) {
	for _, d := range dirs {
		switch d.Controller {
		case "":
			if writeCg(d.Dir, "cgroup.kill", "1") != nil {
				signalAll(d.Dir)
			}
		case "freezer":
			if len(procsOf(d.Dir)) == 0 {
				continue
			}
			writeCg(d.Dir, "freezer.state", "FROZEN")
			signalAll(d.Dir)
			writeCg(d.Dir, "freezer.state", "THAWED")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, d := range dirs {
		for len(procsOf(d.Dir)) > 0 && time.Now().Before(deadline) {
			signalAll(d.Dir)
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func signalAll(dir string) {
	for _, pid := range procsOf(dir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// removeCgroup removes the attempt's cgroups, once empty.
func removeCgroup(dirs []cgroupDir) {
	for _, d := range dirs {
		os.Remove(d.Dir)
	}
}

// procsOf lists the processes in a cgroup.
func procsOf(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func writeCg(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, file), err)
	}
	return nil
}

func fileInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// keyedValue reads "key value" lines (memory.events, cpu.stat,
// memory.oom_control) and returns key's.
func keyedValue(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// ownCgroups finds the server's own cgroup directory in each hierarchy,
// by controller ("" for the v2 hierarchy), from /proc/self/cgroup and
// the mounts.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		ctls := strings.Split(f[1], ",")
		if f[1] == "" {
			ctls = []string{""}
		}
		for _, ctl := range ctls {
			if m, ok := mounts[ctl]; ok {
				out[ctl] = filepath.Join(m, f[2])
			}
		}
	}
	return out, nil
}

// cgroupMounts maps each controller to where its hierarchy is mounted
// ("" to the cgroup2 mount).
func cgroupMounts() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - TYPE SOURCE SUPEROPTS"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || pf[3] != "/" {
			continue
		}
		switch qf[0] {
		case "cgroup2":
			if _, ok := out[""]; !ok || pf[4] == "/sys/fs/cgroup" {
				out[""] = pf[4]
			}
		case "cgroup":
			for _, o := range strings.Split(qf[2], ",") {
				for _, ctl := range cgroupControllers {
					if o == ctl {
						out[ctl] = pf[4]
					}
				}
			}
		}
	}
	return out, nil
}

// isCgroup2 reports whether dir is in a cgroup2 hierarchy with the
// controllers attempts need (not the empty one a hybrid host mounts
// beside its v1 hierarchies).
func isCgroup2(dir string) bool {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil || st.Type != 0x63677270 { // CGROUP2_SUPER_MAGIC
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return false
	}
	ctls := strings.Fields(string(b))
	for _, need := range []string{"memory", "cpu", "pids"} {
		if !slices.Contains(ctls, need) {
			return false
		}
	}
	return true
}

// v2Parent makes the slot's cgroup under the server's own on v2, with the
// memory, cpu and pids controllers for its children. A cgroup with
// processes cannot give its children controllers, so the server moves
// itself into a leaf of its own cgroup first ("server"), where it is the
// only process.
func v2Parent(own, name string) (string, error) {
	if procs := procsOf(own); len(procs) > 0 {
		leaf := filepath.Join(own, "server")
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return "", fmt.Errorf("cgroups: %w", err)
		}
		for _, pid := range procs {
			if pid != os.Getpid() {
				return "", fmt.Errorf("cgroups: the server's cgroup %s holds other processes (%d): give it a cgroup of its own (systemd: a unit with Delegate=yes)", own, pid)
			}
		}
		if err := writeCg(leaf, "cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
			return "", err
		}
	}
	if err := writeCg(own, "cgroup.subtree_control", "+memory +cpu +pids"); err != nil {
		return "", err
	}
	parent := filepath.Join(own, name)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("cgroups: %w", err)
	}
	if err := writeCg(parent, "cgroup.subtree_control", "+memory +cpu +pids"); err != nil {
		return "", err
	}
	return parent, nil
}

// memTotal is the machine's memory, from /proc/meminfo ("MemTotal: N kB").
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cgroupsFile is attempt-N/cgroups.json: the attempt's cgroups, which the
// executor kills and removes itself when the supervisor is lost.
func cgroupsFile(adir string) string { return filepath.Join(adir, "cgroups.json") }

// attemptCgroup makes the attempt's cgroup, with the task's memory and CPU
// requests as its limits, and records where; nil where there are none.
func (e *Executor) attemptCgroup(adir string, t executor.Task) ([]cgroupDir, error) {
	if e.cg == nil {
		return nil, nil
	}
	name := filepath.Base(filepath.Dir(adir)) + "-" + filepath.Base(adir)
	dirs, err := e.cg.create(name, e.limitsOf(t))
	if err != nil {
		return nil, err
	}
	if err := writeJSON(cgroupsFile(adir), dirs); err != nil {
		removeCgroup(dirs)
		return nil, err
	}
	return dirs, nil
}

// limitsOf are the limits of a task's attempt: its memory and CPU requests
// (for all its replicas), and the executor's bound on processes.
func (e *Executor) limitsOf(t executor.Task) cgLimits {
	r := t.Request
	return cgLimits{memBytes: r.MemoryMiB * int64(r.Count()) << 20, milliCPU: r.MilliCPU * int64(r.Count()), pidsMax: e.pidsMax}
}
