package kubernetes

// End-to-end tests of native pods: pods made with client-go, as kubectl or
// a controller makes them, with schedulerName gpufleet's, admitted by the
// real gpufleet server through its quotas, bound by it (the Binding
// subresource), evicted on preemption, and told why they wait.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// nativeE2E is a test world whose server admits the native pods of its
// scheduler name, in a namespace of the test's.
type nativeE2E struct {
	*e2e
	sched string
	ns    string
}

// newNativeE2E makes the nodes and the namespace and starts the server,
// which admits pods whose schedulerName is sched.
func newNativeE2E(t *testing.T, nodes, gpus int, sched string) *nativeE2E {
	t.Helper()
	x := newE2E(t, nodes, gpus)
	n := &nativeE2E{e2e: x, sched: sched, ns: x.nsPrefix() + "native"}
	if _, err := x.client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.restart()
	return n
}

// restart starts the server (again) on the test's data dir.
func (n *nativeE2E) restart() {
	n.t.Helper()
	n.srv = n.startIn(n.data, map[string]any{"kubernetes": map[string]any{
		"kubeconfig": n.kubeconfig, "namespaceTemplate": n.nsPrefix() + "{team}", "nodeSelector": DefaultPoolLabel + "=" + n.id,
		"defaultImage": e2eImage, "native": map[string]any{"schedulerName": n.sched},
	}})
}

func (n *nativeE2E) team(tm api.Team) {
	n.t.Helper()
	if _, err := n.srv.client.CreateTeam(n.t.Context(), &tm); err != nil {
		n.t.Fatal(err)
	}
}

// pod is a native pod of team asking for gpus GPUs, changed by mods.
func (n *nativeE2E) pod(name, team string, gpus int, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: n.ns, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: n.sched, RestartPolicy: corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []corev1.Container{{Name: "trainer", Image: e2eImage, Command: sleepCmd(),
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}}}}},
	}
	if team != "" {
		p.Labels[LabelTeam] = team
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func (n *nativeE2E) create(ps ...*corev1.Pod) {
	n.t.Helper()
	for _, p := range ps {
		if _, err := n.client.CoreV1().Pods(p.Namespace).Create(n.t.Context(), p, metav1.CreateOptions{}); err != nil {
			n.t.Fatalf("create pod %s: %v", p.Name, err)
		}
	}
}

func (n *nativeE2E) get(name string) *corev1.Pod {
	n.t.Helper()
	p, err := n.client.CoreV1().Pods(n.ns).Get(n.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatalf("pod %s: %v", name, err)
	}
	return p
}

// waitBound waits until each pod is bound to a node and Running.
func (n *nativeE2E) waitBound(timeout time.Duration, names ...string) {
	n.t.Helper()
	n.waitFor(timeout, "pods "+strings.Join(names, ", ")+" bound and Running", func() (bool, string) {
		for _, name := range names {
			p, err := n.client.CoreV1().Pods(n.ns).Get(n.t.Context(), name, metav1.GetOptions{})
			if err != nil || p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("pod %s: %v %s", name, err, podWords(p))
			}
		}
		return true, ""
	})
}

