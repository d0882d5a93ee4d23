package qualify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/gpu"
	"github.com/gpufleet/gpufleet/internal/store"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

type fixture struct {
	t   *testing.T
	st  *store.Store
	q   *Qualifier
	now time.Time
}

func newFixture(t *testing.T, n core.Node, opts Options) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.OpenWith(ctx, filepath.Join(t.TempDir(), "gpufleet.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateTeam(ctx, core.NewTeam("a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterNode(ctx, n, core.NodeStatus{State: core.NodeRegistering, Since: t0}); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, now: t0}
	opts.Store, opts.Now = st, func() time.Time { return f.now }
	f.q = New(opts)
	return f
}

func simNode(t *testing.T, gpus int) core.Node {
	t.Helper()
	gs, err := gpu.Fake("n1", strconv.Itoa(gpus)+"xH100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	return core.Node{Name: "n1", Schedulable: true, GPUs: gs}
}

// steps runs the qualifier until the node's state stops changing.
func (f *fixture) steps() core.NodeStatus {
	f.t.Helper()
	var last core.NodeStatus
	for range 10 {
		f.q.Step(context.Background())
		st, _, err := f.st.NodeStatus(context.Background(), "n1")
		if err != nil {
			f.t.Fatal(err)
		}
		if st.State == last.State && st.Validate == nil {
			return st
		}
		last = st
		f.now = f.now.Add(time.Second)
	}
	return last
}

// place places a workload on the given device of n1 and returns it.
func (f *fixture) place(id string, gpuIndex int) *core.Workload {
	f.t.Helper()
	ctx := context.Background()
	w := &core.Workload{ID: core.WorkloadID(id), CreatedAt: f.now, Spec: core.Spec{Team: "a", Priority: "training", Command: []string{"x"},
		Request: core.Request{MilliGPU: 1000}}}
	w, _, err := f.st.CreateWorkload(ctx, w, nil, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	n, _ := f.node()
	g := n.GPUs[slices.IndexFunc(n.GPUs, func(g core.GPU) bool { return g.Index == gpuIndex })]
	res, err := f.st.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: w.ID, Assignments: []core.Assignment{
		{Node: "n1", GPUIndex: gpuIndex, GPUUUID: g.UUID, MilliGPU: 1000, MemoryMiB: g.MemoryMiB}}}}}, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	if res[0].Err != nil {
		f.t.Fatalf("place %s on GPU %d: %v", id, gpuIndex, res[0].Err)
	}
	return res[0].Workload
}

func (f *fixture) node() (core.Node, error) {
	ns, err := f.st.Nodes(context.Background())
	if err != nil || len(ns) != 1 {
		return core.Node{}, err
	}
	return ns[0], nil
}

func commands(evs []core.Evidence) []string {
	var out []string
	for _, e := range evs {
		if e.Check != "" {
			out = append(out, e.Check+" "+e.Result)
			continue
		}
		out = append(out, strings.Join(e.Argv, " ")+" "+e.Result)
	}
	return out
}

