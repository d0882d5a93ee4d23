package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// FractionMode is how a fractional workload gets its share of a device.
type FractionMode string

const (
	// FractionVisibleDevices (the default) hands the device gpufleet chose
	// to the container through NVIDIA_VISIBLE_DEVICES, without any
	// device-plugin resource, as KAI-Scheduler does for fractions.
	FractionVisibleDevices FractionMode = "visible-devices"
	// FractionTimeSlicing asks for one nvidia.com/gpu from a device plugin
	// configured with time-slicing replicas; the plugin picks the device.
	FractionTimeSlicing FractionMode = "time-slicing"
)

// Defaults.
const (
	DefaultNamespaceTemplate = "gpufleet-{team}"
	DefaultImage             = "nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04"
	DefaultPoolLabel         = "gpufleet.io/pool"
	DefaultRegionLabel       = "topology.kubernetes.io/region"
)

// exitBuffer is the capacity of the Exits channel.
const exitBuffer = 1024

// Options configures an Executor.
type Options struct {
	// Client talks to the cluster (Clientset builds one from a kubeconfig
	// or the pod's service account).
	Client clientset.Interface
	// NamespaceTemplate names a team's namespace; "{team}" is replaced by
	// the team's name. Default "gpufleet-{team}".
	NamespaceTemplate string
	// DefaultImage runs tasks that name no image.
	DefaultImage string
	// Fractions is how fractional workloads share a device; default
	// FractionVisibleDevices.
	Fractions FractionMode
	// PoolLabel and RegionLabel are the node labels read as a node's pool
	// and region.
	PoolLabel, RegionLabel string
	// NodeSelector, a Kubernetes label selector ("gpufleet.io/pool=a,
	// tier!=spare"), limits the nodes gpufleet sees and uses to those it
	// selects; empty means every GPU node of the cluster.
	NodeSelector string
	// PriorityClasses are gpufleet's priority classes: New makes sure the
	// PriorityClass "gpufleet-<class>" of each exists, creating the missing
	// ones with the class's value, and fails, saying what to apply, when it
	// may not.
	PriorityClasses []core.PriorityClass
	// OnNodes, when set, is called with every GPU node of the cluster
	// (sorted by name) each time one is added, changed or removed; removed
	// nodes are no longer in the list.
	OnNodes func([]core.Node)
	// LostOnNotReady makes an attempt Lost as soon as its node turns
	// NotReady or is deleted (its pods are then force-deleted, so that the
	// requeued attempt does not run twice). Default true; set
	// DisableLostOnNotReady to wait for Kubernetes' own eviction instead.
	DisableLostOnNotReady bool
	// StorageClass is the storage class of the claims gpufleet makes
	// (team volumes, checkpoints); empty means the cluster's default.
	StorageClass string
	// VolumeAccessMode is their access mode; default ReadWriteOnce (one
	// node at a time, which is what most storage classes offer).
	VolumeAccessMode string
	// PortHosts: the server's proxy serves each port at the root of a
	// host of its own (proxy.baseURL), so GPUFLEET_BASE_URL is "/".
	PortHosts bool
	// CheckpointBytes, when above 0, gives every workload a claim of
	// this size, gpufleet-ckpt-<workload>, created at its first start and
	// mounted in every attempt at $GPUFLEET_CHECKPOINT_DIR, until
	// DeleteWorkload. Zero: no checkpoint directory.
	CheckpointBytes int64
	// ReachEvery is how often the cluster's API server is checked (GET
	// /readyz); default 5 s. UnreachableAfter is how long it may fail
	// every check before the cluster is unreachable (Reachable false,
	// every node reported NotReady through OnNodes); default 30 s.
	ReachEvery, UnreachableAfter time.Duration
	// RequestTimeout bounds each Stop, and each Start whose context has
	// no deadline, so that a cluster that does not answer fails them
	// rather than holds them; default 15 s.
	RequestTimeout time.Duration
	// OnOrphans, when set, hears of the pods deleted as orphans when the
	// cluster answers again after being unreachable (each with its Err),
	// as DeleteOrphans returns them at the server's start: the server
	// records them in its audit trail.
	OnOrphans func([]Orphan)
	// StartUnreachable lets New return while the cluster's API server
	// does not answer (several clusters: the others are served
	// meanwhile): the executor is then unreachable (Reachable false;
	// Start, Stop, Logs fail with ErrUnreachable) and finishes its start
	// by itself at the first check the API server answers (reach.go).
	// Without it New fails, naming the API server, when its first check
	// is not answered.
	StartUnreachable bool
	// KnownNodes are the cluster's nodes as the server knew them before
	// (its store): until the executor's start is finished, Nodes (so
	// OnNodes) gives them, NotReady and unschedulable, so that the node
	// lifecycle handles them as those of an unreachable cluster.
	KnownNodes []core.Node
	// Fence, when set, is the fencing token of the leader lease this
	// server holds, 0 while it holds none (several servers share the
	// store: only the leader starts pods). Start refuses to create a pod
	// without a token, and labels each pod with it (LabelFence); once
	// adoption is over (DeleteOrphans), a pod that appears untracked with
	// an older token is a deposed leader's late start and is deleted, and
	// the clean-ups of orphans run only with a token.
	Fence func() int64
	// Native configures the admission of pods made with kubectl or by a
	// controller (schedulerName gpufleet): see native.go.
	Native NativeOptions
	// Dynamic reads the owners of native pods that are custom resources
	// (JobSets, PyTorchJobs); nil: their pods wait, saying so.
	Dynamic dynamic.Interface
	Logger  *slog.Logger
	// Now stamps the exits whose pod gives no finish time (Exit.At): a pod
	// deleted or stuck before its container ended, a node lost; an exit
	// with a container's FinishedAt keeps the kubelet's time. time.Now
	// when nil.
	Now func() time.Time
}