func podWords(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("node %q, %s, conditions %+v", p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
}

// events lists the Events about a pod, oldest first.
func (n *nativeE2E) events(pod string) []corev1.Event {
	n.t.Helper()
	l, err := n.client.CoreV1().Events(n.ns).List(n.t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		n.t.Fatal(err)
	}
	slices.SortFunc(l.Items, func(a, b corev1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return l.Items
}

// waitEvent waits for an Event from gpufleet about pod with reason whose
// message holds each of words, and returns it.
func (n *nativeE2E) waitEvent(timeout time.Duration, pod, reason string, words ...string) corev1.Event {
	n.t.Helper()
	var found corev1.Event
	n.waitFor(timeout, fmt.Sprintf("event %s on pod %s", reason, pod), func() (bool, string) {
		evs := n.events(pod)
		for _, e := range evs {
			if e.Reason == reason && e.Source.Component == eventSource && containsAll(e.Message, words...) {
				found = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("events: %s", eventWords(evs))
	})
	return found
}

func eventWords(evs []corev1.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return strings.Join(out, " | ")
}

func containsAll(s string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// byPod maps each native pod's name to the workloads that held it, as
// `gpufleet get workloads -o json` lists them (oldest first).
func (n *nativeE2E) byPod() map[string][]api.Workload {
	n.t.Helper()
	out := map[string][]api.Workload{}
	for _, w := range n.cliWorkloads() {
		if w.Native == nil {
			continue
		}
		for _, p := range w.Native.Pods {
			out[p] = append(out[p], w)
		}
	}
	return out
}

// waitWorkload waits until the latest workload of pod is in phase.
func (n *nativeE2E) waitWorkload(timeout time.Duration, pod, phase string) api.Workload {
	n.t.Helper()
	var w api.Workload
	n.waitFor(timeout, "the workload of pod "+pod+" "+phase, func() (bool, string) {
		ws := n.byPod()[pod]
		if len(ws) == 0 {
			return false, "no workload"
		}
		w = ws[len(ws)-1]
		return w.Status.Phase == phase, fmt.Sprintf("%s %s: %s", w.Status.Phase, w.Status.Reason, w.Status.Message)
	})
	return w
}

// TestE2ENativeQuota: three 1-GPU pods of team k, whose limit is 2, made as
// kubectl makes them: two are bound by gpufleet, each with a Scheduled
// Event naming its node; the third waits, PodScheduled=False, with an
// Event naming the limit; deleting a bound one ends its workload
// (Cancelled, its GPU time recorded) and binds the third within 30 s.
// gpufleet get workloads lists them with their namespace/name.
func TestE2ENativeQuota(t *testing.T) {
	n := newNativeE2E(t, 1, 8, DefaultSchedulerName)
	limit := int64(2000)
	n.team(api.Team{Name: "k", LimitMilliGPU: &limit})
	n.create(n.pod("a", "k", 1), n.pod("b", "k", 1))
	n.waitBound(30*time.Second, "a", "b")
	n.create(n.pod("c", "k", 1))
	for _, name := range []string{"a", "b"} {
		n.waitEvent(10*time.Second, name, EventScheduled, n.get(name).Spec.NodeName, "team k")
	}
	ev := n.waitEvent(30*time.Second, "c", "QuotaLimit", "limit")
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("event %s is %s, want Warning", ev.Reason, ev.Type)
	}
	c := n.get("c")
	if cond := podScheduled(c); cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != "QuotaLimit" || !strings.Contains(cond.Message, "limit") {
		t.Errorf("pod c's PodScheduled condition: %+v", cond)
	}
	if c.Spec.NodeName != "" {
		t.Fatalf("pod c bound to %s beyond the team's limit", c.Spec.NodeName)
	}

	// The CLI lists them, with their namespace and name.
	out := string(n.cli("get", "workloads"))
	for _, name := range []string{"a", "b", "c"} {
		if !strings.Contains(out, n.ns+"/"+name) {
			t.Errorf("gpufleet get workloads does not name %s/%s:\n%s", n.ns, name, out)
		}
	}
	ws := n.byPod()
	for _, name := range []string{"a", "b", "c"} {
		if len(ws[name]) != 1 {
			t.Fatalf("pod %s is held by %d workloads, want 1", name, len(ws[name]))
		}
		w := ws[name][0]
		if w.Team != "k" || w.Native.Namespace != n.ns || w.Labels[core.LabelNativeNamespace] != n.ns || w.Resources.GPUs != 1000 {
			t.Errorf("workload of pod %s: team %s, native %+v, labels %v, %v GPUs", name, w.Team, w.Native, w.Labels, w.Resources.GPUs)
		}
	}

	start := time.Now()
	if err := n.client.CoreV1().Pods(n.ns).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitBound(30*time.Second, "c")
	t.Logf("pod c bound %v after pod a's deletion", time.Since(start).Round(10*time.Millisecond))
	n.waitEvent(10*time.Second, "c", EventScheduled, n.get("c").Spec.NodeName)
	a := n.waitWorkload(30*time.Second, "a", api.PhaseCancelled)
	if a.Status.Reason != ReasonPodDeleted || a.Status.FinishedAt == nil {
		t.Errorf("workload of the deleted pod: %s %s, finished %v", a.Status.Phase, a.Status.Reason, a.Status.FinishedAt)
	}
	// Its GPU time is counted, as any workload's.
	rep, err := n.srv.client.Cost(t.Context(), api.CostQuery{By: "label:" + core.LabelNativeNamespace})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Items, func(r api.CostRow) bool { return r.Name == n.ns && r.GPUHours > 0 }) {
		t.Errorf("cost by namespace has no GPU time for %s: %+v", n.ns, rep.Items)
	}
}

// TestE2ENativeGangs: two pods labelled as one gang of size 2 bind
// together, one waiting (GangIncomplete) until the other is made; so do
// the pods of a Kueue pod group, of a KAI pod group, and of an upstream
// PodGroup where the API server serves scheduling.k8s.io/v1beta1.
func TestE2ENativeGangs(t *testing.T) {
	n := newNativeE2E(t, 2, 4, "gpufleet-"+n2(t))
	n.team(api.Team{Name: "k"})
	gangs := []struct {
		name string
		mod  func(p *corev1.Pod)
	}{
		{"gf", func(p *corev1.Pod) {
			p.Labels[LabelGang] = "gf"
			p.Annotations[AnnotationGangSize] = "2"
		}},
		{"kueue", func(p *corev1.Pod) {
			p.Labels[LabelKueuePodGroup] = "kueue"
			p.Annotations[AnnotationKueueGroupCount] = "2"
		}},
		{"kai", func(p *corev1.Pod) {
			p.Annotations[AnnotationKAIPodGroup] = "kai"
			p.Annotations[AnnotationKAIMinMember] = "2"
		}},
	}
	if _, err := n.client.SchedulingV1beta1().PodGroups(n.ns).Create(t.Context(), &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "upstream", Namespace: n.ns},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}},
	}, metav1.CreateOptions{}); err == nil {
		gangs = append(gangs, struct {
			name string
			mod  func(p *corev1.Pod)
		}{"upstream", func(p *corev1.Pod) {
			p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: new("upstream")}
		}})
	} else {
		t.Logf("no upstream PodGroup API (scheduling.k8s.io/v1beta1): %v", err)
	}
	for _, g := range gangs {
		first := n.pod(g.name+"-0", "k", 1, g.mod)
		n.create(first)
		n.waitEvent(30*time.Second, first.Name, ReasonGangWaiting, "1 of its 2 pods")
		if p := n.get(first.Name); p.Spec.NodeName != "" {
			t.Fatalf("gang %s: its first pod bound alone, to %s", g.name, p.Spec.NodeName)
		}
		n.create(n.pod(g.name+"-1", "k", 1, g.mod))
		n.waitBound(30*time.Second, g.name+"-0", g.name+"-1")
		ws := n.byPod()
		w0, w1 := ws[g.name+"-0"], ws[g.name+"-1"]
		if len(w0) != 1 || len(w1) != 1 || w0[0].ID != w1[0].ID || w0[0].Replicas != 2 {
			t.Errorf("gang %s: workloads %+v and %+v, want one of 2 replicas", g.name, w0, w1)
			continue
		}
		if w := w0[0]; w.Native.Name != g.name || !slices.Equal(w.Native.Pods, []string{g.name + "-0", g.name + "-1"}) {
			t.Errorf("gang %s: native %+v", g.name, w.Native)
		}
	}
}

