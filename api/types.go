package api

import (
	"fmt"
	"strings"
	"time"
)

// Workload kinds.
const (
	KindJob      = "job"
	KindService  = "service"
	KindNotebook = "notebook"
)

// WorkloadKinds lists the kinds of workload, for messages.
var WorkloadKinds = []string{KindJob, KindService, KindNotebook}

// Workload phases. Pending → Running → Succeeded | Failed | Cancelled, and
// Running → Preempted | Lost → Pending (requeue). Preempted and Lost are
// recorded as events and as the reason of the requeued Pending workload.
const (
	PhasePending   = "Pending"
	PhaseRunning   = "Running"
	PhaseSucceeded = "Succeeded"
	PhaseFailed    = "Failed"
	PhaseCancelled = "Cancelled"
	PhasePreempted = "Preempted"
	PhaseLost      = "Lost"
)

// Phases are the phases a workload is in, as lists and filters name them.
var Phases = []string{PhasePending, PhaseRunning, PhaseSucceeded, PhaseFailed, PhaseCancelled}

// ParsePhase returns the phase s names, in any case ("running" is
// Running), or an error listing the phases.
func ParsePhase(s string) (string, error) {
	for _, p := range Phases {
		if strings.EqualFold(strings.TrimSpace(s), p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown phase %q: want one of %s", s, strings.Join(Phases, ", "))
}

// Workload is a unit of work a team submits: a job, a service or a notebook.
// The spec fields are set at submission and never change; Status is owned by
// the platform.
type Workload struct {
	ID       string `json:"id,omitempty"`
	Name     string `json:"name,omitempty"`
	Team     string `json:"team,omitempty"`
	Owner    string `json:"owner,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Priority string `json:"priority,omitempty"`

	Resources Resources `json:"resources"`
	// Replicas > 1 makes a gang: that many replicas, each with Resources,
	// started all together or not at all.
	Replicas int `json:"replicas,omitempty"`

	// Image is the container image, for executors that run containers
	// (kubernetes); empty means the server's default image. With an image,
	// Command may be empty: the image's entrypoint runs. A server on the
	// local executor without a container runtime (--container-runtime)
	// refuses any workload with an image (400 naming image).
	Image string `json:"image,omitempty"`
	// Command is the argv to run; it never passes through a shell.
	Command    []string          `json:"command"`
	Env        map[string]string `json:"env,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	// MaxRuntimeSeconds stops the workload (Failed, reason MaxRuntimeExceeded)
	// once it has run this long; 0 means no limit. At most 365 days
	// (31536000).
	MaxRuntimeSeconds int64 `json:"maxRuntimeSeconds,omitempty"`
	// GracePeriodSeconds is the time between SIGTERM and SIGKILL on cancel or
	// preemption; 0 means the default (30 s). At most 3600 (an hour).
	GracePeriodSeconds int64             `json:"gracePeriodSeconds,omitempty"`
	Labels             map[string]string `json:"labels,omitempty"`
	// NodeSelector limits the workload to nodes carrying these labels;
	// gpufleet.io/pool and gpufleet.io/region select a pool or a region.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Residency is the workload's data residency: the regions it may run
	// in (any of them), a hard constraint the scheduler never breaks. A
	// region no pool has is refused at submit (it could never run).
	Residency []string `json:"residency,omitempty"`
	// Ports are the ports the workload serves on (at most 8); the
	// server proxies /w/{id}/{port}/ to each, for the workload's team. A
	// notebook declares 8888 when it declares none.
	Ports []Port `json:"ports,omitempty"`
	// ReadyPath, for a workload with ports, is an HTTP path its first port
	// answers 2xx on once it is ready: until then status.ready is false
	// and the proxy sends it nothing.
	ReadyPath string `json:"readyPath,omitempty"`
	// SecretEnv names secrets of the team whose keys become environment
	// variables of the workload (at most 16).
	SecretEnv []string `json:"secretEnv,omitempty"`
	// SecretFiles names secrets of the team whose keys become files,
	// $GPUFLEET_SECRETS_DIR/<secret>/<key>, mode 0400 (at most
	// 16, with SecretEnv).
	SecretFiles []string `json:"secretFiles,omitempty"`
	// Volumes mounts team volumes (gpufleet create volume) at their
	// paths; Mounts mounts datasets, host directories the server's
	// configuration allows, read-only.
	Volumes []VolumeMount `json:"volumes,omitempty"`
	Mounts  []Mount       `json:"mounts,omitempty"`
	// Array makes the submission a job array (POST /arrays, see
	// ArraySpec); on each task, it says which array and index.
	Array *ArraySpec `json:"array,omitempty"`
	// Network says what the workload may reach beyond the platform
	// (egress); absent: what the executor allows by default.
	Network *Network `json:"network,omitempty"`
	// Native is set (by the server, never in a submission) on a workload
	// that stands for pods made on a Kubernetes cluster directly, with
	// kubectl or by a controller, with schedulerName gpufleet.
	Native *Native `json:"native,omitempty"`

	CreatedAt time.Time      `json:"createdAt,omitzero"`
	Status    WorkloadStatus `json:"status,omitzero"`
}

// Native names the Kubernetes pods a workload stands for: one per
// replica, in replica order, in one namespace, with the object that owns
// them (a Job, a JobSet, a PyTorchJob).
type Native struct {
	// Cluster is the cluster of several the pods are in; absent for the
	// server's only one.
	Cluster   string `json:"cluster,omitempty"`
	Namespace string `json:"namespace"`
	// Name is the gang's name, or the pod's for a pod alone.
	Name string `json:"name"`
	// Group says what made the pods one gang (gpufleet.io/gang,
	// pod-group-name, kueue.x-k8s.io/pod-group-name, PodGroup, owner).
	Group string       `json:"group,omitempty"`
	Pods  []string     `json:"pods"`
	Owner *NativeOwner `json:"owner,omitempty"`
}

// NativeOwner is the controller of a native workload's pods.
type NativeOwner struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// Resources is what one workload asks for. GPUs is a count (1, 2, 8) or a
// fraction below one (0.5, 0.25); GPUMemoryMiB asks for a share of one GPU by
// memory instead. The two are exclusive. Every number is bounded, per
// replica: GPUs by 8, GPUMemoryMiB by 1 TiB, CPU by 1024 and MemoryMiB by
// 16 TiB (the server refuses more, naming the field).
type Resources struct {
	GPUs         Milli    `json:"gpus"`
	GPUMemoryMiB int64    `json:"gpuMemoryMiB,omitempty"`
	GPUModels    []string `json:"gpuModels,omitempty"`
	CPU          Milli    `json:"cpu,omitempty"`
	MemoryMiB    int64    `json:"memoryMiB,omitempty"`
}

// WorkloadStatus is the platform's view of a workload.
type WorkloadStatus struct {
	Phase   string `json:"phase"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// ExitCode is set once the process has exited (null before, and for
	// workloads that never ran or were killed without an exit status).
	ExitCode    *int        `json:"exitCode"`
	Attempts    int         `json:"attempts"`
	Preemptions int         `json:"preemptions,omitempty"`
	Placement   []Placement `json:"placement"`
	StartedAt   *time.Time  `json:"startedAt,omitempty"`
	FinishedAt  *time.Time  `json:"finishedAt,omitempty"`
	// StopRequested names a stop under way (Cancelled, Preempted, ...).
	StopRequested string `json:"stopRequested,omitempty"`
	// PreemptedBy names the workload a running workload is being preempted
	// for.
	PreemptedBy string `json:"preemptedBy,omitempty"`
	// NominatedNode is the node a pending workload waits for while the
	// workloads it preempted stop.
	NominatedNode string `json:"nominatedNode,omitempty"`
	// Usage is what the last utilisation sample saw of a running
	// workload's GPUs; absent when not sampled (yet).
	Usage *WorkloadUsage `json:"usage,omitempty"`
	// Address is where the running workload is reached on the node's
	// network, where it has an address of its own (the local executor's
	// network namespaces): its team's workloads reach its declared ports
	// there.
	Address string `json:"address,omitempty"`
	// Outputs sums the completed work it reported ($GPUFLEET_OUTPUTS_FILE
	// or POST /workloads/{id}/outputs); absent when none.
	Outputs *Outputs `json:"outputs,omitempty"`
	// Ready: a running workload with a readyPath answered 2xx on it at
	// the last probe.
	Ready bool `json:"ready,omitempty"`
	// Metrics are the figures its attempts reported about themselves
	// ($GPUFLEET_METRICS_FILE, JSON lines), the last value of each name,
	// with source "workload"; acceptance cards judge them.
	Metrics []Metric `json:"metrics,omitempty"`
}

// WorkloadUsage is a running workload's sampled use of its GPUs.
type WorkloadUsage struct {
	// GPUUtilization is the mean over its GPUs, 0 to 1.
	GPUUtilization   float64   `json:"gpuUtilization"`
	GPUMemoryUsedMiB int64     `json:"gpuMemoryUsedMiB"`
	SampledAt        time.Time `json:"sampledAt"`
	// IdleSince is when its utilisation went below its idle reclaim
	// threshold (absent when it is above, or no idle rule applies).
	IdleSince *time.Time `json:"idleSince,omitempty"`
}

// Attempt is one attempt of a workload that ended: when it ran, how it
// ended (the phase it ended in: Succeeded, Failed, Cancelled, or Preempted
// and Lost for an attempt that was requeued), what it requested of its
// host, all replicas together (CPU, MemoryMiB; absent: no request), and
// what it used of it against that request.
type Attempt struct {
	Attempt        int       `json:"attempt"`
	StartedAt      time.Time `json:"startedAt"`
	FinishedAt     time.Time `json:"finishedAt"`
	RuntimeSeconds float64   `json:"runtimeSeconds"`
	Phase          string    `json:"phase"`
	Reason         string    `json:"reason,omitempty"`
	CPU            Milli     `json:"cpu,omitempty"`
	MemoryMiB      int64     `json:"memoryMiB,omitempty"`
	// Efficiency is what the attempt used; its figures are null where
	// they were not measured (the local executor measures them in each
	// attempt's cgroup; other executors do not).
	Efficiency Efficiency `json:"efficiency"`
}

// AttemptList is the answer of GET /workloads/{id}/attempts: the
// workload's attempts that ended, oldest first (a running attempt's use is
// measured when it ends), and Total, their sums.
type AttemptList struct {
	Items []Attempt  `json:"items"`
	Total Efficiency `json:"total"`
}

// Efficiency is what attempts used of the host CPU and memory they
// requested. Billing stays on requests, as a cloud bills a VM; these
// figures say how much of what was billed was used. Only what was measured
// counts: a figure is null when no attempt measured it (or, for a share,
// when none of them requested that resource), never 0.
type Efficiency struct {
	// MeasuredAttempts counts the attempts whose use was measured.
	MeasuredAttempts int64 `json:"measuredAttempts"`
	// CPUSeconds is the CPU time they used, in CPU-seconds.
	// RequestedCPUSeconds is, over those that requested CPU, their
	// request × their runtime; CPUEfficiency is the share of it they used
	// (0.1 is 10%; above 1 when they used more than they requested).
	CPUSeconds          *float64 `json:"cpuSeconds"`
	RequestedCPUSeconds *float64 `json:"requestedCPUSeconds"`
	CPUEfficiency       *float64 `json:"cpuEfficiency"`
	// PeakMemoryBytes is the highest peak of one attempt, in bytes.
	// MemoryEfficiency is, over those that requested memory, each one's
	// peak over its request, weighted by its runtime (one attempt: its
	// peak / its request).
	PeakMemoryBytes  *int64   `json:"peakMemoryBytes"`
	MemoryEfficiency *float64 `json:"memoryEfficiency"`
}

// UsageHistory is the cluster's use over time (GET /usage): one point per
// sample interval, oldest first.
type UsageHistory struct {
	Points          []UsagePoint `json:"points"`
	IntervalSeconds float64      `json:"intervalSeconds"`
}

// WorkloadUsageHistory is one workload's use of its GPUs over time (GET
// /workloads/{id}/usage): one point per sample interval while it ran,
// oldest first.
type WorkloadUsageHistory struct {
	Points          []WorkloadUsagePoint `json:"points"`
	IntervalSeconds float64              `json:"intervalSeconds"`
}

// WorkloadUsagePoint is one sample of a workload's GPUs.
type WorkloadUsagePoint struct {
	Time time.Time `json:"time"`
	// Attempt is the attempt sampled (a requeued workload has several).
	Attempt int `json:"attempt"`
	// GPUUtilization is the mean over its GPUs, 0 to 1.
	GPUUtilization   float64 `json:"gpuUtilization"`
	GPUMemoryUsedMiB int64   `json:"gpuMemoryUsedMiB"`
}

// UsagePoint is the cluster at one sample.
type UsagePoint struct {
	Time time.Time `json:"time"`
	GPUs int       `json:"gpus"`
	// AllocatedGPUs counts fractions (0.25 + 0.5 = 0.75).
	AllocatedGPUs float64 `json:"allocatedGPUs"`
	// UsedGPUs is the sum of the sampled utilisation of all GPUs.
	UsedGPUs float64 `json:"usedGPUs"`
	// IdleGPUs are the GPUs with nothing allocated.
	IdleGPUs int `json:"idleGPUs"`
	Running  int `json:"running"`
	Pending  int `json:"pending"`
	// QueueWaitSeconds is the mean wait of the workloads pending then (0
	// when none).
	QueueWaitSeconds float64 `json:"queueWaitSeconds"`
}

// Placement is one GPU share held by a running workload.
type Placement struct {
	// Replica numbers the gang replica the share belongs to (0 when the
	// workload is not a gang).
	Replica   int    `json:"replica,omitempty"`
	Node      string `json:"node"`
	GPUIndex  int    `json:"gpuIndex"`
	GPUUUID   string `json:"gpuUUID"`
	MilliGPU  int64  `json:"milliGPU"`
	MemoryMiB int64  `json:"memoryMiB"`
}

// Event records one thing that happened to a workload, phase changes
// included.
type Event struct {
	ID         int64     `json:"id"`
	WorkloadID string    `json:"workloadID"`
	Time       time.Time `json:"time"`
	Type       string    `json:"type"` // Normal or Warning
	Reason     string    `json:"reason"`
	Message    string    `json:"message,omitempty"`
	From       string    `json:"from,omitempty"`
	To         string    `json:"to,omitempty"`
}

// Node is a machine with GPUs.
type Node struct {
	Name   string `json:"name"`
	Pool   string `json:"pool,omitempty"`
	Region string `json:"region,omitempty"`
	// Zone, Cluster and PoolKind (owned, reserved, on-demand, burst) come
	// from the node's pool in the server's configuration.
	Zone      string            `json:"zone,omitempty"`
	Cluster   string            `json:"cluster,omitempty"`
	PoolKind  string            `json:"poolKind,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	CPU       Milli             `json:"cpu,omitempty"`
	MemoryMiB int64             `json:"memoryMiB,omitempty"`
	// Schedulable is true when the node takes new work: its cluster lets
	// it and its state is Ready.
	Schedulable bool `json:"schedulable"`
	// State is where the node is in its lifecycle: Registering,
	// Validating, Ready, Cordoned, Draining, Failed or Lost; StateReason
	// and StateMessage say why, since StateSince.
	State        string     `json:"state"`
	StateReason  string     `json:"stateReason,omitempty"`
	StateMessage string     `json:"stateMessage,omitempty"`
	StateSince   *time.Time `json:"stateSince,omitempty"`
	// LastQualified is when the node last passed qualification.
	LastQualified *time.Time `json:"lastQualified,omitempty"`
	// Validation is a qualification asked for and not yet run.
	Validation *NodeValidation `json:"validation,omitempty"`
	// Isolation says how the node confines workloads from the platform
	// and from each other ("per-team users + Landlock ABI 7"), with what
	// is missing in parentheses.
	Isolation string `json:"isolation,omitempty"`
	GPUs      []GPU  `json:"gpus"`
	// UpdatedAt is when the node was last reported: a local node's server
	// rewrites it every usage sample interval while it runs; a Kubernetes
	// node is rewritten when the cluster reports a change to it.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// GPU is one device of a node, with what is allocated on it now.
type GPU struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid"`
	Model     string `json:"model"`
	MemoryMiB int64  `json:"memoryMiB"`
	Simulated bool   `json:"simulated,omitempty"`
	// Domain groups devices joined by NVLink; whole-GPU workloads are
	// placed within one domain when they can be.
	Domain int `json:"domain,omitempty"`
	// Health is Healthy, Suspect (a warning; it still takes work) or
	// Failed (it takes no new work until it passes qualification);
	// HealthReason and HealthMessage say why.
	Health             string `json:"health"`
	HealthReason       string `json:"healthReason,omitempty"`
	HealthMessage      string `json:"healthMessage,omitempty"`
	AllocatedMilliGPU  int64  `json:"allocatedMilliGPU"`
	AllocatedMemoryMiB int64  `json:"allocatedMemoryMiB"`
	// Allocations lists the running workloads that hold a share of this
	// GPU and that the caller may see (its own teams'; every one for an
	// admin). The totals above count every workload.
	Allocations []GPUAllocation `json:"allocations,omitempty"`
	// Utilization (0 to 1) and MemoryUsedMiB are the last sample's;
	// absent when never sampled, and for callers other than admins when the
	// GPU holds a workload of a team they cannot see.
	Utilization   *float64 `json:"utilization,omitempty"`
	MemoryUsedMiB *int64   `json:"memoryUsedMiB,omitempty"`
	// Healthy is false when the last sample reported an error for the GPU
	// or its node is unschedulable.
	Healthy bool `json:"healthy"`
}

// GPUAllocation is one workload's share of a GPU.
type GPUAllocation struct {
	WorkloadID string `json:"workloadID"`
	Team       string `json:"team"`
	MilliGPU   int64  `json:"milliGPU"`
	MemoryMiB  int64  `json:"memoryMiB"`
}

// Team owns workloads and holds a quota in milli-GPU (1000 = one GPU). The
// server bounds the guarantee, the limit and each model guarantee by a
// million GPUs, the weight by 1000 and the number of model guarantees by
// 64.
type Team struct {
	Name string `json:"name"`
	// GuaranteedMilliGPU is what the team always gets back, by reclaim,
	// when it has demand for it.
	GuaranteedMilliGPU int64 `json:"guaranteedMilliGPU"`
	// LimitMilliGPU is the most the team may hold, borrowing included;
	// absent or -1 means unlimited.
	LimitMilliGPU *int64 `json:"limitMilliGPU,omitempty"`
	// Weight is the team's share of capacity beyond the guarantees
	// (default 1).
	Weight int64 `json:"weight,omitempty"`
	// GuaranteedByModelMilliGPU guarantees shares of GPU models ("H100":
	// 4000); a workload asking for exactly that model is within quota
	// while the team's use of it stays within this. Its sum is at most
	// GuaranteedMilliGPU.
	GuaranteedByModelMilliGPU map[string]int64 `json:"guaranteedByModelMilliGPU,omitempty"`
	// GuaranteedByPoolMilliGPU guarantees shares of pools ("onprem":
	// 8000); a workload bound to that pool (its node selector
	// gpufleet.io/pool) is within quota while the team's use there stays
	// within this. A model guarantee covering a device takes precedence.
	// Its sum is at most GuaranteedMilliGPU; its size is bounded by
	// 64 too.
	GuaranteedByPoolMilliGPU map[string]int64 `json:"guaranteedByPoolMilliGPU,omitempty"`
	// PriorityClasses the team's workloads may use; empty means every
	// preemptible class (production must be granted by name). An admin or
	// the team's team-admin sets it.
	PriorityClasses []string `json:"priorityClasses,omitempty"`
	// Residency is the regions the team's workloads run in when they name
	// none (their residency); empty: anywhere. An admin sets it.
	Residency []string `json:"residency,omitempty"`
	// Read-only, from the last scheduling cycle: what the team's running
	// workloads hold, its fair share of the capacity, and what its pending
	// workloads ask for.
	UsageMilliGPU     int64     `json:"usageMilliGPU"`
	FairShareMilliGPU int64     `json:"fairShareMilliGPU"`
	PendingMilliGPU   int64     `json:"pendingMilliGPU"`
	CreatedAt         time.Time `json:"createdAt,omitzero"`
}

// TeamQuota changes a team's quota and allowed priority classes (PATCH
// /teams/{name}); absent fields stay as they are. The bounds are Team's.
type TeamQuota struct {
	GuaranteedMilliGPU *int64 `json:"guaranteedMilliGPU,omitempty"`
	LimitMilliGPU      *int64 `json:"limitMilliGPU,omitempty"`
	Weight             *int64 `json:"weight,omitempty"`
	// GuaranteedByModelMilliGPU replaces the model guarantees when given
	// ({} removes them all; null or absent leaves them).
	GuaranteedByModelMilliGPU map[string]int64 `json:"guaranteedByModelMilliGPU,omitzero"`
	// GuaranteedByPoolMilliGPU replaces the pool guarantees when given
	// ({} removes them all; null or absent leaves them).
	GuaranteedByPoolMilliGPU map[string]int64 `json:"guaranteedByPoolMilliGPU,omitzero"`
	// PriorityClasses replaces the classes the team may use when given ([]
	// restores the default, every preemptible class; null or absent leaves
	// them). A team-admin of the team may change this field and no other.
	PriorityClasses []string `json:"priorityClasses,omitzero"`
	// Residency replaces the team's default residency when given ([]
	// removes it; null or absent leaves it). Admins only.
	Residency []string `json:"residency,omitzero"`
}

// PriorityClass is a priority workloads may name, with its rules.
type PriorityClass struct {
	Name  string `json:"name"`
	Value int    `json:"value"`
	// Preemptible is false for classes that are never preempted.
	Preemptible bool `json:"preemptible"`
	// MayBorrow allows running over the team's guarantee; a class that may
	// not borrow is admitted only within quota.
	MayBorrow bool `json:"mayBorrow"`
	// IdleOnly classes run only on idle capacity and never preempt.
	IdleOnly bool `json:"idleOnly"`
}

// User is a person or service account with an API token.
type User struct {
	Name string `json:"name"`
	// Admin manages teams, quotas, nodes and users, and acts for every
	// team.
	Admin bool `json:"admin,omitempty"`
	// ServiceAccount marks a user for pipelines and CI rather than a
	// person.
	ServiceAccount bool `json:"serviceAccount,omitempty"`
	// MetricsReader makes a service account in no team that may read GET
	// /metrics and nothing else (a scraper's; created by an admin).
	MetricsReader bool `json:"metricsReader,omitempty"`
	// Memberships are the user's teams with its role in each (viewer,
	// member, team-admin).
	Memberships []Membership `json:"memberships,omitempty"`
	// Teams, on create, makes the user a member of each (shorthand kept
	// for older clients); in answers, the teams of Memberships.
	Teams     []string  `json:"teams,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// Token is returned once, when the user is created.
	Token string `json:"token,omitempty"`
}

// Roles a user may hold in a team, weakest first: a viewer reads the team's
// workloads, logs, events and usage; a member also submits and cancels its
// workloads; a team-admin also manages its members, service accounts and
// allowed priority classes.
const (
	RoleViewer    = "viewer"
	RoleMember    = "member"
	RoleTeamAdmin = "team-admin"
)

// Membership is a user's role in one team.
type Membership struct {
	Team string `json:"team"`
	Role string `json:"role"`
}

// Token is an API token's record. The token itself (Token) is returned
// once, when it is made; only its hash is kept.
type Token struct {
	// ID names the token for listing and revoking; it is not a secret.
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// User is whom the token authenticates: on create, the caller when
	// empty; an admin may name anyone, a team-admin a service account of
	// its team.
	User      string     `json:"user,omitempty"`
	CreatedAt time.Time  `json:"createdAt,omitzero"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	// ExpiresIn, on create only, sets ExpiresAt that long from now
	// ("720h").
	ExpiresIn string `json:"expiresIn,omitempty"`
	Token     string `json:"token,omitempty"`
}

// AuditEntry is one mutating request as the audit trail keeps it: who, in
// what role, did what to which object, when, and the status answered.
type AuditEntry struct {
	ID      int64     `json:"id"`
	Time    time.Time `json:"time"`
	User    string    `json:"user"`
	Role    string    `json:"role,omitempty"`
	Action  string    `json:"action"`
	Method  string    `json:"method"`
	Path    string    `json:"path"`
	Object  string    `json:"object,omitempty"`
	Team    string    `json:"team,omitempty"`
	Status  int       `json:"status"`
	Message string    `json:"message,omitempty"`
}

// List is the envelope of every list answer. NextPageToken is set when more
// items follow; pass it back as ?pageToken= to read them.
type List[T any] struct {
	Items         []T    `json:"items"`
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// Error is the body of every error answer: {"error": {...}}.
type Error struct {
	Code    string       `json:"code"`
	Message string       `json:"message"`
	Fields  []FieldError `json:"fields,omitempty"`
}

// FieldError names one invalid field and what is wrong with it.
type FieldError struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

// ErrorBody wraps Error on the wire.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error codes carried in Error.Code.
const (
	CodeInvalid          = "invalid"            // 400 or 422
	CodeUnauthenticated  = "unauthenticated"    // 401
	CodeForbidden        = "forbidden"          // 403
	CodeNotFound         = "not_found"          // 404
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeConflict         = "conflict"           // 409
	CodeTooLarge         = "too_large"          // 413
	CodeUnprocessable    = "unprocessable"      // 422
	CodeRateLimited      = "rate_limited"       // 429: too many requests for this token
	CodeLimitReached     = "limit_reached"      // 429: too many pending workloads
	CodeInternal         = "internal"           // 500
	CodeUnavailable      = "unavailable"        // 503
	CodeIdempotency      = "idempotency_conflict"
)

// CodeNoSpace (507) says the server's disk is full: nothing was written;
// retry once an operator has freed space.
const CodeNoSpace = "insufficient_storage"

// Error implements error so that the client can return it.
func (e *Error) Error() string {
	// The server's message usually repeats the field problems on one line;
	// print them one per line instead.
	s := e.Message
	if len(e.Fields) > 0 {
		if i := strings.Index(s, ": "+e.Fields[0].Field+": "); i >= 0 {
			s = s[:i]
		}
	}
	for _, f := range e.Fields {
		s += "\n  " + f.Field + ": " + f.Problem
	}
	return s
}

// NodeEvent is one change of a node's state or of a device's health (GET
// /nodes/{name}/events).
type NodeEvent struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	// GPU is the device the event is about; absent for the node.
	GPU  *int   `json:"gpu,omitempty"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// By names the person who caused it; absent for the platform.
	By string `json:"by,omitempty"`
}

// Evidence is the record of one qualification command (GET
// /nodes/{name}/evidence): what ran (argv, no shell), what it printed
// (bounded), how long it took and what the check found.
type Evidence struct {
	Node string `json:"node"`
	Run  string `json:"run"`
	// Check names a check that is not told by its command alone:
	// "cuda-init", CUDA started in the workloads' sandbox.
	Check         string    `json:"check,omitempty"`
	GPUs          []int     `json:"gpus,omitempty"`
	Command       []string  `json:"command"`
	ExitCode      *int      `json:"exitCode"`
	Stdout        string    `json:"stdout"`
	Stderr        string    `json:"stderr"`
	Error         string    `json:"error,omitempty"`
	StartedAt     time.Time `json:"startedAt"`
	DurationMs    int64     `json:"durationMs"`
	Result        string    `json:"result"`
	Message       string    `json:"message,omitempty"`
	Simulated     bool      `json:"simulated,omitempty"`
	DriverVersion string    `json:"driverVersion,omitempty"`
	DCGMVersion   string    `json:"dcgmVersion,omitempty"`
}

// ResultLabel is the result as every view shows it: "Pass", or "Pass
// (Simulated)" for evidence of simulated devices, which is not
// qualification.
func (e *Evidence) ResultLabel() string {
	if e.Simulated {
		return e.Result + " (Simulated)"
	}
	return e.Result
}

// Drain is the body of POST /nodes/{name}/drain.
type Drain struct {
	// Grace is how long running work has to stop ("5m"); each workload's
	// own grace period when absent.
	Grace string `json:"grace,omitempty"`
}

// Validate is the body of POST /nodes/{name}/validate.
type Validate struct {
	// Level is dcgmi diag's run level, 1 (seconds) to 3 (about 15 min).
	Level int `json:"level"`
	// GPUs limits the qualification to these devices; all when absent.
	GPUs []int `json:"gpus,omitempty"`
	// Drain requeues the work running on the devices under test at once,
	// rather than wait for it to end.
	Drain bool `json:"drain,omitempty"`
}

// NodeValidation is a qualification asked for and not yet run: what it
// tests, who asked, and what it waits for and for how long (as of the
// request).
type NodeValidation struct {
	Level       int       `json:"level"`
	GPUs        []int     `json:"gpus,omitempty"`
	Drain       bool      `json:"drain,omitempty"`
	RequestedBy string    `json:"requestedBy,omitempty"`
	RequestedAt time.Time `json:"requestedAt"`
	Waits       string    `json:"waits,omitempty"`
}

// Fault is the body of POST /nodes/{name}/faults, on simulated nodes only:
// a diagnostic test that the device's next diagnostic fails, an Xid error
// now, or a lost heartbeat.
type Fault struct {
	GPU       *int   `json:"gpu,omitempty"`
	Diag      string `json:"diag,omitempty"`
	Xid       int    `json:"xid,omitempty"`
	Heartbeat string `json:"heartbeat,omitempty"` // "lost"
}

// Egress policies of a workload's network.
const (
	EgressAllow = "allow"
	EgressDeny  = "deny"
)

// Network is a workload's network policy: Egress deny keeps it from
// reaching anything outside the platform but the destinations of Allow
// (CIDRs, addresses or host names, with an optional :port). It is carried
// to the executor with each attempt (executor.Task.Network); an executor
// that controls the workload's network (a network namespace, a
// NetworkPolicy) enforces it, and the others carry it without enforcing
// it (the acceptance stage that asked for it says so).
type Network struct {
	Egress string   `json:"egress,omitempty"`
	Allow  []string `json:"allow,omitempty"`
}

// Port is a port a workload serves on, optionally named ("http").
type Port struct {
	Name string `json:"name,omitempty"`
	Port int    `json:"port"`
	// URL is where the server serves the port on a host of its own
	// ({id}-{port}.{proxy domain}), when it is configured with a proxy
	// domain (proxy.baseURL); set by the server, empty otherwise (the
	// port is at /w/{id}/{port}/ of the server's address).
	URL string `json:"url,omitempty"`
}

// Secret is a team secret (POST /teams/{team}/secrets). Data is given once,
// at creation, and never returned: answers carry the keys only.
type Secret struct {
	Name      string            `json:"name"`
	Team      string            `json:"team,omitempty"`
	Keys      []string          `json:"keys,omitempty"`
	Data      map[string]string `json:"data,omitempty"`
	CreatedAt time.Time         `json:"createdAt,omitzero"`
}

// VolumeMount mounts a team volume at an absolute path.
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Mount mounts a dataset, always read-only (ReadOnly may be given as true,
// never false).
type Mount struct {
	Dataset  string `json:"dataset"`
	Path     string `json:"path"`
	ReadOnly *bool  `json:"readOnly,omitempty"`
}

// Volume is a team's named storage, mounted by its workloads (volumes:).
// SizeBytes is what the team asked for, counted against its storage limit
// and billed; UsedBytes is what it holds at the last measure, -1 when not
// measured (yet, or on Kubernetes, where the kubelet knows).
type Volume struct {
	Team       string    `json:"team,omitempty"`
	Name       string    `json:"name"`
	SizeBytes  int64     `json:"sizeBytes"`
	UsedBytes  int64     `json:"usedBytes"`
	CreatedAt  time.Time `json:"createdAt,omitzero"`
	MeasuredAt time.Time `json:"measuredAt,omitzero"`
	// InUseBy lists the workloads not yet ended that mount it.
	InUseBy []string `json:"inUseBy,omitempty"`
}

// StorageUsage is a team's storage: the sizes of its volumes against its
// limit (-1: none).
type StorageUsage struct {
	Team       string `json:"team"`
	Volumes    int    `json:"volumes"`
	SizeBytes  int64  `json:"sizeBytes"`
	UsedBytes  int64  `json:"usedBytes"`
	LimitBytes int64  `json:"limitBytes"`
}
