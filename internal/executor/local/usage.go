package local

import (
	"path/filepath"

	"github.com/gpufleet/gpufleet/internal/core"
)

// EnvSimUsageFile names, for a task on simulated GPUs (Options.
// SimulatedUsage), the file where it writes its own GPU utilisation and
// memory: "utilization=0.8 memoryMiB=2048". The file is in the workload's
// usage directory, which the task may write; no file means utilisation 0
// and memory 0.
const EnvSimUsageFile = "GPUFLEET_SIM_USAGE_FILE"

// Process is a running task: its main process, which leads the task's
// process group, and its supervisor, which leads the task's session. A
// GPU process in either belongs to the task.
type Process struct {
	WorkloadID core.WorkloadID
	Attempt    int
	PID        int
	ShimPID    int
}

// Processes lists the tasks that are running (started or adopted, and not
// yet reported ended), in no order.
func (e *Executor) Processes() []Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Process, 0, len(e.tasks))
	for _, t := range e.tasks {
		if t.pid > 0 {
			out = append(out, Process{WorkloadID: t.key.id, Attempt: t.key.attempt, PID: t.pid, ShimPID: t.shim})
		}
	}
	return out
}

// UsageFile returns the simulated usage file of a workload's attempt, or ""
// for an ID that is not a plain name.
func (e *Executor) UsageFile(id core.WorkloadID, attempt int) string {
	adir, err := e.attemptDir(id, attempt)
	if err != nil {
		return ""
	}
	return e.usageFile(adir)
}

// usageFile is <workload>/usage/attempt-N: in a directory the task may
// write, since the task writes it.
func (e *Executor) usageFile(adir string) string {
	return filepath.Join(filepath.Dir(adir), "usage", filepath.Base(adir))
}