// Executor runs tasks as pods. It is safe for concurrent use.
type Executor struct {
	opts  Options
	log   *slog.Logger
	out   *executor.Outbox
	pods  corelisters.PodLister
	podIx cache.Indexer
	nodes corelisters.NodeLister

	// started is set once New's work is done (PriorityClasses made,
	// informers synced): at once, or, with Options.StartUnreachable, when
	// the cluster first answers (finishStart). Until then Nodes gives
	// Options.KnownNodes and Adopt only remembers the attempts.
	// Until then, too, the node informer's first list is not reported
	// node by node (hundreds of nodes would each report the whole fleet):
	// it is reported once, when started is set.
	started atomic.Bool
	// startInformers starts the informers and waits for their caches.
	startInformers func(ctx context.Context) error

	mu       sync.Mutex
	tasks    map[key]*attempt
	nsReady  map[string]bool
	notReady map[string]bool // nodes seen NotReady
	// orphaned holds the pods (namespace/name) being deleted as orphans
	// or late starts, until the informer sees them go: each is deleted
	// and handed to OnOrphans once, though both the return's clean-up
	// and the informer's events find it. gone then holds their UIDs, with
	// when they went, for goneFor: a clean-up whose list was read before
	// they went still finds them there.
	orphaned map[string]bool
	gone     map[types.UID]time.Time

	openLogs podLogs // nil: the API server's pod log

	// Native pods (native.go, nativebind.go); natives is nil when their
	// admission is off.
	natives    corelisters.PodLister
	reader     nativeReader
	nativeKeys map[string]key // namespace/name of a tracked native pod → its attempt
	nativeCh   chan struct{}
	// waitsShown remembers the wait last written on each native pod, so
	// that a second NativeWait before the informer sees the first one's
	// condition writes no second Event (nativebind.go).
	waitsShown shownWaits

	// Reachability (reach.go), under mu.
	unreachable bool
	lastAnswer  time.Time  // of the API server's last answer to a check
	adopted     bool       // DeleteOrphans has run: adoption is over
	reportMu    sync.Mutex // serialises OnNodes calls
}

var _ executor.Executor = (*Executor)(nil)

// key names an attempt by its workload label (the workload ID as a DNS
// label, as on the pods) and number, so that informer events find it.
type key struct {
	workload string
	attempt  int
}

func keyOf(id core.WorkloadID, attempt int) key { return key{dnsLabel(string(id)), attempt} }

// attempt is one started or adopted attempt whose end is not yet reported.
type attempt struct {
	id        core.WorkloadID
	attempt   int
	ns        string
	pods      map[string]string // pod name → node name
	ends      map[string]executor.Exit
	stopping  bool
	grace     time.Duration
	stopGrace time.Duration // Stop's grace, for a stop retried on return
	secrets   []string      // the attempt's Secrets, deleted at its end
	// pending: adopted before the executor's start was finished, its
	// pods not yet looked for (settlePendingLocked does, once they can
	// be).
	pending bool
	// native: the pods are a native workload's (Task.Native), bound by
	// gpufleet, not made by it; uids holds their UIDs by name, and
	// nodes the node each is to be bound to.
	native *core.Native
	nodes  map[string]string
}

