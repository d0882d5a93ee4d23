package kubernetes

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// Labels that NVIDIA GPU feature discovery sets on GPU nodes.
const (
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUMemory  = "nvidia.com/gpu.memory" // MiB per device
	LabelGPUCount   = "nvidia.com/gpu.count"
)

func labelsManaged() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManaged: "true"})
}

// NodeLabels are the label keys read as a node's pool and region.
type NodeLabels struct {
	Pool, Region string
}

// GPUNode describes a Kubernetes node as a gpufleet node; ok is false for a
// node without nvidia.com/gpu capacity. The device plugin does not publish
// device UUIDs, so each device gets a stable made-up one, "<node>/gpu<i>";
// indexes are 0..n-1 in the order the node's runtime numbers them.
func GPUNode(n *corev1.Node, keys NodeLabels) (core.Node, bool) {
	q, has := n.Status.Capacity[ResourceGPU]
	count := int(q.Value())
	if c, err := strconv.Atoi(n.Labels[LabelGPUCount]); err == nil && c > 0 && (!has || count == 0) {
		count = c
	}
	if count <= 0 {
		return core.Node{}, false
	}
	model := n.Labels[LabelGPUProduct]
	if model == "" {
		model = "unknown"
	}
	mem, _ := strconv.ParseInt(n.Labels[LabelGPUMemory], 10, 64)
	out := core.Node{
		Name:        core.NodeName(n.Name),
		Pool:        n.Labels[cmpOr(keys.Pool, DefaultPoolLabel)],
		Region:      n.Labels[cmpOr(keys.Region, DefaultRegionLabel)],
		Labels:      cloneLabels(n.Labels),
		Schedulable: !n.Spec.Unschedulable && nodeReady(n) && blockingTaint(n) == nil,
		NotReady:    !nodeReady(n),
		UpdatedAt:   time.Now().UTC(),
	}
	alloc := n.Status.Allocatable
	if alloc == nil {
		alloc = n.Status.Capacity
	}
	if c, ok := alloc[corev1.ResourceCPU]; ok {
		out.MilliCPU = c.MilliValue()
	}
	if m, ok := alloc[corev1.ResourceMemory]; ok {
		out.MemoryMiB = m.Value() >> 20
	}
	for i := range count {
		out.GPUs = append(out.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("%s/gpu%d", n.Name, i), Model: model, MemoryMiB: mem})
	}
	return out, true
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func cloneLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// blockingTaint returns the first taint of n that keeps gpufleet's pods
// off it, or nil:
//
//   - a taint of the node lifecycle or the cloud provider
//     (node.kubernetes.io/..., node.cloudprovider.kubernetes.io/...),
//     NoSchedule or NoExecute: not ready or unreachable, under memory,
//     disk or PID pressure, its network unavailable, not initialised yet.
//     A new node carries not-ready until the node lifecycle controller
//     lifts it, a while after the node turns Ready; its network or
//     storage may not be up before;
//   - any other NoExecute taint but nvidia.com/gpu's: the taint manager
//     would evict a pod that does not tolerate it, and gpufleet's pods
//     tolerate nvidia.com/gpu alone (buildPod).
//
// Other NoSchedule taints (one that keeps other pods off GPU nodes) do not:
// gpufleet binds its pods to the node it chose, as kube-scheduler would
// bind a pod that tolerates them. A native pod's own tolerations are not
// matched (docs/KUBERNETES.md, Limits).
func blockingTaint(n *corev1.Node) *corev1.Taint {
	for i, t := range n.Spec.Taints {
		system := strings.HasPrefix(t.Key, "node.kubernetes.io/") || strings.HasPrefix(t.Key, "node.cloudprovider.kubernetes.io/")
		switch {
		case system && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute):
			return &n.Spec.Taints[i]
		case t.Effect == corev1.TaintEffectNoExecute && t.Key != string(ResourceGPU):
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

// nodeReady reports whether the node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DiscoverNodes lists the cluster's GPU nodes once, sorted by name.
func DiscoverNodes(ctx context.Context, c clientset.Interface, keys NodeLabels) ([]core.Node, error) {
	list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []core.Node
	for i := range list.Items {
		if n, ok := GPUNode(&list.Items[i], keys); ok {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b core.Node) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out, nil
}

// Nodes returns the cluster's GPU nodes from the informer's cache, sorted
// by name; while the cluster is unreachable (Reachable), every one is
// NotReady and unschedulable, whatever the cache last heard. Before the
// executor's start is finished (Options.StartUnreachable, a cluster that
// has not answered since New) the cache holds nothing: Nodes then gives
// Options.KnownNodes, every one NotReady and unschedulable. It is what
// OnNodes hears.
func (e *Executor) Nodes() []core.Node {
	if !e.started.Load() {
		return e.knownNodes()
	}
	down := !e.Reachable()
	list, err := e.nodes.List(labels.Everything())
	if err != nil {
		return nil
	}
	keys := NodeLabels{e.opts.PoolLabel, e.opts.RegionLabel}
	var out []core.Node
	for _, n := range list {
		if gn, ok := GPUNode(n, keys); ok {
			if down {
				gn.NotReady, gn.Schedulable = true, false
			}
			out = append(out, gn)
		}
	}
	slices.SortFunc(out, func(a, b core.Node) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// knownNodes is Options.KnownNodes, sorted by name, every one NotReady
// and unschedulable: the nodes of a cluster not heard from yet.
func (e *Executor) knownNodes() []core.Node {
	out := make([]core.Node, 0, len(e.opts.KnownNodes))
	for _, n := range e.opts.KnownNodes {
		c := *n.Clone()
		c.NotReady, c.Schedulable = true, false
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b core.Node) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// sameGPUNode reports whether an update of a node changed nothing of what
// GPUNode makes of it (its readiness included), so that it can be ignored.
func sameGPUNode(old, obj any, keys NodeLabels) bool {
	a, okA := old.(*corev1.Node)
	b, okB := obj.(*corev1.Node)
	if !okA || !okB {
		return false
	}
	ga, hasA := GPUNode(a, keys)
	gb, hasB := GPUNode(b, keys)
	ga.UpdatedAt, gb.UpdatedAt = time.Time{}, time.Time{}
	return hasA == hasB && reflect.DeepEqual(ga, gb)
}

// onNode handles an informer event about a node: attempts on a node that
// is gone or NotReady are Lost, and OnNodes hears of the change.
func (e *Executor) onNode(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	down := deleted || !nodeReady(n)
	e.mu.Lock()
	was := e.notReady[n.Name]
	if down && !deleted {
		e.notReady[n.Name] = true
	} else {
		delete(e.notReady, n.Name)
	}
	e.mu.Unlock()
	// OnNodes first: the store must know that the node takes no work
	// before its attempts are reported lost, or the control loop could
	// requeue them onto the same node. (The informer's first list is
	// reported once, by New.)
	if e.started.Load() || down {
		e.reportNodes()
	}
	if down && !was && !e.opts.DisableLostOnNotReady {
		why := "NotReady"
		if deleted {
			why = "deleted"
		}
		e.mu.Lock()
		e.loseNodeLocked(n.Name, why)
		e.mu.Unlock()
	}
}

// loseNodeLocked reports Lost every attempt with a pod on the node and
// force-deletes its pods, so that the requeued attempt cannot run twice.
func (e *Executor) loseNodeLocked(node, why string) {
	for _, at := range e.tasks {
		for name, on := range at.pods {
			if on != node {
				continue
			}
			if _, ended := at.ends[name]; ended {
				continue
			}
			e.log.Warn("node lost; its attempt is lost", "node", node, "why", why, "workload", at.id, "attempt", at.attempt)
			at.grace = 0
			e.reportLocked(at, lostExit(node, why, e.opts.Now()))
			break
		}
	}
}

func lostExit(node, why string, at time.Time) executor.Exit {
	return executor.Exit{Reason: ReasonLost, Message: fmt.Sprintf("node %s is %s", node, why), At: at}
}
