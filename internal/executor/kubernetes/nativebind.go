package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// ReasonPodDeleted is the exit reason of a native workload whose pod was
// deleted (by its owner, a user) before it ended: the control loop records
// the workload Cancelled.
const ReasonPodDeleted = "PodDeleted"

// eventSource is the component that native pods' Events come from.
const eventSource = "gpufleet"

// Event reasons on native pods besides the waits' own.
const (
	EventScheduled = "Scheduled" // as kube-scheduler's
	EventEvicting  = "Evicting"
)

// nativeInformers makes the informers of native pods (every namespace,
// field selector spec.schedulerName) and, when a namespace label names
// teams, of namespaces; none when native admission is off.
func (e *Executor) nativeInformers() ([]informers.SharedInformerFactory, error) {
	o := e.opts.Native
	if o.SchedulerName == "" {
		return nil, nil
	}
	f := informers.NewSharedInformerFactoryWithOptions(e.opts.Client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.FieldSelector = "spec.schedulerName=" + o.SchedulerName }))
	inf := f.Core().V1().Pods()
	e.natives = inf.Lister()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.onNativePod(obj, false) },
		UpdateFunc: func(_, obj any) { e.onNativePod(obj, false) },
		DeleteFunc: func(obj any) { e.onNativePod(obj, true) },
	}); err != nil {
		return nil, err
	}
	out := []informers.SharedInformerFactory{f}
	look := &clusterLookup{client: e.opts.Client, dyn: e.opts.Dynamic}
	if o.NamespaceTeamLabel != "" {
		nf := informers.NewSharedInformerFactory(e.opts.Client, 0)
		ni := nf.Core().V1().Namespaces()
		look.namespaces = ni.Lister()
		if _, err := ni.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { e.signalNative() },
			UpdateFunc: func(any, any) { e.signalNative() },
		}); err != nil {
			return nil, err
		}
		out = append(out, nf)
	}
	e.reader = nativeReader{opts: o, classes: e.opts.PriorityClasses, look: look}
	return out, nil
}

// onNativePod handles an informer event about a native pod: the end of a
// tracked one is recorded, and NativeChanged hears of every change.
func (e *Executor) onNativePod(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	e.mu.Lock()
	if k, ok := e.nativeKeys[p.Namespace+"/"+p.Name]; ok {
		if at := e.tasks[k]; at != nil && !at.pending {
			e.podLocked(at, p, deleted)
		}
	}
	e.mu.Unlock()
	e.signalNative()
}

func (e *Executor) signalNative() {
	select {
	case e.nativeCh <- struct{}{}:
	default:
	}
}

// NativeChanged is signalled (coalesced, never blocking) when a native pod
// or a namespace changes: the submissions may have changed.
func (e *Executor) NativeChanged() <-chan struct{} { return e.nativeCh }

// NativeSubmissions groups the native pods waiting for gpufleet into
// submissions (native.go); taken tells the pods a workload holds already.
// None while native admission is off or the executor's start is not
// finished.
func (e *Executor) NativeSubmissions(ctx context.Context, taken func(uid string) bool) []executor.NativeSubmission {
	if e.natives == nil || !e.started.Load() {
		return nil
	}
	pods, err := e.natives.List(labels.Everything())
	if err != nil {
		return nil
	}
	return e.reader.submissions(ctx, pods, taken)
}

// NativePodLive reports whether pod p of a native workload is still there
// for gpufleet: it exists with that UID, not being deleted, not ended.
// True before the executor's start is finished: nothing is known yet.
func (e *Executor) NativePodLive(ns string, p core.NativePod) bool {
	if e.natives == nil || !e.started.Load() {
		return true
	}
	pod, err := e.natives.Pods(ns).Get(p.Name)
	return err == nil && string(pod.UID) == p.UID && pod.DeletionTimestamp == nil && isNative(pod, e.opts.Native.SchedulerName)
}