func TestRegistrationQualifiesSimulatedNode(t *testing.T) {
	f := newFixture(t, simNode(t, 4), Options{})
	if n, _ := f.node(); n.Schedulable || n.State != core.NodeRegistering {
		t.Fatalf("a registering node: schedulable %t state %s", n.Schedulable, n.State)
	}
	st := f.steps()
	if st.State != core.NodeReady || st.LastQualified == nil {
		t.Fatalf("after qualification: %+v", st)
	}
	evs, err := f.st.Evidence(context.Background(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nvidia-smi -L Pass", "nvidia-smi topo -m Pass", "cuda-init NotAvailable", "dcgmi discovery --list Pass", "dcgmi diag -r 1 -j Pass"}
	if diff := cmp.Diff(want, commands(evs)); diff != "" {
		t.Errorf("evidence (-want +got):\n%s", diff)
	}
	for _, e := range evs {
		if e.Check == core.EvidenceCUDAInit {
			// Simulated GPUs have no driver to start: the record says so.
			if !strings.Contains(e.Message, "simulated") {
				t.Errorf("CUDA evidence of simulated GPUs: %+v, want it to say they are simulated", e)
			}
			continue
		}
		if e.Stdout == "" || !e.Simulated || e.Exit == nil || *e.Exit != 0 {
			t.Errorf("evidence %v: %+v", e.Argv, e)
		}
	}
	events, _ := f.st.NodeEvents(context.Background(), "n1")
	var path []core.NodeState
	for _, e := range events {
		if e.To != "" {
			path = append(path, e.To)
		}
	}
	if diff := cmp.Diff([]core.NodeState{core.NodeRegistering, core.NodeValidating, core.NodeReady}, path); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if n, _ := f.node(); !n.Schedulable {
		t.Error("a Ready node is not schedulable")
	}
}

func TestDiagnosticFaultFailsOneGPU(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, simNode(t, 4), Options{})
	f.steps()
	gpu1 := 1
	if err := f.q.InjectFault(ctx, "n1", Fault{GPU: &gpu1, Diag: "memory"}, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.Validate(ctx, "n1", 2, nil, false, "admin", "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.Validate(ctx, "n1", 2, nil, false, "admin", "again"); !errors.Is(err, core.ErrConflict) {
		t.Errorf("a second validation while one is asked: %v, want a conflict", err)
	}
	st := f.steps()
	if st.State != core.NodeReady || st.GPUs[1].Health != core.GPUFailed || len(st.GPUs) != 1 {
		t.Fatalf("after a failing memory test on GPU 1: %+v", st)
	}
	if !strings.Contains(st.GPUs[1].Message, "memory") {
		t.Errorf("GPU 1's reason %q %q: want the failing test named", st.GPUs[1].Reason, st.GPUs[1].Message)
	}
	// Nothing lands on GPU 1; the others serve.
	n, _ := f.node()
	res, err := f.st.ApplyPlan(ctx, core.Plan{Placements: []core.Placement{{Workload: "none", Assignments: []core.Assignment{{Node: "n1", GPUIndex: 1, GPUUUID: n.GPUs[1].UUID, MilliGPU: 1000}}}}}, f.now)
	if err == nil && res[0].Err == nil {
		t.Error("a placement on the failed GPU was accepted")
	}
	f.place("w0", 0)
	// It passes again once the fault is gone.
	if _, err := f.q.Validate(ctx, "n1", 2, []int{1}, false, "admin", "repaired"); err != nil {
		t.Fatal(err)
	}
	st = f.steps()
	if st.GPUs[1].Health != "" || st.State != core.NodeReady {
		t.Errorf("after GPU 1 passes again: %+v", st)
	}
}

func TestXid(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, simNode(t, 2), Options{})
	f.steps()
	w := f.place("w0", 0)
	if err := f.q.Xid(ctx, "n1", 0, 13, "graphics engine exception"); err != nil {
		t.Fatal(err)
	}
	got, _ := f.st.Workload(ctx, w.ID)
	if got.Status.StopRequested != "" {
		t.Errorf("an application Xid stopped the workload: %+v", got.Status)
	}
	evs, _ := f.st.Events(ctx, w.ID)
	if !slices.ContainsFunc(evs, func(e core.Event) bool { return e.Reason == "Xid13" && e.Type == core.EventWarning }) {
		t.Errorf("events %+v: want a Warning Xid13", evs)
	}
	if st, _, _ := f.st.NodeStatus(ctx, "n1"); st.GPUs[0].Health != "" {
		t.Errorf("an application Xid changed the GPU: %+v", st.GPUs)
	}
	if err := f.q.Xid(ctx, "n1", 0, 79, "GPU has fallen off the bus"); err != nil {
		t.Fatal(err)
	}
	got, _ = f.st.Workload(ctx, w.ID)
	if got.Status.StopRequested != ReasonGPUFailed || !strings.Contains(got.Status.Message, "Xid 79") {
		t.Errorf("after Xid 79 under it: %s %q, want stopped naming the Xid", got.Status.StopRequested, got.Status.Message)
	}
	st, _, _ := f.st.NodeStatus(ctx, "n1")
	if st.GPUs[0].Health != core.GPUFailed || st.Validate == nil || !slices.Equal(st.Validate.GPUs, []int{0}) || st.State != core.NodeReady {
		t.Errorf("after Xid 79: %+v, want GPU 0 Failed, its qualification queued, the node Ready", st)
	}
	if err := f.q.Xid(ctx, "n1", 1, 94, "contained"); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := f.st.NodeStatus(ctx, "n1"); st.GPUs[1].Health != core.GPUSuspect {
		t.Errorf("after Xid 94: %+v, want GPU 1 Suspect", st.GPUs)
	}
	counts := f.q.XidCounts()
	if len(counts) != 3 {
		t.Errorf("xid counts %+v", counts)
	}
}

func TestDrainAndUncordon(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, simNode(t, 2), Options{})
	f.steps()
	w := f.place("w0", 0)
	if _, err := f.q.Drain(ctx, "n1", 0, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.Drain(ctx, "n1", 0, "admin"); !errors.Is(err, core.ErrConflict) {
		t.Errorf("draining twice: %v, want a conflict", err)
	}
	f.q.Step(ctx)
	got, _ := f.st.Workload(ctx, w.ID)
	if got.Status.StopRequested != ReasonDrained {
		t.Fatalf("running work on a draining node: %+v", got.Status)
	}
	if n, _ := f.node(); n.Schedulable {
		t.Error("a draining node is schedulable")
	}
	if _, err := f.st.Requeue(ctx, w.ID, 1, core.Preempted, ReasonDrained, "drained", f.now); err != nil {
		t.Fatal(err)
	}
	if st := f.steps(); st.State != core.NodeCordoned {
		t.Fatalf("a drained node with nothing left: %s, want Cordoned", st.State)
	}
	if _, err := f.q.Uncordon(ctx, "n1", "admin"); err != nil {
		t.Fatal(err)
	}
	if n, _ := f.node(); !n.Schedulable || n.State != core.NodeReady {
		t.Errorf("after uncordon: %+v", n)
	}
	if _, err := f.q.Uncordon(ctx, "n1", "admin"); !errors.Is(err, core.ErrConflict) {
		t.Errorf("uncordon a Ready node: %v, want a conflict", err)
	}
	// A Failed node must pass qualification instead.
	if err := f.q.InjectFault(ctx, "n1", Fault{HeartbeatLost: true}, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.q.Uncordon(ctx, "n1", "admin"); !errors.Is(err, core.ErrConflict) || !strings.Contains(err.Error(), "qualification") {
		t.Errorf("uncordon a Lost node: %v", err)
	}
	if st := f.steps(); st.State != core.NodeReady {
		t.Errorf("a lost node after qualification: %s, want Ready", st.State)
	}
}

// scripted answers commands with captured outputs, as a machine with those
// tools would; a command it does not know is not installed.
type scripted map[string]string

func (s scripted) Run(_ context.Context, argv []string, _ time.Duration) Result {
	out, ok := s[strings.Join(argv, " ")]
	if !ok {
		return Result{Err: ErrNotFound}
	}
	code := 0
	return Result{Stdout: []byte(out), Exit: &code, Duration: time.Millisecond}
}

func TestRealNodeEvidence(t *testing.T) {
	list := "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-c7a0294c-c2c2-5476-438c-fb468eaa223b)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-27196ced-a067-4406-2159-46448710fc9c)\n"
	gpus := []core.GPU{{Index: 0, UUID: "GPU-c7a0294c-c2c2-5476-438c-fb468eaa223b", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559},
		{Index: 1, UUID: "GPU-27196ced-a067-4406-2159-46448710fc9c", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559}}
	topo := "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV18\t0-63\t0\t\tN/A\nGPU1\tNV18\t X \t0-63\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
	for _, tc := range []struct {
		name        string
		gpus        []core.GPU
		requireDCGM bool
		want        core.NodeState
		wantReason  string
		wantDiag    string
	}{
		{"no dcgmi, not required", gpus, false, core.NodeReady, "Qualified", core.EvidenceNotAvailable},
		{"no dcgmi, required", gpus, true, core.NodeFailed, "DCGMNotAvailable", core.EvidenceNotAvailable},
		{"a UUID that is not the device's", []core.GPU{gpus[0], {Index: 1, UUID: "GPU-other", Model: gpus[1].Model}}, false, core.NodeFailed, "GPUUUIDMismatch", core.EvidenceNotAvailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := core.Node{Name: "n1", Schedulable: true, GPUs: tc.gpus}
			f := newFixture(t, n, Options{Local: "n1", RequireDCGM: tc.requireDCGM,
				Runner: scripted{"nvidia-smi -L": list, "nvidia-smi topo -m": topo}})
			st := f.steps()
			if st.State != tc.want || st.Reason != tc.wantReason {
				t.Errorf("state %s (%s: %s), want %s (%s)", st.State, st.Reason, st.Message, tc.want, tc.wantReason)
			}
			evs, _ := f.st.Evidence(context.Background(), "n1")
			if len(evs) != 5 || evs[0].Simulated || evs[0].Stdout != list || evs[4].Result != tc.wantDiag || evs[2].Result != core.EvidenceNotAvailable {
				t.Errorf("evidence: %v", commands(evs))
			}
		})
	}
}

func TestWatchKernelLog(t *testing.T) {
	ctx := context.Background()
	n := simNode(t, 2)
	n.GPUs[1].PCIBusID = "00000000:C6:00.0"
	f := newFixture(t, n, Options{})
	f.steps()
	log := "6,1001,5000,-;nvidia-modeset: some other line\n" +
		"4,1002,5001,-;NVRM: Xid (PCI:0000:c6:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n" +
		"4,1003,5002,-;NVRM: Xid (PCI:0000:99:00): 48, pid=1, DBE\n"
	f.q.WatchKernelLog(ctx, strings.NewReader(log), "n1", n.GPUs)
	st, _, _ := f.st.NodeStatus(ctx, "n1")
	if st.GPUs[1].Health != core.GPUFailed || !strings.Contains(st.GPUs[1].Message, "Xid 79") || st.GPUs[0].Health != "" {
		t.Errorf("after an Xid 79 of GPU 1's bus in the kernel log: %+v", st.GPUs)
	}
	evs, _ := f.st.NodeEvents(ctx, "n1")
	if !slices.ContainsFunc(evs, func(e core.NodeEvent) bool { return e.GPU == -1 && strings.Contains(e.Message, "PCI 0000:99:00") }) {
		t.Errorf("an Xid of a bus no GPU has: events %+v, want one on the node", evs)
	}
}

func TestNotReadyNodeIsLostAndReturns(t *testing.T) {
	ctx := context.Background()
	n := simNode(t, 2)
	f := newFixture(t, n, Options{LostAfter: 30 * time.Second, RequeueAfter: 20 * time.Second})
	f.steps()
	w := f.place("w0", 0)
	n.NotReady = true
	if err := f.st.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	f.q.Step(ctx)
	if st, _, _ := f.st.NodeStatus(ctx, "n1"); st.State != core.NodeReady {
		t.Fatalf("just reported not ready: %s, want still Ready (grace)", st.State)
	}
	f.now = f.now.Add(31 * time.Second)
	f.q.Step(ctx)
	st, _, _ := f.st.NodeStatus(ctx, "n1")
	got, _ := f.st.Workload(ctx, w.ID)
	if st.State != core.NodeLost || got.Status.StopRequested != ReasonNodeLost {
		t.Fatalf("not ready past the grace: node %s, workload %s/%s", st.State, got.Status.Phase, got.Status.StopRequested)
	}
	if node, _ := f.node(); node.Schedulable {
		t.Error("a lost node is schedulable")
	}
	// The executor cannot stop it there: it is requeued all the same.
	f.now = f.now.Add(21 * time.Second)
	f.q.Step(ctx)
	if got, _ := f.st.Workload(ctx, w.ID); got.Status.Phase != core.Pending || got.Status.Reason != string(core.Lost) {
		t.Errorf("work on a lost node after RequeueAfter: %s (%s), want requeued", got.Status.Phase, got.Status.Reason)
	}
	// Ready again: back through qualification.
	n.NotReady = false
	if err := f.st.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if st := f.steps(); st.State != core.NodeReady {
		t.Errorf("ready again: %s (%s), want Ready after qualification", st.State, st.Reason)
	}
}

// Found by review: a device a qualification of its own waits for takes no
// work; a validation waiting for work can be given up; a device no
// diagnostic can test stays out of service; an unknown test is refused.
func TestReviewedLifecycleHoles(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, simNode(t, 2), Options{})
	f.steps()
	f.place("w1", 1)
	if _, err := f.q.Validate(ctx, "n1", 2, []int{1}, false, "admin", "check"); err != nil {
		t.Fatal(err)
	}
	n, _ := f.node()
	if n.GPUs[1].Usable() || !n.GPUs[0].Usable() {
		t.Errorf("GPU 1 under a validation of its own: usable %t; GPU 0 %t", n.GPUs[1].Usable(), n.GPUs[0].Usable())
	}
	gpu0 := 0
	if err := f.q.InjectFault(ctx, "n1", Fault{GPU: &gpu0, Diag: "nosuchtest"}, "admin"); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("an unknown test: %v, want invalid", err)
	}

	// A whole-node validation waiting for w1 is given up by uncordon.
	g := newFixture(t, simNode(t, 2), Options{})
	g.steps()
	g.place("w1", 0)
	if _, err := g.q.Validate(ctx, "n1", 1, nil, false, "admin", "check"); err != nil {
		t.Fatal(err)
	}
	g.q.Step(ctx)
	g.q.Step(ctx)
	if st, _, _ := g.st.NodeStatus(ctx, "n1"); st.State != core.NodeValidating || st.Reason != "WaitingForWork" {
		t.Fatalf("a validation waiting for work: %s (%s)", st.State, st.Reason)
	}
	if _, err := g.q.Uncordon(ctx, "n1", "admin"); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := g.st.NodeStatus(ctx, "n1"); st.State != core.NodeReady || st.Validate != nil {
		t.Errorf("after uncordon: %+v, want Ready without the validation", st)
	}

	// A node whose commands this server cannot run: a failed GPU stays
	// failed through a qualification that tested nothing.
	remote := simNode(t, 2)
	for i := range remote.GPUs {
		remote.GPUs[i].Simulated = false
	}
	h := newFixture(t, remote, Options{Local: "elsewhere"})
	h.steps()
	if err := h.q.Xid(ctx, "n1", 0, 79, "reported by DCGM"); err != nil {
		t.Fatal(err)
	}
	st := h.steps()
	if st.GPUs[0].Health != core.GPUFailed {
		t.Errorf("after a qualification that could run nothing: GPU 0 %+v, want still Failed", st.GPUs[0])
	}
}

