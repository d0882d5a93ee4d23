package sched_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/sched"
)

// gpuReq is a request for milli-GPU, milli-CPU and MiB of host memory.
func gpuReq(milli, cpu, mem int64) core.Request {
	return core.Request{MilliGPU: milli, MilliCPU: cpu, MemoryMiB: mem}
}

// place observes and places each request in turn and returns where each
// went: "node:gpu,gpu" or "-" when it did not fit.
func place(t *testing.T, p *sched.Packer, nodes []core.Node, reqs ...core.Request) []string {
	t.Helper()
	var out []string
	for _, r := range reqs {
		p.Observe(r)
		i, as, ok := p.Place(r)
		if !ok {
			out = append(out, "-")
			continue
		}
		s := string(nodes[i].Name) + ":"
		for k, a := range as {
			if k > 0 {
				s += ","
			}
			s += fmt.Sprint(a.GPUIndex)
		}
		out = append(out, s)
	}
	return out
}

func TestPackerBaselines(t *testing.T) {
	nodes := func() []core.Node {
		return []core.Node{
			*node("a").gpus(2, "T4").cpu(64000).hostMem(256000).obj(),
			*node("b").gpus(4, "T4").cpu(64000).hostMem(256000).obj(),
			*node("c").gpus(8, "G2").cpu(96000).hostMem(393216).obj(),
		}
	}
	tests := []struct {
		policy string
		reqs   []core.Request
		want   []string
	}{
		{sched.PackFirstFit, []core.Request{gpuReq(500, 1000, 1000), gpuReq(1000, 1000, 1000), gpuReq(4000, 1000, 1000)},
			[]string{"a:0", "a:1", "b:0,1,2,3"}},
		// Best fit: the node left with the least free GPU share.
		{sched.PackBestFit, []core.Request{gpuReq(1000, 1000, 1000), gpuReq(500, 1000, 1000), gpuReq(500, 1000, 1000)},
			[]string{"a:0", "a:1", "a:1"}},
		// GPU packing: a used device first, then an idle device of a used
		// node.
		{sched.PackGPUPacking, []core.Request{gpuReq(300, 1000, 1000), gpuReq(300, 1000, 1000), gpuReq(500, 1000, 1000)},
			[]string{"a:0", "a:0", "a:1"}},
		// Reservation: every fraction takes a whole device.
		{sched.PackReservation, []core.Request{gpuReq(100, 1000, 1000), gpuReq(100, 1000, 1000), gpuReq(100, 1000, 1000)},
			[]string{"a:0", "a:1", "b:0"}},
		// Nothing fits: 16 GPUs, or more CPU than any node has.
		{sched.PackGPUFleet, []core.Request{gpuReq(16000, 0, 0), gpuReq(1000, 200000, 0)}, []string{"-", "-"}},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			ns := nodes()
			p, err := sched.NewPacker(ns, tt.policy, 1)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, place(t, p, ns, tt.reqs...)); diff != "" {
				t.Errorf("placements (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPackerUnknownPolicy(t *testing.T) {
	if _, err := sched.NewPacker(nil, "worstfit", 1); err == nil {
		t.Fatal("NewPacker accepted an unknown policy")
	}
}

// The production policy keeps CPU for the GPUs: a CPU-heavy request without
// GPUs goes to the node whose CPU no GPU request needs, not to the one
// where it would leave GPUs without CPU. First fit does the opposite.
func TestGPUFleetKeepsCPUForGPUs(t *testing.T) {
	nodes := []core.Node{
		*node("a-lean").gpus(8, "G2").cpu(96000).hostMem(393216).obj(),  // 12 cores a GPU
		*node("b-rich").gpus(2, "T4").cpu(104000).hostMem(524288).obj(), // 52 cores a GPU
	}
	gpuPod := gpuReq(1000, 12000, 32768)
	cpuPod := gpuReq(0, 32000, 65536)
	for _, tt := range []struct {
		policy string
		want   string
	}{{sched.PackGPUFleet, "b-rich:"}, {sched.PackFirstFit, "a-lean:"}} {
		ns := slices.Clone(nodes)
		p, err := sched.NewPacker(ns, tt.policy, 1)
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			p.Observe(gpuPod) // the mix: GPU pods of 12 cores
		}
		got := place(t, p, ns, cpuPod)
		if got[0] != tt.want {
			t.Errorf("%s: the CPU-only pod went to %s, want %s", tt.policy, got[0], tt.want)
		}
	}
}

// The production policy does not leave a fragment the mix cannot use.
func TestGPUFleetAvoidsFragments(t *testing.T) {
	ns := []core.Node{*node("n").gpus(4, "G2").cpu(0).hostMem(0).obj()}
	p, err := sched.NewPacker(ns, sched.PackGPUFleet, 1)
	if err != nil {
		t.Fatal(err)
	}
	// A 0.6 and a 0.1 share device 0, which keeps 0.3 free.
	if diff := cmp.Diff([]string{"n:0", "n:0"}, place(t, p, ns, gpuReq(600, 0, 0), gpuReq(100, 0, 0))); diff != "" {
		t.Fatalf("setup (-want +got):\n%s", diff)
	}
	for range 20 {
		p.Observe(gpuReq(600, 0, 0)) // 0.6s are what comes
	}
	// A 0.4 cannot use device 0 and takes device 1 (0.6 left, just what a
	// 0.6 needs); a 0.3 fills device 0. A second 0.3 goes to an idle
	// device (0.7 left, room for a 0.6), not to device 1, where it would
	// leave 0.3, too little for one.
	got := place(t, p, ns, gpuReq(400, 0, 0), gpuReq(300, 0, 0), gpuReq(300, 0, 0))
	if diff := cmp.Diff([]string{"n:1", "n:0", "n:2"}, got); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	// Best fit puts the second 0.3 on device 1.
	ns = []core.Node{*node("n").gpus(4, "G2").cpu(0).hostMem(0).obj()}
	bf, err := sched.NewPacker(ns, sched.PackBestFit, 1)
	if err != nil {
		t.Fatal(err)
	}
	got = place(t, bf, ns, gpuReq(600, 0, 0), gpuReq(100, 0, 0), gpuReq(400, 0, 0), gpuReq(300, 0, 0), gpuReq(300, 0, 0))
	if diff := cmp.Diff([]string{"n:0", "n:0", "n:1", "n:0", "n:1"}, got); diff != "" {
		t.Errorf("best fit (-want +got):\n%s", diff)
	}
}

// TestPackerNeverOvercommits draws clusters and request streams and checks,
// for every policy, that no device, CPU or memory is ever overcommitted,
// that models are honoured, and that a request fails only when no node
// could hold it (checked by brute force).
func TestPackerNeverOvercommits(t *testing.T) {
	models := []string{"T4", "G2", "V100M32"}
	rapid.Check(t, func(t *rapid.T) {
		var nodes []core.Node
		for i := range rapid.IntRange(1, 6).Draw(t, "nodes") {
			nodes = append(nodes, *node(fmt.Sprintf("n%d", i)).gpus(rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus"),
				rapid.SampledFrom(models).Draw(t, "model")).cpu(rapid.Int64Range(4, 128).Draw(t, "cores") * 1000).hostMem(rapid.Int64Range(8, 512).Draw(t, "gib") * 1024).obj())
		}
		policy := rapid.SampledFrom(sched.Policies()).Draw(t, "policy")
		p, err := sched.NewPacker(nodes, policy, 7)
		if err != nil {
			t.Fatal(err)
		}
		type use struct{ cpu, mem int64 }
		host := make([]use, len(nodes))
		dev := make([][]int64, len(nodes))
		for i, n := range nodes {
			dev[i] = make([]int64, len(n.GPUs))
		}
		for k := range rapid.IntRange(1, 60).Draw(t, "requests") {
			r := core.Request{
				MilliGPU:  rapid.SampledFrom([]int64{0, 100, 250, 500, 810, 1000, 2000, 4000, 8000}).Draw(t, "milli"),
				MilliCPU:  rapid.Int64Range(0, 40).Draw(t, "cpu") * 1000,
				MemoryMiB: rapid.Int64Range(0, 64).Draw(t, "mem") * 1024,
			}
			if r.MilliGPU > 0 && rapid.IntRange(0, 4).Draw(t, "constrained") == 0 {
				r.GPUModels = []string{rapid.SampledFrom(models).Draw(t, "want")}
			}
			placed := r
			if policy == sched.PackReservation && r.Fractional() {
				placed.MilliGPU = 1000
			}
			// Brute force: could any node hold it?
			could := false
			for i, n := range nodes {
				if host[i].cpu+r.MilliCPU > n.MilliCPU || host[i].mem+r.MemoryMiB > n.MemoryMiB {
					continue
				}
				if placed.MilliGPU == 0 {
					could = true
					continue
				}
				free, best := 0, int64(0)
				for g, d := range dev[i] {
					if !r.ModelAllowed(n.GPUs[g].Model) {
						continue
					}
					if d == 0 {
						free++
					}
					best = max(best, 1000-d)
				}
				if (placed.MilliGPU >= 1000 && free >= int(placed.MilliGPU/1000)) || (placed.MilliGPU < 1000 && best >= placed.MilliGPU) {
					could = true
				}
			}
			p.Observe(r)
			i, as, ok := p.Place(r)
			if ok != could {
				t.Fatalf("request %d %+v: placed %v, but a brute-force search says it could fit: %v", k, r, ok, could)
			}
			if !ok {
				continue
			}
			n := nodes[i]
			host[i].cpu += r.MilliCPU
			host[i].mem += r.MemoryMiB
			var got int64
			for _, a := range as {
				if a.Node != n.Name {
					t.Fatalf("assignment on %s, placed on %s", a.Node, n.Name)
				}
				if !r.ModelAllowed(n.GPUs[a.GPUIndex].Model) {
					t.Fatalf("request for %v placed on a %s", r.GPUModels, n.GPUs[a.GPUIndex].Model)
				}
				dev[i][a.GPUIndex] += a.MilliGPU
				got += a.MilliGPU
				if placed.MilliGPU >= 1000 && a.MilliGPU != 1000 {
					t.Fatalf("whole-GPU request got %d of a device", a.MilliGPU)
				}
			}
			if got != placed.MilliGPU {
				t.Fatalf("request for %d milli-GPU got %d", placed.MilliGPU, got)
			}
			v := p.Node(i)
			if v.MilliCPU != host[i].cpu || v.MemoryMiB != host[i].mem {
				t.Fatalf("node %s: packer says %d CPU %d MiB, requests add up to %d and %d", n.Name, v.MilliCPU, v.MemoryMiB, host[i].cpu, host[i].mem)
			}
			for g, d := range dev[i] {
				if d > 1000 || v.Used[g].MilliGPU != d {
					t.Fatalf("node %s device %d: %d allocated (packer: %d)", n.Name, g, d, v.Used[g].MilliGPU)
				}
			}
			if host[i].cpu > n.MilliCPU || host[i].mem > n.MemoryMiB {
				t.Fatalf("node %s host overcommitted: %+v of %d/%d", n.Name, host[i], n.MilliCPU, n.MemoryMiB)
			}
		}
	})
}
