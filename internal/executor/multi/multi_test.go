package multi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/executortest"
	"github.com/gpufleet/gpufleet/internal/executor/fake"
	"github.com/gpufleet/gpufleet/internal/executor/multi"
)

// nodes maps each test node to its cluster; "node-x" is in a cluster that
// no test runs. It is never written.
var nodes = map[core.NodeName]string{"node-a": "a", "node-b": "b", "node-c": "c", "node-d": "d", "node-x": "elsewhere"}

func nodeCluster(n core.NodeName) (string, bool) {
	c, ok := nodes[n]
	return c, ok
}

func newMulti(t *testing.T, clusters ...multi.Cluster) *multi.Executor {
	t.Helper()
	m, err := multi.New(clusters, multi.Options{NodeCluster: nodeCluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// twoFakes returns cluster "a" and cluster "b", each a fake executor, and a
// multi over them.
func twoFakes(t *testing.T) (*fake.Executor, *fake.Executor, *multi.Executor) {
	a, b := fake.New(fake.Options{}), fake.New(fake.Options{})
	return a, b, newMulti(t, multi.Cluster{Name: "a", Executor: a}, multi.Cluster{Name: "b", Executor: b})
}

func task(id core.WorkloadID, attempt int, node core.NodeName, args ...string) executor.Task {
	return executor.Task{WorkloadID: id, Attempt: attempt, Command: append([]string{"train"}, args...),
		Assignments: []core.Assignment{{Node: node, GPUIndex: 0, MilliGPU: 1000}}}
}

// exitsOf reads n exits, as "id/attempt", failing after a timeout.
func exitsOf(t *testing.T, m *multi.Executor, n int) []string {
	t.Helper()
	var out []string
	for range n {
		select {
		case x := <-m.Exits():
			out = append(out, fmt.Sprintf("%s/%d", x.WorkloadID, x.Attempt))
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d exits (%v), want %d", len(out), out, n)
		}
	}
	slices.Sort(out)
	return out
}

func expectNoExit(t *testing.T, m *multi.Executor) {
	t.Helper()
	select {
	case x := <-m.Exits():
		t.Errorf("unexpected exit of %s attempt %d", x.WorkloadID, x.Attempt)
	case <-time.After(200 * time.Millisecond):
	}
}

func ids(ts []executor.Task) []string {
	var out []string
	for _, tk := range ts {
		out = append(out, fmt.Sprintf("%s/%d", tk.WorkloadID, tk.Attempt))
	}
	return out
}

func readAll(t *testing.T, r io.ReadCloser) string {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewRefusesBadClusters(t *testing.T) {
	f := fake.New(fake.Options{})
	for _, tt := range []struct {
		name     string
		clusters []multi.Cluster
		opts     multi.Options
		want     string
	}{
		{"none", nil, multi.Options{NodeCluster: nodeCluster}, "multi: no clusters"},
		{"no NodeCluster", []multi.Cluster{{Name: "a", Executor: f}}, multi.Options{}, "multi: Options.NodeCluster is nil"},
		{"no executor", []multi.Cluster{{Name: "a"}}, multi.Options{NodeCluster: nodeCluster}, `multi: cluster "a" has no executor`},
		{"a name twice", []multi.Cluster{{Name: "a", Executor: f}, {Name: "a", Executor: fake.New(fake.Options{})}},
			multi.Options{NodeCluster: nodeCluster}, `multi: cluster "a" is named twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := multi.New(tt.clusters, tt.opts)
			if err == nil {
				m.Close()
				t.Fatalf("New: got no error, want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("New: got %q, want %q", err, tt.want)
			}
		})
	}
}

func TestStartRoutesByNode(t *testing.T) {
	a, b, m := twoFakes(t)
	for _, tk := range []executor.Task{task("w1", 1, "node-a"), task("w2", 1, "node-b"), task("w3", 2, "node-b")} {
		if err := m.Start(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"w1/1"}, ids(a.Running())); diff != "" {
		t.Errorf("cluster a runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"w2/1", "w3/2"}, ids(b.Running())); diff != "" {
		t.Errorf("cluster b runs (-want +got):\n%s", diff)
	}
	for id, want := range map[core.WorkloadID]string{"w1": "a", "w2": "b"} {
		if got, ok := m.ClusterOf(id, 1); !ok || got != want {
			t.Errorf("ClusterOf(%s, 1): got %q, %v; want %q", id, got, ok, want)
		}
	}
	if diff := cmp.Diff([]string{"a", "b"}, m.Clusters()); diff != "" {
		t.Errorf("Clusters (-want +got):\n%s", diff)
	}
	if e, ok := m.Cluster("b"); !ok || e != executor.Executor(b) {
		t.Errorf("Cluster(b): got %v, %v; want cluster b's fake", e, ok)
	}
	if _, ok := m.Cluster("nope"); ok {
		t.Errorf("Cluster(nope): got ok")
	}
}

func TestStartRefusesTasksWithoutACluster(t *testing.T) {
	a, b, m := twoFakes(t)
	gang := task("gang", 1, "node-a")
	gang.Assignments = append(gang.Assignments, core.Assignment{Replica: 1, Node: "node-b"})
	none := task("none", 1, "node-a")
	none.Assignments = nil
	for _, tt := range []struct {
		t    executor.Task
		want string
	}{
		{none, "start none attempt 1: the task has no assignment, so no node and no cluster to run on"},
		{task("lost", 1, "node-z"), `start lost attempt 1: node "node-z" is not known to be in any cluster`},
		{task("far", 1, "node-x"), `start far attempt 1: node "node-x" is in cluster "elsewhere", which this server does not run (clusters: [a b])`},
		{gang, `start gang attempt 1: the task's nodes are in two clusters: "node-a" in "a", "node-b" in "b"`},
	} {
		err := m.Start(t.Context(), tt.t)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Start(%s): got %v, want %q", tt.t.WorkloadID, err, tt.want)
		}
		if ok, err := m.Adopt(t.Context(), tt.t); ok || err == nil {
			t.Errorf("Adopt(%s): got (%v, %v), want an error", tt.t.WorkloadID, ok, err)
		}
		if _, ok := m.ClusterOf(tt.t.WorkloadID, 1); ok {
			t.Errorf("ClusterOf(%s): remembered a task that did not start", tt.t.WorkloadID)
		}
	}
	if n := len(a.Running()) + len(b.Running()); n != 0 {
		t.Errorf("running tasks: got %d, want none", n)
	}
}

func TestStartFailureIsNotRemembered(t *testing.T) {
	_, b, m := twoFakes(t)
	tk := task("nope", 1, "node-b")
	tk.Command = []string{fake.NoSuchProgram}
	err := m.Start(t.Context(), tk)
	if err == nil || err.Error() != `cluster "b": start nope attempt 1: exec: "no-such-program": executable file not found in $PATH` {
		t.Errorf("Start: got %v, want cluster b's error", err)
	}
	if _, ok := m.ClusterOf("nope", 1); ok {
		t.Errorf("ClusterOf: a failed start is remembered")
	}
	// The same attempt elsewhere, while it runs in b, is refused.
	if err := m.Start(t.Context(), task("w", 1, "node-b")); err != nil {
		t.Fatal(err)
	}
	err = m.Start(t.Context(), task("w", 1, "node-a"))
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("Start in a while it runs in b: got %v, want an error wrapping fs.ErrExist", err)
	}
	// Starting it twice in b fails there, and leaves its route.
	if err := m.Start(t.Context(), task("w", 1, "node-b")); err == nil {
		t.Errorf("second Start in b: got no error")
	}
	if got, ok := m.ClusterOf("w", 1); !ok || got != "b" {
		t.Errorf("ClusterOf(w, 1) after the failed second start: got %q, %v; want b", got, ok)
	}
	if diff := cmp.Diff([]string{"w/1"}, ids(b.Running())); diff != "" {
		t.Errorf("cluster b runs (-want +got):\n%s", diff)
	}
}

func TestExitsAreMergedOnceEach(t *testing.T) {
	a, b, m := twoFakes(t)
	var want []string
	for i := range 20 {
		node, f := core.NodeName("node-a"), a
		if i%2 == 1 {
			node, f = "node-b", b
		}
		id := core.WorkloadID("w" + strconv.Itoa(i))
		if err := m.Start(t.Context(), task(id, 1, node)); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			m.Stop(t.Context(), id, 1, time.Second)
		} else {
			f.Finish(id, 1, i)
		}
		want = append(want, string(id)+"/1")
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, exitsOf(t, m, len(want))); diff != "" {
		t.Errorf("exits (-want +got):\n%s", diff)
	}
	expectNoExit(t, m)
	// Each route is forgotten once its exit has passed.
	for i := range 20 {
		if c, ok := m.ClusterOf(core.WorkloadID("w"+strconv.Itoa(i)), 1); ok {
			t.Errorf("ClusterOf(w%d, 1) after its exit: got %q", i, c)
		}
	}
}

func TestExitCarriesItsFields(t *testing.T) {
	_, b, m := twoFakes(t)
	if err := m.Start(t.Context(), task("w", 3, "node-b")); err != nil {
		t.Fatal(err)
	}
	b.Finish("w", 3, 7)
	select {
	case x := <-m.Exits():
		if x.WorkloadID != "w" || x.Attempt != 3 || x.ExitCode == nil || *x.ExitCode != 7 || x.At.IsZero() {
			t.Errorf("exit: got %+v, want w attempt 3 code 7 with a time", x)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit")
	}
}

func TestStopRoutes(t *testing.T) {
	a, b, m := twoFakes(t)
	for _, tk := range []executor.Task{task("w1", 1, "node-a"), task("w2", 1, "node-b")} {
		if err := m.Start(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Stop(t.Context(), "w2", 1, time.Second); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"w2/1"}, exitsOf(t, m, 1)); diff != "" {
		t.Errorf("exits (-want +got):\n%s", diff)
	}
	if got := ids(b.Running()); len(got) != 0 {
		t.Errorf("cluster b runs %v after Stop", got)
	}
	if diff := cmp.Diff([]string{"w1/1"}, ids(a.Running())); diff != "" {
		t.Errorf("cluster a runs (-want +got):\n%s", diff)
	}
	// A stop of what is not remembered is no error anywhere.
	if err := m.Stop(t.Context(), "never", 1, time.Second); err != nil {
		t.Errorf("Stop of an unknown task: %v", err)
	}
	expectNoExit(t, m)
}

func TestStopOfAnUnrememberedTaskReachesEveryCluster(t *testing.T) {
	a, b, old := twoFakes(t)
	if err := old.Start(t.Context(), task("w", 1, "node-b")); err != nil {
		t.Fatal(err)
	}
	old.Close()
	m := newMulti(t, multi.Cluster{Name: "a", Executor: a}, multi.Cluster{Name: "b", Executor: b})
	if err := m.Stop(t.Context(), "w", 1, time.Second); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"w/1"}, exitsOf(t, m, 1)); diff != "" {
		t.Errorf("exits (-want +got):\n%s", diff)
	}
}

// TestRestart: a new multi over the same clusters adopts what runs, reads
// the exits the old one left, and finds the logs of what ended.
func TestRestart(t *testing.T) {
	a, b, old := twoFakes(t)
	for _, tk := range []executor.Task{task("run-a", 1, "node-a"), task("run-b", 1, "node-b"), task("done", 1, "node-b"), task("both", 1, "node-a")} {
		if err := old.Start(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	b.Finish("done", 1, 0)
	a.Finish("both", 1, 1)
	exitsOf(t, old, 2)
	if err := old.Start(t.Context(), task("both", 2, "node-b")); err != nil {
		t.Fatal(err)
	}
	b.Finish("both", 2, 0)
	exitsOf(t, old, 1)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	// Ended while no multi forwarded: the exit waits on b's channel.
	b.Finish("run-b", 1, 2)

	m := newMulti(t, multi.Cluster{Name: "a", Executor: a}, multi.Cluster{Name: "b", Executor: b})
	if diff := cmp.Diff([]string{"run-b/1"}, exitsOf(t, m, 1)); diff != "" {
		t.Errorf("exits after the restart (-want +got):\n%s", diff)
	}
	ok, err := m.Adopt(t.Context(), task("run-a", 1, "node-a"))
	if err != nil || !ok {
		t.Fatalf("Adopt(run-a): got (%v, %v), want (true, nil)", ok, err)
	}
	if got, ok := m.ClusterOf("run-a", 1); !ok || got != "a" {
		t.Errorf("ClusterOf(run-a, 1): got %q, %v; want a", got, ok)
	}
	// Adopting where the task is not: false, and not remembered.
	ok, err = m.Adopt(t.Context(), task("run-b", 1, "node-a"))
	if err != nil || ok {
		t.Errorf("Adopt(run-b) in a: got (%v, %v), want (false, nil)", ok, err)
	}
	if _, ok := m.ClusterOf("run-b", 1); ok {
		t.Errorf("ClusterOf(run-b, 1): an adoption that failed is remembered")
	}
	if err := m.Stop(t.Context(), "run-a", 1, time.Second); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"run-a/1"}, exitsOf(t, m, 1)); diff != "" {
		t.Errorf("exits (-want +got):\n%s", diff)
	}

	// Logs of workloads not remembered: the first cluster that has them.
	r, err := m.Logs("done")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("started attempt 1: train\nattempt 1 exited with code 0\n", readAll(t, r)); diff != "" {
		t.Errorf("logs of done, from b (-want +got):\n%s", diff)
	}
	r, err = m.Logs("both")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("started attempt 1: train\nattempt 1 exited with code 1\n", readAll(t, r)); diff != "" {
		t.Errorf("logs of both, from a, the first cluster (-want +got):\n%s", diff)
	}
	if _, err := m.Logs("never"); !errors.Is(err, fs.ErrNotExist) || err.Error() != "logs of never: in no cluster: file does not exist" {
		t.Errorf("Logs(never): got %v, want an error wrapping fs.ErrNotExist", err)
	}
}

func TestLogsOfARememberedWorkloadComeFromItsCluster(t *testing.T) {
	a, b, m := twoFakes(t)
	// Attempt 1 ran in a; attempt 2 runs in b.
	if err := m.Start(t.Context(), task("w", 1, "node-a")); err != nil {
		t.Fatal(err)
	}
	a.Finish("w", 1, 1)
	exitsOf(t, m, 1)
	if err := m.Start(t.Context(), task("w", 2, "node-b", "--resume")); err != nil {
		t.Fatal(err)
	}
	r, err := m.Logs("w")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("started attempt 2: train --resume\n", readAll(t, r)); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
	b.Finish("w", 2, 0)
	exitsOf(t, m, 1)
}

// brokenLogs is a fake whose logs cannot be read (an unreachable cluster).
type brokenLogs struct{ *fake.Executor }

func (brokenLogs) Logs(id core.WorkloadID) (io.ReadCloser, error) {
	return nil, errors.New("connection refused")
}

func TestLogsNameAFailingCluster(t *testing.T) {
	b := fake.New(fake.Options{})
	m := newMulti(t, multi.Cluster{Name: "a", Executor: brokenLogs{fake.New(fake.Options{})}}, multi.Cluster{Name: "b", Executor: b})
	// b has the logs: a's failure does not hide them.
	if err := b.Start(t.Context(), task("w", 1, "node-b")); err != nil {
		t.Fatal(err)
	}
	if r, err := m.Logs("w"); err != nil {
		t.Errorf("Logs(w): %v", err)
	} else {
		r.Close()
	}
	// Nobody has them, and a could not tell: not taken for "not found".
	_, err := m.Logs("never")
	if err == nil || errors.Is(err, fs.ErrNotExist) || err.Error() != `logs of never: cluster "a": connection refused` {
		t.Errorf("Logs(never): got %v, want cluster a's error and no fs.ErrNotExist", err)
	}
}

// announcer is a fake that records the stops announced to it.
type announcer struct {
	*fake.Executor
	mu  sync.Mutex
	got []string
}

func (a *announcer) AnnounceStop(id core.WorkloadID, attempt int, reason string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, fmt.Sprintf("%s/%d: %s", id, attempt, reason))
	return nil
}