func TestChangedGPUsAreQualifiedAgain(t *testing.T) {
	ctx := context.Background()
	n := simNode(t, 2)
	f := newFixture(t, n, Options{})
	f.steps()
	// Registered again with the same devices: nothing to do.
	if err := f.st.RegisterNode(ctx, n, core.NodeStatus{State: core.NodeRegistering, Since: f.now}); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := f.st.NodeStatus(ctx, "n1"); st.Validate != nil || st.State != core.NodeReady {
		t.Fatalf("the same devices: %+v", st)
	}
	more := simNode(t, 3)
	if err := f.st.RegisterNode(ctx, more, core.NodeStatus{State: core.NodeRegistering, Since: f.now}); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := f.st.NodeStatus(ctx, "n1"); st.Validate == nil {
		t.Fatalf("three GPUs where there were two: %+v, want a qualification asked", st)
	}
	if st := f.steps(); st.State != core.NodeReady || st.LastQualified == nil {
		t.Errorf("after it: %+v", st)
	}
	evs, _ := f.st.NodeEvents(ctx, "n1")
	if !slices.ContainsFunc(evs, func(e core.NodeEvent) bool { return e.Reason == "GPUsChanged" }) {
		t.Errorf("events %+v: want GPUsChanged", evs)
	}
}

