package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// Reachability defaults (Options.ReachEvery, UnreachableAfter,
// RequestTimeout).
const (
	DefaultReachEvery       = 5 * time.Second
	DefaultUnreachableAfter = 30 * time.Second
	DefaultRequestTimeout   = 15 * time.Second
)

// ErrUnreachable is wrapped by the errors of Start and Stop while the
// cluster's API server cannot be reached.
var ErrUnreachable = fmt.Errorf("the cluster's API server cannot be reached: %w", executor.ErrUnavailable)

// reachDefaults fills in and checks the reachability options.
func reachDefaults(o *Options) error {
	switch {
	case o.ReachEvery < 0:
		return fmt.Errorf("kubernetes executor: ReachEvery %v: must not be negative", o.ReachEvery)
	case o.UnreachableAfter < 0:
		return fmt.Errorf("kubernetes executor: UnreachableAfter %v: must not be negative", o.UnreachableAfter)
	case o.RequestTimeout < 0:
		return fmt.Errorf("kubernetes executor: RequestTimeout %v: must not be negative", o.RequestTimeout)
	}
	if o.ReachEvery == 0 {
		o.ReachEvery = DefaultReachEvery
	}
	if o.UnreachableAfter == 0 {
		o.UnreachableAfter = DefaultUnreachableAfter
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	return nil
}

// Reachable reports whether the cluster's API server answers: false once
// it has failed every check for Options.UnreachableAfter, true again at
// the first check it answers.
func (e *Executor) Reachable() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.unreachable
}

// unreachableErr is the error of a call refused while the cluster cannot
// be reached; nil while it can. It reaches tenants (a workload's logs, the
// status of a workload whose start was refused), so it names neither the
// API server nor the transport's error, which name the platform's
// addresses: the server's log has them (at start and when the cluster
// stops answering).
func (e *Executor) unreachableErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.unreachable {
		return nil
	}
	if !e.started.Load() {
		return fmt.Errorf("the executor's start has waited on the cluster since this server started at %s: %w", e.lastAnswer.UTC().Format(time.RFC3339), ErrUnreachable)
	}
	return fmt.Errorf("no answer since %s: %w", e.lastAnswer.UTC().Format(time.RFC3339), ErrUnreachable)
}

// apiServer names the cluster's API server (its URL) for errors and logs.
func (e *Executor) apiServer() string {
	if rc := e.opts.Client.Discovery().RESTClient(); rc != nil {
		if u := rc.Get().URL(); u != nil {
			u.Path, u.RawQuery = "", ""
			return u.String()
		}
	}
	return "the cluster's API server"
}

// finishStart does, for an executor that New returned before its cluster
// answered (Options.StartUnreachable), what New would have: at the first
// check the API server answers, the PriorityClasses are made (tried
// again at each check while that fails), the informers are started and
// their caches waited for; then the executor is started and reachable,
// the attempts Adopt remembered meanwhile are settled, and the rest is
// as for a cluster that answers again (returned: the nodes as the API
// server lists them, the pods of attempts stopped meanwhile deleted, and,
// once the server's adoption is over, the orphans). It then watches the
// cluster as New's executor does (watchReach).
func (e *Executor) finishStart(ctx context.Context) {
	tick := time.NewTicker(e.opts.ReachEvery)
	defer tick.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := e.probe(ctx)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, e.opts.RequestTimeout)
			err = e.ensurePriorityClasses(cctx)
			cancel()
			if err == nil {
				err = e.mayList(ctx)
			}
			if err == nil {
				break
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err.Error() != lastErr {
			lastErr = err.Error()
			e.log.Warn("cluster not started yet", "apiserver", e.apiServer(), "err", err)
		}
	}
	began := time.Now()
	if err := e.startInformers(ctx); err != nil {
		return // ctx ended
	}
	now := time.Now()
	e.mu.Lock()
	waited := now.Sub(e.lastAnswer)
	e.lastAnswer, e.unreachable = now, false
	e.started.Store(true)
	e.settlePendingLocked()
	e.mu.Unlock()
	e.log.Info("cluster answered: the executor's start is finished", "apiserver", e.apiServer(),
		"unreachable_for", waited.Round(time.Second), "sync", now.Sub(began).Round(time.Millisecond))
	e.returned(ctx)
	e.watchReach(ctx)
}

// settlePendingLocked adopts the pods of the attempts that Adopt
// remembered before the start was finished, from the caches now in: an
// attempt with no pod is reported Lost (the control loop requeues it);
// one asked to stop meanwhile has its pods deleted by returned; one whose
// pod is on a node the informer found NotReady is Lost as onNode would
// have made it. Callers hold mu.
func (e *Executor) settlePendingLocked() {
	for _, at := range e.tasks {
		if !at.pending {
			continue
		}
		at.pending = false
		if at.native != nil {
			e.settlePendingNativeLocked(at)
			continue
		}
		pods := e.attemptPods(at.id, at.attempt)
		if len(pods) == 0 {
			e.log.Warn("attempt remembered while the cluster could not be reached has no pod: lost", "workload", at.id, "attempt", at.attempt)
			e.reportLocked(at, executor.Exit{Reason: ReasonLost, At: e.opts.Now(),
				Message: "the attempt's pods were not found when its cluster answered after the server's start"})
			continue
		}
		at.ns = pods[0].Namespace
		for _, p := range pods {
			at.pods[p.Name] = p.Spec.NodeName
			for _, s := range podSecrets(p) {
				if !slices.Contains(at.secrets, s) {
					at.secrets = append(at.secrets, s)
				}
			}
		}
		e.log.Info("pods adopted", "workload", at.id, "attempt", at.attempt, "pods", len(pods))
		for _, p := range pods {
			if e.tasks[keyOf(at.id, at.attempt)] != at {
				break // ended by an earlier pod
			}
			e.podLocked(at, p, false)
		}
		if e.tasks[keyOf(at.id, at.attempt)] != at || e.opts.DisableLostOnNotReady {
			continue
		}
		for _, node := range at.pods {
			if e.notReady[node] {
				at.grace = 0
				e.reportLocked(at, lostExit(node, "NotReady", e.opts.Now()))
				break
			}
		}
	}
}