const byWorkload = "workload"

// New checks that the cluster's API server answers (GET /readyz within
// Options.ReachEvery), makes sure the PriorityClasses of
// Options.PriorityClasses exist, starts the pod and node informers, waits
// for their caches and returns the executor. The informers stop when ctx
// ends. When the API server does not answer, New fails, naming it; with
// Options.StartUnreachable it returns the executor unreachable instead,
// which finishes that work by itself once the API server answers
// (finishStart).
func New(ctx context.Context, opts Options) (*Executor, error) {
	if opts.Client == nil {
		return nil, errors.New("kubernetes executor: no client")
	}
	opts.NamespaceTemplate = cmp.Or(opts.NamespaceTemplate, DefaultNamespaceTemplate)
	opts.DefaultImage = cmp.Or(opts.DefaultImage, DefaultImage)
	opts.Fractions = cmp.Or(opts.Fractions, FractionVisibleDevices)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.PoolLabel = cmp.Or(opts.PoolLabel, DefaultPoolLabel)
	opts.RegionLabel = cmp.Or(opts.RegionLabel, DefaultRegionLabel)
	switch opts.Fractions {
	case FractionVisibleDevices, FractionTimeSlicing:
	default:
		return nil, fmt.Errorf("kubernetes executor: fractions %q: want %q or %q", opts.Fractions, FractionVisibleDevices, FractionTimeSlicing)
	}
	if _, err := labels.Parse(opts.NodeSelector); err != nil {
		return nil, fmt.Errorf("kubernetes executor: node selector (kubernetes.nodeSelector) %q: %w", opts.NodeSelector, err)
	}
	if err := reachDefaults(&opts); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Executor{
		opts:       opts,
		log:        opts.Logger,
		out:        executor.NewOutbox(exitBuffer),
		tasks:      map[key]*attempt{},
		nsReady:    map[string]bool{},
		notReady:   map[string]bool{},
		orphaned:   map[string]bool{},
		gone:       map[types.UID]time.Time{},
		lastAnswer: time.Now(),
		nativeKeys: map[string]key{},
		nativeCh:   make(chan struct{}, 1),
	}

	// Pods: only gpufleet's, in every namespace (teams come and go).
	podFactory := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelManaged + "=true" }))
	podInf := podFactory.Core().V1().Pods()
	if err := podInf.Informer().AddIndexers(cache.Indexers{byWorkload: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Labels[LabelWorkload] == "" {
			return nil, nil
		}
		return []string{p.Labels[LabelWorkload]}, nil
	}}); err != nil {
		return nil, err
	}
	e.pods, e.podIx = podInf.Lister(), podInf.Informer().GetIndexer()
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.onPod(obj, false) },
		UpdateFunc: func(_, obj any) { e.onPod(obj, false) },
		DeleteFunc: func(obj any) { e.onPod(obj, true) },
	}); err != nil {
		return nil, err
	}

	nodeFactory := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = opts.NodeSelector }))
	nodeInf := nodeFactory.Core().V1().Nodes()
	e.nodes = nodeInf.Lister()
	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { e.onNode(obj, false) },
		UpdateFunc: func(old, obj any) {
			// Most updates are the kubelet's heartbeats, which change
			// nothing gpufleet sees of the node: hundreds of nodes
			// would otherwise report the whole fleet each.
			if !sameGPUNode(old, obj, NodeLabels{opts.PoolLabel, opts.RegionLabel}) {
				e.onNode(obj, false)
			}
		},
		DeleteFunc: func(obj any) { e.onNode(obj, true) },
	}); err != nil {
		return nil, err
	}

	factories := []informers.SharedInformerFactory{podFactory, nodeFactory}
	nf, err := e.nativeInformers()
	if err != nil {
		return nil, err
	}
	factories = append(factories, nf...)
	e.startInformers = func(ctx context.Context) error {
		for _, f := range factories {
			f.Start(ctx.Done())
		}
		for _, f := range factories {
			for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
				if !ok {
					return fmt.Errorf("kubernetes executor: %v informer did not sync", typ)
				}
			}
		}
		return nil
	}

	// The first check: a cluster that does not answer would otherwise
	// hold New in the informers' wait for as long as ctx lasts.
	if err := e.probe(ctx); err != nil {
		if !opts.StartUnreachable {
			return nil, fmt.Errorf("kubernetes executor: the cluster's API server %s does not answer (GET /readyz within %v): %w", e.apiServer(), opts.ReachEvery, err)
		}
		e.mu.Lock()
		e.unreachable = true
		e.mu.Unlock()
		e.log.Error("cluster unreachable at start: its known nodes are reported NotReady; the executor starts when its API server answers",
			"apiserver", e.apiServer(), "known_nodes", len(opts.KnownNodes), "err", err)
		e.reportNodes()
		go e.finishStart(ctx)
		return e, nil
	}
	if err := e.ensurePriorityClasses(ctx); err != nil {
		return nil, err
	}
	if err := e.mayList(ctx); err != nil {
		return nil, err
	}
	if err := e.startInformers(ctx); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.lastAnswer = time.Now() // the caches have just synced
	e.mu.Unlock()
	e.started.Store(true)
	e.reportNodes() // once for the initial list, which onNode did not report node by node
	go e.watchReach(ctx)
	return e, nil
}

