package core

import (
	"slices"
	"strconv"
	"time"
)

// WorkloadID identifies a workload. TeamName and NodeName name a team and a
// node. Distinct types let the compiler catch swapped arguments.
type (
	WorkloadID string
	TeamName   string
	NodeName   string
)

// Phase is where a workload is in its lifecycle.
type Phase string

// Phases. Preempted and Lost are transient: a workload that is preempted or
// lost is requeued as Pending, with the reason kept in its status and events.
const (
	Pending   Phase = "Pending"
	Running   Phase = "Running"
	Succeeded Phase = "Succeeded"
	Failed    Phase = "Failed"
	Cancelled Phase = "Cancelled"
	Preempted Phase = "Preempted"
	Lost      Phase = "Lost"
)

// Terminal reports whether no further transition can leave p.
func (p Phase) Terminal() bool { return p == Succeeded || p == Failed || p == Cancelled }

// Kind is the sort of workload.
type Kind string

// Kinds.
const (
	KindJob      Kind = "job"
	KindService  Kind = "service"
	KindNotebook Kind = "notebook"
)

// DefaultGracePeriod is the time between SIGTERM and SIGKILL when a workload
// does not set its own.
const DefaultGracePeriod = 30 * time.Second

// Request is what one workload asks for.
//
// MilliGPU ≥ 1000 asks for MilliGPU/1000 whole devices on one node; 0 <
// MilliGPU < 1000 asks for a share of one device; GPUMemoryMiB > 0 (with
// MilliGPU 0) asks for a share of one device sized by memory, converted into
// milli-GPU with the memory of the device it lands on.
type Request struct {
	MilliGPU     int64    `json:"milliGPU"`
	GPUMemoryMiB int64    `json:"gpuMemoryMiB,omitempty"`
	GPUModels    []string `json:"gpuModels,omitempty"`
	MilliCPU     int64    `json:"milliCPU,omitempty"`
	MemoryMiB    int64    `json:"memoryMiB,omitempty"`
	// Replicas > 1 makes a gang: that many replicas, each asking for the
	// GPUs, CPU and memory above, placed all or nothing, possibly across
	// nodes. 0 and 1 mean one.
	Replicas int `json:"replicas,omitempty"`
	// NodeSelector restricts the workload to nodes with these labels
	// (including gpufleet.io/pool and gpufleet.io/region).
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Regions, when set, is the workload's data residency: it runs only
	// on nodes in one of these regions, a hard constraint.
	Regions []string `json:"regions,omitempty"`
}

// Count is the number of replicas (1 for a workload that is not a gang).
func (r Request) Count() int { return max(1, r.Replicas) }

// TotalMilliGPU is what the whole workload asks for, all replicas, when its
// GPUs are given as a count or fraction (memory requests are converted on
// the device they land on).
func (r Request) TotalMilliGPU() int64 { return r.MilliGPU * int64(r.Count()) }

// Fractional reports whether the request shares one device.
func (r Request) Fractional() bool {
	return (r.MilliGPU > 0 && r.MilliGPU < 1000) || (r.MilliGPU == 0 && r.GPUMemoryMiB > 0)
}

// WholeGPUs is the number of whole devices asked for (0 for a fraction).
func (r Request) WholeGPUs() int {
	if r.MilliGPU >= 1000 {
		return int(r.MilliGPU / 1000)
	}
	return 0
}

// Spec is what a user submits; it never changes after submission.
type Spec struct {
	Name     string   `json:"name"`
	Team     TeamName `json:"team"`
	Owner    string   `json:"owner"`
	Kind     Kind     `json:"kind"`
	Priority string   `json:"priority"`
	Request  Request  `json:"request"`
	// Image is the container image (kubernetes executor, or the local
	// one with a container runtime); empty means the executor's default.
	Image       string            `json:"image,omitempty"`
	Command     []string          `json:"command"`
	Env         map[string]string `json:"env,omitempty"`
	WorkingDir  string            `json:"workingDir,omitempty"`
	MaxRuntime  time.Duration     `json:"maxRuntime,omitempty"`
	GracePeriod time.Duration     `json:"gracePeriod,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	// Ports are the ports it serves on (see api.Workload.Ports).
	Ports []Port `json:"ports,omitempty"`
	// ReadyPath is probed on its first port (api.Workload.ReadyPath).
	ReadyPath string `json:"readyPath,omitempty"`
	// SecretEnv names team secrets whose keys become environment
	// variables at start (never stored with the workload).
	SecretEnv []string `json:"secretEnv,omitempty"`
	// SecretFiles names team secrets whose keys become files,
	// $GPUFLEET_SECRETS_DIR/<secret>/<key>, mode 0400, at start.
	SecretFiles []string `json:"secretFiles,omitempty"`
	// Volumes are team volumes mounted at their paths; Datasets are
	// host paths an administrator allows, mounted read-only.
	Volumes  []VolumeMount  `json:"volumes,omitempty"`
	Datasets []DatasetMount `json:"datasets,omitempty"`
	// Array is set on each task of a job array (one submission of many
	// tasks, each with its own index): which array, which index, and how
	// many of its tasks may run at once.
	Array *ArrayTask `json:"array,omitempty"`
	// Network is its network policy (api.Network): egress allowed or
	// denied, and the destinations allowed when denied. Zero: the
	// executor's default.
	Network Network `json:"network,omitzero"`
	// Native is set on a workload that stands for pods submitted to a
	// Kubernetes cluster directly (kubectl, a Job, a PyTorchJob) rather
	// than through gpufleet: the executor binds those pods instead of
	// making pods of its own.
	Native *Native `json:"native,omitempty"`
}

// Native names the Kubernetes pods a workload stands for: one pod per
// replica, in replica order, all in one namespace, with the object that
// owns them.
type Native struct {
	// Cluster is the cluster (core.Node.Cluster) the pods are in; empty
	// for a server with one.
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace"`
	// Name is the gang's name, or the pod's for a pod alone.
	Name string `json:"name"`
	// Group says what made the pods one gang: the label or annotation
	// ("gpufleet.io/gang", "pod-group-name", ...), "PodGroup", or
	// "owner"; empty for a pod alone.
	Group string      `json:"group,omitempty"`
	Pods  []NativePod `json:"pods"`
	// Owner is the object the pods belong to (the JobSet of a Job's
	// pods, not the Job), when they have one.
	Owner *NativeOwner `json:"owner,omitempty"`
}