// n2 is a short random suffix for a scheduler name of the test's own.
func n2(t *testing.T) string {
	return strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
}

// TestE2ENativeBadInput: a fraction (gpufleet's annotation or KAI's), a
// team label naming no team, a gang whose size disagrees among its pods and
// a GPU count that is not whole: each pod stays Pending with a Warning
// Event naming the label or annotation and the problem, and nothing is
// admitted in its place; a good pod made after them runs.
func TestE2ENativeBadInput(t *testing.T) {
	n := newNativeE2E(t, 1, 8, "gpufleet-"+n2(t))
	n.team(api.Team{Name: "k"})
	cases := []struct {
		pod           *corev1.Pod
		reason, field string
		words         []string
	}{
		{n.pod("half", "k", 0, func(p *corev1.Pod) { p.Annotations[AnnotationGPUs] = "0.5" }), ReasonFractions, AnnotationGPUs, []string{"0.5", "share"}},
		{n.pod("kai-half", "k", 0, func(p *corev1.Pod) { p.Annotations[AnnotationKAIFraction] = "0.5" }), ReasonFractions, AnnotationKAIFraction, []string{"share"}},
		{n.pod("odd", "k", 1, func(p *corev1.Pod) { p.Annotations[AnnotationGPUs] = "1.5" }), ReasonInvalidGPUs, AnnotationGPUs, []string{"1.5", "whole"}},
		{n.pod("noteam", "nope", 1), "UnknownTeam", LabelTeam, []string{`"nope"`, "does not exist"}},
		{n.pod("orphan", "", 1), ReasonNoTeam, LabelTeam, []string{"no team"}},
		{n.pod("mixed-0", "k", 1, func(p *corev1.Pod) { p.Labels[LabelGang] = "mixed"; p.Annotations[AnnotationGangSize] = "2" }),
			ReasonInvalidGang, AnnotationGangSize, []string{"disagree", "2, 3"}},
		{n.pod("mixed-1", "k", 1, func(p *corev1.Pod) { p.Labels[LabelGang] = "mixed"; p.Annotations[AnnotationGangSize] = "3" }),
			ReasonInvalidGang, AnnotationGangSize, []string{"disagree"}},
		{n.pod("nosize", "k", 1, func(p *corev1.Pod) { p.Labels[LabelGang] = "nosize" }), ReasonInvalidGang, AnnotationGangSize, []string{"missing"}},
	}
	for _, c := range cases {
		n.create(c.pod)
	}
	for _, c := range cases {
		ev := n.waitEvent(30*time.Second, c.pod.Name, c.reason, append([]string{c.field + ":"}, c.words...)...)
		if ev.Type != corev1.EventTypeWarning {
			t.Errorf("pod %s: event %s is %s, want Warning", c.pod.Name, ev.Reason, ev.Type)
		}
		if cond := podScheduled(n.get(c.pod.Name)); cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != c.reason {
			t.Errorf("pod %s: PodScheduled %+v", c.pod.Name, cond)
		}
	}
	n.create(n.pod("good", "k", 1))
	n.waitBound(30*time.Second, "good")
	ws := n.byPod()
	for _, c := range cases {
		if p := n.get(c.pod.Name); p.Spec.NodeName != "" || len(ws[c.pod.Name]) > 0 {
			t.Errorf("pod %s: bound to %q, held by %d workloads; want neither", c.pod.Name, p.Spec.NodeName, len(ws[c.pod.Name]))
		}
	}
	// Each refusal is shown once, however often gpufleet looks again.
	for _, c := range cases {
		var same int
		for _, e := range n.events(c.pod.Name) {
			if e.Reason == c.reason {
				same++
			}
		}
		if same != 1 {
			t.Errorf("pod %s: %d %s events, want 1", c.pod.Name, same, c.reason)
		}
	}
}

