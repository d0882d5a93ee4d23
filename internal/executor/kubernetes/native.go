package kubernetes

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// DefaultSchedulerName is the schedulerName of the pods gpufleet places
// when they are made with kubectl or by a controller (native pods).
const DefaultSchedulerName = "gpufleet"

// Labels and annotations that native pods carry to ask gpufleet for a gang,
// a priority or GPUs; each is read as a label first, then as an
// annotation. LabelTeam (gpufleet.io/team) names the team.
const (
	LabelGang          = "gpufleet.io/gang"
	AnnotationGangSize = "gpufleet.io/gang-size"
	LabelPriority      = "gpufleet.io/priority"
	AnnotationGPUs     = "gpufleet.io/gpus"
)

// The anchors' own labels and annotations, which native pods may carry
// instead (Kueue, KAI-Scheduler).
const (
	LabelKueueQueue           = "kueue.x-k8s.io/queue-name"
	LabelKueuePriority        = "kueue.x-k8s.io/priority-class"
	LabelKueuePodGroup        = "kueue.x-k8s.io/pod-group-name"
	AnnotationKueueGroupCount = "kueue.x-k8s.io/pod-group-total-count"
	LabelKAIQueue             = "kai.scheduler/queue"
	AnnotationKAIPodGroup     = "pod-group-name"
	AnnotationKAIMinMember    = "kai.scheduler/batch-min-member"
	AnnotationKAIFraction     = "gpu-fraction"
	AnnotationKAIMemory       = "gpu-memory"
)

// DefaultTeamLabels are the pod labels read, in order, as a native pod's
// team.
var DefaultTeamLabels = []string{LabelTeam, LabelKueueQueue, LabelKAIQueue}

// Reasons of the waits of native pods that the executor finds (the
// scheduler's own reasons explain the others).
const (
	ReasonNoTeam       = "NoTeam"
	ReasonInvalidGang  = "InvalidGang"
	ReasonGangWaiting  = "GangIncomplete"
	ReasonNoGPU        = "NoGPU"
	ReasonInvalidGPUs  = "InvalidGPURequest"
	ReasonFractions    = "FractionsUnsupported"
	ReasonOwnerUnknown = "OwnerUnreadable"
)

// maxGangSize bounds a gang's size as read from a label.
const maxGangSize = 256

// NativeOptions configure the admission of native pods: pods made with
// kubectl or by a controller whose schedulerName is SchedulerName.
type NativeOptions struct {
	// SchedulerName selects the pods; empty: native pods are not
	// admitted (nothing of them is watched).
	SchedulerName string
	// TeamLabels are the pod labels read, in order, as the pod's team
	// (DefaultTeamLabels when nil); TeamAliases maps a value read there
	// (a Kueue LocalQueue, a KAI queue) to a team, and a value not in it
	// is the team's name.
	TeamLabels  []string
	TeamAliases map[string]string
	// NamespaceTeamLabel, when set, is a namespace label naming the team
	// of the namespace's pods that name none.
	NamespaceTeamLabel string
	// Cluster names the cluster of several these pods live in
	// (core.Node.Cluster); empty for the server's only one.
	Cluster string
}

// nativeLookup reads what a native pod refers to: the object that owns it
// and the PodGroup it belongs to, and its namespace's labels. The
// executor's reads the cluster (with a short cache); tests give tables.
type nativeLookup interface {
	// owner finds the top owner of a pod owned by ref (a Job's JobSet)
	// and the number of pods it runs at once, its gang; size 0 when the
	// owner makes no gang (a kind gpufleet does not group).
	owner(ctx context.Context, ns string, ref metav1.OwnerReference) (top core.NativeOwner, size int, err error)
	// podGroup reads the minimum count of a gang PodGroup
	// (scheduling.k8s.io), 0 for a PodGroup whose policy is basic.
	podGroup(ctx context.Context, ns, name string) (int, error)
	namespaceLabels(ns string) map[string]string
}

// nativeReader turns native pods into submissions.
type nativeReader struct {
	opts    NativeOptions
	classes []core.PriorityClass
	look    nativeLookup
}

