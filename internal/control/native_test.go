package control_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
	"github.com/gpufleet/gpufleet/internal/store"
)

// nativeSource is a cluster's native pods as the admission sees them: the
// submissions its pods make (each offered until a workload holds one of
// its pods), the pods gone, and the waits shown on them.
type nativeSource struct {
	mu    sync.Mutex
	subs  []executor.NativeSubmission
	gone  map[string]bool // pod UID → deleted
	shown []shownWait
	ch    chan struct{}
}

type shownWait struct {
	Pods                   string
	Reason, Field, Message string
	Warning                bool
}

var _ control.NativeSource = (*nativeSource)(nil)

func newNativeSource() *nativeSource {
	return &nativeSource{gone: map[string]bool{}, ch: make(chan struct{}, 1)}
}

func (s *nativeSource) add(sub executor.NativeSubmission) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, sub)
}

func (s *nativeSource) NativeSubmissions(_ context.Context, taken func(uid string) bool) []executor.NativeSubmission {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []executor.NativeSubmission
	for _, sub := range s.subs {
		if !slices.ContainsFunc(sub.Native.PodUIDs(), func(u string) bool { return taken(u) || s.gone[u] }) {
			out = append(out, sub)
		}
	}
	return out
}

func (s *nativeSource) NativePodLive(_ string, p core.NativePod) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.gone[p.UID]
}

func (s *nativeSource) NativeWait(_ context.Context, n core.Native, w executor.NativeWait) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shown = append(s.shown, shownWait{Pods: n.Namespace + "/" + n.Name, Reason: w.Reason, Field: w.Field, Message: w.Message, Warning: w.Warning})
	return nil
}

func (s *nativeSource) NativeChanged() <-chan struct{} { return s.ch }

// takeShown returns the waits shown since the last call.
func (s *nativeSource) takeShown() []shownWait {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.shown
	s.shown = nil
	return out
}

// nativeSub is a submission of pods ns/name (UIDs name-0, name-1, ...) of
// team asking for milliGPU each.
func nativeSub(name string, team string, pods int, milliGPU int64) executor.NativeSubmission {
	n := core.Native{Namespace: "ml", Name: name, Owner: &core.NativeOwner{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: "job-" + name}}
	for i := range pods {
		p := name + "-" + string(rune('0'+i))
		n.Pods = append(n.Pods, core.NativePod{Name: p, UID: "uid-" + p})
	}
	return executor.NativeSubmission{Native: n, Team: team, TeamFrom: "gpufleet.io/team", Request: core.Request{MilliGPU: milliGPU, Replicas: pods},
		Labels: map[string]string{core.LabelNativeNamespace: "ml", core.LabelNativeOwner: "Job/ml/" + name}}
}

func (h *harness) admission(src *nativeSource) *control.NativeAdmission {
	return &control.NativeAdmission{Store: h.store, Source: src, Now: h.clock.Now}
}

