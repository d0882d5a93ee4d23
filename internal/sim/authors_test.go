package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// hnode is a schedulable node of the hand-made traces: cores, and GPUs of
// one model.
func hnode(name string, cores, gpus int, model string) core.Node {
	n := core.Node{Name: core.NodeName(name), Schedulable: true, MilliCPU: int64(cores) * 1000, MemoryMiB: 1 << 20}
	for i := range gpus {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("%s-%d", name, i), Model: model})
	}
	return n
}

// pod asks for cores and milli-GPU (1000 a device for whole GPUs), of the
// models named.
func pod(name string, cores int, milli int64, models ...string) trace.Pod {
	return trace.Pod{Name: name, Request: core.Request{MilliCPU: int64(cores) * 1000, MilliGPU: milli, GPUModels: models}}
}

// step is where one pod went: a node ("" when it failed) and its devices.
type step struct {
	Pod, Node string
	GPUs      []int
}

// placements runs policy over pods in the file's order and returns where
// each went, in the order they were placed.
func placements(t *testing.T, nodes []core.Node, pods []trace.Pod, policy string) []step {
	t.Helper()
	var got []step
	cfg := PackingConfig{Nodes: nodes, Pods: pods, Policy: policy, Order: OrderFile, Inflate: 10, Report: []float64{0.01}}
	cfg.Placed = func(p trace.Pod, n int, ok bool) {
		s := step{Pod: p.Name}
		if ok {
			s.Node = string(nodes[n].Name)
		}
		got = append(got, s)
	}
	if _, err := Packing(cfg); err != nil {
		t.Fatal(err)
	}
	return got
}

