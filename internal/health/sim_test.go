package health

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

var simModels = []string{"H100", "NVIDIA H100 80GB HBM3", "A100-SXM4-40GB", "NVIDIA L4", "NVIDIA GeForce RTX 4090"}

func genGPUs(t *rapid.T) []core.GPU {
	n := rapid.IntRange(1, 16).Draw(t, "n")
	idx := rapid.Permutation(seq(n)).Draw(t, "order")
	var gpus []core.GPU
	for _, i := range idx {
		gpus = append(gpus, core.GPU{
			Index:  i,
			UUID:   fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", rapid.Uint32().Draw(t, "uuid"), i),
			Model:  rapid.SampledFrom(simModels).Draw(t, "model"),
			Domain: rapid.IntRange(0, 3).Draw(t, "domain"),
		})
	}
	return gpus
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestSimRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gpus := genGPUs(t)

		listed, err := ParseNvidiaSMIList(SimNvidiaSMIList(gpus))
		if err != nil {
			t.Fatal(err)
		}
		var wantList []ListedGPU
		for _, g := range gpus {
			wantList = append(wantList, ListedGPU{Index: g.Index, Model: g.Model, UUID: g.UUID})
		}
		if d := cmp.Diff(wantList, listed); d != "" {
			t.Fatalf("nvidia-smi -L (-want +got)\n%s", d)
		}

		topo, err := ParseTopo(SimTopo(gpus))
		if err != nil {
			t.Fatal(err)
		}
		if apart := allApart(gpus); topo.NVLink == apart && len(gpus) > 1 {
			t.Fatalf("GPUs each in a domain of their own: %t; NVLink in the topology: %t, want one or the other", apart, topo.NVLink)
		}
		for _, a := range gpus {
			for _, b := range gpus {
				if !topo.NVLink && topo.Domains[a.Index] != 0 {
					t.Fatalf("a topology without NVLink gives GPU %d domain %d, want 0 (flat)", a.Index, topo.Domains[a.Index])
				}
				if topo.NVLink && (a.Domain == b.Domain) != (topo.Domains[a.Index] == topo.Domains[b.Index]) {
					t.Fatalf("GPUs %d (domain %d) and %d (domain %d): topology domains %v", a.Index, a.Domain, b.Index, b.Domain, topo.Domains)
				}
			}
		}

		found, err := ParseDCGMDiscovery(SimDCGMDiscovery(gpus))
		if err != nil {
			t.Fatal(err)
		}
		var wantFound []DiscoveredGPU
		for _, g := range gpus {
			wantFound = append(wantFound, DiscoveredGPU{ID: g.Index, Name: g.Model, PCIBusID: simPCI(g.Index), UUID: g.UUID})
		}
		if d := cmp.Diff(wantFound, found); d != "" {
			t.Fatalf("dcgmi discovery (-want +got)\n%s", d)
		}
	})
}

func TestSimDiagRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gpus := genGPUs(t)
		level := rapid.IntRange(1, 4).Draw(t, "level")
		names := []string{"memory", "pcie", "diagnostic", "targeted_stress", "targeted_power", "memory_bandwidth", "Denylist", "memtest", "nccl_tests"}
		faults := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) SimFault {
			return SimFault{GPU: rapid.IntRange(0, 17).Draw(t, "gpu"), Diag: rapid.SampledFrom(names).Draw(t, "diag")}
		}), 0, 4).Draw(t, "faults")

		d, err := ParseDCGMDiag(SimDCGMDiag(gpus, level, faults))
		if err != nil {
			t.Fatal(err)
		}
		var want []DiagResult
		overall := DiagPass
		for _, tc := range simTests(level) {
			for _, g := range gpus {
				r := DiagResult{Test: tc.name, Category: tc.category, GPU: g.Index, Status: DiagPass}
				if slices.ContainsFunc(faults, func(f SimFault) bool { return f.GPU == g.Index && strings.EqualFold(f.Diag, tc.name) }) {
					r.Status, r.Warnings = DiagFail, []string{simFaultWarning(g.Index, tc.name)}
					overall = DiagFail
				}
				want = append(want, r)
			}
		}
		if d := cmp.Diff(Diag{Version: simDCGMVersion, Driver: simDriverVersion, Results: want, Overall: overall}, d); d != "" {
			t.Fatalf("dcgmi diag (-want +got)\n%s", d)
		}
	})
}

// Simulated evidence of a node qualifies it, and a diagnostic fault fails
// exactly the faulted GPUs.
func TestSimQualifies(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gpus := genGPUs(t)
		var faults []SimFault
		faulted := map[int]bool{}
		for _, g := range gpus {
			if rapid.Bool().Draw(t, "fault") {
				faults = append(faults, SimFault{GPU: g.Index, Diag: "memory"})
				faulted[g.Index] = true
			}
		}
		v := Qualify(Advertised{GPUs: gpus}, Evidence{
			List: SimNvidiaSMIList(gpus), Topo: SimTopo(gpus), Discovery: SimDCGMDiscovery(gpus),
			DCGMAvailable: true, Diag: SimDCGMDiag(gpus, 2, faults),
		}, true)
		if !v.Pass {
			t.Fatalf("verdict %+v, want a pass", v)
		}
		for _, g := range v.GPUs {
			if (g.Health == Failed) != faulted[g.Index] {
				t.Fatalf("GPU %d is %s (%s), faulted %v", g.Index, g.Health, g.Message, faulted[g.Index])
			}
		}
	})
}