// NativeWait shows why native pods wait: a PodScheduled=False condition
// with w's reason and text and an Event (Warning or Normal, as w says),
// on each pod still waiting whose condition says something else; a pod
// that says it already is left alone, so that a restart writes no Event
// twice, and so is one this executor last showed the same wait, though
// the informer's copy does not say so yet.
func (e *Executor) NativeWait(ctx context.Context, n core.Native, w executor.NativeWait) error {
	if e.natives == nil {
		return nil
	}
	if err := e.unreachableErr(); err != nil {
		return err
	}
	ctx, cancel := e.callContext(ctx)
	defer cancel()
	msg := truncate(w.Text(), maxEventMessage)
	typ := corev1.EventTypeNormal
	if w.Warning {
		typ = corev1.EventTypeWarning
	}
	var errs []error
	for _, np := range n.Pods {
		p, err := e.natives.Pods(n.Namespace).Get(np.Name)
		if err != nil || string(p.UID) != np.UID || p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		if c := podScheduled(p); c != nil && c.Status == corev1.ConditionFalse && c.Reason == w.Reason && c.Message == msg {
			continue
		}
		if e.waitsShown.seen(p.UID, w.Reason, msg) {
			continue
		}
		if err := e.setUnscheduled(ctx, p, w.Reason, msg); err != nil {
			errs = append(errs, err)
			continue
		}
		e.waitsShown.record(p.Namespace, p.Name, p.UID, w.Reason, msg, e.natives)
		errs = append(errs, e.podEvent(ctx, n.Namespace, np, typ, w.Reason, msg))
	}
	return errors.Join(errs...)
}

// shownWaits is the wait each native pod was last shown, by UID: what the
// informer's copy of the pod says only some milliseconds later. Entries of
// pods that are gone are dropped once the map has doubled since the last
// sweep, so it stays about as large as the set of waiting pods.
type shownWaits struct {
	mu    sync.Mutex
	m     map[types.UID]shownWait
	swept int
}

type shownWait struct {
	ns, name, reason, msg string
}

func (s *shownWaits) seen(uid types.UID, reason, msg string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.m[uid]
	return ok && w.reason == reason && w.msg == msg
}

func (s *shownWaits) record(ns, name string, uid types.UID, reason, msg string, pods corelisters.PodLister) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[types.UID]shownWait{}
	}
	s.m[uid] = shownWait{ns: ns, name: name, reason: reason, msg: msg}
	if len(s.m) <= 2*s.swept+64 {
		return
	}
	for u, w := range s.m {
		if p, err := pods.Pods(w.ns).Get(w.name); err != nil || p.UID != u || p.Spec.NodeName != "" {
			delete(s.m, u)
		}
	}
	s.swept = len(s.m)
}

// maxEventMessage bounds the message of an Event (the API server's own
// bound is larger; kubectl shows one line).
const maxEventMessage = 1024

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func podScheduled(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// setUnscheduled writes the pod's PodScheduled condition, False, as
// kube-scheduler does for a pod it cannot place.
func (e *Executor) setUnscheduled(ctx context.Context, p *corev1.Pod, reason, msg string) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: metav1.Now(),
	}}}})
	if err != nil {
		return err
	}
	_, err = e.opts.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("condition PodScheduled of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// podEvent records an Event about a native pod, from gpufleet.
func (e *Executor) podEvent(ctx context.Context, ns string, p core.NativePod, typ, reason, msg string) error {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: p.Name, UID: types.UID(p.UID)},
		Reason:         reason,
		Message:        truncate(msg, maxEventMessage),
		Type:           typ,
		Source:         corev1.EventSource{Component: eventSource},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	if _, err := e.opts.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("event %s on pod %s/%s: %w", reason, ns, p.Name, err)
	}
	return nil
}

// nativeNodes maps each pod of a native task to the node of its replica.
func nativeNodes(t executor.Task) map[string]string {
	out := map[string]string{}
	for _, a := range t.Assignments {
		if a.Replica < len(t.Native.Pods) {
			out[t.Native.Pods[a.Replica].Name] = string(a.Node)
		}
	}
	return out
}

// errPodGone: the pod to bind is deleted, or made again (another UID).
var errPodGone = errors.New("the pod is gone")

