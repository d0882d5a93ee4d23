// Package kubernetes runs gpufleet's tasks as pods on a Kubernetes cluster.
// gpufleet stays the scheduler (quotas, fair share, preemption, fractions);
// Kubernetes runs the containers. It is the only package of gpufleet that
// imports Kubernetes libraries (client-go, informers; no polling); it
// imports client-go's own kubernetes package as clientset, and of
// gpufleet's packages only executor and core.
//
// # Pods
//
// Each attempt becomes one pod per replica (a gang of N replicas is N pods,
// created together, and only once gpufleet has placed all of them), in the
// team's namespace ("gpufleet-{team}" by default, Options.NamespaceTemplate;
// created on first use and labelled gpufleet.io/managed=true). A pod runs
// the task's image (Options.DefaultImage when it names none) with the argv
// as the container's command (no shell; a task with an image and no argv
// runs the image's own entrypoint), restartPolicy Never, the task's
// grace period as terminationGracePeriodSeconds, the PriorityClass
// "gpufleet-<class>" (New creates each one the cluster lacks, with the
// class's value and preemptionPolicy Never, or fails saying what to apply
// when it may not; Start makes one deleted since again; deploy/kubernetes
// creates the four default ones too), and
// the labels gpufleet.io/managed, workload, attempt, replica and team. The
// annotations record the devices gpufleet chose (gpufleet.io/gpu-uuids,
// gpu-indexes, milli-gpu, node).
//
// # Ports and Services
//
// A task's ports become the container's ports (named after the port's name
// made a valid Kubernetes port name: lowercase, [a-z0-9-], at most 15
// characters; unnamed when nothing valid is left) and the local
// executor's variables: PORT (the first port), GPUFLEET_PORT_<n> and
// GPUFLEET_PORT_<NAME> for each, GPUFLEET_BASE_URL (/w/{id}/{port}/). A pod
// has a network of its own, so each variable holds the port declared.
// Endpoint(id, attempt, port) gives the proxy "podIP:port" of the
// attempt's replica 0 once it is Running with an IP, read from the
// informer's cache; it is of use when gpufleet runs where pod IPs are
// routed (in the cluster). The Executor carries no workload kind, so every
// task with ports (notebooks, services alike) gets a ClusterIP Service in
// its namespace, "gpufleet-<workload>", one per workload: each Start points
// its selector at the new attempt's replica 0 (labels workload, attempt,
// replica), so that <service>.<namespace>.svc survives requeues. It is
// kept across attempts and removed by DeleteWorkload. A Service that
// cannot be made or updated is logged, not a failed start.
//
// # Secrets
//
// Secret values never go into the pod: Start creates, before the pods, a
// Secret "gpufleet-<workload>-<attempt>-env" holding Task.SecretEnv, which
// the container takes through envFrom (a task's own Env variable of the
// same name is dropped, since env would win over envFrom), and a Secret
// "gpufleet-<workload>-<attempt>-files" holding Task.SecretFiles, mounted
// read-only at /var/run/gpufleet/secrets ($GPUFLEET_SECRETS_DIR) with one
// item per file, <secret>/<key>, mode 0400 (the Secret's own keys are f0,
// f1, ...: a secret's name and key together need not be a valid data key).
// Secret volumes are the kubelet's tmpfs, never the node's disk. The files
// belong to root: an image that runs as another user cannot read them
// (a pod fsGroup would share them, but the kubelet then makes them
// group-readable, so gpufleet sets none). The Secrets live as
// long as the attempt: they are deleted when its end is reported (a pod
// kept for its logs keeps no Secret), or when a start fails half-way; as a
// backstop, the pods are made their owners, so that the garbage collector
// deletes them with the pods (an orphan deleted after a restart, pods
// garbage-collected while no server ran). An adopted attempt's Secrets are
// found from its pod's envFrom and volumes.
//
// # Volumes, datasets and checkpoints
//
// Executor implements executor.Volumes with PersistentVolumeClaims in the
// team's namespace: EnsureVolume creates "gpufleet-vol-<name>" (labels
// gpufleet.io/managed, team, volume; the exact names in annotations
// gpufleet.io/team-name and volume-name) asking for the size, with
// Options.VolumeAccessMode (ReadWriteOnce by default) and
// Options.StorageClass (the cluster's default when empty); an existing
// claim that asks for less is expanded, which the storage class must allow
// and only a bound claim accepts. DeleteVolume deletes the claim (and, by
// the usual reclaim policy, the data); ListVolumes lists the claims in the
// namespaces of this executor's template, not those being deleted;
// VolumeUsage is -1, since only the kubelet knows what a claim holds.
// Task.Volumes mount their claims at their paths (read-only when asked);
// Task.Datasets are hostPath volumes (type Directory) mounted read-only.
//
// Checkpoints: with Options.CheckpointBytes above zero, Start creates at a workload's
// first attempt a claim "gpufleet-ckpt-<workload>" of that size, mounted in
// every attempt at /var/run/gpufleet/checkpoint and named by
// GPUFLEET_CHECKPOINT_DIR, so that an attempt after a requeue finds what
// the last one saved; DeleteWorkload deletes it once the workload is done.
// With CheckpointBytes zero a pod gets no GPUFLEET_CHECKPOINT_DIR at all:
// an emptyDir would not survive the attempt, and a variable naming one
// would promise what it does not keep.
//
// gpufleet binds its pods itself (below), so no kube-scheduler marks the
// node where a WaitForFirstConsumer claim is to be provisioned: Start sets
// the claims' volume.kubernetes.io/selected-node to the pod's node, as the
// scheduler would, while they are Pending and unbound. A ReadWriteOnce
// claim is attached to one node at a time: a gang whose replicas sit on
// several nodes needs ReadWriteMany storage for its volumes and
// checkpoints, or its other pods wait in ContainerCreating.
//
// # Binding: spec.nodeName, not a scheduler of our own
//
// gpufleet has already decided where the pod runs, so the pod is created
// with spec.nodeName set to that node: kube-scheduler never sees it, and
// the kubelet of that node admits and runs it directly. A custom
// schedulerName with a Binding would work too, but costs a second API call
// per pod and a component that only echoes a decision already taken.
// The trade-off: nothing re-checks the placement before the kubelet does.
// Kubelet admission may still reject the pod (not enough nvidia.com/gpu
// left because of pods gpufleet does not know about, a NoExecute taint put
// on the node after gpufleet chose it, a node selector mismatch): the pod
// then fails with a reason such as
// OutOfnvidia.com/gpu or UnexpectedAdmissionError, and that reason is the
// attempt's exit. Pods with nodeName also skip kube-scheduler's preemption,
// which is what we want: preemption is gpufleet's.
//
// # Native pods
//
// Pods that gpufleet did not make, made with kubectl or by a controller,
// whose spec.schedulerName is Options.Native.SchedulerName ("gpufleet"),
// are gpufleet's to place (docs/KUBERNETES.md). A second pod informer
// (field selector spec.schedulerName; pods labelled gpufleet.io/managed
// are left out) watches them, and NativeSubmissions groups those that
// wait (unbound, not being deleted, held by no workload) into
// submissions (native.go): a pod alone or a gang, by gpufleet.io/gang,
// an upstream PodGroup (spec.schedulingGroup), KAI's pod-group-name,
// Kueue's pod-group labels, or the pod's owner (a Job, a JobSet's Job, a
// PyTorchJob, read with a few seconds' cache: nativelookup.go); each with
// its team, class and GPUs, or the wait that names what is wrong. The
// executor decides nothing: control.NativeAdmission admits them.
//
// A task with Task.Native is started by binding its pods, replica i's to
// its node, with the Binding subresource and the pod's UID as a
// precondition (nativebind.go), and a Scheduled Event; a pod bound there
// already is left as it is, so that a start cut short and retried, or an
// adoption, binds nothing twice. Stop evicts the pods (the Eviction API:
// PodDisruptionBudgets hold, and a refused eviction fails the Stop, which
// the loop retries), after ExplainStop's Event says why. Such an attempt
// ends when all its pods have: by their phase, by the eviction, or
// deleted by someone else (ReasonPodDeleted); gpufleet never deletes
// them, whether an attempt fails or its node is lost. NativeWait writes a
// waiting pod's PodScheduled=False condition and an Event, unless the
// condition says so already (a restart writes no Event twice).
//
// # GPUs
//
// Whole GPUs are asked of the NVIDIA device plugin as
// resources.limits["nvidia.com/gpu"] = count. The kubelet's device manager
// picks which devices of the node; gpufleet accounts devices per node, so
// the count always agrees, but the exact devices may differ from the
// annotation. The plugin does not publish device UUIDs, so gpufleet names a
// node's devices "<node>/gpu<i>".
//
// Fractional workloads (Options.Fractions):
//
//   - "visible-devices" (default), as KAI-Scheduler does for fractions: the
//     pod asks the device plugin for nothing; gpufleet's own choice of device
//     is passed as NVIDIA_VISIBLE_DEVICES=<index>, with the share in
//     GPUFLEET_GPU_FRACTION and its memory in GPUFLEET_GPU_MEMORY_LIMIT_MIB.
//     Isolation limits: none is enforced. The memory limit is advisory (a
//     process that allocates more takes it from its neighbours, and one of
//     them hits out-of-memory); compute is shared by time-slicing in the
//     driver, without a quota. The kubelet does not count these pods against
//     nvidia.com/gpu, and the device plugin, not gpufleet, picks the devices
//     of a whole-GPU pod: a whole-GPU pod (gpufleet's own included) may be
//     given a device that fractions use, while gpufleet counts it on another.
//     KAI-Scheduler closes this gap with a reservation pod per shared device
//     that holds it in the device plugin and reports its UUID; gpufleet does
//     not do that yet. Until it does, keep fractions and whole GPUs on
//     different nodes (a pool for each, chosen with nodeSelector) or use
//     "time-slicing". It needs the NVIDIA
//     container toolkit to honour the variable for unprivileged containers
//     (accept-nvidia-visible-devices-envvar-when-unprivileged, which some GPU
//     operator versions turn off).
//   - "time-slicing": the pod asks for one nvidia.com/gpu from a device
//     plugin configured with time-slicing replicas; the plugin picks the
//     device, and the isolation is that of time-slicing (none for memory).
//
// # Status
//
// A pod informer (only pods labelled gpufleet.io/managed=true, every
// namespace) reports each attempt's end once on Exits: Succeeded or Failed
// with the container's exit code; the reason when Kubernetes gives one
// (OOMKilled, Evicted, StartError, ImagePullBackOff, InvalidImageName,
// admission rejections). A container stuck in ImagePullBackOff or another
// waiting reason that needs a change to the pod ends the attempt, and its
// pod is deleted. A gang ends with its first failed replica (the others are
// deleted) or succeeds when all have. A pod deleted by anyone but Stop ends
// the attempt as Lost, which the control loop requeues; so does a node that
// turns NotReady or is deleted (the node informer sees it; its pods are
// force-deleted so that the requeued attempt cannot run twice; set
// Options.DisableLostOnNotReady to leave it to Kubernetes' eviction).
//
// Stop deletes the pods with the grace period, rounded up to seconds: the
// kubelet sends SIGTERM, then SIGKILL. Exit codes 143 and 137 of a pod being
// stopped read as those signals.
//
// Pods that have ended are kept, so that Logs can read them; they hold no
// resources. Logs streams the logs of every pod of the workload still in
// the cluster, attempt after attempt. A pod's log cannot be followed by
// reading it again as a file can, so FollowLogs (the API server's
// LogFollower, behind `gpufleet logs -f` and the portal's live log) reads
// the earlier attempts whole and follows the latest attempt's pods with
// Follow: true, waiting for containers that have not started yet. Ended
// pods are never deleted by gpufleet; Kubernetes' pod garbage collection
// (--terminated-pod-gc-threshold) bounds them.
//
// # Restart
//
// Adopt finds an attempt's pods by their labels in the informer's cache;
// DeleteOrphans, called once the control loop has re-adopted its running
// workloads (and run again by the executor when the cluster answers after
// being unreachable, below), deletes the pending or running pods that
// nobody adopted, in
// the namespaces of this executor's template only (another gpufleet server
// on the cluster, with a template of its own, keeps its pods), and returns
// them. The server records each deletion in its audit trail (action
// "delete orphan pod", user "gpufleet", the pod as object, 200 or the
// error): that is where gpufleet's operators already look for who deleted
// what, it outlives the pod, and it needs no further RBAC. A Kubernetes
// Event on the pod was the alternative: it is visible to kubectl users
// but expires after an hour (the API server's event TTL) and would need
// "create events" in the Role.
//
// # Nodes
//
// GPUNode and DiscoverNodes describe every node with nvidia.com/gpu capacity
// from the labels of GPU feature discovery (nvidia.com/gpu.product,
// nvidia.com/gpu.memory in MiB, nvidia.com/gpu.count), its pool and region
// from configurable labels; a cordoned or NotReady node is not schedulable,
// nor one with a taint that keeps gpufleet's pods off (blockingTaint: the
// node lifecycle's and cloud provider's, such as the not-ready taint a new
// node carries until kube-controller-manager lifts it, and a NoExecute
// taint gpufleet's pods do not tolerate).
// Options.NodeSelector (config kubernetes.nodeSelector), a label selector,
// limits the nodes gpufleet sees to those it selects (the node informer
// lists only them), so that gpufleet can share a cluster. Options.OnNodes
// hears of every change the node informer sees; when a node turns NotReady
// or goes, OnNodes is called before its attempts are reported Lost, so that
// the store knows the node takes no work before the control loop requeues
// them. While the cluster cannot be reached, Nodes and OnNodes give every
// node NotReady and unschedulable (below); before the executor's start is
// finished (a cluster unreachable at the server's start), Nodes and
// OnNodes give Options.KnownNodes so.
//
// # Elastic pools
//
// A burst pool may start with no nodes. Provisioner (provision.go; made by
// Executor.Provisioner with a dynamic client) asks the cluster for them
// the standard way: a PodTemplate of the workload's pod shape
// (nvidia.com/gpu per pod, CPU and memory when asked, a node selector
// putting the new nodes in the pool and of the GPU model asked) and a
// ProvisioningRequest (autoscaling.x-k8s.io/v1, class
// best-effort-atomic-scale-up.autoscaling.x-k8s.io) for Count such pods,
// owned together, labelled managed, workload, team and pool.
// ProvisionStatus reads its conditions (Provisioned, Failed,
// CapacityRevoked); DeleteProvision withdraws it, after which the
// cluster's autoscaler scales the nodes down once their pods are gone. A
// cluster without the API answers ErrNoProvisioningAPI. The control loop's
// Elastic reconciler decides when to ask.
//
// # Reachability and failover
//
// When the API server cannot be reached the informers do not fail: they
// keep their last view and retry, so nothing they hear marks a node
// NotReady. The executor therefore checks the API server itself, every
// Options.ReachEvery (default 5 s), with GET /readyz (readable by every
// client) bounded by that same interval. Once every check has failed for
// Options.UnreachableAfter (default 30 s) since the last answer, the
// cluster is unreachable: Reachable is false, the error is logged, and
// OnNodes is called with every node of the cluster NotReady and
// unschedulable; so it stays while unreachable, whatever the informer's
// cache says (an informer event meanwhile is reported NotReady too; the
// OnNodes calls are serialised, so a report made before the change never
// lands after one made since). The executor reports no attempt Lost for
// it and deletes nothing: the node lifecycle (internal/qualify) makes a
// NotReady node Lost after its own grace period, asks its work to stop and
// then requeues it into any pool its constraints allow. A short blip of
// the network thus requeues nothing; a partition longer than the grace
// period may have the requeued attempt run while the old pod still runs
// in the unreachable cluster, as no one can stop it there; the clean-up on
// return bounds that.
//
// While unreachable, Start, Stop, Logs and FollowLogs fail at once with
// an error wrapping ErrUnreachable (naming when the API server last
// answered; not the API server nor why the last check failed, which name
// the platform's addresses and reach only the server's log: the error
// reaches tenants) rather than wait on a
// connection that may never answer; Stop still marks the attempt
// stopping. Each Stop, and each Start
// whose context has no deadline, is also bounded by Options.RequestTimeout
// (default 15 s), for the time before the cluster is found unreachable.
//
// At the first check answered after that, the cluster is reachable again:
// OnNodes hears the nodes as the API server lists them then (not the
// informer's cache, which may still hold its view from before: a node
// gone down meanwhile must not be reported Ready; it then goes the usual
// way, Lost when the informer hears of it); the
// pods of attempts whose Stop came while unreachable are deleted again,
// with Stop's grace; and the pods no tracked attempt owns are deleted as
// in DeleteOrphans (running or pending, in this template's namespaces),
// read from the API server itself rather than the informer, which may not
// have caught up, and handed to Options.OnOrphans, where the server records
// them in its audit trail as at its start (each pod once: one that the
// informer, relisting, meanwhile found to be a deposed leader's late
// start is not deleted and reported again, even when the informer has
// already seen it go and the list still holds it). These are the pods of
// attempts the store no longer expects: an attempt requeued elsewhere has
// been stopped (so it is deleted as stopping) or reported ended (so it is
// no longer tracked). The executor runs this clean-up itself, not the
// server, because only it knows the moment of return; it does so only once
// the server has called DeleteOrphans, that is once its adoption of the
// running workloads is over, so that a return during the server's start
// cannot delete a pod not yet adopted.
//
// # A cluster unreachable at the server's start
//
// New first checks the API server (GET /readyz within ReachEvery), and,
// once it answers, lists one pod and one node as the informers will: a
// service account without the right fails at once with the Forbidden
// answer and the rights it needs, not in a wait for the informers' first
// list without end. When the API server does not answer, New fails with
// an error naming it (the server of
// one cluster, --executor kubernetes, then exits: it would have nowhere
// to run work), unless Options.StartUnreachable is set, as the server
// sets it for each Kubernetes cluster of several (config clusters:): New
// then returns an executor that is unreachable from the start. It knows
// nothing of the cluster yet, so Nodes and OnNodes give
// Options.KnownNodes (the cluster's nodes in the server's store) NotReady
// and unschedulable, and the node lifecycle goes its usual way with them;
// Start, Stop, Logs and FollowLogs fail with ErrUnreachable as above.
// Adopt cannot look for pods in caches not yet filled, and an attempt
// taken for gone would be requeued and its pod, still running there,
// deleted as an orphan: so Adopt remembers the attempt as expected and
// answers true; DeleteOrphans marks the adoption over and deletes
// nothing. At the first check the API server answers, the executor
// finishes its start (finishStart: the PriorityClasses, then the
// informers and their caches), is reachable, and settles the attempts it
// remembered: their pods are adopted (a pod that ended meanwhile reports
// its end; one on a node the informer finds NotReady is Lost), and an
// attempt with no pod is reported Lost, which the control loop requeues.
// Then it does what it does when a cluster answers again (above): the
// nodes as the API server lists them, the pods of attempts stopped
// meanwhile deleted, and the pods no tracked attempt owns, remembered
// ones included, deleted as orphans and handed to Options.OnOrphans.
package kubernetes
