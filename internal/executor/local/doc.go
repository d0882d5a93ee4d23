// Package local runs tasks as OS processes on this machine, with their GPUs
// pinned through the environment (CUDA_VISIBLE_DEVICES and friends).
//
// # Files
//
// Everything a workload leaves on disk lives under
// DataDir/workloads/<workload ID>/:
//
//	log          stdout and stderr of every attempt, appended, each attempt
//	             after a "--- gpufleet: attempt N started <time> ---" line;
//	             written by the supervisor, never opened by the task
//	log.idx      the log's time index: "<offset> <unix ns>" at most once a
//	             second of output, for logs --since (LogOffsetSince)
//	work/        the default working directory (and HOME) of every attempt;
//	             Task.WorkingDir is a local path below it
//	checkpoint/  $GPUFLEET_CHECKPOINT_DIR: kept across attempts, so a task
//	             requeued after a preemption finds what it saved
//	usage/       attempt-N: the simulated GPU usage file the task writes;
//	             outputs-attempt-N: $GPUFLEET_OUTPUTS_FILE, the task's
//	             report of completed work (removed when attempt N starts)
//	tmp/         $TMPDIR, where the task has no private /tmp
//	attempt-N/   pid: the supervisor's and the task's pid and start time
//	             exit.reserved: a 4 KiB placeholder written before the task
//	             starts, overwritten in place with the ending when there is
//	             no space for a new file
//	             exit: how the task ended, as JSON, written once at its end
//
// Paths are built only from the workload ID, which must match
// ^[a-z0-9-]{1,64}$, and the attempt number. The directories the task may
// write (work, checkpoint, usage, tmp) are mode 0700 and owned by its
// team's user; everything else is the server's, 0700 or 0600.
//
// # Isolation
//
// Tasks are untrusted code. By default (Options.Isolation's zero value) the
// executor confines them as far as the machine allows, and says how far in
// Isolation(), which the server shows on its node ("per-team users +
// Landlock ABI 7") and refuses to run several teams without (see the
// server's --allow-shared-uid). New probes it once by running the sandbox
// with every restriction around no program. When the server is root, each
// task runs through the sandbox (sandbox.go: this binary re-executed with
// GPUFLEET_SANDBOX=1, started by the supervisor in a mount namespace of its
// own), which, on its one locked thread, before it execs the program:
//
//  1. (in IPC and UTS namespaces of its own too) mounts an empty tmpfs on
//     /tmp and /dev/shm (private to the task), covers /run (the host's
//     service sockets) and the data directory with empty read-only tmpfs
//     and binds back the task's own directories at their usual paths (and
//     /run/nvidia-persistenced), so the store, the admin token and other
//     workloads' files do not exist in its view, and remounts /proc with
//     hidepid=invisible;
//  2. builds a Landlock ruleset (go-landlock): read and execute on the
//     read-only system paths (Isolation.ReadOnlyPaths, default /usr, /etc,
//     /proc, /sys, ...), read and write on its own directories, /tmp and
//     /dev/shm, read, write and ioctl on /dev/null and friends, the NVIDIA
//     control devices and the /dev/nvidiaN of its own GPUs only; signals
//     and abstract sockets scoped to its own domain;
//  3. drops to its team's user and group (one each per team, from
//     Isolation.UIDFirst-UIDLast, default 200000-265535, kept in
//     DataDir/team-uids.json) with no supplementary groups, which also
//     drops every capability;
//  4. sets no_new_privs and enforces the ruleset, marks every descriptor
//     but stdin, stdout and stderr close-on-exec, then execs the program
//     with the task's environment.
//
// The supervisor and the sandbox run as the server's user, so nothing the
// task controls reaches them before the drop: they start with an
// environment of one marker variable, and the task's environment
// (LD_PRELOAD and all) travels as a JSON argument, applied only by the
// final exec. The task leads a session of its own, so its main process
// cannot leave its process group (a session leader cannot), and the
// group signal of Stop always reaches it.
//
// A failure at any step is written to a close-on-exec pipe and fails the
// start. Without root but with Landlock, the sandbox applies only step 2
// (and 4), with $TMPDIR in the workload's tmp/ instead of a private /tmp:
// the files are out of reach, but tasks share the server's user. Without
// either, tasks run unconfined, as the server's user. Landlock is applied to
// the sandbox's own thread and execve passes it on, so no all-threads
// machinery is needed; the mount namespace is why the bind mounts cost
// nothing outside. Network access is not restricted (see SECURITY.md).
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
//  3. reserves the exit record (attempt-N/exit.reserved), then starts the
//     task with the argv as given (never through a shell), through the
//     sandbox when it confines tasks, in a new process group whose ID is the
//     task's pid, with stdin /dev/null and stdout and stderr on a pipe that
//     it copies to the log file the server opened for it (a write the disk
//     refuses drops that output but keeps the pipe drained);
//  4. tells the server, over a pipe on fd 3, the task's pid and start time,
//     or why exec failed; Start returns only after that;
//  5. waits for the task, kills what is left of its process group (a task
//     ends with its main process, as a container does), copies the rest of
//     the output (for at most 2 s), writes attempt-N/exit atomically (temp
//     file, fsync, rename, fsync of the directory) or, when that fails, over
//     the reservation in place, and exits.
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
// Every Exit, a Lost one and one found by Adopt included, carries the
// attempt's report of completed work: Outputs, summed from the lines the
// task wrote to $GPUFLEET_OUTPUTS_FILE ("accepted=120 rejected=3
// unit=images", one appended per batch, as core.ParseOutputs reads them),
// nil when it wrote no valid line; and OutputsMalformed, notes on what was
// skipped. The task owns that file, so the executor reads it as it would
// any untrusted input (outputs.go): opened with O_NOFOLLOW|O_NONBLOCK, only
// when fstat finds a regular file with one name (a symbolic link, a hard
// link, a FIFO or a directory is refused with a note), and at most 64 KiB
// of it (a longer file counts its whole lines up to there, with a note).
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
// working directory, LANG is C.UTF-8, GPUFLEET_CHECKPOINT_DIR its checkpoint
// directory (and TMPDIR its tmp/ where /tmp is not private), then come the
// task's own variables,
// then the platform's, which win: GPUFLEET_WORKLOAD_ID, GPUFLEET_ATTEMPT,
// CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES (GPU indices in
// assignment order; empty, hiding every device, when there are none),
// CUDA_DEVICE_ORDER=PCI_BUS_ID, GPUFLEET_GPU_UUIDS, GPUFLEET_OUTPUTS_FILE
// (see Exits) and, for a fractional request only, GPUFLEET_GPU_FRACTION
// (0.25) and GPUFLEET_GPU_MEMORY_LIMIT_MIB; GPUFLEET_SIM_USAGE_FILE too,
// for a task on simulated GPUs. Exit.At is the
// executor's clock when the end is delivered; the exit file also records the
// supervisor's wall-clock finishing time.
//
// Max runtime is not the executor's business; the control loop enforces it
// through Stop.
//
// # Imports
//
// local may import executor, core, api (for quantity formatting), the
// standard library, golang.org/x/sys and go-landlock. It must not import the store, the
// scheduler or the control loop.
package local