// isNative reports whether p is a pod gpufleet is asked to place: its
// scheduler name, not one of gpufleet's own pods, not ended.
func isNative(p *corev1.Pod, scheduler string) bool {
	return scheduler != "" && p.Spec.SchedulerName == scheduler && p.Labels[LabelManaged] != "true" &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// meta reads a key as a label, else as an annotation.
func meta(p *corev1.Pod, key string) (string, bool) {
	if v, ok := p.Labels[key]; ok {
		return v, true
	}
	v, ok := p.Annotations[key]
	return v, ok
}

// gang is what makes a native pod one of several.
type gang struct {
	source, name string // empty source: a pod alone
	// size is the gang's size; exact: exactly that many pods (a label
	// that counts them), else at least (a PodGroup's minCount, an owner's
	// parallelism).
	size     int
	exact    bool
	sizeFrom string
	owner    *core.NativeOwner
	wait     *executor.NativeWait
}

func badGang(field, format string, args ...any) gang {
	return gang{wait: &executor.NativeWait{Reason: ReasonInvalidGang, Field: field, Message: fmt.Sprintf(format, args...), Warning: true}}
}

// gangOf finds a pod's gang, in this order: gpufleet.io/gang, an upstream
// PodGroup (spec.schedulingGroup), KAI's pod-group-name, Kueue's
// pod-group-name, then the pod's owner when it is a Job, a JobSet's Job or
// a PyTorchJob.
func (r *nativeReader) gangOf(ctx context.Context, p *corev1.Pod) gang {
	owner, ownerSize, ownerErr := r.ownerOf(ctx, p)
	explicit := func(source, name, sizeKey string, exact bool) gang {
		g := gang{source: source, name: name, exact: exact, sizeFrom: sizeKey, owner: owner}
		v, ok := meta(p, sizeKey)
		if !ok {
			return badGang(sizeKey, "missing: the pods of gang %q (%s) must say how many they are", name, source)
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > maxGangSize {
			return badGang(sizeKey, "%q is not a whole number of pods from 1 to %d", v, maxGangSize)
		}
		g.size = n
		return g
	}
	if name, ok := meta(p, LabelGang); ok && name != "" {
		return explicit(LabelGang, name, AnnotationGangSize, true)
	}
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil && *sg.PodGroupName != "" {
		name := *sg.PodGroupName
		n, err := r.look.podGroup(ctx, p.Namespace, name)
		if err != nil {
			return gang{wait: &executor.NativeWait{Reason: ReasonInvalidGang, Field: "spec.schedulingGroup.podGroupName",
				Message: fmt.Sprintf("PodGroup %s: %v", name, err), Warning: true}}
		}
		if n == 0 {
			return gang{owner: owner} // a basic policy: each pod alone
		}
		return gang{source: "PodGroup", name: name, size: n, sizeFrom: "PodGroup " + name + " spec.schedulingPolicy.gang.minCount", owner: owner}
	}
	if name, ok := p.Annotations[AnnotationKAIPodGroup]; ok && name != "" {
		for _, key := range []string{AnnotationKAIMinMember, AnnotationGangSize} {
			if _, ok := meta(p, key); ok {
				return explicit(AnnotationKAIPodGroup, name, key, false)
			}
		}
		if ownerErr == nil && ownerSize > 0 {
			return gang{source: AnnotationKAIPodGroup, name: name, size: ownerSize, sizeFrom: owner.Kind + " " + owner.Name, owner: owner}
		}
		return badGang(AnnotationKAIPodGroup, "the size of pod group %q is unknown: set %s (or %s) on its pods", name, AnnotationKAIMinMember, AnnotationGangSize)
	}
	if name, ok := p.Labels[LabelKueuePodGroup]; ok && name != "" {
		return explicit(LabelKueuePodGroup, name, AnnotationKueueGroupCount, true)
	}
	if ownerErr != nil {
		return gang{wait: &executor.NativeWait{Reason: ReasonOwnerUnknown, Field: "metadata.ownerReferences",
			Message: ownerErr.Error(), Warning: true}}
	}
	if owner != nil && ownerSize > 0 {
		return gang{source: "owner", name: owner.Name, size: ownerSize, sizeFrom: owner.Kind + " " + owner.Name, owner: owner}
	}
	return gang{owner: owner}
}

// ownerOf is a pod's top owner and the gang it makes; nil for a pod no
// controller owns.
func (r *nativeReader) ownerOf(ctx context.Context, p *corev1.Pod) (*core.NativeOwner, int, error) {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil {
		return nil, 0, nil
	}
	top, size, err := r.look.owner(ctx, p.Namespace, *ref)
	if err != nil {
		return &core.NativeOwner{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}, 0,
			fmt.Errorf("%s %s, which gpufleet reads to group its pods: %w", ref.Kind, ref.Name, err)
	}
	return &top, size, nil
}

// ask is what one native pod asks for.
type ask struct {
	team, teamFrom string
	prio, prioFrom string
	milliGPU       int64
	milliCPU       int64
	memoryMiB      int64
	wait           *executor.NativeWait
}

// askOf reads a pod's resources, team and priority. What it asks of its
// GPUs is checked first: a share waits whatever its team.
func (r *nativeReader) askOf(p *corev1.Pod) ask {
	var a ask
	gpus, cpu, mem := podResources(p)
	a.milliGPU, a.milliCPU, a.memoryMiB = gpus*1000, cpu, mem
	if a.wait = gpuWait(p, gpus); a.wait != nil {
		return a
	}
	labels := r.opts.TeamLabels
	if len(labels) == 0 {
		labels = DefaultTeamLabels
	}
	for _, k := range labels {
		if v := p.Labels[k]; v != "" {
			a.team, a.teamFrom = cmp.Or(r.opts.TeamAliases[v], v), k
			break
		}
	}
	if a.team == "" && r.opts.NamespaceTeamLabel != "" {
		if v := r.look.namespaceLabels(p.Namespace)[r.opts.NamespaceTeamLabel]; v != "" {
			a.team = cmp.Or(r.opts.TeamAliases[v], v)
			a.teamFrom = fmt.Sprintf("label %s of namespace %s", r.opts.NamespaceTeamLabel, p.Namespace)
		}
	}
	if a.team == "" {
		where := strings.Join(labels, ", ")
		if r.opts.NamespaceTeamLabel != "" {
			where += ", or the namespace's label " + r.opts.NamespaceTeamLabel
		}
		a.wait = &executor.NativeWait{Reason: ReasonNoTeam, Field: labels[0], Warning: true,
			Message: "the pod names no team: gpufleet reads it from the pod's label " + where}
		return a
	}
	for _, k := range []string{LabelPriority, LabelKueuePriority} {
		if v, ok := meta(p, k); ok {
			a.prio, a.prioFrom = v, k
			break
		}
	}
	if a.prio == "" && p.Spec.PriorityClassName != "" {
		// gpufleet's PriorityClasses are gpufleet-<class>; a class of the
		// cluster's own (a global default) is not gpufleet's to judge.
		name := strings.TrimPrefix(p.Spec.PriorityClassName, PriorityClassPrefix)
		if _, ok := core.Class(r.classes, name); ok {
			a.prio, a.prioFrom = name, "priorityClassName"
		}
	}
	return a
}

// gpuWait checks what a pod says of its GPUs besides its nvidia.com/gpu
// limits: gpufleet.io/gpus must agree with them, and fractions (gpufleet's
// or KAI's annotations) wait for a device-sharing path.
func gpuWait(p *corev1.Pod, gpus int64) *executor.NativeWait {
	fraction := func(field, v string) *executor.NativeWait {
		return &executor.NativeWait{Reason: ReasonFractions, Field: field, Warning: true, Message: fmt.Sprintf(
			"%q asks for a share of a GPU; gpufleet admits pods made with kubectl for whole GPUs only, since a share needs a "+
				"device-sharing path it does not set up for them yet: ask for whole GPUs (resources.limits nvidia.com/gpu), "+
				"or submit the share through gpufleet (gpufleet submit --gpus %s)", v, cmp.Or(v, "0.5"))}
	}
	for _, k := range []string{AnnotationKAIFraction, AnnotationKAIMemory} {
		if v, ok := p.Annotations[k]; ok {
			return fraction(k, v)
		}
	}
	v, ok := meta(p, AnnotationGPUs)
	if !ok {
		return nil
	}
	q, err := resource.ParseQuantity(strings.TrimSpace(v))
	m := q.MilliValue()
	switch {
	case err != nil || m <= 0:
		return &executor.NativeWait{Reason: ReasonInvalidGPUs, Field: AnnotationGPUs, Warning: true,
			Message: fmt.Sprintf("%q is not a positive number of GPUs", v)}
	case m < 1000:
		return fraction(AnnotationGPUs, v)
	case m%1000 != 0:
		return &executor.NativeWait{Reason: ReasonInvalidGPUs, Field: AnnotationGPUs, Warning: true,
			Message: fmt.Sprintf("%q is not a whole number of GPUs: above one GPU the count must be whole (a share is of one GPU)", v)}
	case m/1000 != gpus:
		return &executor.NativeWait{Reason: ReasonInvalidGPUs, Field: AnnotationGPUs, Warning: true,
			Message: fmt.Sprintf("%q GPUs, but the containers' resources.limits nvidia.com/gpu add up to %d: the device plugin gives a "+
				"container the GPUs of its limit, so set the limit to the count", v, gpus)}
	}
	return nil
}

// podResources is what a pod asks of a node, as the kubelet counts it: the
// sum over its containers, or the largest init container's when larger.
// GPUs come from nvidia.com/gpu limits (requests when no limit: the API
// server makes an extended resource's request equal its limit); CPU in
// milli-CPU and memory in MiB from requests.
func podResources(p *corev1.Pod) (gpus, milliCPU, memoryMiB int64) {
	one := func(c corev1.Container) (int64, int64, int64) {
		q, ok := c.Resources.Limits[ResourceGPU]
		if !ok {
			q = c.Resources.Requests[ResourceGPU]
		}
		cpu := c.Resources.Requests[corev1.ResourceCPU]
		mem := c.Resources.Requests[corev1.ResourceMemory]
		return q.Value(), cpu.MilliValue(), mem.Value() >> 20
	}
	for _, c := range p.Spec.Containers {
		g, cpu, mem := one(c)
		gpus, milliCPU, memoryMiB = gpus+g, milliCPU+cpu, memoryMiB+mem
	}
	for _, c := range p.Spec.InitContainers {
		g, cpu, mem := one(c)
		gpus, milliCPU, memoryMiB = max(gpus, g), max(milliCPU, cpu), max(memoryMiB, mem)
	}
	return gpus, milliCPU, memoryMiB
}

// pending is one gang (or pod alone) as the pods show it.
type pending struct {
	g gang
	// waiting are its pods that wait for gpufleet; present counts the
	// others, bound or already a workload's (taken), which count toward
	// its size.
	waiting []*corev1.Pod
	present int
	// sizes are the sizes its pods give, when they disagree.
	sizes []int
}

// submissions groups the native pods of pods into submissions: one per
// gang (or pod alone) that has pods waiting for gpufleet and not taken (a
// workload of gpufleet's holds them already), each ready to be admitted or
// saying why it waits.
func (r *nativeReader) submissions(ctx context.Context, pods []*corev1.Pod, taken func(uid string) bool) []executor.NativeSubmission {
	pods = slices.Clone(pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	type key struct{ ns, source, name string }
	groups := map[key]*pending{}
	var order []key
	for _, p := range pods {
		if !isNative(p, r.opts.SchedulerName) || p.DeletionTimestamp != nil {
			continue
		}
		g := r.gangOf(ctx, p)
		k := key{p.Namespace, g.source, g.name}
		if g.source == "" {
			k.name = p.Name
		}
		pg := groups[k]
		if pg == nil {
			pg = &pending{g: g}
			groups[k] = pg
			order = append(order, k)
		} else if pg.g.wait == nil && g.wait != nil {
			pg.g.wait = g.wait
		} else if g.size != pg.g.size && !slices.Contains(pg.sizes, g.size) {
			pg.sizes = append(pg.sizes, g.size)
		}
		if p.Spec.NodeName == "" && !taken(string(p.UID)) {
			pg.waiting = append(pg.waiting, p)
		} else {
			pg.present++
		}
	}
	var out []executor.NativeSubmission
	for _, k := range order {
		if pg := groups[k]; len(pg.waiting) > 0 {
			out = append(out, r.submission(pg))
		}
	}
	return out
}

// submission is the submission of one gang's waiting pods.
func (r *nativeReader) submission(pg *pending) executor.NativeSubmission {
	first := pg.waiting[0]
	g := pg.g
	n := core.Native{Cluster: r.opts.Cluster, Namespace: first.Namespace, Name: cmp.Or(g.name, first.Name), Group: g.source, Owner: g.owner}
	for _, p := range pg.waiting {
		n.Pods = append(n.Pods, core.NativePod{Name: p.Name, UID: string(p.UID)})
	}
	sub := executor.NativeSubmission{Native: n}
	wait := func(w *executor.NativeWait) executor.NativeSubmission {
		sub.Wait = w
		return sub
	}
	if g.wait != nil {
		return wait(g.wait)
	}
	if len(pg.sizes) > 0 {
		sizes := append([]int{g.size}, pg.sizes...)
		slices.Sort(sizes)
		return wait(&executor.NativeWait{Reason: ReasonInvalidGang, Field: g.sizeFrom, Warning: true,
			Message: fmt.Sprintf("the pods of gang %q disagree on its size (%s): give them all the same", g.name, joinInts(sizes))})
	}
	if g.source != "" {
		have := len(pg.waiting) + pg.present
		switch need := max(1, g.size-pg.present); {
		case g.exact && have > g.size:
			return wait(&executor.NativeWait{Reason: ReasonInvalidGang, Field: g.sizeFrom, Warning: true,
				Message: fmt.Sprintf("gang %q has %d pods, more than its size %d", g.name, have, g.size)})
		case len(pg.waiting) < need:
			return wait(&executor.NativeWait{Reason: ReasonGangWaiting, Field: g.sizeFrom,
				Message: fmt.Sprintf("gang %q has %d of its %d pods; gpufleet admits them all at once when the rest are made", g.name, have, g.size)})
		}
	}
	var asks []ask
	for _, p := range pg.waiting {
		a := r.askOf(p)
		if a.wait != nil {
			return wait(a.wait)
		}
		asks = append(asks, a)
	}
	a0 := asks[0]
	req := core.Request{Replicas: len(asks), NodeSelector: maps.Clone(first.Spec.NodeSelector)}
	var grace time.Duration
	for i, a := range asks {
		p := pg.waiting[i]
		switch {
		case a.team != a0.team:
			return wait(&executor.NativeWait{Reason: ReasonInvalidGang, Field: a.teamFrom, Warning: true,
				Message: fmt.Sprintf("the pods of gang %q name different teams (%s, %s): a gang is one team's", g.name, a0.team, a.team)})
		case a.prio != a0.prio:
			return wait(&executor.NativeWait{Reason: ReasonInvalidGang, Field: cmp.Or(a.prioFrom, a0.prioFrom), Warning: true,
				Message: fmt.Sprintf("the pods of gang %q name different priority classes (%q, %q)", g.name, a0.prio, a.prio)})
		case !maps.Equal(p.Spec.NodeSelector, first.Spec.NodeSelector):
			return wait(&executor.NativeWait{Reason: ReasonInvalidGang, Field: "spec.nodeSelector", Warning: true,
				Message: fmt.Sprintf("the pods of gang %q select different nodes: gpufleet places a gang's pods alike", g.name)})
		}
		req.MilliGPU, req.MilliCPU, req.MemoryMiB = max(req.MilliGPU, a.milliGPU), max(req.MilliCPU, a.milliCPU), max(req.MemoryMiB, a.memoryMiB)
		if s := p.Spec.TerminationGracePeriodSeconds; s != nil {
			grace = max(grace, time.Duration(*s)*time.Second)
		}
	}
	if req.MilliGPU == 0 {
		return wait(&executor.NativeWait{Reason: ReasonNoGPU, Field: "resources.limits[nvidia.com/gpu]", Warning: true,
			Message: "the pod asks for no GPU, and gpufleet places GPU pods: leave schedulerName out to have kube-scheduler place it"})
	}
	if r.opts.Cluster != "" {
		if req.NodeSelector == nil {
			req.NodeSelector = map[string]string{}
		}
		req.NodeSelector[core.LabelCluster] = r.opts.Cluster
	}
	sub.Team, sub.TeamFrom = a0.team, a0.teamFrom
	sub.Priority, sub.PriorityFrom = a0.prio, a0.prioFrom
	sub.Request, sub.GracePeriod = req, grace
	sub.Labels = sharedLabels(pg.waiting)
	sub.Labels[core.LabelNativeNamespace] = n.Namespace
	if n.Owner != nil {
		sub.Labels[core.LabelNativeOwner] = n.Owner.String(n.Namespace)
	}
	return sub
}

// sharedLabels are the labels every pod carries with the same value.
func sharedLabels(pods []*corev1.Pod) map[string]string {
	out := maps.Clone(pods[0].Labels)
	if out == nil {
		out = map[string]string{}
	}
	for _, p := range pods[1:] {
		maps.DeleteFunc(out, func(k, v string) bool { return p.Labels[k] != v })
	}
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