// mayList lists one of the pods and one of the nodes the informers will
// watch, so that a service account not allowed to (a Forbidden answer)
// fails the start at once with the permission it lacks: the informers'
// wait for their first list would otherwise retry it for as long as ctx
// lasts, with the reason only in client-go's log.
func (e *Executor) mayList(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.opts.RequestTimeout)
	defer cancel()
	if _, err := e.opts.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=true", Limit: 1}); err != nil {
		return fmt.Errorf("kubernetes executor: list pods in every namespace: %w (the executor needs list, watch, create and delete on pods: deploy/kubernetes/rbac.yaml)", err)
	}
	if _, err := e.opts.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: e.opts.NodeSelector, Limit: 1}); err != nil {
		return fmt.Errorf("kubernetes executor: list nodes: %w (the executor needs list and watch on nodes: deploy/kubernetes/rbac.yaml)", err)
	}
	if e.opts.Native.NamespaceTeamLabel != "" {
		if _, err := e.opts.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return fmt.Errorf("kubernetes executor: list namespaces, whose label %s names their pods' team: %w (the executor needs list and watch on namespaces: deploy/kubernetes/rbac.yaml)",
				e.opts.Native.NamespaceTeamLabel, err)
		}
	}
	return nil
}

// Start implements executor.Executor: it makes sure the team's namespace
// exists and creates one pod per replica, bound to the node gpufleet chose
// (making its PriorityClass again if it was deleted since New).
// It returns once the pods exist; a program that cannot run is reported on
// Exits (StartError, ImagePullBackOff, ...), as only the kubelet knows.
func (e *Executor) Start(ctx context.Context, t executor.Task) error {
	if t.Native != nil {
		return e.startNative(ctx, t)
	}
	fail := func(err error) error { return fmt.Errorf("start %s attempt %d: %w", t.WorkloadID, t.Attempt, err) }
	switch {
	case t.WorkloadID == "":
		return fail(errors.New("empty workload ID"))
	case len(t.Command) == 0 && t.Image == "":
		return fail(errors.New("empty command and no image (the default image needs a command)"))
	}
	if err := e.unreachableErr(); err != nil {
		return fail(err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.opts.RequestTimeout)
		defer cancel()
	}
	ns := namespaceFor(e.opts.NamespaceTemplate, t.Team)
	groups := replicaAssignments(t)
	pods := make([]*corev1.Pod, len(groups))
	at := &attempt{id: t.WorkloadID, attempt: t.Attempt, ns: ns, pods: map[string]string{}, ends: map[string]executor.Exit{}, grace: t.GracePeriod}
	for r, as := range groups {
		pods[r] = buildPod(&e.opts, t, ns, r, as, len(groups))
		at.pods[pods[r].Name] = pods[r].Spec.NodeName
	}

	tok, err := e.fence()
	if err != nil {
		return fail(err)
	}
	if tok > 0 {
		for _, p := range pods {
			p.Labels[LabelFence] = strconv.FormatInt(tok, 10)
		}
	}
	k := keyOf(t.WorkloadID, t.Attempt)
	e.mu.Lock()
	if e.tasks[k] != nil {
		e.mu.Unlock()
		return fail(fmt.Errorf("attempt is already running: %w", fs.ErrExist))
	}
	// Tracked before the pods exist, so that no event about them is missed.
	e.tasks[k] = at
	e.mu.Unlock()
	untrack := func() {
		e.mu.Lock()
		if e.tasks[k] == at {
			delete(e.tasks, k)
		}
		e.mu.Unlock()
	}

	if err := e.ensureNamespace(ctx, ns); err != nil {
		untrack()
		return fail(err)
	}
	if e.opts.CheckpointBytes > 0 {
		if err := e.ensureCheckpoint(ctx, t, ns); err != nil {
			untrack()
			return fail(err)
		}
	}
	if err := e.selectNode(ctx, ns, pods[0].Spec.NodeName, e.taskClaims(t)); err != nil {
		untrack()
		return fail(err)
	}
	// The Secrets first: a pod whose Secret is missing does not start.
	secrets := buildSecrets(t, ns)
	at.secrets = secretNames(secrets)
	if err := e.createSecrets(ctx, secrets); err != nil {
		untrack()
		return fail(err)
	}
	// Gangs: gpufleet calls Start only once every replica is placed, so
	// all pods are created here together; if one cannot be, none stays.
	for i, p := range pods {
		err := e.stillLeading(tok)
		if err == nil {
			err = e.createPod(ctx, p)
		}
		if err != nil {
			untrack()
			for _, made := range pods[:i] {
				e.deletePod(context.WithoutCancel(ctx), ns, made.Name, 0)
			}
			e.deleteSecrets(context.WithoutCancel(ctx), ns, at.secrets)
			if apierrors.IsAlreadyExists(err) {
				err = fmt.Errorf("pod %s/%s: %w", ns, p.Name, fs.ErrExist)
			}
			return fail(err)
		}
	}
	if len(secrets) > 0 {
		// A backstop: the pods own the Secrets, so that they go with
		// the pods should the attempt's end never be seen here.
		if err := e.ownSecrets(ctx, ns, at.secrets, pods); err != nil {
			e.log.Warn("secrets of an attempt not owned by its pods", "workload", t.WorkloadID, "attempt", t.Attempt, "err", err)
		}
	}
	if len(t.Ports) > 0 {
		// The pods run: a Service that cannot be made is a name that
		// does not resolve, not a start that failed.
		if err := e.ensureService(ctx, t, ns); err != nil {
			e.log.Error("service of a workload", "workload", t.WorkloadID, "attempt", t.Attempt, "err", err)
		}
	}
	e.log.Info("pods created", "workload", t.WorkloadID, "attempt", t.Attempt, "namespace", ns, "pods", len(pods))
	return nil
}