// endpoints is a fake whose tasks serve on host.
type endpoints struct {
	*fake.Executor
	host string
}

func (e endpoints) Endpoint(id core.WorkloadID, attempt, port int) (string, bool) {
	for _, tk := range e.Running() {
		if tk.WorkloadID == id && tk.Attempt == attempt {
			return e.host + ":" + strconv.Itoa(port), true
		}
	}
	return "", false
}

func TestAnnounceStopRoutes(t *testing.T) {
	an := &announcer{Executor: fake.New(fake.Options{})}
	m := newMulti(t, multi.Cluster{Name: "a", Executor: an}, multi.Cluster{Name: "b", Executor: fake.New(fake.Options{})})
	for _, tk := range []executor.Task{task("w1", 1, "node-a"), task("w2", 1, "node-b")} {
		if err := m.Start(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []core.WorkloadID{"w1", "w2", "never"} {
		if err := m.AnnounceStop(id, 1, "preempted"); err != nil {
			t.Errorf("AnnounceStop(%s): %v", id, err)
		}
	}
	if diff := cmp.Diff([]string{"w1/1: preempted"}, an.got); diff != "" {
		t.Errorf("announced in a (-want +got):\n%s", diff)
	}
}

func TestEndpointRoutes(t *testing.T) {
	a := endpoints{fake.New(fake.Options{}), "10.0.0.1"}
	b := endpoints{fake.New(fake.Options{}), "10.0.0.2"}
	c := fake.New(fake.Options{})
	d := endpoints{fake.New(fake.Options{}), "10.0.0.4"}
	m := newMulti(t, multi.Cluster{Name: "a", Executor: a}, multi.Cluster{Name: "b", Executor: b},
		multi.Cluster{Name: "c", Executor: c}, multi.Cluster{Name: "d", Executor: d, NoEndpoints: true})
	for _, tk := range []executor.Task{task("wa", 1, "node-a"), task("wb", 1, "node-b"), task("wc", 1, "node-c"), task("wd", 1, "node-d")} {
		if err := m.Start(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	type answer struct {
		Addr string
		OK   bool
	}
	got := map[string]answer{}
	for _, id := range []core.WorkloadID{"wa", "wb", "wc", "wd", "never"} {
		addr, ok := m.Endpoint(id, 1, 8080)
		got[string(id)] = answer{addr, ok}
	}
	want := map[string]answer{"wa": {"10.0.0.1:8080", true}, "wb": {"10.0.0.2:8080", true}, "wc": {}, "wd": {}, "never": {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	b.Finish("wb", 1, 0)
	exitsOf(t, m, 1)
	if addr, ok := m.Endpoint("wb", 1, 8080); ok {
		t.Errorf("Endpoint of a task that ended: got %q", addr)
	}
}

// volumes is a fake that keeps volumes in memory.
type volumes struct {
	*fake.Executor
	usage int64 // what VolumeUsage says
	fail  error // what every method returns, when set

	mu   sync.Mutex
	vols map[executor.VolumeRef]int64
}

func newVolumes(usage int64) *volumes {
	return &volumes{Executor: fake.New(fake.Options{}), usage: usage, vols: map[executor.VolumeRef]int64{}}
}

func (v *volumes) EnsureVolume(ctx context.Context, team core.TeamName, name string, sizeBytes int64) error {
	if v.fail != nil {
		return v.fail
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	r := executor.VolumeRef{Team: team, Name: name}
	v.vols[r] = max(v.vols[r], sizeBytes)
	return nil
}

func (v *volumes) DeleteVolume(ctx context.Context, team core.TeamName, name string) error {
	if v.fail != nil {
		return v.fail
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.vols, executor.VolumeRef{Team: team, Name: name})
	return nil
}

func (v *volumes) ListVolumes(ctx context.Context) ([]executor.VolumeRef, error) {
	if v.fail != nil {
		return nil, v.fail
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Collect(maps.Keys(v.vols)), nil
}

func (v *volumes) VolumeUsage(ctx context.Context, team core.TeamName, name string) (int64, error) {
	if v.fail != nil {
		return 0, v.fail
	}
	return v.usage, nil
}

func (v *volumes) has() map[executor.VolumeRef]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.vols)
}

func TestVolumesFanOut(t *testing.T) {
	a, c := newVolumes(-1), newVolumes(42)
	m := newMulti(t, multi.Cluster{Name: "a", Executor: a}, multi.Cluster{Name: "b", Executor: fake.New(fake.Options{})},
		multi.Cluster{Name: "c", Executor: c})
	if !m.KeepsVolumes() {
		t.Errorf("KeepsVolumes: got false")
	}
	ctx := t.Context()
	for _, v := range []executor.VolumeRef{{Team: "t1", Name: "data"}, {Team: "t0", Name: "ckpt"}} {
		if err := m.EnsureVolume(ctx, v.Team, v.Name, 1<<30); err != nil {
			t.Fatal(err)
		}
	}
	c.EnsureVolume(ctx, "t2", "only-in-c", 1)
	a.EnsureVolume(ctx, "t0", "ckpt", 1)
	want := map[executor.VolumeRef]int64{{Team: "t1", Name: "data"}: 1 << 30, {Team: "t0", Name: "ckpt"}: 1 << 30}
	if diff := cmp.Diff(want, a.has()); diff != "" {
		t.Errorf("volumes of a (-want +got):\n%s", diff)
	}
	refs, err := m.ListVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantRefs := []executor.VolumeRef{{Team: "t0", Name: "ckpt"}, {Team: "t1", Name: "data"}, {Team: "t2", Name: "only-in-c"}}
	if diff := cmp.Diff(wantRefs, refs); diff != "" {
		t.Errorf("ListVolumes (-want +got):\n%s", diff)
	}
	if n, err := m.VolumeUsage(ctx, "t1", "data"); err != nil || n != 42 {
		t.Errorf("VolumeUsage: got (%d, %v), want c's 42, the first that a cluster can tell", n, err)
	}
	if err := m.DeleteVolume(ctx, "t1", "data"); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]*volumes{"a": a, "c": c} {
		if _, ok := v.has()[executor.VolumeRef{Team: "t1", Name: "data"}]; ok {
			t.Errorf("volume t1/data is still in %s after DeleteVolume", name)
		}
	}

	// A cluster that fails is named; the others are still served.
	a.fail = errors.New("disk full")
	err = m.EnsureVolume(ctx, "t3", "new", 10)
	if err == nil || err.Error() != `cluster "a": disk full` {
		t.Errorf("EnsureVolume with a failing: got %v", err)
	}
	if _, ok := c.has()[executor.VolumeRef{Team: "t3", Name: "new"}]; !ok {
		t.Errorf("EnsureVolume with a failing did not make the volume in c")
	}
	refs, err = m.ListVolumes(ctx)
	if err == nil || err.Error() != `cluster "a": disk full` {
		t.Errorf("ListVolumes with a failing: got error %v", err)
	}
	if len(refs) != 3 {
		t.Errorf("ListVolumes with a failing: got %v, want c's three", refs)
	}
	if n, err := m.VolumeUsage(ctx, "t3", "new"); err != nil || n != 42 {
		t.Errorf("VolumeUsage with a failing: got (%d, %v), want c's 42", n, err)
	}
	c.usage = -1
	if n, err := m.VolumeUsage(ctx, "t3", "new"); err == nil || n != -1 {
		t.Errorf("VolumeUsage with a failing and c unable to tell: got (%d, %v), want -1 and a's error", n, err)
	}
}

func TestVolumesWithoutAClusterThatKeepsThem(t *testing.T) {
	_, _, m := twoFakes(t)
	if m.KeepsVolumes() {
		t.Errorf("KeepsVolumes: got true over two fakes")
	}
	if err := m.EnsureVolume(t.Context(), "t", "v", 1); err != nil {
		t.Errorf("EnsureVolume: %v", err)
	}
	if refs, err := m.ListVolumes(t.Context()); err != nil || len(refs) != 0 {
		t.Errorf("ListVolumes: got (%v, %v), want none", refs, err)
	}
	if n, err := m.VolumeUsage(t.Context(), "t", "v"); err != nil || n != -1 {
		t.Errorf("VolumeUsage: got (%d, %v), want -1", n, err)
	}
}

func TestConcurrentStarts(t *testing.T) {
	a, b, m := twoFakes(t)
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			node := core.NodeName("node-a")
			if i%2 == 1 {
				node = "node-b"
			}
			id := core.WorkloadID(fmt.Sprintf("w%03d", i))
			if err := m.Start(context.Background(), task(id, 1, node)); err != nil {
				t.Error(err)
				return
			}
			m.ClusterOf(id, 1)
			m.Endpoint(id, 1, 80)
			if i%4 < 2 {
				m.Stop(context.Background(), id, 1, time.Second)
			}
		})
	}
	wg.Wait()
	if got := len(a.Running()) + len(b.Running()); got != n/2 {
		t.Errorf("running: got %d, want %d", got, n/2)
	}
	for _, tk := range a.Running() {
		a.Finish(tk.WorkloadID, tk.Attempt, 0)
	}
	for _, tk := range b.Running() {
		b.Finish(tk.WorkloadID, tk.Attempt, 0)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("w%03d/1", i))
	}
	if diff := cmp.Diff(want, exitsOf(t, m, n)); diff != "" {
		t.Errorf("exits (-want +got):\n%s", diff)
	}
	expectNoExit(t, m)
}

// assigning places every task that the conformance suite starts (which
// carry no assignment) on one of the nodes, as the scheduler would have:
// each new workload on the next node in turn, and again on the same one.
type assigning struct {
	*multi.Executor
	nodes []core.NodeName

	mu     sync.Mutex
	placed map[core.WorkloadID]core.NodeName
}

func (e *assigning) place(t executor.Task) executor.Task {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, ok := e.placed[t.WorkloadID]
	if !ok {
		n = e.nodes[len(e.placed)%len(e.nodes)]
		e.placed[t.WorkloadID] = n
	}
	t.Assignments = []core.Assignment{{Node: n}}
	return t
}

func (e *assigning) Start(ctx context.Context, t executor.Task) error {
	return e.Executor.Start(ctx, e.place(t))
}

func (e *assigning) Adopt(ctx context.Context, t executor.Task) (bool, error) {
	return e.Executor.Adopt(ctx, e.place(t))
}

func TestConformance(t *testing.T) {
	for _, tt := range []struct {
		name  string
		nodes []core.NodeName
	}{
		{"one cluster", []core.NodeName{"node-a"}},
		{"two clusters", []core.NodeName{"node-a", "node-b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			executortest.Run(t, func(t *testing.T) executor.Executor {
				cs := []multi.Cluster{{Name: "a", Executor: fake.New(fake.Options{})}}
				if len(tt.nodes) > 1 {
					cs = append(cs, multi.Cluster{Name: "b", Executor: fake.New(fake.Options{})})
				}
				return &assigning{Executor: newMulti(t, cs...), nodes: tt.nodes, placed: map[core.WorkloadID]core.NodeName{}}
			}, executortest.Options{
				Finish: func(e executor.Executor, id core.WorkloadID, attempt, code int) {
					m := e.(*assigning).Executor
					name, ok := m.ClusterOf(id, attempt)
					if !ok {
						t.Errorf("Finish(%s, %d): no cluster runs it", id, attempt)
						return
					}
					f, _ := m.Cluster(name)
					if !f.(*fake.Executor).Finish(id, attempt, code) {
						t.Errorf("Finish(%s, %d): task is not running in cluster %s", id, attempt, name)
					}
				},
			})
		})
	}
}