// NativePod is one pod of a native workload. The UID tells it from a pod
// of the same name made again later.
type NativePod struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// NativeOwner is the controller that made a native workload's pods.
type NativeOwner struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid,omitempty"`
}

// String is "Kind/namespace/name", the value of the workload label
// LabelNativeOwner.
func (o NativeOwner) String(ns string) string { return o.Kind + "/" + ns + "/" + o.Name }

// Labels a native workload carries, so that reports group by them
// (cost --by label:gpufleet.io/owner).
const (
	LabelNativeNamespace = "gpufleet.io/namespace"
	LabelNativeOwner     = "gpufleet.io/owner"
)

// Clone returns a deep copy.
func (n *Native) Clone() *Native {
	if n == nil {
		return nil
	}
	c := *n
	c.Pods = slices.Clone(n.Pods)
	if n.Owner != nil {
		o := *n.Owner
		c.Owner = &o
	}
	return &c
}

// PodUIDs lists the UIDs of its pods.
func (n *Native) PodUIDs() []string {
	out := make([]string, len(n.Pods))
	for i, p := range n.Pods {
		out[i] = p.UID
	}
	return out
}

// Egress policies of a workload's network.
const (
	EgressAllow = "allow"
	EgressDeny  = "deny"
)

// Network is a workload's network policy, carried to the executor with
// each attempt (executor.Task.Network). Egress deny keeps the workload
// from reaching anything outside the platform but Allow's destinations
// (CIDRs, addresses or host names, each with an optional :port); empty
// Egress is the executor's default.
type Network struct {
	Egress string   `json:"egress,omitempty"`
	Allow  []string `json:"allow,omitempty"`
}

// DeniesEgress reports whether the policy denies egress.
func (n Network) DeniesEgress() bool { return n.Egress == EgressDeny }

// ArrayTask places one workload in its job array, of indices Start to End
// inclusive. A task's ID is the array's ID, "-" and its index
// (ArrayTaskID); MaxRunning > 0 caps how many of the array's tasks the
// scheduler runs at once (0: no cap).
type ArrayTask struct {
	ID         WorkloadID `json:"id"`
	Index      int        `json:"index"`
	Start      int        `json:"start"`
	End        int        `json:"end"`
	MaxRunning int        `json:"maxRunning,omitempty"`
}

// MaxArrayTasks bounds how many tasks one job array may have.
const MaxArrayTasks = 100_000

// ArrayTaskID is the ID of the task of array id with index i: the array's
// ID, "-" and the index ("wl-4pzi4zb2m4pxh5ys-7"). A dash, not Slurm's
// underscore, because workload IDs name Kubernetes pods.
func ArrayTaskID(id WorkloadID, i int) WorkloadID {
	return id + "-" + WorkloadID(strconv.Itoa(i))
}

// VolumeMount mounts the team volume Name at Path (absolute and clean).
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// DatasetMount mounts the dataset Name, a host path the server's
// configuration allows, read-only at Path.
type DatasetMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

// Volume is a team's named storage: a directory under the data directory
// on the local executor, a PersistentVolumeClaim in the team's namespace on
// Kubernetes. SizeBytes is what was asked for (and is billed); UsedBytes is
// the last measure of what it holds (-1 before the first).
type Volume struct {
	Team      TeamName  `json:"team"`
	Name      string    `json:"name"`
	SizeBytes int64     `json:"sizeBytes"`
	UsedBytes int64     `json:"usedBytes"`
	CreatedAt time.Time `json:"createdAt"`
	// MeasuredAt is when UsedBytes was measured; zero before the first.
	MeasuredAt time.Time `json:"measuredAt,omitzero"`
	// DeletedAt is when it was deleted (VolumeHistory only); zero while
	// it exists.
	DeletedAt time.Time `json:"deletedAt,omitzero"`
}