// The authors' BestFit on a hand-made trace. Scores are
// int((1 − ½·cpuLeftAfter/128 cores − ½·gpuLeftAfter/8 GPUs) × 100):
//
//	p1 (8 cores, 0.5): a 68.75→68, b 68.75→68, c (T4) 62.5→62: a, the smaller name of the tie
//	p2 (4 cores, 0.5): a 73, b 67, c 60: a, on device 0 (500 free, the least that holds it)
//	p3 (16 cores, 2 GPUs): a has one free device, c one: b (81), devices 0 and 1
//	p4 (32 cores, no GPU): a 85, b has 16 cores left, c 68: a
//	p5 (8 cores, 0.5 of a T4): only c
//	p6 (40 cores, 1 GPU): a and b lack the cores, c has no free device: fails
func TestAuthorsBestFitByHand(t *testing.T) {
	nodes := []core.Node{hnode("a", 64, 2, "V100"), hnode("b", 32, 4, "V100"), hnode("c", 96, 1, "T4")}
	pods := []trace.Pod{pod("p1", 8, 500), pod("p2", 4, 500), pod("p3", 16, 2000), pod("p4", 32, 0), pod("p5", 8, 500, "T4"), pod("p6", 40, 1000)}
	b := newAuthorsBestFit(slices.Clone(nodes))
	var got []step
	for _, p := range pods {
		n, as, ok := b.Place(p.Request)
		s := step{Pod: p.Name}
		if ok {
			s.Node = string(nodes[n].Name)
			for _, a := range as {
				s.GPUs = append(s.GPUs, a.GPUIndex)
			}
		}
		got = append(got, s)
	}
	want := []step{{"p1", "a", []int{0}}, {"p2", "a", []int{0}}, {"p3", "b", []int{0, 1}}, {"p4", "a", nil}, {"p5", "c", []int{0}}, {"p6", "", nil}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	// What the nodes hold afterwards.
	if v := b.Node(0); v.MilliCPU != 44000 || v.Used[0].MilliGPU != 1000 || v.Used[1].MilliGPU != 0 {
		t.Errorf("node a holds %d milli-CPU and %+v; want 44000 and a full device 0", v.MilliCPU, v.Used)
	}
	// The scheduler's best fit (bestfit-gpu) sends p1 to c instead: the
	// node left with the least free GPU share.
	if s := placements(t, nodes, pods[:1], PolicyBestFitGPU); s[0].Node != "c" {
		t.Errorf("bestfit-gpu put p1 on %q; want c, the node left with the least free GPU share", s[0].Node)
	}
}

// The score is an integer: node y is better than x by 0.2 points, which
// the integer scale loses, and the tie goes to x, the smaller name,
// wherever it is in the node list.
//
//	x (64 cores, 2 GPUs): 1 − ½·56/128 − ½·1.5/8 = 0.6875 → 68
//	y (63.5 cores, 2 GPUs): 1 − ½·55.5/128 − ½·1.5/8 ≈ 0.6895 → 68
func TestAuthorsBestFitIntegerScale(t *testing.T) {
	y := hnode("y", 63, 2, "V100")
	y.MilliCPU = 63500
	nodes := []core.Node{hnode("x", 64, 2, "V100"), y}
	for _, c := range []struct {
		nodes []core.Node
		want  string
	}{{nodes, "x"}, {[]core.Node{nodes[1], nodes[0]}, "x"}} {
		if s := placements(t, c.nodes, []trace.Pod{pod("p", 8, 500)}, PolicyBestFit); s[0].Node != c.want {
			t.Errorf("nodes %s, %s: placed on %q; want %s, the smaller name of the tie", c.nodes[0].Name, c.nodes[1].Name, s[0].Node, c.want)
		}
	}
	if a, b := bestFitScore(newAuthorsBestFit(nodes).Node(0), pod("p", 8, 500).Request), bestFitScore(newAuthorsBestFit(nodes).Node(1), pod("p", 8, 500).Request); a != 68 || b != 68 {
		t.Errorf("scores %d, %d; want 68 and 68", a, b)
	}
}

// fgd weighs with the mix of the whole trace from the first pod on;
// fgd-online knows only the pods arrived so far. Node b (64 cores) comes
// first, a (8 cores) second, one GPU each; p1 asks 0.5 GPU and 4 cores,
// the three after it 0.5 GPU and 32 cores, which a can never hold.
//
// fgd, mix ¼ p1's shape and ¾ the big one (the constant of the request,
// 500, added to every shape's change):
//
//	on b: no shape loses its place: ¼·500 + ¾·500 = 500
//	on a: the big shape could not use a's GPU before and cannot after, but
//	      half of it is taken: ¼·500 + ¾·(500 − 1000 + 500) = 125: a
//
// fgd-online, mix p1's shape alone: 500 on both, the tie to b. Then a
// lacks the cores for the big pods: under fgd, p2 and p3 fill b's GPU and
// p4 fails; under fgd-online p2 fills it and p3 and p4 fail.
func TestFGDMixFromTheWholeTrace(t *testing.T) {
	nodes := []core.Node{hnode("b", 64, 1, "V100"), hnode("a", 8, 1, "V100")}
	pods := []trace.Pod{pod("p1", 4, 500), pod("p2", 32, 500), pod("p3", 32, 500), pod("p4", 32, 500)}
	for policy, want := range map[string][]step{
		PolicyFGD:       {{Pod: "p1", Node: "a"}, {Pod: "p2", Node: "b"}, {Pod: "p3", Node: "b"}, {Pod: "p4"}},
		PolicyFGDOnline: {{Pod: "p1", Node: "b"}, {Pod: "p2", Node: "b"}, {Pod: "p3"}, {Pod: "p4"}},
	} {
		if diff := cmp.Diff(want, placements(t, nodes, pods, policy)); diff != "" {
			t.Errorf("%s placements (-want +got):\n%s", policy, diff)
		}
	}
}

// With OrderFile the pods are placed in the file's order, each once, for
// every policy and whatever the seed; inflate only ends the run early.
func TestOrderFile(t *testing.T) {
	nodes, pods := testTrace(t)
	capacity := capacityOf(nodes)
	if d := demand(pods); d <= capacity/2 {
		t.Fatalf("the test trace asks %d milli-GPU of %d; want more than half", d, capacity)
	}
	names := func(ps []trace.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	for _, policy := range Policies() {
		for _, inflate := range []float64{0.5, 10} {
			var seq []string
			var runs []PackingRun
			for _, seed := range []int64{1, 2} {
				var got []string
				cfg := PackingConfig{Nodes: nodes, Pods: pods, Policy: policy, Seed: seed, Order: OrderFile, Inflate: inflate, Report: []float64{0.1}}
				cfg.Placed = func(p trace.Pod, _ int, _ bool) { got = append(got, p.Name) }
				run, err := Packing(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if seq != nil && !slices.Equal(seq, got) {
					t.Errorf("%s: seeds 1 and 2 placed different sequences", policy)
				}
				seq = got
				runs = append(runs, run)
			}
			want := names(pods)
			if inflate < 1 {
				want = names(FileOrder(pods, inflate, capacity))
				if len(want) >= len(pods) || demand(FileOrder(pods, inflate, capacity)) < capacity/2 {
					t.Fatalf("FileOrder at 0.5 kept %d of %d pods", len(want), len(pods))
				}
			}
			if diff := cmp.Diff(want, seq); diff != "" {
				t.Errorf("%s, inflate %g: placement sequence (-file +placed):\n%s", policy, inflate, diff)
			}
			if r := runs[0]; r.Pods != len(want) || r.Order != OrderFile || r.Placed+r.Failed != len(want) {
				t.Errorf("%s, inflate %g: run of %d pods (%d placed, %d failed), order %q; want %d pods in order file", policy, inflate, r.Pods, r.Placed, r.Failed, r.Order, len(want))
			}
			if policy != "random" && !cmp.Equal(runs[0].Points, runs[1].Points) {
				t.Errorf("%s: seeds 1 and 2 gave different points in the file's order", policy)
			}
		}
	}
	if _, err := Packing(PackingConfig{Nodes: nodes, Pods: pods, Order: "sorted", Inflate: 1}); err == nil || !strings.Contains(err.Error(), `"sorted"`) {
		t.Errorf("order sorted: error %v; want one naming it", err)
	}
}

// The default order is still the paper's: shuffled and inflated.
func TestOrderShuffleIsTheDefault(t *testing.T) {
	nodes, pods := testTrace(t)
	run, err := Packing(PackingConfig{Nodes: nodes, Pods: pods, Policy: sched.PackFirstFit, Seed: 1, Inflate: 1.3})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(Workload(pods, 1, 1.3, capacityOf(nodes))); run.Order != OrderShuffle || run.Pods != want {
		t.Errorf("order %q with %d pods; want shuffle with %d", run.Order, run.Pods, want)
	}
}

func TestPoliciesNames(t *testing.T) {
	want := []string{"gpufleet", "fgd", "fgd-online", "firstfit", "bestfit", "bestfit-gpu", "random", "dotproduct", "gpupacking", "reservation"}
	if diff := cmp.Diff(want, Policies()); diff != "" {
		t.Errorf("Policies (-want +got):\n%s", diff)
	}
}

// spread keeps each shape's share in every prefix within one pod.
func TestSpread(t *testing.T) {
	var pods []trace.Pod
	for i := range 30 {
		milli := int64(500)
		if i%3 == 0 {
			milli = 1000
		}
		pods = append(pods, pod(fmt.Sprint(i), 1, milli))
	}
	pods = append(pods, pod("cpu", 1, 0))
	reqs := spread(pods)
	if len(reqs) != 30 {
		t.Fatalf("%d requests; want the 30 with GPUs", len(reqs))
	}
	whole := 0
	for i, r := range reqs {
		if r.MilliGPU == 1000 {
			whole++
		}
		if exact := float64(i+1) / 3; float64(whole) < exact-1 || float64(whole) > exact+1 {
			t.Fatalf("after %d requests %d whole GPUs; want %.1f ± 1", i+1, whole, exact)
		}
	}
}