// startNative binds a native task's pods, each to the node of its replica
// (the Binding subresource, with the pod's UID as a precondition, so that
// a pod made again under the same name is not bound in its place), with a
// Scheduled Event on each. A pod that is gone meanwhile ends with
// ReasonPodDeleted (reported once every pod has ended); a pod already
// bound to its node (a start cut short before) is left as it is. When no
// pod could be bound the start fails, wrapping executor.ErrUnavailable, so
// that the workload waits again; once one is, those left are bound in the
// background.
func (e *Executor) startNative(ctx context.Context, t executor.Task) error {
	fail := func(err error) error {
		return fmt.Errorf("bind the pods of %s attempt %d: %w", t.WorkloadID, t.Attempt, err)
	}
	if e.natives == nil {
		return fail(errors.New("this server does not admit native pods (kubernetes.native)"))
	}
	if err := e.unreachableErr(); err != nil {
		return fail(err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.opts.RequestTimeout)
		defer cancel()
	}
	tok, err := e.fence()
	if err != nil {
		return fail(err)
	}
	n := t.Native
	at := &attempt{id: t.WorkloadID, attempt: t.Attempt, ns: n.Namespace, pods: map[string]string{}, ends: map[string]executor.Exit{},
		grace: t.GracePeriod, native: n.Clone(), nodes: nativeNodes(t)}
	for _, p := range n.Pods {
		at.pods[p.Name] = at.nodes[p.Name]
	}
	k := keyOf(t.WorkloadID, t.Attempt)
	e.mu.Lock()
	if e.tasks[k] != nil {
		e.mu.Unlock()
		return fail(fmt.Errorf("attempt is already running: %w", fs.ErrExist))
	}
	e.trackNativeLocked(k, at)
	e.mu.Unlock()
	bound := 0
	for i, p := range n.Pods {
		err := e.stillLeading(tok)
		if err == nil {
			err = e.bindPod(ctx, t, p, at.nodes[p.Name])
		}
		switch {
		case err == nil:
			bound++
		case errors.Is(err, errPodGone):
			e.podGone(at, p)
		case bound == 0:
			e.mu.Lock()
			e.untrackNativeLocked(k, at)
			e.mu.Unlock()
			return fail(fmt.Errorf("%w: %w", err, executor.ErrUnavailable))
		default:
			e.log.Warn("pods of a native gang left to bind", "workload", t.WorkloadID, "attempt", t.Attempt, "err", err)
			go e.bindLater(t, n.Pods[i:])
			return nil
		}
	}
	return nil
}

// trackNativeLocked tracks a native attempt, its pods found by name in
// informer events. Callers hold mu.
func (e *Executor) trackNativeLocked(k key, at *attempt) {
	e.tasks[k] = at
	for _, p := range at.native.Pods {
		e.nativeKeys[at.ns+"/"+p.Name] = k
	}
}

func (e *Executor) untrackNativeLocked(k key, at *attempt) {
	if e.tasks[k] != at {
		return
	}
	delete(e.tasks, k)
	for _, p := range at.native.Pods {
		delete(e.nativeKeys, at.ns+"/"+p.Name)
	}
}

// podGone records that a pod of a native attempt is gone.
func (e *Executor) podGone(at *attempt, p core.NativePod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tasks[keyOf(at.id, at.attempt)] != at {
		return
	}
	if _, ended := at.ends[p.Name]; !ended {
		e.endNativeLocked(at, p.Name, deletedExit(at.ns, p.Name, e.opts.Now()))
	}
}

// bindLater binds pods left unbound, with a few tries: a start that bound
// part of a gang, or an adoption that found pods not bound yet.
func (e *Executor) bindLater(t executor.Task, pods []core.NativePod) {
	for _, p := range pods {
		for try := 1; ; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), e.opts.RequestTimeout)
			err := e.bindPod(ctx, t, p, nativeNodes(t)[p.Name])
			cancel()
			if err == nil || errors.Is(err, errPodGone) || try == 5 {
				if err != nil && !errors.Is(err, errPodGone) {
					e.log.Error("bind a native pod", "workload", t.WorkloadID, "pod", t.Native.Namespace+"/"+p.Name, "err", err)
				}
				break
			}
			time.Sleep(time.Duration(try) * 500 * time.Millisecond)
		}
	}
}

// bindPod binds one native pod to node, unless it is bound there already.
func (e *Executor) bindPod(ctx context.Context, t executor.Task, p core.NativePod, node string) error {
	ns := t.Native.Namespace
	if node == "" {
		return fmt.Errorf("pod %s/%s has no node in the placement", ns, p.Name)
	}
	if cur, err := e.natives.Pods(ns).Get(p.Name); err == nil && string(cur.UID) == p.UID && cur.Spec.NodeName == node {
		return nil
	}
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns, UID: types.UID(p.UID)},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	err := e.opts.Client.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{})
	if err != nil {
		cur, gerr := e.opts.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr) || gerr == nil && string(cur.UID) != p.UID:
			return fmt.Errorf("pod %s/%s: %w", ns, p.Name, errPodGone)
		case gerr == nil && cur.Spec.NodeName == node:
			return nil // bound already: a start cut short, or a retry
		case gerr == nil && cur.Spec.NodeName != "":
			return fmt.Errorf("pod %s/%s is bound to node %s by someone else (gpufleet chose %s)", ns, p.Name, cur.Spec.NodeName, node)
		}
		return fmt.Errorf("bind pod %s/%s to node %s: %w", ns, p.Name, node, err)
	}
	msg := fmt.Sprintf("Successfully assigned %s/%s to %s by gpufleet: %s of workload %s (team %s, %s)",
		ns, p.Name, node, gpuWords(t, p), t.WorkloadID, t.Team, cmpOrDefault(t.Priority, "default class"))
	if err := e.podEvent(ctx, ns, p, corev1.EventTypeNormal, EventScheduled, msg); err != nil {
		e.log.Warn("event on a bound pod", "err", err)
	}
	e.log.Info("native pod bound", "workload", t.WorkloadID, "attempt", t.Attempt, "pod", ns+"/"+p.Name, "node", node)
	return nil
}

func cmpOrDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// gpuWords says which GPUs a native pod's replica holds: "1 GPU
// (node/gpu0)", "2 GPUs (node/gpu0, node/gpu1)".
func gpuWords(t executor.Task, p core.NativePod) string {
	r := slices.IndexFunc(t.Native.Pods, func(q core.NativePod) bool { return q.Name == p.Name })
	var ids []string
	for _, a := range t.Assignments {
		if a.Replica == r {
			ids = append(ids, a.GPUUUID)
		}
	}
	n := t.Request.WholeGPUs()
	unit := "GPUs"
	if n == 1 {
		unit = "GPU"
	}
	return fmt.Sprintf("%d %s (%s), replica %d of %d", n, unit, strings.Join(ids, ", "), r, len(t.Native.Pods))
}

// adoptNativeLocked re-attaches to a native attempt after a restart: its
// pods found by name and UID in the informer's cache, a pod gone ending
// with ReasonPodDeleted, and a pod not bound yet (the server stopped
// between its placement and its binding) bound in the background. False
// when none of its pods is left. Callers hold mu.
func (e *Executor) adoptNativeLocked(t executor.Task) bool {
	if e.natives == nil {
		e.log.Warn("a native workload runs, but this server admits no native pods (kubernetes.native): its pods are not watched", "workload", t.WorkloadID)
		return false
	}
	at := &attempt{id: t.WorkloadID, attempt: t.Attempt, ns: t.Native.Namespace, pods: map[string]string{}, ends: map[string]executor.Exit{},
		grace: t.GracePeriod, native: t.Native.Clone(), nodes: nativeNodes(t)}
	unbound, ok := e.settleNativeLocked(at)
	if !ok {
		return false
	}
	e.log.Info("native pods adopted", "workload", t.WorkloadID, "attempt", t.Attempt, "pods", len(at.pods), "to_bind", len(unbound))
	if len(unbound) > 0 {
		go e.bindLater(t, unbound)
	}
	return true
}

// settleNativeLocked tracks a native attempt from the pods the cache
// holds, records the ends of those gone or ended, and returns those still
// to bind; ok is false (nothing tracked) when no pod is left.
func (e *Executor) settleNativeLocked(at *attempt) (unbound []core.NativePod, ok bool) {
	var found []*corev1.Pod
	for _, np := range at.native.Pods {
		at.pods[np.Name] = at.nodes[np.Name]
		if p, err := e.natives.Pods(at.ns).Get(np.Name); err == nil && string(p.UID) == np.UID {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return nil, false
	}
	k := keyOf(at.id, at.attempt)
	e.trackNativeLocked(k, at)
	for _, np := range at.native.Pods {
		if !slices.ContainsFunc(found, func(p *corev1.Pod) bool { return p.Name == np.Name }) && e.tasks[k] == at {
			e.endNativeLocked(at, np.Name, deletedExit(at.ns, np.Name, e.opts.Now()))
		}
	}
	for _, p := range found {
		if e.tasks[k] != at {
			break // every pod has ended
		}
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			unbound = append(unbound, core.NativePod{Name: p.Name, UID: string(p.UID)})
		}
		e.podLocked(at, p, false)
	}
	return unbound, true
}

// nativePodLocked records the end of one pod of a native attempt, if it
// has ended: by itself (its phase), evicted by gpufleet, or deleted by
// someone else. The attempt ends once all its pods have: gpufleet holds
// their GPUs until then, as the kubelet does.
func (e *Executor) nativePodLocked(at *attempt, p *corev1.Pod, deleted bool) {
	if i := slices.IndexFunc(at.native.Pods, func(q core.NativePod) bool { return q.Name == p.Name }); i < 0 || at.native.Pods[i].UID != string(p.UID) {
		return
	}
	x, ended := nativeEnd(p, at.stopping, deleted, e.opts.Now())
	if ended {
		e.endNativeLocked(at, p.Name, x)
	}
}