func (e *Executor) ensureNamespace(ctx context.Context, ns string) error {
	e.mu.Lock()
	ready := e.nsReady[ns]
	e.mu.Unlock()
	if ready {
		return nil
	}
	nsc := e.opts.Client.CoreV1().Namespaces()
	if _, err := nsc.Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = nsc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{LabelManaged: "true"},
		}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
		e.log.Info("namespace created", "namespace", ns)
	} else if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	e.mu.Lock()
	e.nsReady[ns] = true
	e.mu.Unlock()
	return nil
}

// Stop implements executor.Executor: it deletes the attempt's pods with the
// grace period (rounded up to whole seconds): the kubelet sends SIGTERM,
// then SIGKILL once the grace has passed. The end comes on Exits when the
// pods are gone. While the cluster cannot be reached it fails at once
// (ErrUnreachable), the attempt marked stopping: its pods are deleted when
// the cluster answers again. Each call is bounded by
// Options.RequestTimeout.
func (e *Executor) Stop(ctx context.Context, id core.WorkloadID, attempt int, grace time.Duration) error {
	e.mu.Lock()
	at := e.tasks[keyOf(id, attempt)]
	var ns string
	var names []string
	pending := at != nil && at.pending
	if at != nil {
		at.stopping, at.stopGrace = true, grace
		ns = at.ns
		for name := range at.pods {
			if _, ended := at.ends[name]; !ended {
				names = append(names, name)
			}
		}
	}
	e.mu.Unlock()
	if len(names) == 0 && !pending {
		return nil
	}
	if err := e.unreachableErr(); err != nil {
		return fmt.Errorf("stop %s attempt %d: %w", id, attempt, err)
	}
	if len(names) == 0 {
		return nil // its pods are not known yet: returned deletes them once they are
	}
	ctx, cancel := e.callContext(ctx)
	defer cancel()
	var errs []error
	for _, name := range names {
		if at.native != nil {
			errs = append(errs, e.evictPod(ctx, at, name, grace))
			continue
		}
		errs = append(errs, e.deletePod(ctx, ns, name, grace))
	}
	return errors.Join(errs...)
}