// TestE2ENativePreemption: a native production pod of a team within its
// guarantee preempts a native pod of a team that borrows: the victim is
// evicted (the Eviction API) with an Event saying why, its workload ends
// Failed with that reason, and the production pod is bound.
func TestE2ENativePreemption(t *testing.T) {
	n := newNativeE2E(t, 1, 4, "gpufleet-"+n2(t))
	n.team(api.Team{Name: "low"})
	n.team(api.Team{Name: "prod", GuaranteedMilliGPU: 2000, PriorityClasses: []string{"production", "training"}})
	var low []string
	for i := range 4 {
		name := fmt.Sprintf("low-%d", i)
		low = append(low, name)
		n.create(n.pod(name, "low", 1))
	}
	n.waitBound(30*time.Second, low...)
	n.create(n.pod("prod", "prod", 2, func(p *corev1.Pod) { p.Spec.PriorityClassName = PriorityClassPrefix + "production" }))
	n.waitBound(60*time.Second, "prod")
	if w := n.waitWorkload(10*time.Second, "prod", api.PhaseRunning); w.Priority != "production" {
		t.Errorf("prod's workload has class %s, want production (from priorityClassName)", w.Priority)
	}
	var evicted []string
	n.waitFor(30*time.Second, "two low pods evicted", func() (bool, string) {
		evicted = nil
		for _, name := range low {
			if _, err := n.client.CoreV1().Pods(n.ns).Get(t.Context(), name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				evicted = append(evicted, name)
			}
		}
		return len(evicted) == 2, fmt.Sprintf("evicted: %v", evicted)
	})
	for _, name := range evicted {
		w := n.waitWorkload(30*time.Second, name, api.PhaseFailed)
		if w.Status.Reason != "Preempted" && w.Status.Reason != "Reclaimed" {
			t.Errorf("workload of evicted pod %s: reason %s (%s)", name, w.Status.Reason, w.Status.Message)
		}
		ev := n.waitEvent(10*time.Second, name, w.Status.Reason, "gpufleet evicts the pod")
		if ev.Type != corev1.EventTypeWarning || len(ev.Message) < len("gpufleet evicts the pod (Preempted): x") {
			t.Errorf("eviction event of %s: %s %q", name, ev.Type, ev.Message)
		}
	}
}