// endNativeLocked records a pod's end and reports the attempt's once
// every pod has ended: the first failure, else the last end.
func (e *Executor) endNativeLocked(at *attempt, name string, x executor.Exit) {
	at.ends[name] = x
	if len(at.ends) < len(at.pods) {
		return
	}
	report := x
	for _, p := range at.native.Pods {
		if y := at.ends[p.Name]; y.ExitCode == nil || *y.ExitCode != 0 || y.Reason != "" {
			report = y
			break
		}
	}
	e.reportLocked(at, report)
}

// nativeEnd tells whether a native pod has ended and how: by its phase as
// podEnd reads it, or by its deletion; a pod being deleted holds its GPUs
// until it is gone.
func nativeEnd(p *corev1.Pod, stopping, deleted bool, now time.Time) (executor.Exit, bool) {
	switch {
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		return podEnd(p, stopping, deleted, now)
	case !deleted:
		return executor.Exit{}, false
	case stopping:
		return podEnd(p, true, true, now)
	}
	return deletedExit(p.Namespace, p.Name, now), true
}

func deletedExit(ns, name string, at time.Time) executor.Exit {
	return executor.Exit{Reason: ReasonPodDeleted, At: at,
		Message: fmt.Sprintf("pod %s/%s was deleted (by its owner or a user) before it ended", ns, name)}
}

// evictPod evicts one pod of a native attempt (the Eviction API, so that
// PodDisruptionBudgets hold and its controller sees a disruption), with
// the stop's grace and the pod's UID as a precondition. A pod gone
// already is no error; a budget that forbids the eviction now is, and the
// control loop tries again.
func (e *Executor) evictPod(ctx context.Context, at *attempt, name string, grace time.Duration) error {
	i := slices.IndexFunc(at.native.Pods, func(p core.NativePod) bool { return p.Name == name })
	if i < 0 {
		return nil
	}
	uid := types.UID(at.native.Pods[i].UID)
	g := graceSeconds(grace)
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: name, Namespace: at.ns},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &g, Preconditions: &metav1.Preconditions{UID: &uid}},
	}
	err := e.opts.Client.CoreV1().Pods(at.ns).EvictV1(ctx, ev)
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	case apierrors.IsTooManyRequests(err):
		return fmt.Errorf("evict pod %s/%s: a PodDisruptionBudget does not allow it now: %w", at.ns, name, err)
	}
	return fmt.Errorf("evict pod %s/%s: %w", at.ns, name, err)
}

// ExplainStop implements executor.StopExplainer: an Event on each pod of a
// native attempt still running says why gpufleet evicts it (reason, the
// stop's: Preempted, Reclaimed, Cancelled ...).
func (e *Executor) ExplainStop(id core.WorkloadID, attempt int, reason, message string) {
	e.mu.Lock()
	at := e.tasks[keyOf(id, attempt)]
	var pods []core.NativePod
	if at != nil && at.native != nil {
		for _, p := range at.native.Pods {
			if _, ended := at.ends[p.Name]; !ended {
				pods = append(pods, p)
			}
		}
	}
	e.mu.Unlock()
	if len(pods) == 0 || e.unreachableErr() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.RequestTimeout)
	defer cancel()
	msg := fmt.Sprintf("gpufleet evicts the pod (%s): %s", reason, message)
	for _, p := range pods {
		if err := e.podEvent(ctx, at.ns, p, corev1.EventTypeWarning, cmpOrDefault(reason, EventEvicting), msg); err != nil {
			e.log.Warn("event on an evicted pod", "err", err)
		}
	}
}

// settlePendingNativeLocked adopts a native attempt that Adopt remembered
// before the executor's start was finished: as adoptNativeLocked, or Lost
// when none of its pods is left. Callers hold mu.
func (e *Executor) settlePendingNativeLocked(at *attempt) {
	var unbound []core.NativePod
	ok := e.natives != nil
	if ok {
		unbound, ok = e.settleNativeLocked(at)
	}
	if !ok {
		e.log.Warn("native attempt remembered while the cluster could not be reached has no pod left", "workload", at.id, "attempt", at.attempt)
		e.reportLocked(at, deletedExit(at.ns, at.native.Name, e.opts.Now()))
		return
	}
	if len(unbound) > 0 {
		t := executor.Task{WorkloadID: at.id, Attempt: at.attempt, Native: at.native}
		for name, node := range at.nodes {
			r := slices.IndexFunc(at.native.Pods, func(p core.NativePod) bool { return p.Name == name })
			t.Assignments = append(t.Assignments, core.Assignment{Replica: r, Node: core.NodeName(node)})
		}
		go e.bindLater(t, unbound)
	}
}
