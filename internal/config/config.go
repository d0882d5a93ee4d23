package config

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// Config configures `gpufleet server`.
type Config struct {
	// Addr is the HTTP listen address.
	Addr string
	// DataDir holds the store, the admin token and the workloads' files.
	DataDir string
	// Store is where the state lives: empty for DATA/gpufleet.db (SQLite),
	// or a PostgreSQL URL (postgres://…) that several servers may share.
	Store string
	// ServerName names this server among those sharing a store (the
	// leader lease's holder); empty: HOSTNAME:PORT.
	ServerName string
	// AdvertiseAddr is the address the servers list shows for this server
	// (HOST:PORT others reach it at); empty: the listen address.
	AdvertiseAddr string
	// LeaseTTL is the leader lease's length: a follower takes over
	// within it when the leader dies.
	LeaseTTL time.Duration
	// FakeGPUs, when set, registers simulated GPUs instead of detecting real
	// ones: "4xH100-80GB" or "2xH100-80GB,2xA10-24GB".
	FakeGPUs string
	// Demo creates two teams and uses simulated GPUs when none are found.
	Demo bool
	// NodeName is the name this machine is registered under.
	NodeName string
	// Executor is "local" (processes on this machine) or "kubernetes"
	// (pods on a cluster, whose GPU nodes become gpufleet's nodes).
	Executor string
	// Kubernetes configures the kubernetes executor.
	Kubernetes Kubernetes
	// Local configures how the local executor confines tasks.
	Local Local
	// ResyncPeriod is how soon the control loop retries a failure and
	// reads the budget gates; without a change it runs at the latest every
	// 60 × this (the safety resync): cycles follow changes and the times
	// the plan asks for.
	ResyncPeriod time.Duration
	// MaxBodyBytes bounds request bodies.
	MaxBodyBytes int64
	// PriorityClasses are the classes workloads may use.
	PriorityClasses []PriorityClass
	// Scheduler tunes the scheduling policy.
	Scheduler Scheduler
	// Limits bound what one caller or team may ask of the server.
	Limits Limits
	// Usage configures utilisation sampling, idle reclaim and memory
	// enforcement.
	Usage Usage
	// Pool is the pool of this machine's node (DefaultPool unless set).
	Pool string
	// Cost configures prices and the currency.
	Cost Cost
	// Qualification configures the node lifecycle's qualification.
	Qualification Qualification
	// SecretsKeyFile holds the key that seals team secrets (64 hex
	// digits, mode 0600); empty means DATA/secrets.key, made at first
	// start.
	SecretsKeyFile string
	// Storage configures team volumes (limits) and datasets.
	Storage Storage
	// Proxy configures how workloads' ports are served.
	Proxy Proxy
	// ClusterList and PoolList are the clusters and pools of the
	// configuration file (clusters:, pools:); empty, the single-cluster
	// flags make one of each (Clusters, Pools). Burst says when work may
	// go to burst pools.
	ClusterList []Cluster
	PoolList    []Pool
	Burst       Burst
}

// Proxy configures the workload proxy.
type Proxy struct {
	// BaseURL, when set ("https://apps.example.com", with a wildcard DNS
	// name *.apps.example.com pointing at this server), also serves each
	// workload port at the root of a host of its own,
	// https://{id}-{port}.apps.example.com/: an origin of its own, which
	// servers such as Jupyter need. Workloads then get GPUFLEET_BASE_URL=/.
	BaseURL string `json:"baseURL,omitempty"`
}

// URL parses BaseURL (nil when unset): an http or https URL of a DNS
// name, with no path, query or user.
func (p Proxy) URL() (*url.URL, error) {
	if p.BaseURL == "" {
		return nil, nil
	}
	u, err := url.Parse(p.BaseURL)
	switch {
	case err != nil:
		return nil, err
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("want an http or https URL such as https://apps.example.com")
	case u.Hostname() == "" || net.ParseIP(u.Hostname()) != nil:
		return nil, fmt.Errorf("want a DNS name (a wildcard *.NAME pointing at this server), not %q", u.Host)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "":
		return nil, errors.New("want only a scheme and a host, such as https://apps.example.com")
	}
	u.Path = ""
	return u, nil
}

// Postgres reports whether the store is a PostgreSQL database.
func (c Config) Postgres() bool {
	return strings.HasPrefix(c.Store, "postgres://") || strings.HasPrefix(c.Store, "postgresql://")
}

// Default returns the defaults: 127.0.0.1:8080, ./.gpufleet, local executor.
func Default() Config {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "local"
	}
	return Config{
		Addr:            "127.0.0.1:8080",
		LeaseTTL:        10 * time.Second,
		DataDir:         ".gpufleet",
		NodeName:        host,
		Executor:        "local",
		ResyncPeriod:    time.Second,
		MaxBodyBytes:    1 << 20,
		PriorityClasses: DefaultPriorityClasses(),
		Scheduler: Scheduler{
			StarvationAfter:  Duration{2 * time.Minute},
			FairShareReclaim: true,
			MinRuntime:       Duration{5 * time.Minute},
		},
		Limits:        DefaultLimits(),
		Usage:         DefaultUsage(),
		Pool:          DefaultPool,
		Cost:          Cost{Currency: "USD"},
		Qualification: DefaultQualification(),
		Burst:         DefaultBurst(),
	}
}