func TestExecRunsTrustedCommandsOnly(t *testing.T) {
	r := Exec{}.Run(context.Background(), []string{"true"}, time.Minute)
	if r.Err != nil || r.Exit == nil || *r.Exit != 0 {
		t.Errorf("true: %+v", r)
	}
	r = Exec{}.Run(context.Background(), []string{"sh", "-c", "exit 3"}, time.Minute)
	if r.Exit == nil || *r.Exit != 3 {
		t.Errorf("exit 3: %+v", r)
	}
	r = Exec{}.Run(context.Background(), []string{"sleep", "5"}, 100*time.Millisecond)
	if r.Err == nil || r.Exit != nil {
		t.Errorf("a command past its timeout: %+v", r)
	}
	// A program in a directory of the PATH that is not a system one is
	// not run.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi-fake"), []byte("#!/bin/sh\necho GPU 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	if r := (Exec{}).Run(context.Background(), []string{"nvidia-smi-fake"}, time.Minute); !errors.Is(r.Err, ErrNotFound) {
		t.Errorf("a program on the PATH only: %+v, want not found", r)
	}
}

// scriptedSandbox answers the CUDA probe with what a probe printed.
type scriptedSandbox struct {
	out  string
	code int
	got  *[]int
}

func (s scriptedSandbox) RunAsTask(_ context.Context, name string, argv []string, gpus []int, _ time.Duration) Result {
	*s.got = gpus
	code := s.code
	return Result{Stdout: []byte(s.out), Exit: &code, Duration: time.Millisecond}
}