func (e *Executor) deletePod(ctx context.Context, ns, name string, grace time.Duration) error {
	g := graceSeconds(grace)
	err := e.opts.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &g})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// Adopt implements executor.Executor: it finds the attempt's pods by their
// labels in the informer's cache. A pod that has already ended counts: its
// end is reported on Exits at once.
//
// Before the executor's start is finished (Options.StartUnreachable, a
// cluster that has not answered yet) the cache holds nothing: Adopt then
// remembers the attempt as expected and answers true, so that its pods
// are never taken for orphans; once the cluster answers, settlePendingLocked
// adopts its pods or, when it has none, reports it Lost on Exits.
func (e *Executor) Adopt(ctx context.Context, t executor.Task) (bool, error) {
	k := keyOf(t.WorkloadID, t.Attempt)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tasks[k] != nil {
		return true, nil
	}
	if !e.started.Load() {
		at := &attempt{id: t.WorkloadID, attempt: t.Attempt, ns: namespaceFor(e.opts.NamespaceTemplate, t.Team),
			pods: map[string]string{}, ends: map[string]executor.Exit{}, grace: t.GracePeriod, pending: true}
		if t.Native != nil {
			at.ns, at.native, at.nodes = t.Native.Namespace, t.Native.Clone(), nativeNodes(t)
		}
		e.tasks[k] = at
		e.log.Info("attempt remembered until the cluster answers; its pods are adopted then", "workload", t.WorkloadID, "attempt", t.Attempt)
		return true, nil
	}
	if t.Native != nil {
		return e.adoptNativeLocked(t), nil
	}
	pods := e.attemptPods(t.WorkloadID, t.Attempt)
	if len(pods) == 0 {
		return false, nil
	}
	at := &attempt{id: t.WorkloadID, attempt: t.Attempt, ns: pods[0].Namespace, pods: map[string]string{}, ends: map[string]executor.Exit{}, grace: t.GracePeriod}
	for _, p := range pods {
		at.pods[p.Name] = p.Spec.NodeName
		for _, s := range podSecrets(p) {
			if !slices.Contains(at.secrets, s) {
				at.secrets = append(at.secrets, s)
			}
		}
	}
	e.tasks[k] = at
	for _, p := range pods {
		e.podLocked(at, p, false)
	}
	e.log.Info("pods adopted", "workload", t.WorkloadID, "attempt", t.Attempt, "pods", len(pods))
	return true, nil
}

// attemptPods lists the cached pods of one attempt, by name.
func (e *Executor) attemptPods(id core.WorkloadID, attempt int) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range e.workloadPods(id) {
		if p.Labels[LabelAttempt] == strconv.Itoa(attempt) {
			out = append(out, p)
		}
	}
	return out
}

