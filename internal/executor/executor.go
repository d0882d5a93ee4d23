package executor

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Task is one attempt at running a workload on the devices it was given.
type Task struct {
	WorkloadID core.WorkloadID
	Attempt    int // 1 for the first run, 2 after one requeue, ...
	// Team owns the workload; Priority names its priority class. Executors
	// that isolate teams or pass priorities on (kubernetes) use them.
	Team     core.TeamName
	Priority string
	// Image is the container image, for executors that run containers;
	// empty means the executor's default. With an image, Command may be
	// empty (the image's entrypoint runs). The local executor runs it in a
	// container when it has a container runtime; without one (its server
	// then refuses such workloads at submit) it ignores Image, and refuses
	// a task with an image and no command.
	Image   string
	Command []string
	Env     map[string]string
	// WorkingDir is relative to the workload's own directory; empty means
	// that directory itself.
	WorkingDir  string
	Request     core.Request
	Assignments []core.Assignment
	GracePeriod time.Duration
	// Ports are the ports the workload serves on; an executor tells the
	// task where to listen (PORT, GPUFLEET_PORT_<NAME>) and the proxy
	// where to reach it (Endpoint).
	Ports []core.Port
	// SecretEnv are the opened values of the workload's secrets, added to
	// its environment at start (Env's own keys give way to them); never
	// logged or stored by an executor.
	SecretEnv map[string]string
	// SecretFiles are the opened values of the secrets the workload takes
	// as files: secret name, then key, then value. The executor writes
	// them as $GPUFLEET_SECRETS_DIR/<secret>/<key>, mode 0400, owned by
	// the task, and never on a disk it keeps (local: a tmpfs; kubernetes:
	// a Secret volume).
	SecretFiles map[string]map[string][]byte
	// Volumes are the team volumes to mount; the executor knows where
	// each lives (Volumes). Datasets are read-only host paths, resolved
	// by the server from its configuration.
	Volumes  []core.VolumeMount
	Datasets []Dataset
	// Network is the workload's network policy (core.Network): with
	// Egress deny, an executor that controls the task's network keeps it
	// from reaching anything outside the platform but Network.Allow. An
	// executor that does not control it runs the task as it would
	// otherwise (EgressEnforcer says which do).
	Network core.Network
	// Native, when set, names the pods the task stands for, which exist
	// already (made with kubectl or by a controller): the executor binds
	// replica i's pod to its node rather than make pods of its own, and
	// Stop evicts them.
	Native *core.Native
}

// EgressEnforcer is an executor that enforces a task's Network policy
// (egress deny and its allowed destinations). An executor that does not
// implement it, or answers false, carries the policy without enforcing
// it.
type EgressEnforcer interface {
	EnforcesEgress() bool
}

// Dataset is a read-only host directory mounted at Path.
type Dataset struct {
	Name     string
	HostPath string
	Path     string
}

// ErrUnavailable is what a Start wraps when the executor cannot reach where
// the task would run (an unreachable cluster): the control loop requeues
// the workload rather than fail it.
var ErrUnavailable = errors.New("the executor cannot reach where the task runs")

// ErrNoSpace is what a Start wraps when the task could not be started for
// want of disk space (its files, its supervisor's records): the control
// loop requeues the workload rather than fail it, since nothing of it ran.
var ErrNoSpace = errors.New("no space left on the disk to start the task")

// EnvSecretsDir names the directory holding a task's secret files.
const EnvSecretsDir = "GPUFLEET_SECRETS_DIR"

// Volumes is an executor that keeps team volumes (local: directories under
// its data directory; kubernetes: PersistentVolumeClaims in the team's
// namespace). The control loop reconciles them with the store: it ensures
// every stored volume, measures it, and deletes what the store no longer
// has.
type Volumes interface {
	// EnsureVolume makes the volume exist with at least size bytes; it
	// is idempotent.
	EnsureVolume(ctx context.Context, team core.TeamName, name string, sizeBytes int64) error
	// DeleteVolume removes the volume and its data; deleting one that
	// does not exist is not an error.
	DeleteVolume(ctx context.Context, team core.TeamName, name string) error
	// ListVolumes lists the volumes the executor keeps.
	ListVolumes(ctx context.Context) ([]VolumeRef, error)
	// VolumeUsage returns the bytes the volume holds, or -1 when the
	// executor cannot tell (a PVC's usage is the kubelet's).
	VolumeUsage(ctx context.Context, team core.TeamName, name string) (int64, error)
}

// VolumeRef names a volume an executor keeps.
type VolumeRef struct {
	Team core.TeamName
	Name string
}

// Exit reports that a task has ended.
type Exit struct {
	WorkloadID core.WorkloadID
	Attempt    int
	// ExitCode is the process's exit status; nil when it was killed by a
	// signal or its status could not be known.
	ExitCode *int
	// Signal names the signal that ended it, if any ("SIGKILL").
	Signal string
	// Reason is a short CamelCase word when the executor knows more than the
	// exit status ("StartError", "OOMKilled"); empty otherwise.
	Reason  string
	Message string
	At      time.Time
	// CPUSeconds and PeakMemoryBytes are what the attempt used, where the
	// executor measures it (the local executor's cgroups); 0 when unknown.
	CPUSeconds      float64
	PeakMemoryBytes int64
	// Outputs is the completed work this attempt reported (the local
	// executor: the lines it wrote to $GPUFLEET_OUTPUTS_FILE, summed by
	// core.ParseOutputs); nil when it reported nothing, so that the caller
	// can apply its default (a Succeeded job counts one "job").
	Outputs *core.Outputs
	// OutputsMalformed lists, as short notes, what of the report was
	// skipped: malformed lines, or a report that could not be read (not a
	// regular file, too large): at most core.MaxOutputsMalformed+1 notes,
	// which the caller turns into one Warning event. Empty when everything
	// was read.
	OutputsMalformed []string
	// Metrics are the figures the attempt reported about itself (the
	// local executor: $GPUFLEET_METRICS_FILE, read by core.ParseMetrics);
	// MetricsMalformed notes what of that report was skipped.
	Metrics          []core.Metric
	MetricsMalformed []string
}

// Executor runs tasks.
type Executor interface {
	// Start launches the task and returns once it is running (or failed to
	// start, with an error). Its end is reported on Exits.
	Start(ctx context.Context, t Task) error
	// Stop asks a running task to end: SIGTERM (or its equivalent), then a
	// forced kill after grace. It returns at once; the end is reported on
	// Exits. Stopping a task that is not running is not an error.
	Stop(ctx context.Context, id core.WorkloadID, attempt int, grace time.Duration) error
	// Adopt re-attaches to a task started by an earlier run of the control
	// plane. It returns true when the task is known to the executor: either
	// still running (its end will be reported on Exits) or ended with a
	// recorded result (reported on Exits soon). It returns false when nothing
	// of the task is left, so that the caller can mark it Lost.
	Adopt(ctx context.Context, t Task) (bool, error)
	// Exits delivers the end of every task started or adopted, once each.
	Exits() <-chan Exit
	// Logs opens the combined stdout and stderr of a workload, all attempts.
	Logs(id core.WorkloadID) (io.ReadCloser, error)
}

// StopAnnouncer is an executor that tells a task why it is stopped before
// it signals it (the local executor's $GPUFLEET_STOP_FILE).
type StopAnnouncer interface {
	AnnounceStop(id core.WorkloadID, attempt int, reason string) error
}