// Kubernetes configures the kubernetes executor; empty fields take the
// executor's defaults.
type Kubernetes struct {
	// Kubeconfig is the kubeconfig file; empty means the pod's service
	// account when running in a pod, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context names the kubeconfig's context; empty: its current one.
	Context string `json:"context,omitempty"`
	// QPS and Burst bound the API client's request rate (client-go's
	// token bucket); zero: 100 and 200, suited to a dedicated controller.
	QPS   float32 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// NamespaceTemplate names a team's namespace: "gpufleet-{team}".
	NamespaceTemplate string `json:"namespaceTemplate,omitempty"`
	// DefaultImage runs workloads that name no image.
	DefaultImage string `json:"defaultImage,omitempty"`
	// Fractions is how fractional workloads share a GPU: "visible-devices"
	// (the default) or "time-slicing".
	Fractions string `json:"fractions,omitempty"`
	// PoolLabel and RegionLabel are the node labels read as pool and
	// region.
	PoolLabel   string `json:"poolLabel,omitempty"`
	RegionLabel string `json:"regionLabel,omitempty"`
	// NodeSelector is a Kubernetes label selector ("gpufleet.io/pool=a");
	// only the GPU nodes it selects become gpufleet's nodes. Empty: all.
	NodeSelector string `json:"nodeSelector,omitempty"`
	// StorageClass and VolumeAccessMode shape the PersistentVolumeClaims
	// of team volumes and checkpoints; empty: the cluster's default class,
	// ReadWriteOnce.
	StorageClass     string `json:"storageClass,omitempty"`
	VolumeAccessMode string `json:"volumeAccessMode,omitempty"`
	// CheckpointSize, when set ("50GiB"), gives every workload a
	// checkpoint claim of that size, kept across its attempts; empty: pods
	// get no GPUFLEET_CHECKPOINT_DIR.
	CheckpointSize string `json:"checkpointSize,omitempty"`
	// PodNetwork: this server reaches pod IPs (it runs in the cluster),
	// so its proxy, port-forward and readiness probes reach workloads'
	// ports. Nil: true when it runs in a pod (KUBERNETES_SERVICE_HOST is
	// set).
	PodNetwork *bool `json:"podNetwork,omitempty"`
	// Native admits pods made with kubectl or by a controller whose
	// spec.schedulerName is gpufleet's (docs/KUBERNETES.md).
	Native Native `json:"native,omitzero"`
}

// Native configures the admission of native pods: pods that ask gpufleet
// to place them (spec.schedulerName) without going through its API.
type Native struct {
	// Disabled leaves such pods alone (they stay Pending).
	Disabled bool `json:"disabled,omitempty"`
	// SchedulerName is the schedulerName that selects them; default
	// "gpufleet".
	SchedulerName string `json:"schedulerName,omitempty"`
	// TeamLabels are the pod labels read, in order, as a pod's team;
	// default gpufleet.io/team, kueue.x-k8s.io/queue-name,
	// kai.scheduler/queue.
	TeamLabels []string `json:"teamLabels,omitempty"`
	// TeamAliases maps a value of those labels (a Kueue LocalQueue, a
	// KAI queue) to a team; a value not in it is the team's name.
	TeamAliases map[string]string `json:"teamAliases,omitempty"`
	// NamespaceTeamLabel is the namespace label naming the team of the
	// namespace's pods that name none; default gpufleet.io/team.
	NamespaceTeamLabel string `json:"namespaceTeamLabel,omitempty"`
}

// DefaultSchedulerName is the schedulerName of native pods by default.
const DefaultSchedulerName = "gpufleet"

// Scheduler is the scheduler name native pods carry; empty when their
// admission is off.
func (n Native) Scheduler() string {
	if n.Disabled {
		return ""
	}
	return cmp.Or(n.SchedulerName, DefaultSchedulerName)
}

// TeamLabel is the namespace label that names a team.
func (n Native) TeamLabel() string { return cmp.Or(n.NamespaceTeamLabel, "gpufleet.io/team") }

