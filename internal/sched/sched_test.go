package sched_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// scenario is a cluster as data and what one cycle should make of it.
type scenario struct {
	name  string
	nodes []*core.Node
	// used is the milli-GPU held per device, by node; the memory held is
	// the matching share of the device's memory.
	used map[core.NodeName][]int64
	// pending is the queue; a workload without Seq gets its place in the
	// list.
	pending []*core.Workload
	// placed is where each placed workload lands: "n1:0,1" for whole
	// devices, "n1:2@250" for a share of one device.
	placed map[core.WorkloadID]string
	// unplaced are the workloads that stay pending.
	unplaced []core.WorkloadID
	// messages are the exact pending messages the scenario is about.
	messages map[core.WorkloadID]string
}

func (sc scenario) snapshot() *core.Snapshot {
	snap := &core.Snapshot{Nodes: sc.nodes, Usage: map[core.NodeName]*core.NodeUsage{}}
	for _, n := range sc.nodes {
		u := &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
		for i, milli := range sc.used[n.Name] {
			if milli > 0 {
				u.GPUs[i] = core.GPUUse{MilliGPU: milli, MemoryMiB: n.GPUs[i].MemoryMiB * milli / 1000}
			}
		}
		snap.Usage[n.Name] = u
	}
	for i, w := range sc.pending {
		if w.Seq == 0 {
			w.Seq = int64(i + 1)
		}
		snap.Pending = append(snap.Pending, w)
	}
	return snap
}

// where describes a placement compactly: "n1:0,1" or "n1:2@250".
func where(as []core.Assignment) string {
	if len(as) == 0 {
		return "nowhere"
	}
	idx := make([]string, len(as))
	for i, a := range as {
		idx[i] = strconv.Itoa(a.GPUIndex)
	}
	s := string(as[0].Node) + ":" + strings.Join(idx, ",")
	if len(as) == 1 && as[0].MilliGPU < 1000 {
		s += "@" + strconv.FormatInt(as[0].MilliGPU, 10)
	}
	return s
}