// workloadPods lists the cached pods of a workload, by attempt and name.
func (e *Executor) workloadPods(id core.WorkloadID) []*corev1.Pod {
	objs, err := e.podIx.ByIndex(byWorkload, dnsLabel(string(id)))
	if err != nil {
		return nil
	}
	var out []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		aa, _ := strconv.Atoi(a.Labels[LabelAttempt])
		ba, _ := strconv.Atoi(b.Labels[LabelAttempt])
		return cmp.Or(cmp.Compare(aa, ba), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Exits implements executor.Executor.
func (e *Executor) Exits() <-chan executor.Exit { return e.out.C }

// Logs implements executor.Executor: the logs of every pod of the workload
// still in the cluster, attempt after attempt, each after a header line.
// Pods deleted (stopped, lost) take their logs with them. The error wraps
// fs.ErrNotExist when the workload has no pod.
func (e *Executor) Logs(id core.WorkloadID) (io.ReadCloser, error) {
	return e.streamLogs(context.Background(), id, false, false)
}

type logReader struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (r *logReader) Close() error {
	r.cancel()
	return r.PipeReader.Close()
}

// Orphan is a pod that gpufleet made and no longer tracks.
type Orphan struct {
	Namespace, Name string
	Workload        core.WorkloadID
	Attempt         int
	// Team is the pod's team label (the team's name as a DNS label).
	Team string
	// Err is why the pod could not be deleted; nil when it was.
	Err error
}

// DeleteOrphans deletes every running or pending pod of gpufleet that is not
// tracked: neither started nor adopted since this executor began. Call it
// after the control loop has re-adopted its running workloads. Pods that
// have ended are history (their logs) and stay. Only pods in namespaces
// that this executor's namespace template makes are considered: another
// gpufleet server on the same cluster, with a template of its own, keeps
// its pods. Once it has run, the executor runs it again by itself each
// time the cluster answers after being unreachable (reach.go). Before the
// executor's start is finished (Options.StartUnreachable) nothing of the
// cluster is known: it deletes nothing then, and the orphans are deleted
// when the cluster first answers, the attempts Adopt remembered kept.
func (e *Executor) DeleteOrphans(ctx context.Context) ([]Orphan, error) {
	if !e.leading() {
		return nil, errNotLeader
	}
	if !e.started.Load() {
		// Nothing of the cluster is known yet: its orphans are
		// deleted when it answers (finishStart, returned).
		e.mu.Lock()
		e.adopted = true
		e.mu.Unlock()
		e.log.Info("orphan pods are looked for once the cluster answers")
		return nil, nil
	}
	pods, err := e.pods.List(labelsManaged())
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.adopted = true
	e.mu.Unlock()
	return e.deleteOrphans(ctx, pods)
}

// deleteOrphans deletes those of pods that DeleteOrphans calls orphans.
func (e *Executor) deleteOrphans(ctx context.Context, pods []*corev1.Pod) ([]Orphan, error) {
	var orphans []Orphan
	e.mu.Lock()
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		n, err := strconv.Atoi(p.Labels[LabelAttempt])
		if err != nil || p.Labels[LabelWorkload] == "" {
			continue
		}
		if e.tasks[key{p.Labels[LabelWorkload], n}] != nil || !ownsNamespace(e.opts.NamespaceTemplate, p.Namespace) || e.orphaned[p.Namespace+"/"+p.Name] {
			continue
		}
		if _, went := e.gone[p.UID]; went {
			continue // deleted as an orphan already: pods was read before it went
		}
		e.orphaned[p.Namespace+"/"+p.Name] = true
		orphans = append(orphans, Orphan{Namespace: p.Namespace, Name: p.Name, Workload: core.WorkloadID(p.Labels[LabelWorkload]),
			Attempt: n, Team: p.Labels[LabelTeam]})
	}
	e.mu.Unlock()
	var errs []error
	for i, o := range orphans {
		e.log.Warn("deleting orphan pod", "namespace", o.Namespace, "pod", o.Name, "workload", o.Workload, "attempt", o.Attempt)
		orphans[i].Err = e.deletePod(ctx, o.Namespace, o.Name, 0)
		errs = append(errs, orphans[i].Err)
		if orphans[i].Err != nil {
			e.unmarkOrphan(o) // to be tried again
		}
	}
	return orphans, errors.Join(errs...)
}

// goneFor is how long the UID of an orphan seen gone is kept (gone): far
// longer than a list of pods takes to read and act on.
const goneFor = 10 * time.Minute

// wentLocked records that the informer saw orphan uid go, and forgets
// those that went more than goneFor ago. Callers hold mu.
func (e *Executor) wentLocked(uid types.UID) {
	if uid == "" {
		return // not a pod the API server made
	}
	now := time.Now()
	for u, at := range e.gone {
		if now.Sub(at) > goneFor {
			delete(e.gone, u)
		}
	}
	e.gone[uid] = now
}

// unmarkOrphan forgets that an orphan is being deleted (its deletion
// failed, or the informer saw it go).
func (e *Executor) unmarkOrphan(o Orphan) {
	e.mu.Lock()
	delete(e.orphaned, o.Namespace+"/"+o.Name)
	e.mu.Unlock()
}

// errNotLeader is Start's error while this server holds no leader lease.
var errNotLeader = fmt.Errorf("this server does not hold the leader lease: %w", executor.ErrUnavailable)

// fence returns the token to label pods with (0 without Options.Fence), or
// errNotLeader.
func (e *Executor) fence() (int64, error) {
	if e.opts.Fence == nil {
		return 0, nil
	}
	if tok := e.opts.Fence(); tok > 0 {
		return tok, nil
	}
	return 0, errNotLeader
}

// stillLeading checks, before each pod is created, that the lease whose
// token tok the pods carry is still held: a leader paused between two
// creations does not go on after waking.
func (e *Executor) stillLeading(tok int64) error {
	if e.opts.Fence == nil {
		return nil
	}
	if e.opts.Fence() != tok {
		return errNotLeader
	}
	return nil
}

// leading reports whether this server may clean up pods (it holds the
// lease, or there is no lease).
func (e *Executor) leading() bool { return e.opts.Fence == nil || e.opts.Fence() > 0 }

// staleStart reports whether p, an untracked pod, is a deposed leader's
// start: it carries an older fencing token than the lease this server
// holds, adoption is over, and it has not ended. Callers hold mu.
func (e *Executor) staleStart(p *corev1.Pod) bool {
	if e.opts.Fence == nil || !e.adopted || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	f, err := strconv.ParseInt(p.Labels[LabelFence], 10, 64)
	cur := e.opts.Fence()
	return err == nil && cur > 0 && f < cur && ownsNamespace(e.opts.NamespaceTemplate, p.Namespace)
}

// onPod handles an informer event about a pod.
func (e *Executor) onPod(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n, err := strconv.Atoi(p.Labels[LabelAttempt])
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if deleted && e.orphaned[p.Namespace+"/"+p.Name] {
		delete(e.orphaned, p.Namespace+"/"+p.Name)
		e.wentLocked(p.UID)
	}
	if at := e.tasks[key{p.Labels[LabelWorkload], n}]; at != nil && at.pending {
		return // expected: settlePendingLocked adopts its pods once the caches are in
	} else if at != nil && at.ns == p.Namespace {
		e.podLocked(at, p, deleted)
		return
	}
	if !deleted && !e.orphaned[p.Namespace+"/"+p.Name] && e.staleStart(p) {
		e.orphaned[p.Namespace+"/"+p.Name] = true
		o := Orphan{Namespace: p.Namespace, Name: p.Name, Workload: core.WorkloadID(p.Labels[LabelWorkload]), Attempt: n, Team: p.Labels[LabelTeam]}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), e.opts.RequestTimeout)
			defer cancel()
			e.log.Warn("deleting a deposed leader's late pod", "namespace", o.Namespace, "pod", o.Name, "workload", o.Workload, "attempt", o.Attempt, "fence", p.Labels[LabelFence])
			o.Err = e.deletePod(ctx, o.Namespace, o.Name, 0)
			if o.Err != nil {
				e.unmarkOrphan(o)
			}
			if e.opts.OnOrphans != nil {
				e.opts.OnOrphans([]Orphan{o})
			}
		}()
	}
}

