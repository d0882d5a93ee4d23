// Package local runs tasks as OS processes on this machine, with their GPUs
// pinned through the environment (CUDA_VISIBLE_DEVICES and friends), or,
// for a task with an image and a configured container runtime, in
// containers (see Containers).
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
//	             report of completed work; metrics-attempt-N:
//	             $GPUFLEET_METRICS_FILE, its figures about itself (both
//	             removed when attempt N starts)
//	tmp/         $TMPDIR, where the task has no private /tmp
//	secrets/     the mount point of $GPUFLEET_SECRETS_DIR in the task's
//	             mount namespace (a tmpfs there; never written on the host)
//	attempt-N/   pid: the supervisor's and the task's pid and start time
//	             exit.reserved: a 4 KiB placeholder written before the task
//	             starts, overwritten in place with the ending when there is
//	             no space for a new file
//	             exit: how the task ended, as JSON, written once at its end
//	             ports.json: the host ports given to its declared ports
//	             secrets-dir: the path of its secrets directory under
//	             /dev/shm, where it has one (see Secret files)
//	             container: the name of its container, where it runs one
//
// Team volumes live apart from workloads, in DataDir/volumes/<team>/<name>/
// (mode 0700, owned by the team's user; volumes/ and volumes/<team>/ are
// the server's, 0700). EnsureVolume makes one, DeleteVolume removes it
// (os.RemoveAll, which unlinks links and never follows them), ListVolumes
// lists them, and VolumeUsage sums the sizes of its files (lstat, no link
// followed, a hard-linked file once, at most 2^20 entries). The size asked
// for is not enforced here. Start makes a volume that was never ensured
// (with the team's owner), so a task never fails for want of one.
//
// Paths are built only from the workload ID, which must match
// ^[a-z0-9-]{1,64}$, the attempt number and, for volumes, team and volume
// names that must be plain ([a-zA-Z0-9][a-zA-Z0-9._-]*). The directories the
// task may write (work, checkpoint, usage, tmp) are mode 0700 and owned by
// its team's user; everything else is the server's, 0700 or 0600.
//
// # Secret files
//
// Task.SecretFiles become $GPUFLEET_SECRETS_DIR/<secret>/<key>, mode 0400
// (directories 0500), owned by the task's user, and never touch a disk.
// In a mount namespace (the server is root) the values travel with the
// environment over the supervisor's and the sandbox's pipes; the sandbox
// mounts a tmpfs (nosuid, nodev, noexec, sized to fit) at the workload's
// secrets/ path, which exists only in the task's view of the hidden data
// directory, writes the files, remounts it read-only and only then drops
// its privileges; the tmpfs ends with the namespace. Without one (no root,
// or a container task) Start writes them in a fresh 0700 directory under
// /dev/shm (refused when that is not a tmpfs), records it in
// attempt-N/secrets-dir, and removes it when the attempt's end is
// delivered (or found by Adopt). A secret or key name that is empty, ".",
// "..", or holds '/' is refused, whatever the API checked.
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
//     workloads' files do not exist in its view; binds each of its volumes
//     (read-only when asked) and datasets (always read-only) at the path it
//     asked for, not recursively, nosuid and nodev, making the mount point
//     with MkdirAll if it is missing (which leaves an empty directory on
//     the host: the mount namespace shares the host's filesystems, only
//     its mounts are private); writes its secret files on a tmpfs of its
//     own (see Secret files); binds the task's passwd and group over the
//     system's, read-only; and mounts the /proc of its PID namespace with
//     hidepid=invisible;
//  2. stays as the namespace's init (pidns.go: it passes Stop's signals to
//     every process of the task, reaps orphans, reports how the task's
//     first process ended to the supervisor and exits then, which kills
//     whatever is left in the namespace) and starts itself again
//     (GPUFLEET_SANDBOX=1 with the argument gpufleet-sandbox-exec) as the
//     task's first process, which, on its one locked thread, before it
//     execs the program:
//  3. builds a Landlock ruleset (go-landlock): read and execute on the
//     read-only system paths (Isolation.ReadOnlyPaths, default /usr, /etc,
//     /proc, /sys, ...), its read-only volumes, datasets and secrets
//     directory; read and write on its own directories, its volumes, /tmp,
//     /dev/shm and its namespace's /proc (where a process writes its
//     thread names: CUDA's driver does, through /proc/self/task/TID/comm);
//     read, write and ioctl on /dev/null and friends, the
//     NVIDIA control devices and the /dev/nvidiaN of its own GPUs only;
//     signals and abstract sockets scoped to its own domain;
//  4. drops to its team's user and group (one each per team, from
//     Isolation.UIDFirst-UIDLast, default 200000-265535, kept in
//     DataDir/team-uids.json) with no supplementary groups, which also
//     drops every capability;
//  5. sets no_new_privs and enforces the ruleset, marks every descriptor
//     but stdin, stdout and stderr close-on-exec, then execs the program
//     with the task's environment, looking a bare name up in the task's
//     PATH as execvp does (execprog.go): as the task's user sees the files,
//     a directory it may not enter passed over.
//
// Where PID namespaces are refused, the sandbox does steps 1, 3, 4 and 5
// itself (its /proc then the host's, read-only), and Isolation says so.
//
// The supervisor and the sandbox run as the server's user, so nothing the
// task controls reaches them before the drop: they start with an
// environment of one marker variable, and the task's environment
// (LD_PRELOAD and all) and secret files travel as JSON ({"env": [...],
// "files": {...}}, at most 8 MiB) on a pipe, never in argv, which any user
// may read in /proc; the environment is applied only by the final exec.
//
// Mount paths (volumes and datasets) must be absolute and clean, free of
// ':' and ',', and must not be /, nor at or below /proc, /sys, /dev, /usr,
// /etc, /bin, /sbin, /lib*, /tmp, /run, /var/run, /boot, /gpufleet or a
// read-only system path, nor the data directory, below it or above it;
// two mounts may not nest. Start refuses others, naming the field
// ("volumes[0].path"), whatever the API checked. Volumes and datasets need
// the mount namespace: without it (the server is not root) a process task
// that has any fails to start ("volumes need the server to run as root:
// mount namespaces"). The task leads a session of its own, so its first
// process cannot join the init's process group (nor, without a PID
// namespace, leave its own, which Stop then signals).
//
// A failure at any step is written to a close-on-exec pipe and fails the
// start (a program not found or not executable as JSON, so that Start's
// error wraps exec.ErrNotFound or fs.ErrPermission). Without root but with
// Landlock, the sandbox applies only step 3 (and 5), with $TMPDIR in the
// workload's tmp/ instead of a private /tmp:
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
//     sandbox when it confines tasks (or the container runtime, for a
//     container task), in a new process group whose ID is the
//     task's pid (with a PID namespace, that of the namespace's init,
//     which Stop signals alone and which passes the signal on to every
//     process of the task), with stdin /dev/null and stdout and stderr on a pipe that
//     it copies to the log file the server opened for it (a write the disk
//     refuses drops that output but keeps the pipe drained);
//  4. tells the server, over a pipe on fd 3, the task's pid and start time,
//     or why exec failed; Start returns only after that;
//  5. waits for the task (with a PID namespace, the init's report of how
//     the task's first process ended, on sandboxStatusFD), kills what is
//     left of its process group (a task ends with its main process, as a
//     container does; the namespace's end kills it all), copies the rest of
//     the output (for at most 2 s), removes a container task's container
//     (the cleanup command of its payload), writes attempt-N/exit atomically (temp
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
// The same goes for $GPUFLEET_METRICS_FILE, JSON lines such as
// {"name":"p95_latency_ms","value":182,"unit":"ms"} read by
// core.ParseMetrics into Exit.Metrics (notes in MetricsMalformed), which
// acceptance cards judge.
//
// A program that cannot be found or executed makes Start return an error
// (wrapping exec.ErrNotFound when it is missing, fs.ErrPermission when the
// task's user may not execute it) and no Exit is delivered: the sandbox
// resolves the program, with the task's PATH, and relative to the working
// directory for names such as "./run.sh" (unconfined, Start does, as the
// server); an exec failure ("exec format error") fails Start the same way.
// The failure is also appended to the workload's log.
//
// # Environment
//
// A task sees nothing of the server's environment: PATH is the system's
// (Options.Path, DefaultPath when empty; never the server's, which may lead
// to directories only the server's user may enter), HOME its home/, USER
// and LOGNAME its user's name (per-team users only), LANG is C.UTF-8,
// GPUFLEET_CHECKPOINT_DIR its checkpoint directory (and TMPDIR its tmp/
// where /tmp is not private), then come the
// task's own variables and its secrets' (SecretEnv),
// then the platform's, which win: GPUFLEET_WORKLOAD_ID, GPUFLEET_ATTEMPT,
// CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES (GPU indices in
// assignment order; empty, hiding every device, when there are none),
// CUDA_DEVICE_ORDER=PCI_BUS_ID, GPUFLEET_GPU_UUIDS, GPUFLEET_OUTPUTS_FILE
// and GPUFLEET_METRICS_FILE (see Exits) and, for a fractional request only, GPUFLEET_GPU_FRACTION
// (0.25) and GPUFLEET_GPU_MEMORY_LIMIT_MIB; GPUFLEET_SIM_USAGE_FILE too,
// for a task on simulated GPUs; GPUFLEET_STOP_FILE (see stopfile.go);
// PORT and GPUFLEET_PORT_<N>/<NAME> for its declared ports (ports.go); and,
// when it has secret files, GPUFLEET_SECRETS_DIR. A container task gets the
// same variables with the container's paths (see Containers). Exit.At is the
// executor's clock when the end is delivered; the exit file also records the
// supervisor's wall-clock finishing time.
//
// Max runtime is not the executor's business; the control loop enforces it
// through Stop.
//
// # Containers
//
// With Options.ContainerRuntime (podman or docker; it must run as root, as
// the server does, and tasks need per-team users) a task with an Image
// runs in a container (RunsImages reports it, for the server's submit
// check); without one, a task with an image and no command is refused,
// and one with a command runs the command. The supervisor starts, instead
// of the sandbox,
//
//	<runtime> <ContainerArgs...> run --rm --name gpufleet-<id>-<attempt>
//	  --network host --user <team uid>:<gid> --cap-drop ALL
//	  --security-opt no-new-privileges --ulimit nofile=1024:1024
//	  --ulimit nproc=4096:4096 [--init] -w /workspace[/<WorkingDir>]
//	  -v <work>:/workspace -v <checkpoint>:/gpufleet/checkpoint
//	  -v <usage>:/gpufleet/usage -v <volume>:<path>[:ro]... -v <dataset>:<path>:ro...
//	  [-v <secrets under /dev/shm>:/gpufleet/secrets:ro]
//	  [--device nvidia.com/gpu=<i>... (podman, CDI) | --gpus "device=<i,...>" (docker)]
//	  -e HOME=/workspace -e NAME... <image> [command...]
//
// (no device option for simulated GPUs, Options.SimulatedUsage: there is
// no device to pass)
// and the container confines the task. Variables go by name only (-e
// NAME): the runtime reads their values from its own environment, which is
// the task's variables plus the server's PATH, so no value is in argv. A
// task may not set a variable that the runtime itself would read (PATH,
// HOME, TMPDIR, LD_*, GODEBUG, *_PROXY, CONTAINERS_*, DOCKER_*, XDG_*, ...:
// runtimeOnly in container.go): Start refuses it, as it refuses an image
// that starts with '-'. The image's PATH applies. Paths in the variables are
// the container's (GPUFLEET_CHECKPOINT_DIR=/gpufleet/checkpoint,
// GPUFLEET_OUTPUTS_FILE and GPUFLEET_STOP_FILE under /gpufleet/usage,
// GPUFLEET_SECRETS_DIR=/gpufleet/secrets), and CUDA_VISIBLE_DEVICES numbers
// the container's GPUs from 0 (NVIDIA_VISIBLE_DEVICES keeps the host's
// indices). Ports are the host's (--network host). Note that a runtime
// keeps a container's environment in its own (root-only) state while it
// exists, so a secret taken as a variable is there too; secret files are
// not.
//
// --init (docker's init; podman's catatonit, when installed) runs as PID 1
// and passes Stop's SIGTERM (sent to the runtime's process group; the
// runtime proxies it) on to the task, which then ends with status 143.
// After the grace the runtime's client is killed; the supervisor then runs
// "<runtime> rm -f [--time 0] <name>" (at most 30 s) before it records the
// ending, so no container is left; when the supervisor itself was lost,
// the executor does it (attempt-N/container names the container).
//
// # Imports
//
// local may import executor, core, api (for quantity formatting), the
// standard library, golang.org/x/sys and go-landlock. It must not import the store, the
// scheduler or the control loop.
package local
