package usage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

var t0 = time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseGPUQuery(t *testing.T) {
	got, err := ParseGPUQuery(read(t, "query-gpu.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []core.GPUSample{
		{Index: 0, UUID: "GPU-1b2c3d4e-0000-1111-2222-333344445555", Utilization: 0.87, MemoryUsedMiB: 40321},
		{Index: 1, UUID: "GPU-9f8e7d6c-0000-1111-2222-333344445555", Utilization: 0, MemoryUsedMiB: 3},
		{Index: 2, UUID: "GPU-aaaabbbb-0000-1111-2222-333344445555", Err: "utilization.gpu [GPU requires reset]"},
		{Index: 3, UUID: "GPU-ccccdddd-0000-1111-2222-333344445555", Utilization: 0.12, MemoryUsedMiB: 20480},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"x, GPU-1, 1, 2\n", "0, GPU-1, 1\n"} {
		if _, err := ParseGPUQuery(bad); err == nil {
			t.Errorf("ParseGPUQuery(%q) = nil error, want one", bad)
		}
	}
}

func TestParseAppsQuery(t *testing.T) {
	got, err := ParseAppsQuery(read(t, "query-compute-apps.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []App{
		{4242, "GPU-1b2c3d4e-0000-1111-2222-333344445555", 40000},
		{5151, "GPU-ccccdddd-0000-1111-2222-333344445555", 12000},
		{5152, "GPU-ccccdddd-0000-1111-2222-333344445555", 8000},
		{777, "GPU-ccccdddd-0000-1111-2222-333344445555", 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, none := range []string{"", "No running processes found\n"} {
		if got, err := ParseAppsQuery(none); err != nil || len(got) != 0 {
			t.Errorf("ParseAppsQuery(%q) = %v, %v; want nothing", none, got, err)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	pg, sid, ok := ParseProcStat("5152 (python (worker) 1) S 5150 5150 5100 0 -1 4194560 ...")
	if !ok || pg != 5150 || sid != 5100 {
		t.Errorf("got %d %d %v, want 5150 5100 true", pg, sid, ok)
	}
	if _, _, ok := ParseProcStat("garbage"); ok {
		t.Error("garbage parsed")
	}
}

func running(id string, attempt int, as ...core.Assignment) *core.Workload {
	w := &core.Workload{ID: core.WorkloadID(id)}
	w.Status.Phase, w.Status.Attempts, w.Status.Placement = core.Running, attempt, as
	return w
}

func TestNvidiaSampleMapsProcessesToWorkloads(t *testing.T) {
	// train holds GPU 0; a and b share GPU 3 (a has two processes, one a
	// child in its group); idle holds GPU 1 without any process; pid 777
	// belongs to nobody gpufleet knows.
	snap := &core.Snapshot{Running: []*core.Workload{
		running("train", 1, core.Assignment{Node: "n1", GPUIndex: 0, MilliGPU: 1000}),
		running("a", 2, core.Assignment{Node: "n1", GPUIndex: 3, MilliGPU: 500, MemoryMiB: 10240}),
		running("b", 1, core.Assignment{Node: "n1", GPUIndex: 3, MilliGPU: 500, MemoryMiB: 10240}),
		running("idle", 1, core.Assignment{Node: "n1", GPUIndex: 1, MilliGPU: 1000}),
		running("elsewhere", 1, core.Assignment{Node: "n2", GPUIndex: 0, MilliGPU: 1000}),
	}}
	var ran [][]string
	n := &Nvidia{
		Node: "n1",
		Now:  func() time.Time { return t0 },
		Run: func(_ context.Context, path string, args []string) ([]byte, error) {
			ran = append(ran, append([]string{path}, args...))
			if strings.HasPrefix(args[0], "--query-gpu") {
				return []byte(read(t, "query-gpu.txt")), nil
			}
			return []byte(read(t, "query-compute-apps.txt")), nil
		},
		Tasks: func() []TaskProcess {
			return []TaskProcess{{"train", 1, 4242, 4240}, {"a", 2, 5150, 5100}, {"b", 1, 6000, 5990}, {"idle", 1, 7000, 6990}}
		},
		Group: func(pid int) (int, int, bool) {
			switch pid {
			case 5151:
				return 5150, 5100, true // a's child, in its group
			case 5152:
				return 5152, 5990, true // b's, in a group of its own but b's session
			}
			return pid, pid, true
		},
	}
	got, err := n.Sample(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]string{append([]string{"nvidia-smi"}, GPUQueryArgs...), append([]string{"nvidia-smi"}, AppsQueryArgs...)}, ran); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	ref := func(i int) core.GPURef { return core.GPURef{Node: "n1", Index: i} }
	want := map[core.WorkloadID]core.WorkloadSample{
		"train": {ID: "train", Attempt: 1, Utilization: 0.87, MemoryUsedMiB: 40000, PerGPUMemoryMiB: map[core.GPURef]int64{ref(0): 40000}},
		"a":     {ID: "a", Attempt: 2, Utilization: 0.12, MemoryUsedMiB: 12000, PerGPUMemoryMiB: map[core.GPURef]int64{ref(3): 12000}},
		"b":     {ID: "b", Attempt: 1, Utilization: 0.12, MemoryUsedMiB: 8000, PerGPUMemoryMiB: map[core.GPURef]int64{ref(3): 8000}},
		"idle":  {ID: "idle", Attempt: 1, Utilization: 0, MemoryUsedMiB: 0, PerGPUMemoryMiB: map[core.GPURef]int64{ref(1): 0}},
	}
	if diff := cmp.Diff(want, got.Workloads); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
	if len(got.GPUs) != 4 || got.GPUs[0].Node != "n1" || got.GPUs[2].Err == "" {
		t.Errorf("GPUs = %+v, want 4 on n1 with GPU 2 in error", got.GPUs)
	}
}

// TestNvidiaSampleFindsProcessesInSessionsOfTheirOwn: Jupyter starts each
// kernel in a session of its own, so the kernel that uses the GPU is in
// neither the notebook task's session nor its group; it is the task's
// through its parent. A process whose parents lead to no task is nobody's.
func TestNvidiaSampleFindsProcessesInSessionsOfTheirOwn(t *testing.T) {
	snap := &core.Snapshot{Running: []*core.Workload{
		running("nb", 1, core.Assignment{Node: "n1", GPUIndex: 0, MilliGPU: 1000}),
	}}
	n := &Nvidia{
		Node: "n1",
		Run: func(_ context.Context, _ string, args []string) ([]byte, error) {
			if strings.HasPrefix(args[0], "--query-gpu") {
				return []byte(read(t, "query-gpu.txt")), nil
			}
			return []byte("8100, GPU-1b2c3d4e-0000-1111-2222-333344445555, 30000\n" +
				"9100, GPU-1b2c3d4e-0000-1111-2222-333344445555, 500\n"), nil
		},
		Tasks: func() []TaskProcess { return []TaskProcess{{"nb", 1, 8000, 7990}} },
		Group: func(pid int) (int, int, bool) {
			if pid == 8050 {
				return 8000, 7990, true // the Jupyter server's worker, in the task's group
			}
			return pid, pid, true // everyone else leads a session of its own
		},
		Parent: func(pid int) (int, bool) {
			switch pid {
			case 8100:
				return 8050, true // the kernel, started by the server
			case 9100:
				return 9000, true
			case 9000:
				return 1, true
			}
			return 0, false
		},
	}
	got, err := n.Sample(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if w := got.Workloads["nb"]; w.MemoryUsedMiB != 30000 || w.Utilization != 0.87 {
		t.Errorf("nb = %+v, want the kernel's 30000 MiB and GPU 0's 0.87", w)
	}
}

func TestProcParent(t *testing.T) {
	if ppid, ok := procParent(os.Getpid()); !ok || ppid != os.Getppid() {
		t.Errorf("procParent(self) = %d, %v; want %d", ppid, ok, os.Getppid())
	}
}

func TestNvidiaSampleFails(t *testing.T) {
	n := &Nvidia{Node: "n1", Run: func(context.Context, string, []string) ([]byte, error) { return nil, errors.New("exit status 9") }}
	if _, err := n.Sample(context.Background(), &core.Snapshot{}); err == nil || !strings.Contains(err.Error(), "exit status 9") {
		t.Errorf("err = %v, want nvidia-smi's", err)
	}
}

func TestNvidiaTimeout(t *testing.T) {
	// A real nvidia-smi stand-in that hangs is killed after the timeout.
	path := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Nvidia{Node: "n1", Path: path, Timeout: 100 * time.Millisecond}
	if _, err := n.Sample(context.Background(), &core.Snapshot{}); err == nil {
		t.Error("no error from a query that outlived its timeout")
	}
}

func TestParseSimUsage(t *testing.T) {
	cases := []struct {
		in      string
		want    SimUsage
		wantErr bool
	}{
		{"utilization=0.8 memoryMiB=2048\n", SimUsage{0.8, 2048}, false},
		{"memoryMiB=10\nutilization=0", SimUsage{0, 10}, false},
		{"utilization=80", SimUsage{0.8, 0}, false},
		{"utilization=5% other=1", SimUsage{0.05, 0}, false},
		{"", SimUsage{}, false},
		{"utilization=lots memoryMiB=5", SimUsage{0, 5}, true},
		{"memoryMiB=-1", SimUsage{}, true},
		{"utilization=101", SimUsage{}, true},
		{"junk", SimUsage{}, true},
	}
	for _, c := range cases {
		got, err := ParseSimUsage(c.in)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("ParseSimUsage(%q) = %+v, %v; want %+v, error %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func TestSimSample(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a-1", "utilization=0.7 memoryMiB=3001")
	write("b-1", "utilization=0.6 memoryMiB=100")
	snap := &core.Snapshot{
		Nodes: []*core.Node{{Name: "n", GPUs: []core.GPU{{Index: 0, Simulated: true}, {Index: 1, Simulated: true}, {Index: 2, Simulated: true}}}},
		Running: []*core.Workload{
			running("a", 1, core.Assignment{Node: "n", GPUIndex: 0, MilliGPU: 1000}, core.Assignment{Node: "n", GPUIndex: 1, MilliGPU: 1000}),
			running("b", 1, core.Assignment{Node: "n", GPUIndex: 1, MilliGPU: 500}),
			running("silent", 1, core.Assignment{Node: "n", GPUIndex: 2, MilliGPU: 500}),
		},
	}
	s := &Sim{Now: func() time.Time { return t0 }, File: func(id core.WorkloadID, attempt int) string {
		return filepath.Join(dir, string(id)+"-1")
	}}
	got, err := s.Sample(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	wantGPUs := []core.GPUSample{
		{Node: "n", Index: 0, Utilization: 0.7, MemoryUsedMiB: 1501},
		{Node: "n", Index: 1, Utilization: 1, MemoryUsedMiB: 1600},
		{Node: "n", Index: 2},
	}
	if diff := cmp.Diff(wantGPUs, got.GPUs); diff != "" {
		t.Errorf("GPUs (-want +got):\n%s", diff)
	}
	if w := got.Workloads["a"]; w.Utilization != 0.7 || w.MemoryUsedMiB != 3001 {
		t.Errorf("a = %+v", w)
	}
	if w, ok := got.Workloads["silent"]; !ok || w.Utilization != 0 || w.MemoryUsedMiB != 0 {
		t.Errorf("a workload without a file = %+v, %v; want a sample of zeros", w, ok)
	}
}

// TestSimSumsRound: a GPU shared by workloads at 0.6 and 0.3 is at 0.9, in
// the GPU's sample and in the cluster's point, not 0.8999999999999999.
func TestSimSumsRound(t *testing.T) {
	dir := t.TempDir()
	for id, u := range map[string]string{"a": "utilization=0.6", "b": "utilization=0.3"} {
		if err := os.WriteFile(filepath.Join(dir, id), []byte(u), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	snap := &core.Snapshot{
		Nodes: []*core.Node{{Name: "n", GPUs: []core.GPU{{Index: 0, Simulated: true}}}},
		Running: []*core.Workload{
			running("a", 1, core.Assignment{Node: "n", GPUIndex: 0, MilliGPU: 250}),
			running("b", 1, core.Assignment{Node: "n", GPUIndex: 0, MilliGPU: 250}),
		},
	}
	s := &Sim{Now: func() time.Time { return t0 }, File: func(id core.WorkloadID, _ int) string { return filepath.Join(dir, string(id)) }}
	got, err := s.Sample(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	if u := got.GPUs[0].Utilization; u != 0.9 {
		t.Errorf("GPU utilisation %v, want 0.9", u)
	}
	got.GPUs = append(got.GPUs, core.GPUSample{Node: "m", Index: 0, Utilization: 0.7})
	if p := Point(snap, got, t0); p.UsedGPUs != 1.6 {
		t.Errorf("used GPUs %v, want 1.6", p.UsedGPUs)
	}
}

// TestSimSampleReadsOnlyRegularFiles: the workload owns its usage file. A
// FIFO there must not block the sample (opening one waits for a writer,
// and stalled the monitor for the whole cluster), nor may a link make the
// server read another file: both count as no file.
func TestSimSampleReadsOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo, link, target := filepath.Join(dir, "fifo"), filepath.Join(dir, "link"), filepath.Join(dir, "target")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.WriteFile(target, []byte("utilization=0.9 memoryMiB=9000"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	snap := &core.Snapshot{
		Nodes: []*core.Node{{Name: "n", GPUs: []core.GPU{{Index: 0, Simulated: true}, {Index: 1, Simulated: true}}}},
		Running: []*core.Workload{
			running("fifo", 1, core.Assignment{Node: "n", GPUIndex: 0, MilliGPU: 500}),
			running("link", 1, core.Assignment{Node: "n", GPUIndex: 1, MilliGPU: 500}),
		},
	}
	s := &Sim{Now: func() time.Time { return t0 }, File: func(id core.WorkloadID, _ int) string { return filepath.Join(dir, string(id)) }}
	type result struct {
		s   core.Sample
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := s.Sample(context.Background(), snap)
		done <- result{got, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, id := range []core.WorkloadID{"fifo", "link"} {
			if w, ok := r.s.Workloads[id]; !ok || w.Utilization != 0 || w.MemoryUsedMiB != 0 {
				t.Errorf("%s: %+v, %v; want a sample of zeros", id, w, ok)
			}
		}
	case <-time.After(5 * time.Second):
		// Unblock the goroutine before failing.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("sampling blocked on a FIFO in place of the usage file")
	}
}

func TestPoint(t *testing.T) {
	snap := &core.Snapshot{
		Nodes:   []*core.Node{{Name: "n", GPUs: []core.GPU{{Index: 0}, {Index: 1}, {Index: 2}, {Index: 3}}}},
		Usage:   map[core.NodeName]*core.NodeUsage{"n": {GPUs: map[int]core.GPUUse{0: {MilliGPU: 250}, 1: {MilliGPU: 1000}, 2: {MilliGPU: 500}}}},
		Running: []*core.Workload{{}, {}, {}},
		Pending: []*core.Workload{{CreatedAt: t0.Add(-10 * time.Second)}, {CreatedAt: t0.Add(-20 * time.Second)}},
	}
	s := core.Sample{GPUs: []core.GPUSample{{Utilization: 0.5}, {Utilization: 0.25}}}
	got := Point(snap, s, t0)
	want := core.UsagePoint{Time: t0, GPUs: 4, AllocatedGPUs: 1.75, UsedGPUs: 0.75, IdleGPUs: 1, Running: 3, Pending: 2, QueueWaitSeconds: 15}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestTracker(t *testing.T) {
	tr := NewTracker(time.Second, 3*time.Second)
	for i := range 5 {
		at := t0.Add(time.Duration(i) * time.Second)
		s := core.Sample{At: at, GPUs: []core.GPUSample{{Node: "n", Index: 0, Utilization: float64(i) / 10}},
			Workloads: map[core.WorkloadID]core.WorkloadSample{"a": {ID: "a", Attempt: 1, Utilization: float64(i) / 10}}}
		tr.Record(s, core.UsagePoint{Time: at, Running: i}, map[core.WorkloadID]time.Time{"a": t0})
	}
	var got []int
	for _, p := range tr.History(time.Hour, t0.Add(5*time.Second)) {
		got = append(got, p.Running)
	}
	if diff := cmp.Diff([]int{2, 3, 4}, got); diff != "" {
		t.Errorf("history keeps the last 3, oldest first (-want +got):\n%s", diff)
	}
	if h := tr.History(1500*time.Millisecond, t0.Add(4*time.Second)); len(h) != 2 {
		t.Errorf("a window of 1.5 s holds %d points, want 2", len(h))
	}
	if g, ok := tr.GPU("n", 0); !ok || g.Utilization != 0.4 {
		t.Errorf("GPU = %+v, %v", g, ok)
	}
	if s, _, idle, ok := tr.Workload("a", 1); !ok || s.Utilization != 0.4 || idle == nil || !idle.Equal(t0) {
		t.Errorf("workload = %+v, %v, %v", s, idle, ok)
	}
	if _, _, _, ok := tr.Workload("a", 2); ok {
		t.Error("a sample of attempt 1 answers for attempt 2")
	}
}

// Each workload keeps its own history, every attempt's, bounded in points
// and in workloads; a history goes once its workload is no longer sampled
// for the keep time.
func TestTrackerWorkloadHistory(t *testing.T) {
	tr := NewTracker(time.Second, 10*time.Second)
	tr.maxPoints, tr.maxWorkloads = 4, 2
	sample := func(i int, ws ...core.WorkloadSample) {
		s := core.Sample{At: t0.Add(time.Duration(i) * time.Second), Workloads: map[core.WorkloadID]core.WorkloadSample{}}
		for _, w := range ws {
			s.Workloads[w.ID] = w
		}
		tr.Record(s, core.UsagePoint{Time: s.At}, nil)
	}
	for i := range 6 {
		attempt := 1
		if i >= 4 {
			attempt = 2
		}
		sample(i, core.WorkloadSample{ID: "a", Attempt: attempt, Utilization: float64(i) / 10, MemoryUsedMiB: int64(i) * 100})
	}
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	want := []core.WorkloadUsagePoint{
		{Time: at(2), Attempt: 1, Utilization: 0.2, MemoryUsedMiB: 200},
		{Time: at(3), Attempt: 1, Utilization: 0.3, MemoryUsedMiB: 300},
		{Time: at(4), Attempt: 2, Utilization: 0.4, MemoryUsedMiB: 400},
		{Time: at(5), Attempt: 2, Utilization: 0.5, MemoryUsedMiB: 500},
	}
	if diff := cmp.Diff(want, tr.WorkloadHistory("a", time.Hour, at(5))); diff != "" {
		t.Errorf("the last 4 points, oldest first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[2:], tr.WorkloadHistory("a", 1500*time.Millisecond, at(5))); diff != "" {
		t.Errorf("a window of 1.5 s (-want +got):\n%s", diff)
	}
	if got := tr.WorkloadHistory("nosuch", time.Hour, at(5)); got != nil {
		t.Errorf("a workload never sampled has history %v", got)
	}
	// Two more workloads: a, sampled longest ago, loses its history.
	sample(6, core.WorkloadSample{ID: "b", Attempt: 1})
	sample(7, core.WorkloadSample{ID: "b", Attempt: 1}, core.WorkloadSample{ID: "c", Attempt: 1})
	if got := tr.WorkloadHistory("a", time.Hour, at(7)); got != nil {
		t.Errorf("three workloads with a bound of 2: the one sampled longest ago keeps %v", got)
	}
	if len(tr.WorkloadHistory("b", time.Hour, at(7))) != 2 || len(tr.WorkloadHistory("c", time.Hour, at(7))) != 1 {
		t.Errorf("b and c: %v, %v", tr.WorkloadHistory("b", time.Hour, at(7)), tr.WorkloadHistory("c", time.Hour, at(7)))
	}
	// c alone for more than the keep time (10 s): b's history goes, c's
	// stays.
	for i := 8; i <= 18; i++ {
		sample(i, core.WorkloadSample{ID: "c", Attempt: 1})
	}
	if got := tr.WorkloadHistory("b", time.Hour, at(18)); got != nil {
		t.Errorf("b, not sampled for 11 s with a keep of 10 s, keeps %v", got)
	}
	if got := tr.WorkloadHistory("c", time.Hour, at(18)); len(got) != 4 {
		t.Errorf("c keeps %d points, want 4", len(got))
	}
}

// TestH200Queries: the usage queries as an H200 answered them, idle and
// with two 0.25-GPU workloads running (internal/health/testdata/h200).
func TestH200Queries(t *testing.T) {
	h200 := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "health", "testdata", "h200", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	gpus, err := ParseGPUQuery(h200("query-gpu.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]core.GPUSample{{Index: 0, UUID: "GPU-0ba79ed6-f6d3-59ad-f6ce-8ab2e3e621da"}}, gpus); diff != "" {
		t.Errorf("--query-gpu (-want +got):\n%s", diff)
	}
	apps, err := ParseAppsQuery(h200("query-compute-apps.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []App{{880, "GPU-b5ce9572-2b76-939f-3616-a2cfe6369113", 21316}, {899, "GPU-b5ce9572-2b76-939f-3616-a2cfe6369113", 21316}}
	if diff := cmp.Diff(want, apps); diff != "" {
		t.Errorf("--query-compute-apps (-want +got):\n%s", diff)
	}
}