// TestCUDAInitInTheSandbox: on a node of real GPUs, qualification runs the
// CUDA probe in the workloads' sandbox with every GPU; a node where CUDA
// cannot start fails with the driver's error, which its state and the
// evidence show; one where it starts passes.
func TestCUDAInitInTheSandbox(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "health", "testdata", "h200", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	gpus, err := gpu.ParseNvidiaSMI(read("query-discover.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		out        string
		code       int
		want       core.NodeState
		wantResult string
		wantText   string
	}{
		{"cuInit fails", `{"deviceCount":0,"call":"cuInit","code":304,"error":"CUDA_ERROR_OPERATING_SYSTEM"}`, 1,
			core.NodeFailed, core.EvidenceFail, "cuInit returned 304 (CUDA_ERROR_OPERATING_SYSTEM)"},
		{"CUDA starts", `{"driverVersion":13000,"deviceCount":1,"devices":["NVIDIA H200"]}`, 0,
			core.NodeReady, core.EvidencePass, "CUDA 13.0 starts in the workloads' sandbox and sees 1 GPU(s): NVIDIA H200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ran []int
			n := core.Node{Name: "n1", Schedulable: true, GPUs: gpus}
			f := newFixture(t, n, Options{Local: "n1", CUDAProbe: "/usr/local/bin/gpufleet-cuda-probe",
				Runner:  scripted{"nvidia-smi -L": read("smi-list.txt"), "nvidia-smi topo -m": read("topo.txt")},
				Sandbox: scriptedSandbox{out: tc.out, code: tc.code, got: &ran}})
			st := f.steps()
			if st.State != tc.want || (tc.want == core.NodeFailed && (st.Reason != "CUDAInitFailed" || !strings.Contains(st.Message, tc.wantText))) {
				t.Errorf("state %s (%s: %s), want %s naming %q", st.State, st.Reason, st.Message, tc.want, tc.wantText)
			}
			if !slices.Equal(ran, []int{0}) {
				t.Errorf("the probe ran with GPUs %v, want [0]", ran)
			}
			evs, _ := f.st.Evidence(context.Background(), "n1")
			i := slices.IndexFunc(evs, func(e core.Evidence) bool { return e.Check == core.EvidenceCUDAInit })
			if i < 0 || evs[i].Result != tc.wantResult || !strings.Contains(evs[i].Message, tc.wantText) || evs[i].Argv[0] != "/usr/local/bin/gpufleet-cuda-probe" {
				t.Errorf("evidence: %+v, want %s saying %q", evs, tc.wantResult, tc.wantText)
			}
		})
	}
}