// Port is a port a workload serves on.
type Port struct {
	Name string `json:"name,omitempty"`
	Port int    `json:"port"`
}

// Grace returns the workload's grace period, or the default.
func (s *Spec) Grace() time.Duration {
	if s.GracePeriod > 0 {
		return s.GracePeriod
	}
	return DefaultGracePeriod
}

// Status is the platform's view of a workload.
type Status struct {
	Phase       Phase        `json:"phase"`
	Reason      string       `json:"reason,omitempty"`
	Message     string       `json:"message,omitempty"`
	ExitCode    *int         `json:"exitCode,omitempty"`
	Attempts    int          `json:"attempts"`
	Preemptions int          `json:"preemptions,omitempty"`
	Placement   []Assignment `json:"placement,omitempty"`
	StartedAt   *time.Time   `json:"startedAt,omitempty"`
	FinishedAt  *time.Time   `json:"finishedAt,omitempty"`
	// StopRequested is set when a stop has been asked for a running
	// workload (Cancelled, MaxRuntimeExceeded, Preempted, Reclaimed); the
	// executor is stopping it.
	StopRequested string `json:"stopRequested,omitempty"`
	// PreemptedBy names the workload a preemption is for.
	PreemptedBy WorkloadID `json:"preemptedBy,omitempty"`
	// PreemptedAt is when the scheduler last asked it to stop for another
	// workload; it outlives the requeue, so that the scheduler does not
	// start it again where it would be reclaimed at once (sched: a
	// decision is stable for MinRuntime).
	PreemptedAt *time.Time `json:"preemptedAt,omitempty"`
	// Nominated is the node a pending preemptor waits for.
	Nominated NodeName `json:"nominated,omitempty"`
	// Outputs sums the completed work the workload reported over all its
	// attempts; nil when it reported none.
	Outputs *Outputs `json:"outputs,omitempty"`
	// Ready: the running attempt answered its ReadyPath with 2xx at the
	// last probe (reset at each start).
	Ready bool `json:"ready,omitempty"`
	// Metrics are the figures its attempts reported ($GPUFLEET_METRICS_FILE),
	// the last value of each name.
	Metrics []Metric `json:"metrics,omitempty"`
}

// Workload is a submitted workload with its status.
type Workload struct {
	ID        WorkloadID `json:"id"`
	Seq       int64      `json:"seq"` // submission order, assigned by the store
	CreatedAt time.Time  `json:"createdAt"`
	Spec
	Status Status `json:"status"`
}

// Clone returns a deep copy.
func (w *Workload) Clone() *Workload {
	c := *w
	c.Request.GPUModels = slices.Clone(w.Request.GPUModels)
	c.Request.NodeSelector = cloneMap(w.Request.NodeSelector)
	c.Request.Regions = slices.Clone(w.Request.Regions)
	c.Command = slices.Clone(w.Command)
	c.Env = cloneMap(w.Env)
	c.Labels = cloneMap(w.Labels)
	c.Ports = slices.Clone(w.Ports)
	c.SecretEnv = slices.Clone(w.SecretEnv)
	c.SecretFiles = slices.Clone(w.SecretFiles)
	c.Volumes = slices.Clone(w.Volumes)
	c.Datasets = slices.Clone(w.Datasets)
	c.Network.Allow = slices.Clone(w.Network.Allow)
	c.Native = w.Native.Clone()
	if w.Array != nil {
		a := *w.Array
		c.Array = &a
	}
	c.Status.Placement = slices.Clone(w.Status.Placement)
	if w.Status.ExitCode != nil {
		v := *w.Status.ExitCode
		c.Status.ExitCode = &v
	}
	if w.Status.Outputs != nil {
		o := *w.Status.Outputs
		c.Status.Outputs = &o
	}
	c.Status.Metrics = slices.Clone(w.Status.Metrics)
	for i := range c.Status.Metrics {
		c.Status.Metrics[i].Samples = slices.Clone(c.Status.Metrics[i].Samples)
	}
	for _, t := range []**time.Time{&c.Status.StartedAt, &c.Status.FinishedAt, &c.Status.PreemptedAt} {
		if *t != nil {
			v := **t
			*t = &v
		}
	}
	return &c
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Event records one thing that happened to a workload.
type Event struct {
	ID         int64      `json:"id"`
	WorkloadID WorkloadID `json:"workloadID"`
	Time       time.Time  `json:"time"`
	Type       string     `json:"type"` // Normal or Warning
	Reason     string     `json:"reason"`
	Message    string     `json:"message,omitempty"`
	From       Phase      `json:"from,omitempty"`
	To         Phase      `json:"to,omitempty"`
}

// Event types.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)