func TestSchedule(t *testing.T) {
	tests := []scenario{
		{
			name:    "fractions pack onto the partly used device",
			nodes:   []*core.Node{node("n1").gpus(4, h100).obj()},
			used:    map[core.NodeName][]int64{"n1": {0, 0, 500, 0}},
			pending: []*core.Workload{job("a").gpus(250).obj()},
			placed:  map[core.WorkloadID]string{"a": "n1:2@250"},
		},
		{
			// The mix is 0.3 and 0.2. 0.3 on device 1 (0.5 free) costs one
			// 0.3 and one 0.2 of what the device could hold, and leaves 0.2
			// that no 0.3 can use; on an idle device it costs one 0.3 and
			// two 0.2s. 0.3s have fewer places left than 0.2s, so they
			// weigh more: the idle device. 0.2 then fills device 0.
			name:  "a fraction goes where it costs the workload mix least",
			nodes: []*core.Node{node("n1").gpus(4, h100).obj()},
			used:  map[core.NodeName][]int64{"n1": {800, 500, 0, 0}},
			pending: []*core.Workload{
				job("a").gpus(300).obj(),
				job("b").gpus(200).obj(),
			},
			placed: map[core.WorkloadID]string{"a": "n1:2@300", "b": "n1:0@200"},
		},
		{
			name:    "fractions prefer a partly used node to a free one",
			nodes:   []*core.Node{node("n1").gpus(2, h100).obj(), node("n2").gpus(2, h100).obj()},
			used:    map[core.NodeName][]int64{"n2": {0, 500}},
			pending: []*core.Workload{job("a").gpus(500).obj()},
			placed:  map[core.WorkloadID]string{"a": "n2:1@500"},
		},
		{
			name:  "fractions leave whole devices free for whole-GPU requests",
			nodes: []*core.Node{node("n1").gpus(2, h100).obj()},
			pending: []*core.Workload{
				job("half-1").gpus(500).obj(),
				job("half-2").gpus(500).obj(),
				job("whole").gpus(1000).obj(),
			},
			placed: map[core.WorkloadID]string{"half-1": "n1:0@500", "half-2": "n1:0@500", "whole": "n1:1"},
		},
		{
			name: "a memory request takes the matching share of the device it lands on",
			nodes: []*core.Node{
				node("n1").gpus(1, h100).obj(),
				node("n2").gpus(1, a10).obj(),
			},
			// 12288 MiB is 150 milli of an H100 and 500 of an A10; the A10
			// is left with less room, so it is the better fit.
			pending: []*core.Workload{job("a").gpuMem(12288).obj()},
			placed:  map[core.WorkloadID]string{"a": "n2:0@500"},
		},
		{
			name:     "a memory request larger than every device stays pending",
			nodes:    []*core.Node{node("n1").gpus(2, a10).obj()},
			pending:  []*core.Workload{job("a").gpuMem(40960).obj()},
			unplaced: []core.WorkloadID{"a"},
			messages: map[core.WorkloadID]string{"a": "can never run as asked: 40960 MiB on one GPU: the biggest has 24576 MiB"},
		},
		{
			name:  "milli-GPU is a limit of its own: shares rounded up fill a device before its memory does",
			nodes: []*core.Node{node("n1").gpus(1, h100).obj()},
			// 27306 MiB is 333.3 milli of an H100, rounded up to 334: three
			// take 1002 milli-GPU but only 81918 of 81920 MiB.
			pending: []*core.Workload{
				job("a").gpuMem(27306).obj(),
				job("b").gpuMem(27306).obj(),
				job("c").gpuMem(27306).obj(),
			},
			placed:   map[core.WorkloadID]string{"a": "n1:0@334", "b": "n1:0@334"},
			unplaced: []core.WorkloadID{"c"},
		},
		{
			name:    "a fraction fits on a device of unknown memory",
			nodes:   []*core.Node{node("n1").gpus(1, unknown).obj()},
			used:    map[core.NodeName][]int64{"n1": {500}},
			pending: []*core.Workload{job("a").gpus(500).obj(), job("b").gpuMem(1024).obj(), job("c").gpus(1).obj()},
			placed:  map[core.WorkloadID]string{"a": "n1:0@500"},
			// b cannot be sized on it, and a filled it.
			unplaced: []core.WorkloadID{"b", "c"},
		},
		{
			name:  "whole GPUs stay on one node",
			nodes: []*core.Node{node("n1").gpus(4, h100).obj(), node("n2").gpus(4, h100).obj()},
			used:  map[core.NodeName][]int64{"n1": {500, 500, 0, 0}, "n2": {0, 0, 500, 500}},
			pending: []*core.Workload{
				job("four").gpus(4000).obj(), // four devices are free, but two on each node
				job("two").gpus(2000).obj(),
			},
			placed:   map[core.WorkloadID]string{"two": "n1:2,3"},
			unplaced: []core.WorkloadID{"four"},
		},
		{
			name:    "whole GPUs pack onto the node left with the fewest free devices",
			nodes:   []*core.Node{node("n1").gpus(8, h100).obj(), node("n2").gpus(4, h100).obj()},
			used:    map[core.NodeName][]int64{"n2": {1000, 0, 1000, 0}},
			pending: []*core.Workload{job("a").gpus(2000).obj()},
			placed:  map[core.WorkloadID]string{"a": "n2:1,3"},
		},
		{
			name:  "a whole-GPU request never takes a partly used device",
			nodes: []*core.Node{node("n1").gpus(2, h100).obj()},
			used:  map[core.NodeName][]int64{"n1": {1, 0}},
			pending: []*core.Workload{
				job("two").gpus(2000).obj(),
				job("one").gpus(1000).obj(),
			},
			placed:   map[core.WorkloadID]string{"one": "n1:1"},
			unplaced: []core.WorkloadID{"two"},
			messages: map[core.WorkloadID]string{"two": "no node with 2 free GPUs (best: n1 with 1); 1 node considered: 1 not enough free whole GPUs"},
		},
		{
			name:  "a large request that does not fit does not block smaller ones behind it (backfill)",
			nodes: []*core.Node{node("n1").gpus(4, h100).obj()},
			pending: []*core.Workload{
				job("big").gpus(8000).obj(),
				job("small").gpus(1000).obj(),
				job("frac").gpus(500).obj(),
			},
			placed:   map[core.WorkloadID]string{"small": "n1:0", "frac": "n1:1@500"},
			unplaced: []core.WorkloadID{"big"},
		},
		{
			name:  "placements of the same cycle count against each other",
			nodes: []*core.Node{node("n1").gpus(1, h100).obj()},
			pending: []*core.Workload{
				job("first").gpus(1000).obj(),
				job("second").gpus(1000).obj(),
				job("third").gpus(100).obj(),
			},
			placed:   map[core.WorkloadID]string{"first": "n1:0"},
			unplaced: []core.WorkloadID{"second", "third"},
		},
		{
			name:  "pending workloads are taken in submission order, not in snapshot order",
			nodes: []*core.Node{node("n1").gpus(1, h100).obj()},
			pending: []*core.Workload{
				job("later").gpus(1000).seq(7).obj(),
				job("earlier").gpus(1000).seq(3).obj(),
			},
			placed:   map[core.WorkloadID]string{"earlier": "n1:0"},
			unplaced: []core.WorkloadID{"later"},
		},
		{
			name: "model constraint filters nodes",
			nodes: []*core.Node{
				node("n1").gpus(4, a10).obj(),
				node("n2").gpus(4, h100).obj(),
			},
			used: map[core.NodeName][]int64{"n1": {500, 0, 0, 0}},
			pending: []*core.Workload{
				job("h100").gpus(500).models("h100").obj(),
				job("any").gpus(500).obj(),
				job("b200").gpus(1000).models("B200").obj(),
			},
			placed:   map[core.WorkloadID]string{"h100": "n2:0@500", "any": "n1:0@500"},
			unplaced: []core.WorkloadID{"b200"},
			messages: map[core.WorkloadID]string{"b200": "can never run as asked: no node has a GPU of model B200 (the fleet has NVIDIA A10, NVIDIA H100 80GB HBM3)"},
		},
		{
			name:    "a model constraint filters devices on a mixed node",
			nodes:   []*core.Node{node("n1").gpus(2, l4).gpus(2, a100).obj()},
			pending: []*core.Workload{job("a").gpus(2000).models("A100").obj()},
			placed:  map[core.WorkloadID]string{"a": "n1:2,3"},
		},
		{
			name: "unschedulable node is skipped",
			nodes: []*core.Node{
				node("n1").gpus(4, h100).cordoned().obj(),
				node("n2").gpus(4, h100).obj(),
			},
			// n1 would be the best fit for the fraction were it schedulable.
			used:    map[core.NodeName][]int64{"n1": {500}},
			pending: []*core.Workload{job("a").gpus(500).obj(), job("b").gpus(4000).obj()},
			placed:  map[core.WorkloadID]string{"a": "n2:0@500"},
			// b no longer fits on n2 and n1 is cordoned.
			unplaced: []core.WorkloadID{"b"},
		},
		{
			name: "host CPU and memory limit placement",
			nodes: []*core.Node{
				node("n1").gpus(4, h100).cpu(8000).hostMem(65536).obj(),
				node("n2").gpus(4, h100).cpu(64000).hostMem(524288).obj(),
			},
			used: map[core.NodeName][]int64{"n1": {500}},
			pending: []*core.Workload{
				job("cpu").gpus(500).cpu(16000).obj(),
				job("mem").gpus(500).hostMem(131072).obj(),
				job("small").gpus(500).cpu(4000).hostMem(4096).obj(),
			},
			placed: map[core.WorkloadID]string{"cpu": "n2:0@500", "mem": "n2:0@500", "small": "n1:0@500"},
		},
		{
			name: "equally good nodes are chosen by name",
			nodes: []*core.Node{
				node("n2").gpus(2, h100).obj(),
				node("n1").gpus(2, h100).obj(),
			},
			pending: []*core.Workload{job("a").gpus(1000).obj(), job("b").gpus(250).obj()},
			placed:  map[core.WorkloadID]string{"a": "n1:0", "b": "n1:1@250"},
		},
		{
			name: "the pending message counts the rejected nodes by reason",
			nodes: []*core.Node{
				node("n1").gpus(4, h100).cordoned().obj(),
				node("n2").gpus(4, a10).obj(),
				node("n3").gpus(4, h100).obj(),
				node("n4").gpus(4, h100).cpu(8000).obj(),
				node("n5").gpus(4, h100).obj(),
			},
			used: map[core.NodeName][]int64{"n3": {1000, 1000, 1000, 500}, "n5": {1000, 500, 1000, 1000}},
			pending: []*core.Workload{
				job("train").gpus(2000).models("H100").cpu(16000).obj(),
				job("tiny").gpus(600).models("H100").cpu(16000).obj(),
			},
			unplaced: []core.WorkloadID{"train", "tiny"},
			messages: map[core.WorkloadID]string{
				"train": "no node with 2 free H100 GPUs; 5 nodes considered: 1 not schedulable, 1 no GPU of the requested model, 2 not enough free whole GPUs, 1 not enough CPU",
				"tiny":  "no node with 0.6 of a free H100 GPU (best: n3 with 0.5 of a GPU free); 5 nodes considered: 1 not schedulable, 1 no GPU of the requested model, 2 no GPU with enough free share, 1 not enough CPU",
			},
		},
		{
			name:     "with no nodes every workload stays pending and says so",
			pending:  []*core.Workload{job("a").gpus(1000).obj()},
			unplaced: []core.WorkloadID{"a"},
			messages: map[core.WorkloadID]string{"a": "no nodes are registered"},
		},
		{
			name:  "an empty queue makes an empty plan",
			nodes: []*core.Node{node("n1").gpus(1, h100).obj()},
		},
	}
	for _, sc := range tests {
		t.Run(sc.name, func(t *testing.T) {
			snap := sc.snapshot()
			plan := sched.Schedule(snap, now)
			checkPlan(t, snap, plan)

			placed := map[core.WorkloadID]string{}
			for _, p := range plan.Placements {
				placed[p.Workload] = where(p.Assignments)
			}
			if diff := cmp.Diff(sc.placed, placed, cmpEmpty); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
			var unplaced []core.WorkloadID
			for _, d := range plan.Unplaced {
				unplaced = append(unplaced, d.Workload)
				if want, ok := sc.messages[d.Workload]; ok && d.Message != want {
					t.Errorf("message for %s:\n got %q\nwant %q", d.Workload, d.Message, want)
				}
			}
			slices.Sort(unplaced)
			want := slices.Sorted(slices.Values(sc.unplaced))
			if diff := cmp.Diff(want, unplaced, cmpEmpty); diff != "" {
				t.Errorf("unplaced (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpEmpty treats nil and empty maps and slices alike.
var cmpEmpty = cmp.FilterValues(func(x, y any) bool {
	return isEmpty(x) && isEmpty(y)
}, cmp.Ignore())

func isEmpty(v any) bool {
	switch v := v.(type) {
	case map[core.WorkloadID]string:
		return len(v) == 0
	case []core.WorkloadID:
		return len(v) == 0
	}
	return false
}

// checkPlan checks the properties every plan has, whatever the cluster:
//
//  1. every placement passes core.Fits against the snapshot's usage plus
//     the placements made before it in the same plan;
//  2. no workload is placed twice, and only pending workloads are placed;
//  3. every pending workload is either placed or has exactly one decision,
//     with a reason and a message;
//  4. a workload left pending fitted nowhere when its turn came: with the
//     usage of the snapshot plus the placements of the workloads submitted
//     before it, no node takes it (backfill leaves nothing behind).
func checkPlan(t propTB, snap *core.Snapshot, plan core.Plan) {
	t.Helper()
	nodes := map[core.NodeName]*core.Node{}
	usage := map[core.NodeName]*core.NodeUsage{}
	for _, n := range snap.Nodes {
		nodes[n.Name] = n
		if u := snap.Usage[n.Name]; u != nil {
			usage[n.Name] = u.Clone()
		} else {
			usage[n.Name] = &core.NodeUsage{}
		}
	}
	pending := map[core.WorkloadID]*core.Workload{}
	for _, w := range snap.Pending {
		pending[w.ID] = w
	}

	// 1 and 2, in the order of the plan.
	placedAt := map[core.WorkloadID]int{}
	for i, p := range plan.Placements {
		w := pending[p.Workload]
		if w == nil {
			t.Errorf("placement %d: workload %s is not pending", i, p.Workload)
			continue
		}
		if j, ok := placedAt[p.Workload]; ok {
			t.Errorf("placement %d: workload %s already placed by placement %d", i, p.Workload, j)
			continue
		}
		placedAt[p.Workload] = i
		if len(p.Assignments) == 0 {
			t.Errorf("placement %d: workload %s placed on no device", i, p.Workload)
			continue
		}
		n := nodes[p.Assignments[0].Node]
		if n == nil {
			t.Errorf("placement %d: workload %s placed on unknown node %s", i, p.Workload, p.Assignments[0].Node)
			continue
		}
		if err := core.Fits(n, usage[n.Name], w.Request, p.Assignments); err != nil {
			t.Errorf("placement %d: workload %s on %s does not fit: %v", i, p.Workload, where(p.Assignments), err)
			continue
		}
		usage[n.Name].Add(n.Name, w.Request, p.Assignments)
	}

	// 3.
	decided := map[core.WorkloadID]core.Decision{}
	for _, d := range plan.Unplaced {
		if pending[d.Workload] == nil {
			t.Errorf("decision for %s, which is not pending", d.Workload)
		}
		if _, ok := decided[d.Workload]; ok {
			t.Errorf("two decisions for %s", d.Workload)
		}
		if _, ok := placedAt[d.Workload]; ok {
			t.Errorf("%s is both placed and left pending", d.Workload)
		}
		if d.Reason != sched.ReasonUnschedulable || d.Message == "" {
			t.Errorf("decision for %s has reason %q and message %q, want reason %q and a message", d.Workload, d.Reason, d.Message, sched.ReasonUnschedulable)
		}
		decided[d.Workload] = d
	}
	for _, w := range snap.Pending {
		_, placed := placedAt[w.ID]
		_, pend := decided[w.ID]
		if !placed && !pend {
			t.Errorf("workload %s is neither placed nor has a decision", w.ID)
		}
	}

	// 4. Replay in submission order.
	queue := slices.Clone(snap.Pending)
	slices.SortStableFunc(queue, func(a, b *core.Workload) int { return int(a.Seq - b.Seq) })
	replay := map[core.NodeName]*core.NodeUsage{}
	for _, n := range snap.Nodes {
		if u := snap.Usage[n.Name]; u != nil {
			replay[n.Name] = u.Clone()
		} else {
			replay[n.Name] = &core.NodeUsage{}
		}
	}
	for _, w := range queue {
		if i, ok := placedAt[w.ID]; ok {
			as := plan.Placements[i].Assignments
			if u := replay[as[0].Node]; u != nil {
				u.Add(as[0].Node, w.Request, as)
			}
			continue
		}
		if as := fitsSomewhere(snap.Nodes, replay, w.Request); as != nil {
			t.Errorf("workload %s was left pending (%q) but fits on %s", w.ID, decided[w.ID].Message, where(as))
		}
	}
}

// fitsSomewhere looks for any placement of req that core.Fits accepts,
// trying every device for a fraction and the first free devices of every
// node for whole GPUs.
func fitsSomewhere(nodes []*core.Node, usage map[core.NodeName]*core.NodeUsage, req core.Request) []core.Assignment {
	for _, n := range nodes {
		if as := invFitOn(n, usage[n.Name], req); as != nil {
			return as
		}
	}
	return nil
}

// copySnapshot copies a snapshot deeply, keeping nil maps nil, so that a
// change made through the original shows in a comparison.
func copySnapshot(s *core.Snapshot) *core.Snapshot {
	c := &core.Snapshot{Teams: slices.Clone(s.Teams), Classes: slices.Clone(s.Classes)}
	for _, n := range s.Nodes {
		c.Nodes = append(c.Nodes, n.Clone())
	}
	if s.Usage != nil {
		c.Usage = map[core.NodeName]*core.NodeUsage{}
		for k, u := range s.Usage {
			if u == nil {
				c.Usage[k] = nil
				continue
			}
			cu := *u
			if u.GPUs != nil {
				cu.GPUs = map[int]core.GPUUse{}
				for i, g := range u.GPUs {
					cu.GPUs[i] = g
				}
			}
			c.Usage[k] = &cu
		}
	}
	for _, w := range s.Pending {
		c.Pending = append(c.Pending, w.Clone())
	}
	for _, w := range s.Running {
		c.Running = append(c.Running, w.Clone())
	}
	return c
}

var randomModels = []string{h100, a100, a10, l4, unknown}

// intN draws an int in [0, n), as rand.IntN.
func intN(t *rapid.T, n int, label string) int { return rapid.IntRange(0, n-1).Draw(t, label) }

// int64N draws an int64 in [0, n), as rand.Int64N.
func int64N(t *rapid.T, n int64, label string) int64 { return rapid.Int64Range(0, n-1).Draw(t, label) }

// randomSnapshot draws a cluster of up to 12 nodes with random devices,
// some of them cordoned, with consistent random usage and a random pending
// queue.
func randomSnapshot(t *rapid.T) *core.Snapshot {
	snap := &core.Snapshot{Usage: map[core.NodeName]*core.NodeUsage{}}
	nodes := intN(t, 13, "nodes")
	for i := range nodes {
		b := node(fmt.Sprintf("n%02d", intN(t, 100, "name")*100+i)) // random name order
		model := rapid.SampledFrom(randomModels).Draw(t, "model")
		for range 1 + intN(t, 8, "gpus") {
			if intN(t, 5, "mixed") == 0 {
				b.gpus(1, rapid.SampledFrom(randomModels).Draw(t, "otherModel"))
			} else {
				b.gpus(1, model)
			}
		}
		if intN(t, 10, "cordoned") == 0 {
			b.cordoned()
		}
		if rapid.Bool().Draw(t, "cpu") {
			b.cpu(int64(8+intN(t, 57, "cores")) * 1000)
		}
		if rapid.Bool().Draw(t, "hostMem") {
			b.hostMem(int64(32+intN(t, 481, "gib")) * 1024)
		}
		n := b.obj()
		snap.Nodes = append(snap.Nodes, n)

		switch intN(t, 10, "usage") {
		case 0: // no usage recorded for the node
			continue
		case 1: // host usage only, no device map
			snap.Usage[n.Name] = &core.NodeUsage{MilliCPU: upTo(t, n.MilliCPU), MemoryMiB: upTo(t, n.MemoryMiB)}
			continue
		}
		u := &core.NodeUsage{GPUs: map[int]core.GPUUse{}, MilliCPU: upTo(t, n.MilliCPU), MemoryMiB: upTo(t, n.MemoryMiB)}
		for _, g := range n.GPUs {
			switch intN(t, 10, "gpuUse") {
			case 0, 1:
				u.GPUs[g.Index] = core.GPUUse{MilliGPU: 1000, MemoryMiB: g.MemoryMiB}
			case 2, 3, 4:
				m := 1 + int64N(t, 999, "milli")
				mem := g.MemoryMiB * m / 1000
				if intN(t, 3, "disproportionate") == 0 {
					// Memory and share out of proportion, as when a device
					// is reported again with less memory.
					mem = upTo(t, g.MemoryMiB)
				}
				u.GPUs[g.Index] = core.GPUUse{MilliGPU: m, MemoryMiB: mem}
			}
		}
		snap.Usage[n.Name] = u
	}
	if intN(t, 10, "goneNode") == 0 {
		// Usage of a node that has gone away.
		snap.Usage["gone"] = &core.NodeUsage{GPUs: map[int]core.GPUUse{0: {MilliGPU: 1000}}}
	}

	pending := intN(t, 41, "pending")
	seqs := rapid.Permutation(makeRange(pending)).Draw(t, "seqs")
	for i := range pending {
		b := job(fmt.Sprintf("w%03d", i)).seq(int64(seqs[i] + 1))
		switch k := intN(t, 10, "shape"); {
		case k < 3:
			b.gpus(rapid.SampledFrom([]int64{100, 250, 333, 500, 750}).Draw(t, "share"))
		case k < 4:
			b.gpus(1 + int64N(t, 999, "milli"))
		case k < 6:
			b.gpuMem(1 + int64N(t, 90000, "gpuMemoryMiB"))
		default:
			b.gpus(int64(rapid.SampledFrom([]int{1, 1, 1, 2, 2, 4, 8}).Draw(t, "count")) * 1000)
		}
		if intN(t, 5, "constrained") == 0 {
			names := []string{"H100", "a100", "A10", "L4", "B200"}
			m := []string{rapid.SampledFrom(names).Draw(t, "want")}
			if intN(t, 3, "twoModels") == 0 {
				m = append(m, rapid.SampledFrom(names).Draw(t, "want"))
			}
			b.models(m...)
		}
		if rapid.Bool().Draw(t, "cpu") {
			b.cpu(1000 + int64N(t, 31000, "milliCPU"))
		}
		if rapid.Bool().Draw(t, "hostMem") {
			b.hostMem(1024 + int64N(t, 130000, "memoryMiB"))
		}
		snap.Pending = append(snap.Pending, b.obj())
	}
	return snap
}

// makeRange is 0, 1, …, n-1.
func makeRange(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// upTo is a random amount up to max, or any amount below 100000 when max is
// 0 (undeclared, so unlimited).
func upTo(t *rapid.T, max int64) int64 {
	if max == 0 {
		return int64N(t, 100000, "amount")
	}
	return rapid.Int64Range(0, max).Draw(t, "amount")
}

// TestScheduleProperties checks checkPlan's properties, and that the
// snapshot is left as it was, on random clusters (randomSnapshot).
func TestScheduleProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		snap := randomSnapshot(t)
		before := copySnapshot(snap)
		plan := sched.Schedule(snap, now)
		checkPlan(t, snap, plan)
		if diff := cmp.Diff(before, snap); diff != "" {
			t.Errorf("Schedule modified the snapshot (-before +after):\n%s", diff)
		}
	})
}

// benchSnapshot is a cluster of H100 nodes with eight devices each, a
// quarter of the devices half used, and a pending queue of fractions and
// whole GPUs that asks for about twice the cluster.
func benchSnapshot(gpus int) *core.Snapshot {
	r := rand.New(rand.NewPCG(uint64(gpus), 1))
	snap := &core.Snapshot{Usage: map[core.NodeName]*core.NodeUsage{}}
	for i := range gpus / 8 {
		n := node(fmt.Sprintf("n%05d", i)).gpus(8, h100).cpu(128000).hostMem(1 << 20).obj()
		snap.Nodes = append(snap.Nodes, n)
		u := &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
		for _, g := range n.GPUs {
			if r.IntN(4) == 0 {
				u.GPUs[g.Index] = core.GPUUse{MilliGPU: 500, MemoryMiB: g.MemoryMiB / 2}
			}
		}
		snap.Usage[n.Name] = u
	}
	var asked int64
	for i := 0; asked < int64(gpus)*2000; i++ {
		b := job(fmt.Sprintf("w%06d", i)).cpu(4000).hostMem(16384)
		switch k := r.IntN(10); {
		case k < 5:
			b.gpus([]int64{125, 250, 500}[r.IntN(3)])
		default:
			b.gpus(int64([]int{1, 1, 1, 1, 2, 2, 2, 4, 4, 8}[r.IntN(10)]) * 1000)
		}
		b.seq(int64(i + 1))
		asked += b.w.Request.MilliGPU
		snap.Pending = append(snap.Pending, b.obj())
	}
	return snap
}

func BenchmarkSchedule(b *testing.B) {
	for _, gpus := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			snap := benchSnapshot(gpus)
			var plan core.Plan
			for b.Loop() {
				plan = sched.Schedule(snap, now)
			}
			b.ReportMetric(float64(len(snap.Pending)), "pending")
			b.ReportMetric(float64(len(plan.Placements)), "placed")
		})
	}
}