// schedulerNameRE is what a schedulerName may be (a DNS subdomain, as
// the API server wants; also safe in a field selector).
var schedulerNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// labelKeyRE is a Kubernetes label key: an optional DNS prefix and a name.
var labelKeyRE = regexp.MustCompile(`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

func (n Native) validate() []error {
	var errs []error
	if n.SchedulerName != "" && !schedulerNameRE.MatchString(n.SchedulerName) {
		errs = append(errs, fmt.Errorf("kubernetes.native.schedulerName %q: want a DNS subdomain (lowercase letters, digits, '-' and '.')", n.SchedulerName))
	}
	for _, k := range append(slices.Clone(n.TeamLabels), n.NamespaceTeamLabel) {
		if k != "" && !labelKeyRE.MatchString(k) {
			errs = append(errs, fmt.Errorf("kubernetes.native: %q is not a label key", k))
		}
	}
	return errs
}

// ReachesPods reports whether the server can reach pod IPs (PodNetwork).
func (k Kubernetes) ReachesPods() bool {
	if k.PodNetwork != nil {
		return *k.PodNetwork
	}
	return os.Getenv("KUBERNETES_SERVICE_HOST") != ""
}

// CheckpointBytes is CheckpointSize in bytes (0: none).
func (k Kubernetes) CheckpointBytes() int64 {
	if k.CheckpointSize == "" {
		return 0
	}
	b, _ := quantity.ParseSizeBytes(k.CheckpointSize)
	return b
}

func (k Kubernetes) validate() []error {
	var errs []error
	switch k.Fractions {
	case "", "visible-devices", "time-slicing":
	default:
		errs = append(errs, fmt.Errorf("kubernetes.fractions %q: want \"visible-devices\" or \"time-slicing\"", k.Fractions))
	}
	switch k.VolumeAccessMode {
	case "", "ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod":
	default:
		errs = append(errs, fmt.Errorf("kubernetes.volumeAccessMode %q: want ReadWriteOnce, ReadWriteMany or ReadWriteOncePod", k.VolumeAccessMode))
	}
	if k.CheckpointSize != "" {
		if _, err := quantity.ParseSizeBytes(k.CheckpointSize); err != nil {
			errs = append(errs, fmt.Errorf("kubernetes.checkpointSize %q: %w", k.CheckpointSize, err))
		}
	}
	if k.QPS < 0 || k.QPS > 100000 || k.Burst < 0 || k.Burst > 100000 {
		errs = append(errs, fmt.Errorf("kubernetes.qps %g and kubernetes.burst %d: want 0 (the default) to 100000", k.QPS, k.Burst))
	}
	if k.NamespaceTemplate != "" && !strings.Contains(k.NamespaceTemplate, "{team}") {
		errs = append(errs, fmt.Errorf("kubernetes.namespaceTemplate %q: want {team} in it", k.NamespaceTemplate))
	}
	return append(errs, k.Native.validate()...)
}

// DemoFakeGPUs is what --demo simulates when the machine has no GPUs.
const DemoFakeGPUs = "4xH100-80GB"

// Validate checks the configuration and returns every problem.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("--addr %q: want HOST:PORT", c.Addr))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("--data must not be empty"))
	}
	if c.LeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("leaseTTL %s: want at least 1s", c.LeaseTTL))
	}
	if strings.HasPrefix(c.Store, "postgres") && !strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") {
		errs = append(errs, fmt.Errorf("--store: want a URL such as postgres://user@host:5432/gpufleet, or a SQLite file's path"))
	}
	if c.Postgres() && c.SecretsKeyFile == "" {
		errs = append(errs, errors.New("secretsKeyFile: a PostgreSQL store needs the secrets key in a file every server reads (the same 64 hex digits): set secretsKeyFile (or --secrets-key-file)"))
	}
	if c.FakeGPUs != "" {
		if _, err := ParseFakeGPUs(c.FakeGPUs); err != nil {
			errs = append(errs, fmt.Errorf("--fake-gpus: %w", err))
		}
	}
	switch c.Executor {
	case "local":
	case "kubernetes":
		errs = append(errs, c.Kubernetes.validate()...)
	default:
		errs = append(errs, fmt.Errorf("--executor %q: want \"local\" or \"kubernetes\"", c.Executor))
	}
	if c.ResyncPeriod <= 0 {
		errs = append(errs, errors.New("resync period must be positive"))
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, errors.New("max body size must be positive"))
	}
	if err := validateClasses(c.PriorityClasses); err != nil {
		errs = append(errs, err)
	}
	if c.Scheduler.StarvationAfter.Duration < 0 || c.Scheduler.MinRuntime.Duration < 0 {
		errs = append(errs, errors.New("scheduler: durations must not be negative"))
	}
	errs = append(errs, c.Limits.validate()...)
	errs = append(errs, c.Usage.validate()...)
	errs = append(errs, c.Local.validate()...)
	errs = append(errs, c.Cost.validate()...)
	errs = append(errs, c.Qualification.validate()...)
	errs = append(errs, c.Storage.validate()...)
	errs = append(errs, c.validateClusters()...)
	if _, err := c.Proxy.URL(); err != nil {
		errs = append(errs, fmt.Errorf("proxy.baseURL %q: %w", c.Proxy.BaseURL, err))
	}
	if c.Pool == "" || len(c.Pool) > 63 || strings.ContainsAny(c.Pool, " \t\n/\\\"'") {
		errs = append(errs, fmt.Errorf("pool %q: want a name of at most 63 characters without spaces, slashes or quotes", c.Pool))
	}
	return errors.Join(errs...)
}
