package local

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// Environment variables that the platform sets for every task.
const (
	EnvWorkloadID     = "GPUFLEET_WORKLOAD_ID"
	EnvAttempt        = "GPUFLEET_ATTEMPT"
	EnvGPUUUIDs       = "GPUFLEET_GPU_UUIDS"
	EnvGPUFraction    = "GPUFLEET_GPU_FRACTION"
	EnvGPUMemoryLimit = "GPUFLEET_GPU_MEMORY_LIMIT_MIB"
	EnvReplicas       = "GPUFLEET_REPLICAS"
)

// taskEnv builds a task's whole environment, sorted. Nothing of the
// server's environment leaks in but PATH. Layers, each overriding the one
// before:
//
//  1. PATH (the server's), HOME (the working directory), LANG=C.UTF-8;
//  2. the task's own Env;
//  3. the platform's variables: workload ID, attempt, the visible devices
//     and, for a fractional request, the share and its memory limit.
//
// The supervisor's marker variable is never passed on, and the fraction
// variables are removed from a request that is not fractional, so that a
// program can trust them.
func taskEnv(t executor.Task, path, home string) []string {
	env := map[string]string{"PATH": path, "HOME": home, "LANG": "C.UTF-8"}
	for k, v := range t.Env {
		env[k] = v
	}
	for k, v := range t.SecretEnv {
		env[k] = v
	}
	delete(env, shimEnv)
	delete(env, EnvGPUFraction)
	delete(env, EnvGPUMemoryLimit)
	delete(env, EnvReplicas)

	// A device appears once, even when several replicas of a fractional
	// gang share it.
	var idx, uuids []string
	for _, a := range t.Assignments {
		if !slices.Contains(uuids, a.GPUUUID) {
			idx = append(idx, strconv.Itoa(a.GPUIndex))
			uuids = append(uuids, a.GPUUUID)
		}
	}
	env[EnvWorkloadID] = string(t.WorkloadID)
	env[EnvAttempt] = strconv.Itoa(t.Attempt)
	env["CUDA_VISIBLE_DEVICES"] = strings.Join(idx, ",")
	env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
	env["NVIDIA_VISIBLE_DEVICES"] = strings.Join(idx, ",")
	env[EnvGPUUUIDs] = strings.Join(uuids, ",")
	// A gang on this machine runs as one process that starts its replicas
	// itself (torchrun --nproc-per-node, say): it learns how many.
	if t.Request.Count() > 1 {
		env[EnvReplicas] = strconv.Itoa(t.Request.Count())
	}
	if t.Request.Fractional() && len(t.Assignments) > 0 {
		a := t.Assignments[0]
		env[EnvGPUFraction] = quantity.Milli(a.MilliGPU).String()
		env[EnvGPUMemoryLimit] = strconv.FormatInt(a.MemoryMiB, 10)
	}

	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// EnvCheckpointDir names the workload's checkpoint directory: kept across
// attempts (a requeue after preemption or a lost node finds what the last
// attempt saved there), and writable by the task.
const EnvCheckpointDir = "GPUFLEET_CHECKPOINT_DIR"

// withVar sets name=value in a sorted environment, over any value there.
func withVar(env []string, name, value string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	env = append(env, name+"="+value)
	slices.Sort(env)
	return env
}

// envValue returns the value of name in a "k=v" list.
func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// checkEnv refuses variables that cannot be passed to a process.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("invalid environment variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("environment variable %s contains a NUL byte", k)
		}
	}
	return nil
}