// TestE2ENativeRestartAfterKill9: gpufleet killed with SIGKILL and started
// again re-adopts the native pods it bound (their workloads still at their
// first attempt, no pod bound twice: one Scheduled Event each), ends the
// workload of a pod deleted while it was down (Cancelled), keeps the one
// workload of a pod that waits (not a second), and admits a pod made while
// it was down.
func TestE2ENativeRestartAfterKill9(t *testing.T) {
	n := newNativeE2E(t, 1, 4, "gpufleet-"+n2(t))
	limit := int64(3000)
	n.team(api.Team{Name: "k", LimitMilliGPU: &limit})
	n.create(n.pod("a", "k", 1), n.pod("b", "k", 1), n.pod("c", "k", 1))
	n.waitBound(30*time.Second, "a", "b", "c")
	n.create(n.pod("wait", "k", 1))
	n.waitEvent(30*time.Second, "wait", "QuotaLimit")
	nodes := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		nodes[name] = n.get(name).Spec.NodeName
	}
	before := n.byPod()

	n.srv.kill9(t)
	if err := n.client.CoreV1().Pods(n.ns).Delete(t.Context(), "c", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(30*time.Second, "pod c gone", func() (bool, string) {
		_, err := n.client.CoreV1().Pods(n.ns).Get(t.Context(), "c", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	n.create(n.pod("late", "k", 1, func(p *corev1.Pod) { p.Annotations["note"] = "made while gpufleet was down" }))
	n.restart()

	n.waitWorkload(30*time.Second, "c", api.PhaseCancelled)
	// c's GPU is free again: the waiting pod or the late one takes it.
	n.waitFor(30*time.Second, "one of wait and late bound", func() (bool, string) {
		return n.get("wait").Spec.NodeName != "" || n.get("late").Spec.NodeName != "", ""
	})
	after := n.byPod()
	for _, name := range []string{"a", "b"} {
		ws := after[name]
		if len(ws) != 1 || ws[0].ID != before[name][0].ID || ws[0].Status.Phase != api.PhaseRunning || ws[0].Status.Attempts != 1 {
			t.Errorf("pod %s after the restart: workloads %+v, want its first, Running at attempt 1", name, ws)
		}
		if p := n.get(name); p.Spec.NodeName != nodes[name] {
			t.Errorf("pod %s moved from %s to %s", name, nodes[name], p.Spec.NodeName)
		}
	}
	if ws := after["wait"]; len(ws) != 1 || ws[0].ID != before["wait"][0].ID {
		t.Errorf("pod wait: workloads %+v after the restart, want its one workload from before", ws)
	}
	if len(after["late"]) != 1 {
		t.Errorf("pod late, made while gpufleet was down: %d workloads, want 1", len(after["late"]))
	}
	for _, name := range []string{"a", "b", "wait", "late"} {
		var scheduled int
		for _, e := range n.events(name) {
			if e.Reason == EventScheduled {
				scheduled++
			}
		}
		if scheduled > 1 {
			t.Errorf("pod %s: %d Scheduled events: bound twice", name, scheduled)
		}
	}
}

// TestE2ENativeJob: the pods of a Job (made by the real Job controller)
// are grouped by their owner: parallelism 2, completions 4, in a team
// whose limit is 2: two gangs of 2 in turn (KWOK completes a Job's pods at
// once), each a workload attributed to the Job, both Succeeded.
func TestE2ENativeJob(t *testing.T) {
	n := newNativeE2E(t, 1, 4, "gpufleet-"+n2(t))
	limit := int64(2000)
	n.team(api.Team{Name: "k", LimitMilliGPU: &limit})
	tmpl := n.pod("", "k", 1)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: n.ns},
		Spec: batchv1.JobSpec{Parallelism: new(int32(2)), Completions: new(int32(4)),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels}, Spec: tmpl.Spec}},
	}
	if _, err := n.client.BatchV1().Jobs(n.ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitFor(90*time.Second, "the Job complete", func() (bool, string) {
		j, err := n.client.BatchV1().Jobs(n.ns).Get(t.Context(), "train", metav1.GetOptions{})
		return err == nil && j.Status.Succeeded == 4, fmt.Sprintf("%v %+v", err, j.Status)
	})
	var ws []api.Workload
	n.waitFor(30*time.Second, "two Succeeded workloads of the Job", func() (bool, string) {
		ws = nil
		for _, w := range n.cliWorkloads() {
			if w.Native != nil && w.Native.Owner != nil && w.Native.Owner.Name == "train" {
				ws = append(ws, w)
			}
		}
		if len(ws) != 2 {
			return false, fmt.Sprintf("%d workloads", len(ws))
		}
		for _, w := range ws {
			if w.Status.Phase != api.PhaseSucceeded || w.Replicas != 2 || w.Native.Group != "owner" ||
				w.Labels[core.LabelNativeOwner] != "Job/"+n.ns+"/train" {
				return false, fmt.Sprintf("%s: %s, %d replicas, group %q, labels %v", w.ID, w.Status.Phase, w.Replicas, w.Native.Group, w.Labels)
			}
		}
		return true, ""
	})
}