// nativeWorkloads lists the workloads of native pods, in submission order.
func (h *harness) nativeWorkloads() []*core.Workload {
	h.t.Helper()
	ws, err := h.store.Workloads(context.Background(), store.WorkloadFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []*core.Workload
	for _, w := range ws {
		if w.Native != nil {
			out = append(out, w)
		}
	}
	return out
}

func reconcile(t *testing.T, a *control.NativeAdmission) {
	t.Helper()
	if err := a.Reconcile(context.Background()); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
}

// TestNativeAdmissionStoresAWorkloadOnce: a group of native pods becomes
// one Pending workload of its team, with its pods, owner and labels, the
// team's residency and the default class; a second pass (or a restart's:
// a fresh admission on the same store) stores nothing more.
func TestNativeAdmissionStoresAWorkloadOnce(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.store.UpdateTeam(ctx, "a", func(t *core.Team) error { t.Residency = []string{"eu"}; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := h.store.PutNode(ctx, core.Node{Name: "n1", Region: "eu", Schedulable: true, UpdatedAt: t0,
		GPUs: []core.GPU{{Index: 0, UUID: "g0", Model: "H100", MemoryMiB: 81920}, {Index: 1, UUID: "g1", Model: "H100", MemoryMiB: 81920}}}); err != nil {
		t.Fatal(err)
	}
	src := newNativeSource()
	src.add(nativeSub("train", "a", 2, 1000))
	reconcile(t, h.admission(src))
	reconcile(t, h.admission(src))
	ws := h.nativeWorkloads()
	if len(ws) != 1 {
		t.Fatalf("%d workloads, want 1", len(ws))
	}
	w := ws[0]
	want := core.Spec{Name: "train", Team: "a", Owner: "kubernetes:ml", Kind: core.KindJob, Priority: "training",
		Request: core.Request{MilliGPU: 1000, Replicas: 2, Regions: []string{"eu"}},
		Labels:  map[string]string{core.LabelNativeNamespace: "ml", core.LabelNativeOwner: "Job/ml/train"},
		Native:  &src.subs[0].Native}
	if diff := cmp.Diff(want, w.Spec); diff != "" {
		t.Errorf("workload spec (-want +got):\n%s", diff)
	}
	if w.Status.Phase != core.Pending {
		t.Errorf("workload is %s, want Pending", w.Status.Phase)
	}
}

// TestNativeAdmissionRefuses: what the API's submit refuses is refused
// here too, shown on the pods with the label at fault, and nothing is
// stored; the executor's own waits are shown as they are.
func TestNativeAdmissionRefuses(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	prod := core.NewTeam("prod", t0)
	prod.Guaranteed, prod.PriorityClasses = 1000, []string{"production"}
	if err := h.store.CreateTeam(ctx, prod); err != nil {
		t.Fatal(err)
	}
	src := newNativeSource()
	withClass := func(s executor.NativeSubmission, class string) executor.NativeSubmission {
		s.Priority, s.PriorityFrom = class, "priorityClassName"
		return s
	}
	waiting := nativeSub("half", "a", 1, 0)
	waiting.Wait = &executor.NativeWait{Reason: "FractionsUnsupported", Field: "gpufleet.io/gpus", Message: "a share", Warning: true}
	for _, s := range []executor.NativeSubmission{
		nativeSub("nobody", "ghost", 1, 1000),
		withClass(nativeSub("unknown", "a", 1, 1000), "gold"),
		withClass(nativeSub("notyours", "a", 1, 1000), "production"),
		withClass(nativeSub("toobig", "prod", 2, 1000), "production"),
		nativeSub("huge", "a", 1, 8000),
		waiting,
	} {
		src.add(s)
	}
	reconcile(t, h.admission(src))
	want := []shownWait{
		{"ml/nobody", "UnknownTeam", "gpufleet.io/team", `team "ghost" does not exist in gpufleet (gpufleet get teams lists them)`, true},
		{"ml/unknown", "UnknownPriorityClass", "priorityClassName", `unknown priority class "gold" (known: production, training, development, batch)`, true},
		{"ml/notyours", "PriorityClassNotAllowed", "priorityClassName", "team a may not use priority class production (allowed: training, development, batch); a team-admin or an admin can grant it", true},
		{"ml/toobig", "PriorityClassNotAllowed", "priorityClassName",
			"production runs only within the team's guarantee, and team prod guarantees 1 GPUs while this workload asks for 2; ask an admin to raise the guarantee or choose another class", true},
		{"ml/huge", "Infeasible", "resources.limits[nvidia.com/gpu]", "can never run as asked: 8 GPUs on one node: the biggest node has 4", true},
		{"ml/half", "FractionsUnsupported", "gpufleet.io/gpus", "a share", true},
	}
	if diff := cmp.Diff(want, src.takeShown()); diff != "" {
		t.Errorf("waits shown (-want +got):\n%s", diff)
	}
	if ws := h.nativeWorkloads(); len(ws) != 0 {
		t.Errorf("%d workloads stored for refused pods, want none: %+v", len(ws), ws[0].Spec)
	}
}

// TestNativeAdmissionExplains: a pending native workload shows the
// scheduler's explanation on its pods once per change, another team's
// workload named as that team's readers see it; one whose pod is deleted
// is cancelled; one cancelled in gpufleet is not submitted again.
func TestNativeAdmissionExplains(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	src := newNativeSource()
	src.add(nativeSub("wait", "a", 1, 1000))
	src.add(nativeSub("drop", "a", 1, 1000))
	a := h.admission(src)
	reconcile(t, a)
	ws := h.nativeWorkloads()
	if len(ws) != 2 {
		t.Fatalf("%d workloads, want 2", len(ws))
	}
	wait, drop := ws[0], ws[1]
	if err := h.store.CreateTeam(ctx, core.NewTeam("b", t0)); err != nil {
		t.Fatal(err)
	}
	other := h.submit(func(w *core.Workload) { w.Team = "b" })
	explain := func(msg string) {
		t.Helper()
		if _, err := h.store.ApplyPlan(ctx, core.Plan{Unplaced: []core.Decision{{Workload: wait.ID, Reason: "QuotaLimit", Message: msg}}}, h.clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	explain("team a at its limit (2/2 GPUs; this workload needs 1)")
	reconcile(t, a)
	reconcile(t, a)
	explain("waits for " + core.Mention(other))
	reconcile(t, a)
	want := []shownWait{
		{"ml/wait", "QuotaLimit", "", "team a at its limit (2/2 GPUs; this workload needs 1)", true},
		{"ml/wait", "QuotaLimit", "", "waits for " + core.ForeignWorkload, true},
	}
	if diff := cmp.Diff(want, src.takeShown()); diff != "" {
		t.Errorf("waits shown (-want +got):\n%s", diff)
	}

	// drop's pod is deleted: its workload ends.
	src.mu.Lock()
	src.gone[drop.Native.Pods[0].UID] = true
	src.mu.Unlock()
	reconcile(t, a)
	if w := h.get(drop.ID); w.Status.Phase != core.Cancelled || w.Status.Reason != control.ReasonPodDeleted {
		t.Errorf("workload of a deleted pod: %s %s, want Cancelled %s", w.Status.Phase, w.Status.Reason, control.ReasonPodDeleted)
	}

	// wait is cancelled in gpufleet: its pods are told so, and not
	// submitted again, by this admission or a new one (a restart).
	if _, err := h.store.RequestStop(ctx, wait.ID, control.ReasonCancelled, "cancelled by alice", h.clock.Now()); err != nil {
		t.Fatal(err)
	}
	reconcile(t, a)
	reconcile(t, h.admission(src))
	if n := len(h.nativeWorkloads()); n != 2 {
		t.Errorf("%d native workloads after the cancel, want still 2", n)
	}
	for _, s := range src.takeShown() {
		if s.Reason != control.ReasonWorkloadEnded || s.Pods != "ml/wait" {
			t.Errorf("shown after the cancel: %+v, want %s on ml/wait", s, control.ReasonWorkloadEnded)
		}
	}
}

// explainingExecutor is the fake executor that records the stops it is
// told the reasons of.
type explainingExecutor struct {
	*fake.Executor
	mu    sync.Mutex
	stops []string
}

func (e *explainingExecutor) ExplainStop(id core.WorkloadID, attempt int, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.stops = append(e.stops, string(id)+" "+reason+": "+message)
}

// TestNativeWorkloadEnds: a native workload is never requeued: preempted,
// it is Failed with the preemption's reason (its pods told why before
// they are evicted); lost, Failed too; its pods deleted by their owner,
// Cancelled; its allocations are closed each time.
func TestNativeWorkloadEnds(t *testing.T) {
	h := newHarness(t)
	ex := &explainingExecutor{Executor: h.exec}
	loop := control.New(h.options(ex))
	ctx := context.Background()
	src := newNativeSource()
	for _, name := range []string{"n0", "n1", "n2", "n3"} {
		s := nativeSub(name, "a", 1, 1000)
		s.Priority, s.PriorityFrom = "development", "gpufleet.io/priority"
		src.add(s)
	}
	reconcile(t, h.admission(src))
	var ids []core.WorkloadID
	for _, w := range h.nativeWorkloads() {
		ids = append(ids, w.ID)
	}
	loop.Step(ctx)
	for _, id := range ids {
		if w := h.get(id); w.Status.Phase != core.Running {
			t.Fatalf("%s is %s, want Running", id, w.Status.Phase)
		}
	}

	// Its pods deleted by their owner.
	if !h.exec.End(ids[0], 1, control.ReasonPodDeleted, "pod ml/n0-0 was deleted") {
		t.Fatal("End: n0 not running")
	}
	// Its node lost.
	if !h.exec.End(ids[1], 1, "Lost", "node n1 is NotReady") {
		t.Fatal("End: n1 not running")
	}
	loop.Step(ctx)
	if w := h.get(ids[0]); w.Status.Phase != core.Cancelled || w.Status.Reason != control.ReasonPodDeleted {
		t.Errorf("deleted: %s %s, want Cancelled %s", w.Status.Phase, w.Status.Reason, control.ReasonPodDeleted)
	}
	if w := h.get(ids[1]); w.Status.Phase != core.Failed || w.Status.Attempts != 1 {
		t.Errorf("lost: %s %s at attempt %d, want Failed at attempt 1", w.Status.Phase, w.Status.Reason, w.Status.Attempts)
	}

	// A training workload of the team takes the two GPUs left, then
	// preempts a development one.
	h.clock.Advance(time.Minute)
	h.submit(nil)
	h.submit(nil)
	h.submit(nil)
	for range 4 {
		loop.Step(ctx)
	}
	var preempted []*core.Workload
	for _, id := range ids[2:] {
		if w := h.get(id); w.Status.Phase != core.Running {
			preempted = append(preempted, w)
		}
	}
	if len(preempted) != 1 {
		t.Fatalf("%d native workloads stopped for the training ones, want 1", len(preempted))
	}
	w := preempted[0]
	if w.Status.Phase != core.Failed || w.Status.Reason != control.ReasonPreempted || w.Status.Attempts != 1 || w.Status.Preemptions != 0 {
		t.Errorf("preempted: %s %s, attempt %d, %d preemptions; want Failed %s at attempt 1, not requeued",
			w.Status.Phase, w.Status.Reason, w.Status.Attempts, w.Status.Preemptions, control.ReasonPreempted)
	}
	ex.mu.Lock()
	stops := ex.stops
	ex.mu.Unlock()
	if len(stops) != 1 || !strings.HasPrefix(stops[0], string(w.ID)+" Preempted: ") {
		t.Errorf("stops explained: %q, want one of %s, Preempted", stops, w.ID)
	}
	for _, id := range ids[:2] {
		h.checkAllClosed(id)
	}
	h.checkAllClosed(w.ID)
}