// probe asks the API server whether it is ready (GET /readyz, which every
// client may read), within one check's time. A clientset without a REST
// client (client-go's fake) is asked its version instead.
func (e *Executor) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, e.opts.ReachEvery)
	defer cancel()
	disc := e.opts.Client.Discovery()
	if rc := disc.RESTClient(); rc != nil {
		return rc.Get().AbsPath("/readyz").Do(ctx).Error()
	}
	_, err := discovery.ToServerVersionInterfaceWithContext(disc).ServerVersionWithContext(ctx)
	return err
}

// watchReach checks the API server every Options.ReachEvery until ctx
// ends: after UnreachableAfter without an answer the cluster is
// unreachable and its nodes are reported NotReady; at the first answer
// after that it is reachable again (returned).
func (e *Executor) watchReach(ctx context.Context) {
	tick := time.NewTicker(e.opts.ReachEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := e.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		e.mu.Lock()
		was := e.unreachable
		if err == nil {
			e.lastAnswer, e.unreachable = now, false
		} else if now.Sub(e.lastAnswer) >= e.opts.UnreachableAfter {
			e.unreachable = true
		}
		down, since := e.unreachable, e.lastAnswer
		e.mu.Unlock()
		switch {
		case down && !was:
			e.log.Error("cluster unreachable: its nodes are reported NotReady", "since", since.UTC(), "err", err)
			e.reportNodes()
		case !down && was:
			e.log.Info("cluster reachable again: its nodes are reported as the cluster sees them", "unreachable_for", now.Sub(since).Round(time.Second))
			e.returned(ctx)
		}
	}
}

// reportNodes hands Nodes to Options.OnNodes. Calls are serialised, so
// that a report computed before a change of reachability never lands
// after one computed since.
func (e *Executor) reportNodes() {
	if e.opts.OnNodes == nil {
		return
	}
	e.reportMu.Lock()
	defer e.reportMu.Unlock()
	e.opts.OnNodes(e.Nodes())
}

// returned runs when the cluster answers again: the nodes are reported as
// the API server lists them (the informer may still hold its view from
// before); the pods of attempts whose stop was asked while
// the cluster could not be reached are deleted again; and, once the server
// has run DeleteOrphans (its own adoption is over), the pods that no
// attempt tracked here owns are deleted, read from the API server itself
// (the informer may not have caught up yet) and handed to
// Options.OnOrphans.
func (e *Executor) returned(ctx context.Context) {
	e.reportLiveNodes(ctx)

	type del struct {
		at   *attempt
		name string
	}
	var dels []del
	e.mu.Lock()
	for _, at := range e.tasks {
		if !at.stopping {
			continue
		}
		for name := range at.pods {
			if _, ended := at.ends[name]; !ended {
				dels = append(dels, del{at, name})
			}
		}
	}
	adopted := e.adopted && e.leading()
	e.mu.Unlock()
	for _, d := range dels {
		cctx, cancel := context.WithTimeout(ctx, e.opts.RequestTimeout)
		var err error
		if d.at.native != nil {
			err = e.evictPod(cctx, d.at, d.name, d.at.stopGrace)
		} else {
			err = e.deletePod(cctx, d.at.ns, d.name, d.at.stopGrace)
		}
		if err != nil {
			e.log.Error("delete a pod stopped while the cluster was unreachable", "err", err)
		}
		cancel()
	}
	if !adopted {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, e.opts.RequestTimeout)
	defer cancel()
	list, err := e.opts.Client.CoreV1().Pods(metav1.NamespaceAll).List(cctx, metav1.ListOptions{LabelSelector: LabelManaged + "=true"})
	var pods []*corev1.Pod
	if err != nil {
		e.log.Error("list pods after the cluster's return; orphans read from the informer's cache", "err", err)
		pods, _ = e.pods.List(labelsManaged())
	} else {
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	}
	orphans, err := e.deleteOrphans(cctx, pods)
	if err != nil {
		e.log.Error("delete orphan pods after the cluster's return", "err", err)
	}
	if len(orphans) > 0 && e.opts.OnOrphans != nil {
		e.opts.OnOrphans(orphans)
	}
}

// reportLiveNodes hands OnNodes the GPU nodes as the API server lists them
// now (those of Options.NodeSelector), or as the informer's cache holds
// them when the list fails.
func (e *Executor) reportLiveNodes(ctx context.Context) {
	if e.opts.OnNodes == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, e.opts.RequestTimeout)
	defer cancel()
	list, err := e.opts.Client.CoreV1().Nodes().List(cctx, metav1.ListOptions{LabelSelector: e.opts.NodeSelector})
	if err != nil {
		e.log.Error("list nodes after the cluster's return; reported from the informer's cache", "err", err)
		e.reportNodes()
		return
	}
	keys := NodeLabels{e.opts.PoolLabel, e.opts.RegionLabel}
	var out []core.Node
	for i := range list.Items {
		if n, ok := GPUNode(&list.Items[i], keys); ok {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b core.Node) int { return strings.Compare(string(a.Name), string(b.Name)) })
	e.reportMu.Lock()
	defer e.reportMu.Unlock()
	e.opts.OnNodes(out)
}

// callContext bounds one Stop or Start by Options.RequestTimeout, unless
// the caller's context ends sooner.
func (e *Executor) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= e.opts.RequestTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, e.opts.RequestTimeout)
}