// Waits says what a qualification waits for and for how long: nothing,
// the work requeued at once (drain), the latest max runtime, or no bound
// when some work has none; at most five workloads are named.
func TestWaitsSaysWhatAndHowLong(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	started := now.Add(-time.Hour)
	w := func(id string, maxRuntime time.Duration) *core.Workload {
		x := &core.Workload{ID: core.WorkloadID(id), Spec: core.Spec{MaxRuntime: maxRuntime}}
		x.Status.StartedAt = &started
		return x
	}
	for _, tc := range []struct {
		name        string
		onIt        []*core.Workload
		whole, dr   bool
		want, never string
	}{
		{"nothing runs", nil, true, false, "no work runs on the devices under test: the qualification starts at once; meanwhile the node takes no new work", ""},
		{"drain", []*core.Workload{w("wl-a", 0)}, true, true, "drains for it: 1 running workload (wl-a) requeued now", "waits"},
		{"bounded", []*core.Workload{w("wl-a", 2*time.Hour), w("wl-b", 3*time.Hour)}, false, false,
			"waits for 2 running workloads (wl-a, wl-b) to end, until 2025-06-01T14:00:00Z at the latest (their max runtimes, 2h0m0s from now); node validate n1 --drain requeues them instead", "meanwhile"},
		{"unbounded", []*core.Workload{w("wl-a", 2*time.Hour), w("wl-b", 0), w("wl-c", 0)}, true, false, "with no bound: 2 of them have no max runtime; meanwhile the node takes no new work", "at the latest"},
		{"many", []*core.Workload{w("wl-1", 0), w("wl-2", 0), w("wl-3", 0), w("wl-4", 0), w("wl-5", 0), w("wl-6", 0)}, true, false, "6 running workloads (wl-1, wl-2, wl-3, wl-4, wl-5, and 1 more)", "wl-6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Waits(tc.onIt, tc.whole, tc.dr, "n1", now)
			if !strings.Contains(got, tc.want) || (tc.never != "" && strings.Contains(got, tc.never)) {
				t.Errorf("got %q, want it to say %q and not %q", got, tc.want, tc.never)
			}
		})
	}
}