// pyTorchJobGVR is the Kubeflow training-operator's PyTorchJob.
var pyTorchJobGVR = schema.GroupVersionResource{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}

// installPyTorchJobCRD creates the training-operator's PyTorchJob CRD
// (testdata) unless it exists, and waits until the API server serves it.
func installPyTorchJobCRD(t *testing.T, x *e2e, dyn dynamic.Interface) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "pytorchjob-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatalf("CRD yaml: %v", err)
	}
	if _, err := dyn.Resource(crdGVR).Create(t.Context(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the PyTorchJob CRD: %v", err)
	}
	x.waitFor(30*time.Second, "the PyTorchJob API served", func() (bool, string) {
		_, err := dyn.Resource(pyTorchJobGVR).Namespace("default").List(t.Context(), metav1.ListOptions{Limit: 1})
		return err == nil, fmt.Sprint(err)
	})
}

// TestE2ENativePyTorchJob: a PyTorchJob of 2 workers (the training-
// operator's v1 CRD; the pods made as its operator makes them: named
// <job>-worker-<i>, its labels, owned by the job) is admitted as one gang
// within its team's quota: one worker waits for the other, then both are
// bound together, one workload attributed to the PyTorchJob. A production
// pod of another team then preempts the gang: both workers are evicted,
// and the workers the operator makes again are a new workload of the same
// owner.
func TestE2ENativePyTorchJob(t *testing.T) {
	n := newNativeE2E(t, 1, 2, "gpufleet-"+n2(t))
	dyn, err := Dynamic(n.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	installPyTorchJobCRD(t, n.e2e, dyn)
	limit := int64(2000)
	n.team(api.Team{Name: "ml", LimitMilliGPU: &limit})
	n.team(api.Team{Name: "prod", GuaranteedMilliGPU: 2000, PriorityClasses: []string{"production"}})
	worker := map[string]any{
		"replicas": int64(2), "restartPolicy": "OnFailure",
		"template": map[string]any{"spec": map[string]any{"schedulerName": n.sched, "containers": []any{map[string]any{
			"name": "pytorch", "image": e2eImage, "resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": int64(1)}}}}}},
	}
	job, err := dyn.Resource(pyTorchJobGVR).Namespace(n.ns).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": map[string]any{"name": "mnist", "namespace": n.ns},
		"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{"Worker": worker}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the PyTorchJob: %v", err)
	}
	// What the training-operator makes (pkg/controller.v1/common/pod.go).
	operatorPod := func(i int) *corev1.Pod {
		return n.pod(fmt.Sprintf("mnist-worker-%d", i), "", 1, func(p *corev1.Pod) {
			p.Labels = map[string]string{"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "pytorchjob-controller",
				"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": strconv.Itoa(i), LabelKueueQueue: "ml"}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "PyTorchJob", Name: "mnist", UID: types.UID(job.GetUID()),
				Controller: new(true), BlockOwnerDeletion: new(true)}}
			p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
		})
	}
	n.create(operatorPod(0))
	n.waitEvent(30*time.Second, "mnist-worker-0", ReasonGangWaiting, "1 of its 2 pods")
	n.create(operatorPod(1))
	n.waitBound(30*time.Second, "mnist-worker-0", "mnist-worker-1")
	w := n.waitWorkload(10*time.Second, "mnist-worker-0", api.PhaseRunning)
	if w.Team != "ml" || w.Replicas != 2 || w.Native.Owner == nil || w.Native.Owner.Kind != "PyTorchJob" || w.Native.Owner.Name != "mnist" ||
		w.Labels[core.LabelNativeOwner] != "PyTorchJob/"+n.ns+"/mnist" {
		t.Fatalf("the PyTorchJob's workload: team %s, %d replicas, native %+v, labels %v", w.Team, w.Replicas, w.Native, w.Labels)
	}
	if d := string(n.cli("describe", w.ID)); !containsAll(d, n.ns, "mnist-worker-0, mnist-worker-1", "PyTorchJob/mnist (kubeflow.org/v1)") {
		t.Errorf("gpufleet describe %s does not say where its pods are:\n%s", w.ID, d)
	}

	n.create(n.pod("serve", "prod", 2, func(p *corev1.Pod) { p.Labels[LabelPriority] = "production" }))
	n.waitBound(60*time.Second, "serve")
	gone := n.waitWorkload(30*time.Second, "mnist-worker-0", api.PhaseFailed)
	if gone.ID != w.ID || (gone.Status.Reason != "Preempted" && gone.Status.Reason != "Reclaimed") {
		t.Errorf("the preempted gang: %s %s %s", gone.ID, gone.Status.Phase, gone.Status.Reason)
	}
	for i := range 2 {
		name := fmt.Sprintf("mnist-worker-%d", i)
		n.waitFor(30*time.Second, name+" evicted", func() (bool, string) {
			_, err := n.client.CoreV1().Pods(n.ns).Get(t.Context(), name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		n.create(operatorPod(i)) // the operator makes it again
	}
	n.waitFor(30*time.Second, "the new workers a new workload of the PyTorchJob", func() (bool, string) {
		ws := n.byPod()["mnist-worker-0"]
		if len(ws) != 2 {
			return false, fmt.Sprintf("%d workloads", len(ws))
		}
		nw := ws[1]
		return nw.ID != w.ID && nw.Status.Phase == api.PhasePending && nw.Labels[core.LabelNativeOwner] == w.Labels[core.LabelNativeOwner] && nw.Replicas == 2,
			fmt.Sprintf("%s %s labels %v", nw.ID, nw.Status.Phase, nw.Labels)
	})
	// It waits, and says why on its pods.
	n.waitFor(30*time.Second, "the new workers told why they wait", func() (bool, string) {
		c := podScheduled(n.get("mnist-worker-1"))
		return c != nil && c.Status == corev1.ConditionFalse && c.Message != "", podWords(n.get("mnist-worker-1"))
	})
}
