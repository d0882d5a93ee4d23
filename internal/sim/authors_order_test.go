// The authors' code, transcribed below, seeds math/rand's global source
// with rand.Seed, which since Go 1.24 does nothing unless randseednop=0.
//
//go:debug randseednop=0

package sim

import (
	"encoding/csv"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// authorsTestPods is a small openb pod list: fractions, whole GPUs (one,
// two, four, eight), CPU-only pods, names out of order ("p-2" sorts after
// "p-10", byte by byte). It asks for 15,750 milli-GPU.
const authorsTestPods = `name,cpu_milli,memory_mib,num_gpu,gpu_milli
p-07,4000,1000,1,500
p-10,8000,1000,8,1000
p-01,2000,1000,0,0
p-03,4000,1000,1,250
p-2,4000,1000,2,1000
p-05,1000,1000,1,1000
p-11,1000,1000,0,0
p-04,1000,1000,4,1000
`

func readTestPods(t *testing.T, text string) []trace.Pod {
	t.Helper()
	pods, err := trace.ReadPods(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// theirSequence is the authors' Simulate up to the end of the tuning, and
// their renaming of the nodes in syncClusterResourceList, transcribed from
// hkust-adsl/kubernetes-scheduler-simulator at 8f3d641 (pkg/simulator:
// core.go, simulator.go, analysis.go), on math/rand's global source as
// theirs. Pods are read from the CSV as their pod_csv_to_yaml.py makes
// them (gpu-milli gpu_milli, gpu-count num_gpu, none without GPUs), not
// through package trace. It returns the pods' names in order and the
// nodes' new names, index for index with nodeNames.
func theirSequence(podsCSV string, seed int64, ratio float64, nodeTotalMilliGpu int64, nodeNames []string, reflectors int) ([]string, []string) {
	type pod struct {
		Name      string
		MilliGpu  int64
		GpuNumber int
	}
	rows, err := csv.NewReader(strings.NewReader(podsCSV)).ReadAll()
	if err != nil {
		panic(err)
	}
	var clusterPods []*pod
	for _, r := range rows[1:] {
		p := &pod{Name: r[0]}
		if n, _ := strconv.Atoi(r[3]); n != 0 {
			p.GpuNumber = n
			p.MilliGpu, _ = strconv.ParseInt(r[4], 10, 64)
		}
		clusterPods = append(clusterPods, p)
	}
	total := func(p *pod) int64 { return p.MilliGpu * int64(p.GpuNumber) }

	// SetWorkloadPods
	workloadPods := slices.Clone(clusterPods)
	sort.Slice(workloadPods, func(i, j int) bool { return workloadPods[i].Name < workloadPods[j].Name })

	rand.Seed(seed)
	_ = rand.Int() // log.Debugf("Random Seed: %d, Random Int: %d", seed, rand.Int())

	// SortClusterPods, shufflePod true
	pods := clusterPods
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	rand.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })

	// RecordPodTotalResourceReq
	var podTotalMilliGpuReq int64
	for _, p := range pods {
		podTotalMilliGpuReq += total(p)
	}

	// TunePodsByNodeTotalResource
	tgtTotalMilliGpu := ratio * float64(nodeTotalMilliGpu)
	if float64(podTotalMilliGpuReq) > tgtTotalMilliGpu {
		// tuneDownPods
		for float64(podTotalMilliGpuReq) > ratio*float64(nodeTotalMilliGpu) {
			idx := rand.Intn(len(pods))
			podToRm := pods[idx]
			pods = append(pods[:idx], pods[idx+1:]...)
			podTotalMilliGpuReq -= total(podToRm)
		}
	} else if float64(podTotalMilliGpuReq) < tgtTotalMilliGpu {
		// tuneUpPods
		n := len(workloadPods)
		i := 0
		for {
			idx := rand.Intn(n)
			podTuned := *workloadPods[idx]
			podTuned.Name = fmt.Sprintf("%s-tuned-%d", podTuned.Name, i)
			if float64(podTotalMilliGpuReq+podTuned.MilliGpu) > ratio*float64(nodeTotalMilliGpu) {
				break
			}
			podTotalMilliGpuReq += total(&podTuned)
			pods = append(pods, &podTuned)
			i++
		}
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}

	// RunCluster: the informers' reflectors, then syncClusterResourceList.
	for range reflectors {
		rand.Float64()
	}
	type node struct{ Name, orig string }
	nodes := make([]*node, len(nodeNames))
	for i, n := range nodeNames {
		nodes[i] = &node{n, n}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	randomIndex := rand.Perm(len(nodes))
	for i := 0; i < len(randomIndex); i++ {
		idx := randomIndex[i]
		nodes[i].Name = fmt.Sprintf("%04d-", idx) + nodes[i].Name
	}
	renamed := map[string]string{}
	for _, n := range nodes {
		renamed[n.orig] = n.Name
	}
	var newNames []string
	for _, n := range nodeNames {
		newNames = append(newNames, renamed[n])
	}
	return names, newNames
}

func podNames(pods []trace.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// The authors' order is what their code gives, for seeds and ratios that
// tune up (1.3, 2), down (0.5) or not at all (exactly the pods' demand),
// and the nodes are renamed as theirs are.
func TestAuthorsOrderIsTheirs(t *testing.T) {
	pods := readTestPods(t, authorsTestPods)
	var nodes []core.Node
	var nodeNames []string
	for _, name := range []string{"n-3", "n-1", "n-20", "n-2", "n-10"} {
		nodes = append(nodes, hnode(name, 64, 4, "A100"))
		nodeNames = append(nodeNames, name)
	}
	for _, c := range []struct {
		ratio    float64
		capacity int64
	}{{1.3, 16000}, {2, 16000}, {0.5, 16000}, {1, 15750}} {
		for seed := int64(0); seed < 40; seed++ {
			wantPods, wantNodes := theirSequence(authorsTestPods, seed, c.ratio, c.capacity, nodeNames, authorsReflectorDraws)
			seq, names, err := authorsRun(nodes, pods, seed, c.ratio, c.capacity)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantPods, podNames(seq)); diff != "" {
				t.Fatalf("ratio %g, seed %d: the sequence differs from theirs (-theirs +ours):\n%s", c.ratio, seed, diff)
			}
			if diff := cmp.Diff(wantNodes, names); diff != "" {
				t.Fatalf("ratio %g, seed %d: the node names differ from theirs (-theirs +ours):\n%s", c.ratio, seed, diff)
			}
		}
	}
}

// The shuffle is all the pods, each once; copies follow, each of a pod of
// the list, numbered from 0, each appended while the demand so far plus
// its per-device share stays within the target; and the tuning stops only
// where a draw's share would pass it, so within 1000 milli-GPU of it.
func TestAuthorsOrderAppendsCopiesByTheRule(t *testing.T) {
	pods := readTestPods(t, authorsTestPods)
	byName := map[string]trace.Pod{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	const capacity = 16000
	target := 1.3 * capacity
	over, cpuCopies := 0, 0
	for seed := int64(0); seed < 200; seed++ {
		seq, err := AuthorsOrder(pods, seed, 1.3, capacity)
		if err != nil {
			t.Fatal(err)
		}
		first := podNames(seq[:len(pods)])
		slices.Sort(first)
		if diff := cmp.Diff([]string{"p-01", "p-03", "p-04", "p-05", "p-07", "p-10", "p-11", "p-2"}, first); diff != "" {
			t.Fatalf("seed %d: the first %d pods are not the list's, each once (-want +got):\n%s", seed, len(pods), diff)
		}
		if slices.Equal(podNames(seq[:len(pods)]), podNames(pods)) {
			t.Errorf("seed %d: not shuffled", seed)
		}
		d := demand(seq[:len(pods)])
		for i, p := range seq[len(pods):] {
			base, n, ok := strings.Cut(p.Name, "-tuned-")
			orig, known := byName[base]
			if !ok || !known || n != strconv.Itoa(i) {
				t.Fatalf("seed %d: copy %d is named %q; want NAME-tuned-%d", seed, i, p.Name, i)
			}
			if diff := cmp.Diff(orig.Request, p.Request); diff != "" {
				t.Fatalf("seed %d: copy %s asks for another request (-original +copy):\n%s", seed, p.Name, diff)
			}
			if share := min(p.GPUs(), 1000); float64(d+share) > target {
				t.Fatalf("seed %d: copy %s appended at demand %d though its share %d passes %g", seed, p.Name, d, share, target)
			}
			if p.GPUs() == 0 {
				cpuCopies++
			}
			d += p.GPUs()
		}
		if d <= int64(target)-1000 {
			t.Errorf("seed %d: stopped at demand %d; a draw stops it only within 1000 of %g", seed, d, target)
		}
		if float64(d) > target {
			over++
		}
	}
	// Both sides of their rule show up in 200 seeds: a whole-GPU copy
	// passing the target by its devices past the first, a CPU-only copy.
	if over == 0 || cpuCopies == 0 {
		t.Errorf("over 200 seeds: %d ended above the target, %d CPU-only copies; want some of each", over, cpuCopies)
	}
}

func TestAuthorsOrderRefusesARepeatedName(t *testing.T) {
	pods := readTestPods(t, authorsTestPods+"p-05,1000,1000,0,0\n")
	if _, err := AuthorsOrder(pods, 42, 1.3, 16000); err == nil || !strings.Contains(err.Error(), `"p-05"`) {
		t.Errorf("error %v; want one naming p-05", err)
	}
	if _, err := Packing(PackingConfig{Nodes: []core.Node{hnode("n", 8, 2, "A100")}, Pods: pods, Order: OrderAuthors, Inflate: 1.3}); err == nil {
		t.Error("Packing ran a list with a repeated name in the authors' order")
	}
}

// Under OrderAuthors, bestfit breaks a tie by the authors' node names:
// among identical nodes the first pod goes to the one whose prefix is the
// smallest, not to the smallest name.
func TestAuthorsBestFitTiesByTheirNames(t *testing.T) {
	var nodes []core.Node
	for i := range 6 {
		nodes = append(nodes, hnode(fmt.Sprintf("n-%d", i), 64, 4, "A100"))
	}
	pods := []trace.Pod{pod("a", 4, 500), pod("b", 4, 500)}
	moved := false
	for seed := int64(0); seed < 10; seed++ {
		_, names, err := authorsRun(nodes, pods, seed, 1, capacityOf(nodes))
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for i := range names {
			if names[i] < names[want] {
				want = i
			}
		}
		got := -1
		cfg := PackingConfig{Nodes: nodes, Pods: pods, Policy: PolicyBestFit, Seed: seed, Order: OrderAuthors, Inflate: 1, Report: []float64{0.01}}
		cfg.Placed = func(_ trace.Pod, n int, ok bool) {
			if got < 0 && ok {
				got = n
			}
		}
		if _, err := Packing(cfg); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("seed %d: the first pod went to %s; want %s, named %s there", seed, nodes[got].Name, nodes[want].Name, names[want])
		}
		moved = moved || want != 0
	}
	if !moved {
		t.Error("in 10 seeds the tie never left n-0: the names are not shuffled")
	}
}

// Their figure at a level: rows whose arrival rounds (half to even) to the
// level, each allocation rounded to 0.01 first; the rows of the levels
// beside it when none is at it.
func TestAuthorsFigures(t *testing.T) {
	const gpus = 8 // 8000 milli-GPU: 80 milli-GPU is 1%
	var f authorsFigures
	for _, r := range [][2]int64{
		{7880, 7880}, // 98.5% → 98 (half to even)
		{7960, 7960}, // 99.5% → 100
		{8000, 7930}, // 100% → 100; 99.125% → 99.12 (half to even)
		{8040, 7930}, // 100.5% → 100
		{8140, 7950}, // 101.75% → 102
	} {
		f = f.Add(r[0], r[1], gpus)
	}
	for _, c := range []struct {
		level float64
		want  float64 // %
		ok    bool
	}{
		{1, (99.5 + 99.12 + 99.12) / 3, true},
		{0.98, 98.5, true},
		{0.99, (98.5 + 99.5 + 99.12 + 99.12) / 4, true},  // none at 99: rows at 98 to 100
		{1.01, (99.5 + 99.12 + 99.12 + 99.38) / 4, true}, // none at 101: rows at 100 to 102 (99.375 → 99.38)
		{0.995, 0, false},
		{0.9, 0, false},
	} {
		got, ok := f.At(c.level)
		if want := math.RoundToEven(c.want*100) / 100 / 100; ok != c.ok || math.Abs(got-want) > 1e-12 {
			t.Errorf("At(%g) = %v, %v; want %v, %v", c.level, got, ok, want, c.ok)
		}
	}
}

// pairwiseSum adds in numpy's order: eight lanes over a block, so that 15
// ones after 1e16 count (each alone rounds away: 1e16 + 1 is 1e16).
func TestPairwiseSum(t *testing.T) {
	a := []float64{1e16}
	for range 15 {
		a = append(a, 1)
	}
	var seq float64
	for _, v := range a {
		seq += v
	}
	if seq != 1e16 || pairwiseSum(a) != 1e16+14 {
		t.Errorf("sequential %v, pairwise %v; want 1e16 and 1e16+14 (lanes 1e16+1, 2, …: ((1e16+2)+4)+(4+4))", seq, pairwiseSum(a))
	}
	for _, n := range []int{0, 1, 7, 8, 9, 128, 129, 1000} {
		b := make([]float64, n)
		for i := range b {
			b[i] = 0.25
		}
		if got := pairwiseSum(b); got != 0.25*float64(n) {
			t.Errorf("pairwiseSum of %d × 0.25 = %v", n, got)
		}
	}
}

// authorsPublished reads testdata/fgd-authors-alloc.csv: workload,seed →
// their figures (%).
func authorsPublished(t *testing.T) (map[string][]string, map[string]map[string]float64) {
	t.Helper()
	fh, err := os.Open("testdata/fgd-authors-alloc.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r := csv.NewReader(fh)
	r.Comment = '#'
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]string{}
	out := map[string]map[string]float64{}
	for _, rec := range recs[1:] {
		row := map[string]float64{}
		for i, col := range recs[0][2:] {
			v, err := strconv.ParseFloat(rec[i+2], 64)
			if err != nil {
				t.Fatalf("%v: %v", rec, err)
			}
			row[col] = v
		}
		seeds[rec[0]] = append(seeds[rec[0]], rec[1])
		out[rec[0]+","+rec[1]] = row
	}
	return seeds, out
}

// The fixture has every workload of their experiment with seeds 42–51.
func TestAuthorsFixture(t *testing.T) {
	seeds, rows := authorsPublished(t)
	want := []string{"42", "43", "44", "45", "46", "47", "48", "49", "50", "51"}
	if len(seeds) != 17 || len(rows) != 170 {
		t.Errorf("%d workloads, %d rows; want 17 and 170", len(seeds), len(rows))
	}
	for w, s := range seeds {
		if diff := cmp.Diff(want, s); diff != "" {
			t.Errorf("%s: seeds (-want +got):\n%s", w, diff)
		}
	}
	if r := rows["default,42"]; r["fgd_100"] != 95.14 || r["bestfit_100"] != 92.94 {
		t.Errorf("default seed 42: %v; want FGD 95.14 and BestFit 92.94 at 100%%", r)
	}
}

// On the real trace, bestfit on the authors' sequence gives their published
// BestFit figures: default (seed 42), a workload tuned down (multigpu50,
// seed 47) and one with GPU-model constraints (gpuspec33, seed 45).
func TestAuthorsOrderBestFitMatchesTheirFigures(t *testing.T) {
	_, published := authorsPublished(t)
	levels := []float64{0.9, 1, 1.1, 1.2}
	for _, c := range []struct {
		workload string
		seed     int64
	}{{"default", 42}, {"multigpu50", 47}, {"gpuspec33", 45}} {
		nodes, pods := readTrace(t, filepath.Join(sharedTrace, "openb_node_list_gpu_node.csv"), filepath.Join(sharedTrace, "openb_pod_list_"+c.workload+".csv"))
		run, err := Packing(PackingConfig{Nodes: nodes, Pods: pods, Policy: PolicyBestFit, Seed: c.seed, Order: OrderAuthors, Inflate: 1.3, Report: levels})
		if err != nil {
			t.Fatal(err)
		}
		want := published[fmt.Sprintf("%s,%d", c.workload, c.seed)]
		for i, pt := range run.Points {
			col := fmt.Sprintf("bestfit_%.0f", levels[i]*100)
			if pt.AuthorsAllocation == nil || math.Abs(*pt.AuthorsAllocation*100-want[col]) > 0.005 {
				t.Errorf("%s seed %d at %g: authorsAllocation %v; want their BestFit's %.2f%%", c.workload, c.seed, levels[i], pt.AuthorsAllocation, want[col])
			}
		}
		if len(run.Points) != len(levels) {
			t.Errorf("%s seed %d: %d points; want %d", c.workload, c.seed, len(run.Points), len(levels))
		}
	}
}