// A validation asked with drain requeues the work on the node at once
// and says so; one without waits for it and says for how long, in the
// request and in the node's state.
func TestValidateSaysWhatItWaitsFor(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, simNode(t, 2), Options{})
	f.steps()
	w1 := f.place("w1", 0)
	st, err := f.q.Validate(ctx, "n1", 2, nil, false, "admin", "check")
	if err != nil {
		t.Fatal(err)
	}
	if st.Validate == nil || !strings.Contains(st.Validate.Waits, "waits for 1 running workload ("+string(w1.ID)+") to end, with no bound") {
		t.Fatalf("the request says %+v", st.Validate)
	}
	f.q.Step(ctx)
	f.q.Step(ctx)
	if st, _, _ := f.st.NodeStatus(ctx, "n1"); st.Reason != "WaitingForWork" || !strings.Contains(st.Message, string(w1.ID)) || !strings.Contains(st.Message, "--drain") {
		t.Errorf("waiting: %s: %q", st.Reason, st.Message)
	}
	if w, _ := f.st.Workload(ctx, w1.ID); w.Status.StopRequested != "" {
		t.Errorf("without drain the work was stopped: %q", w.Status.StopRequested)
	}

	g := newFixture(t, simNode(t, 2), Options{})
	g.steps()
	w2 := g.place("w2", 1)
	st, err = g.q.Validate(ctx, "n1", 1, nil, true, "admin", "check")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Validate.Drain || !strings.Contains(st.Validate.Waits, "drains for it: 1 running workload ("+string(w2.ID)+") requeued now") {
		t.Errorf("the drain request says %+v", st.Validate)
	}
	g.q.Step(ctx)
	g.q.Step(ctx)
	if w, _ := g.st.Workload(ctx, w2.ID); w.Status.StopRequested != ReasonValidating {
		t.Errorf("with drain the work was not stopped for the qualification: %q", w.Status.StopRequested)
	}
}
