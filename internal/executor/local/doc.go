// Package local is the executor that runs tasks on this machine: as OS
// processes, with their GPUs pinned through the environment
// (CUDA_VISIBLE_DEVICES and friends), or, for a task with an image and a
// configured container runtime (Options.ContainerRuntime, podman or
// docker), in containers (container.go). It implements executor.Executor
// and the optional interfaces the server asks of it (volumes, endpoints and
// ports, log offsets, egress, probes).
//
// # The supervisor
//
// A task is never a direct child of the server. Start re-executes the
// server's own binary (os.Executable) with GPUFLEET_SHIM=1, as the
// supervisor (shim.go): in a session of its own, so that it outlives the
// server, it starts the task in a process group of its own, copies its
// output to the workload's log, waits for it, and records how it ended in
// DataDir/workloads/<id>/attempt-N/exit (written atomically, or over a
// reservation made before the start when the disk is full). Stop signals
// the task's group alone, so every ending is recorded, a SIGKILL included.
// After a restart Adopt finds the exit record, or the live supervisor
// (checked against its start time, so a reused pid is not mistaken for
// it), which it then watches through a pidfd. A supervisor gone without a
// record is an Exit with Reason "Lost". The server's service manager must
// not kill its whole cgroup on restart (systemd: KillMode=process).
//
// # Confinement
//
// Tasks are untrusted code. The executor confines them as far as the
// machine allows, probes how far once in New, and says so (Isolation()),
// which the server shows on its node and requires before it runs several
// teams. With the server as root, the supervisor starts each task through
// the sandbox (sandbox.go, this binary again with GPUFLEET_SANDBOX=1),
// which, before it execs the program:
//
//   - in mount, IPC and UTS namespaces of its own, covers the data
//     directory and /run and binds back only the task's own directories,
//     volumes, datasets (read-only) and secret files (a tmpfs), with a
//     private /tmp and /dev/shm;
//   - in a PID namespace of its own, stays as its init (pidns.go), passing
//     Stop's signals on and reaping orphans, with the namespace's /proc;
//   - in a network namespace of its own (network.go), reaches a bridge of
//     the server's through a veth, with an address from the server's slot
//     of the network range, behind the server's nftables table
//     (nftrules.go): outbound traffic NAT'ed out unless the team's or the
//     task's egress policy denies it, and nothing else of the host, nor of
//     other teams' workloads, within reach;
//   - joins a cgroup of its own attempt (cgroup.go: a memory limit, a CPU
//     quota or weight, a bound on its processes), whose OOM kill, peak
//     memory and CPU time the supervisor reads at the end;
//   - drops to its team's user and group (uids.go: one user ID a team, from local.uidRange, kept across restarts),
//     with no supplementary groups and no capabilities, sets
//     no_new_privs, and restricts itself with Landlock (go-landlock) to
//     its own paths, the read-only system paths and its own GPU devices.
//
// Where a step is refused the sandbox does what the machine allows and
// Isolation says what is missing: without root but with Landlock, only
// Landlock; without either, tasks run unconfined as the server's user.
// Mount paths are checked again here, whatever the API checked. The task's
// environment and secret files reach the sandbox as JSON on a pipe, never
// in argv.
//
// Several servers may share one host: each holds a slot (claim.go, an
// flock under ClaimDir) that gives it its own block of user IDs, its /24
// of the network range, and its bridge, nftables table and parent cgroup,
// named gpufleet<slot>; a data directory takes the same slot again.
//
// # Concurrent starts
//
// The control loop calls Start for several placements at once. What
// starts share is each claimed under a lock of its own, held for the
// claim alone, so that the slow parts (the network namespace, the
// supervisor and the sandbox) overlap: the attempt's key in the tasks
// map (Executor.mu), a team's user ID (teamIDs.mu, which records a new
// team's in team-uids.json), and a workload's address (netManager.mu),
// whose namespace and veth (named after the address) are then made
// without it. Writes of the network's state cannot overlap: network.json
// and the nftables table are each rewritten whole from every workload's
// namespace, so they are written one at a time (netManager.flushMu), a
// workload's before its task starts; and the nftables package numbers a
// transaction's sets from an unlocked counter of its own, so the process
// builds one table's transaction at a time (nftMu). The rest is the
// attempt's own: its directory, pid and exit files, cgroup (named after
// the workload and attempt), its lines in the workload's log (appended),
// and the pipes to its supervisor (close-on-exec: no other start's child
// keeps them). A port given on the host's network (no namespaces) is free
// when chosen, as with one start at a time.
//
// # Files and environment
//
// A workload's files live under DataDir/workloads/<id>/ (dirs.go): the
// log and its time index (logindex.go, for logs --since), work/ (its
// working directory and HOME), checkpoint/ ($GPUFLEET_CHECKPOINT_DIR, kept
// across attempts), usage/ (the simulated usage, outputs and metrics
// files it writes), tmp/, and attempt-N/ (pids, the exit record, ports).
// Team volumes live in DataDir/volumes/<team>/<name>/ (volumes.go). Paths
// are built only from checked IDs and names.
//
// A task sees nothing of the server's environment (env.go): the system's
// PATH, its HOME, then its own variables and secrets, then the platform's,
// which win: GPUFLEET_WORKLOAD_ID, GPUFLEET_ATTEMPT, CUDA_VISIBLE_DEVICES
// and NVIDIA_VISIBLE_DEVICES, GPUFLEET_GPU_FRACTION and
// GPUFLEET_GPU_MEMORY_LIMIT_MIB for a share, GPUFLEET_OUTPUTS_FILE,
// GPUFLEET_METRICS_FILE, GPUFLEET_STOP_FILE (stopfile.go), PORT and
// GPUFLEET_PORT_<NAME> (ports.go), GPUFLEET_SECRETS_DIR. The files a task
// writes for the platform (outputs, metrics, usage) are read as untrusted
// input (outputs.go: a regular file with one name, bounded). Max runtime
// is the control loop's business, through Stop.
//
// # Imports
//
// executor, core and api (an image reference's check, a share's
// formatting), the standard library,
// golang.org/x/sys, go-landlock, netlink, netns and nftables; never the
// store, the scheduler or the control loop.
package local