// podLocked records the end of one pod of a tracked attempt, if it has
// ended, and reports the attempt's end once it is known: the first replica
// that fails ends a gang (the others are deleted), and it succeeds when all
// its replicas have.
func (e *Executor) podLocked(at *attempt, p *corev1.Pod, deleted bool) {
	if _, ours := at.pods[p.Name]; !ours {
		return
	}
	if _, ended := at.ends[p.Name]; ended {
		return
	}
	if at.native != nil {
		e.nativePodLocked(at, p, deleted)
		return
	}
	x, ended := podEnd(p, at.stopping, deleted, e.opts.Now())
	if !ended {
		return
	}
	at.ends[p.Name] = x
	failed := x.ExitCode == nil || *x.ExitCode != 0 || x.Reason != ""
	if !failed && len(at.ends) < len(at.pods) {
		return
	}
	e.reportLocked(at, x)
}

// reportLocked delivers the end of an attempt and deletes what is left of
// it that has not ended.
func (e *Executor) reportLocked(at *attempt, x executor.Exit) {
	x.WorkloadID, x.Attempt = at.id, at.attempt
	delete(e.tasks, keyOf(at.id, at.attempt))
	e.out.Put(x)
	if at.native != nil {
		// Their owner's pods: gpufleet binds and evicts them, and
		// deletes none.
		for name := range at.pods {
			delete(e.nativeKeys, at.ns+"/"+name)
		}
		return
	}
	var rest []string
	for name := range at.pods {
		if _, ended := at.ends[name]; !ended {
			rest = append(rest, name)
		}
	}
	// A stuck pod (ImagePullBackOff) ended the attempt but still exists.
	if x.Reason != "" && x.Reason != ReasonLost {
		for name, end := range at.ends {
			if end.Reason == x.Reason && end.ExitCode == nil && end.Signal == "" {
				rest = append(rest, name)
			}
		}
	}
	if len(rest) == 0 && len(at.secrets) == 0 {
		return
	}
	go func() {
		// The Secrets go at once: an attempt that has ended needs
		// them no more (a pod being deleted has its environment and
		// its files already).
		if err := e.deleteSecrets(context.Background(), at.ns, at.secrets); err != nil {
			e.log.Error("delete secrets of an ended attempt", "err", err)
		}
		for _, name := range rest {
			if err := e.deletePod(context.Background(), at.ns, name, at.grace); err != nil {
				e.log.Error("delete pod of an ended attempt", "err", err)
			}
		}
	}()
}
