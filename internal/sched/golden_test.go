package sched_test

import (
	"bufio"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// The decision-identity test: plans of a fixed set of generated clusters,
// cycle after cycle, compared with the plans the scheduler made when the
// golden file was written (testdata/golden-plans.txt). It guards changes
// made for speed: such a change must not change a decision, a victim, a
// device or a sentence. A change of policy regenerates the file with
//
//	go test ./internal/sched -run TestPlansUnchanged -golden.update
//
// and says, in its commit, which decisions it changed and why.
var (
	goldenUpdate = flag.Bool("golden.update", false, "rewrite testdata/golden-plans.txt from the plans made now")
	goldenDump   = flag.String("golden.dump", "", "write every plan in full to this directory, to compare two versions")
)

// goldenCase is one generated cluster: its seed and size.
type goldenCase struct {
	seed  uint64
	nodes int
}

// goldenCases run from a handful of nodes to a few hundred.
var goldenCases = func() []goldenCase {
	var cs []goldenCase
	sizes := []int{3, 6, 10, 16, 24, 40, 64, 100, 160, 250, 320}
	for i, n := range sizes {
		for s := range 3 {
			cs = append(cs, goldenCase{seed: uint64(100*i + s + 1), nodes: n})
		}
	}
	return cs
}()

// goldenCycles is how many cycles each cluster is scheduled for: plans
// applied in between, so that later cycles see stops under way,
// nominations and reservations.
const goldenCycles = 4

// goldenSnapshot draws a cluster: H100, A100 and A10 nodes in two NVLink
// domains or one, in regions and pools, some of them burst pools; teams
// with guarantees and limits; running work of every class; pending work of
// every shape (fractions, whole GPUs, memory, a model list, gangs,
// residency, a node selector), some of it preempted before.
func goldenSnapshot(gc goldenCase) *core.Snapshot {
	r := rand.New(rand.NewPCG(gc.seed, uint64(gc.nodes)))
	snap := &core.Snapshot{}
	models := []string{h100, h100, a100, a10}
	var capacity int64
	for i := range gc.nodes {
		b := node(fmt.Sprintf("n%03d", i))
		m := models[r.IntN(len(models))]
		k := []int{1, 2, 4, 8, 8, 8}[r.IntN(6)]
		if k == 8 && r.IntN(3) == 0 {
			b.gpus(4, m).inDomain(1).gpus(4, m)
		} else {
			b.gpus(k, m)
		}
		if r.IntN(2) == 0 {
			b.cpu(int64(k) * 16000).hostMem(int64(k) * 65536)
		}
		switch r.IntN(6) {
		case 0:
			b.in("cloud-a", "us", core.PoolBurst)
		case 1:
			b.in("cloud-b", "us", core.PoolBurst)
		case 2, 3:
			b.in("owned-eu", "eu", core.PoolOwned)
		default:
			b.in("owned-us", "us", core.PoolOwned)
		}
		n := b.obj()
		if r.IntN(4) == 0 {
			n.Labels = map[string]string{"fabric": "ib"}
		}
		if r.IntN(40) == 0 {
			n.Schedulable = false
		}
		snap.Nodes = append(snap.Nodes, n)
		capacity += int64(len(n.GPUs)) * 1000
	}
	nteams := 2 + r.IntN(6)
	var teams []core.TeamName
	for i := range nteams {
		g := r.Int64N(capacity/int64(nteams)/250+1) * 250
		b := team(core.TeamName(fmt.Sprintf("t%d", i))).guaranteed(g).weight(1 + r.Int64N(3))
		if r.IntN(3) == 0 {
			b.limit(g + r.Int64N(capacity/250+1)*250)
		}
		snap.Teams = append(snap.Teams, b.obj())
		teams = append(teams, core.TeamName(fmt.Sprintf("t%d", i)))
	}
	limit := func(tn core.TeamName) core.Team {
		for _, t := range snap.Teams {
			if t.Name == tn {
				return t
			}
		}
		return core.Team{}
	}
	usage := invUsage(snap.Nodes, nil)
	held := map[core.TeamName]int64{}
	classes := []string{"production", "training", "training", "development", "batch"}
	sizes := []int64{125, 250, 500, 1000, 1000, 2000, 4000, 8000}
	id := 0
	var running []*core.Workload
	for _, n := range snap.Nodes {
		if !n.Schedulable {
			continue
		}
		for range r.IntN(2*len(n.GPUs) + 1) {
			fit := invFitting(n, usage[n.Name], sizes)
			if len(fit) == 0 {
				break
			}
			size := fit[r.IntN(len(fit))]
			tn := teams[r.IntN(len(teams))]
			class := classes[r.IntN(len(classes))]
			tm := limit(tn)
			if !tm.LimitAllows(held[tn]+size) || (class == "production" && held[tn]+size > tm.Guaranteed) {
				continue
			}
			w := job(fmt.Sprintf("r%04d", id)).team(tn).class(class).gpus(size).obj()
			id++
			w.Seq = int64(id)
			w.Status.Phase = core.Running
			w.Status.Placement = invFitOn(n, usage[n.Name], w.Request)
			if len(w.Status.Placement) == 0 {
				continue
			}
			started := invNow.Add(-time.Duration(r.IntN(120)) * time.Minute)
			w.CreatedAt = started.Add(-time.Minute)
			w.Status.StartedAt = &started
			w.Status.Attempts = 1 + r.IntN(3)
			if r.IntN(4) == 0 {
				w.MaxRuntime = time.Duration(30+r.IntN(240)) * time.Minute
			}
			usage[n.Name].Add(n.Name, w.Request, w.Status.Placement)
			held[tn] += size
			running = append(running, w)
		}
	}
	snap.Running, snap.Usage = running, usage
	for i := range 2*gc.nodes + r.IntN(3*gc.nodes+10) {
		w := job(fmt.Sprintf("p%04d", i)).team(teams[r.IntN(len(teams))]).class(classes[r.IntN(len(classes))]).gpus(sizes[r.IntN(len(sizes))]).obj()
		switch r.IntN(10) {
		case 0:
			w.Request.MilliGPU, w.Request.GPUMemoryMiB = 0, []int64{8192, 20480, 24576, 40960, 81920}[r.IntN(5)]
		case 1:
			w.Request.GPUModels = []string{[]string{"H100", "A10", "A100"}[r.IntN(3)]}
		case 2:
			w.Request.MilliGPU, w.Request.Replicas = []int64{1000, 2000, 4000, 8000}[r.IntN(4)], 2+r.IntN(3)
		case 3:
			w.Request.MilliCPU, w.Request.MemoryMiB = int64(1+r.IntN(8))*4000, int64(1+r.IntN(8))*16384
		case 4:
			w.Request.NodeSelector = map[string]string{"fabric": "ib"}
		}
		switch r.IntN(6) {
		case 0:
			w.Request.Regions = []string{"eu"}
		case 1:
			w.Request.Regions = []string{"us"}
		case 2:
			if r.IntN(8) == 0 {
				w.Request.Regions = []string{"mars"}
			}
		}
		w.CreatedAt = invNow.Add(-time.Duration(r.IntN(60)) * time.Minute)
		if r.IntN(8) == 0 {
			at := invNow.Add(-time.Duration(r.IntN(8)) * time.Minute)
			w.Status.PreemptedAt = &at
		}
		if r.IntN(5) == 0 {
			w.MaxRuntime = time.Duration(10+r.IntN(120)) * time.Minute
		}
		snap.Pending = append(snap.Pending, w)
	}
	invNumber(snap.Pending, int64(id))
	return snap
}

// goldenOptions are the defaults, the burst pools priced apart, and, for
// one case in three, the fgd packing policy or reclaim off.
func goldenOptions(gc goldenCase) sched.Options {
	o := sched.DefaultOptions()
	o.Burst.Prices = map[string]int64{"cloud-a": 3, "cloud-b": 2}
	switch gc.seed % 3 {
	case 1:
		o.Packing = sched.PackFGD
	case 2:
		o.FairShareReclaim, o.StarvationAfter = false, 10*time.Minute
	}
	return o
}

// goldenPlans schedules a case for goldenCycles cycles and returns each
// plan written out in full.
func goldenPlans(gc goldenCase) []string {
	s := &invSim{opts: goldenOptions(gc), snap: goldenSnapshot(gc), now: invNow, rng: rand.New(rand.NewPCG(gc.seed, 1)),
		linger: map[core.WorkloadID]int{}, next: 0, seq: 1 << 20}
	var teams []core.TeamName
	for _, t := range s.snap.Teams {
		teams = append(teams, t.Name)
	}
	var out []string
	for k := range goldenCycles {
		plan := s.opts.Schedule(s.snap, s.now)
		out = append(out, invDescribePlan(plan))
		s.apply(plan, func() int { return s.rng.IntN(2) })
		if k < goldenCycles-1 {
			s.step(true, teams)
		}
	}
	return out
}

func goldenLine(gc goldenCase, cycle int, plan string) string {
	var placed, preempted, waiting int
	for _, l := range strings.Split(plan, "\n") {
		switch {
		case strings.HasPrefix(l, "place "):
			placed++
		case strings.HasPrefix(l, "preempt "):
			preempted++
		case strings.HasPrefix(l, "wait "):
			waiting++
		}
	}
	return fmt.Sprintf("seed=%d nodes=%d cycle=%d placed=%d preempted=%d waiting=%d sha256=%x",
		gc.seed, gc.nodes, cycle, placed, preempted, waiting, sha256.Sum256([]byte(plan)))
}

// TestPlansUnchanged compares every plan of the golden cases, line by line
// (counts and a SHA-256 of the plan in full: placements with their
// devices, preemptions with their sentences, every waiting decision with
// its reason, message and nomination, and the shares).
func TestPlansUnchanged(t *testing.T) {
	path := filepath.Join("testdata", "golden-plans.txt")
	var got []string
	for _, gc := range goldenCases {
		for k, p := range goldenPlans(gc) {
			got = append(got, goldenLine(gc, k, p))
			if *goldenDump != "" {
				name := filepath.Join(*goldenDump, fmt.Sprintf("seed%d-nodes%d-cycle%d.txt", gc.seed, gc.nodes, k))
				if err := os.WriteFile(name, []byte(p), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if *goldenUpdate {
		text := "# Plans of the golden cases (golden_test.go), one line per cycle.\n" + strings.Join(got, "\n") + "\n"
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("golden plans: %v (write them with -golden.update)", err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			want = append(want, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d golden plans, want %d", len(got), len(want))
	}
	var total, withPreemption int
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("plan changed:\n got %s\nwant %s\n(compare in full with -golden.dump DIR before and after)", got[i], want[i])
		}
		if !strings.Contains(got[i], " preempted=0 ") {
			withPreemption++
		}
		total++
	}
	// The set must exercise preemption, or it guards little.
	if withPreemption < total/4 {
		t.Errorf("only %d of %d golden plans preempt", withPreemption, total)
	}
}
