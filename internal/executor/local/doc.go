// Package local runs tasks as OS processes on this machine, with their GPUs
// pinned through the environment (CUDA_VISIBLE_DEVICES and friends).
//
// # Files
//
// Everything a workload leaves on disk lives under
// DataDir/workloads/<workload ID>/:
//
//	log          stdout and stderr of every attempt, appended, each attempt
//	             after a "--- gpufleet: attempt N started <time> ---" line
//	work/        the default working directory (and HOME) of every attempt;
//	             Task.WorkingDir is a local path below it
//	attempt-N/   pid: the supervisor's and the task's pid and start time
//	             exit: how the task ended, as JSON, written once at its end
//
// Paths are built only from the workload ID, which must match
// ^[a-z0-9-]{1,64}$, and the attempt number.
//
// # The supervisor (shim)
//
// A task is never a direct child of the server. Start re-executes the
// server's own binary (os.Executable) with GPUFLEET_SHIM=1 in its
// environment and the arguments "gpufleet-shim <attempt dir> <program>
// <argv...>". An init function in this package recognises that call, runs
// the supervisor and exits, so every binary that links this package (test
// binaries included) can act as the supervisor. The supervisor:
//
//  1. runs in a session of its own (Setsid), so it outlives the server;
//  2. catches SIGTERM, SIGINT and SIGHUP and ignores them;
//  3. starts the task with the argv as given (never through a shell), in a
//     new process group whose ID is the task's pid, with stdin /dev/null and
//     stdout and stderr on the log file that the server opened for it;
//  4. tells the server, over a pipe on fd 3, the task's pid and start time,
//     or why exec failed; Start returns only after that;
//  5. waits for the task, kills what is left of its process group (a task
//     ends with its main process, as a container does), writes attempt-N/exit
//     atomically (temp file, fsync, rename, fsync of the directory) and exits.
//
// Because the supervisor is outside the task's process group, Stop's SIGTERM
// and SIGKILL reach only the task, and the supervisor records every ending,
// a SIGKILL included. (Putting the supervisor in the task's group would lose
// the exit status of every task killed after its grace.) If the supervisor itself is killed, the ending is
// unknown: the executor reports Reason "Lost" and kills the orphaned task.
//
// After a restart of the server, Adopt finds the exit file (the task ended
// while the server was down) or a live supervisor, checked against its start
// time in /proc to guard against pid reuse, which it then watches through a
// pidfd (or, where pidfds are unavailable, by polling /proc every 200 ms).
//
// Deployment note: the server's service manager must not kill the server's
// whole cgroup on restart (systemd: KillMode=process), or tasks die with it.
//
// # Exits
//
//   - exit status N: ExitCode N;
//   - killed by a signal: ExitCode nil, Signal "SIGTERM" (or "SIGKILL", ...);
//   - supervisor gone without a record: ExitCode nil, Reason "Lost".
//
// A program that cannot be found or executed makes Start return an error
// (wrapping exec.ErrNotFound when it is missing) and no Exit is delivered:
// Start resolves the program itself, with the task's PATH, and relative to
// the working directory for names such as "./run.sh"; an exec failure that
// only the supervisor sees ("exec format error") fails Start the same way.
// The failure is also appended to the workload's log.
//
// # Environment
//
// A task sees nothing of the server's environment but PATH: HOME is its
// working directory, LANG is C.UTF-8, then come the task's own variables,
// then the platform's, which win: GPUFLEET_WORKLOAD_ID, GPUFLEET_ATTEMPT,
// CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES (GPU indices in
// assignment order; empty, hiding every device, when there are none),
// CUDA_DEVICE_ORDER=PCI_BUS_ID, GPUFLEET_GPU_UUIDS and, for a fractional
// request only, GPUFLEET_GPU_FRACTION (0.25) and
// GPUFLEET_GPU_MEMORY_LIMIT_MIB. Exit.At is the
// executor's clock when the end is delivered; the exit file also records the
// supervisor's wall-clock finishing time.
//
// Max runtime is not the executor's business; the control loop enforces it
// through Stop.
//
// # Imports
//
// local may import executor, core, api (for quantity formatting), the
// standard library and golang.org/x/sys. It must not import the store, the
// scheduler or the control loop.
package local
