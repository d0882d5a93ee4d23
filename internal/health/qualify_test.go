package health

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

func node4() []core.GPU {
	var gpus []core.GPU
	for i := range 4 {
		gpus = append(gpus, core.GPU{Index: i, UUID: "GPU-0000000" + string(rune('0'+i)), Model: "NVIDIA H100 80GB HBM3", Domain: i / 2})
	}
	return gpus
}

func evidence(gpus []core.GPU, faults ...SimFault) Evidence {
	return Evidence{List: SimNvidiaSMIList(gpus), Topo: SimTopo(gpus), Discovery: SimDCGMDiscovery(gpus),
		DCGMAvailable: true, Diag: SimDCGMDiag(gpus, 2, faults)}
}

func healthy(n int) []GPUVerdict {
	var v []GPUVerdict
	for i := range n {
		v = append(v, GPUVerdict{Index: i, Health: Healthy})
	}
	return v
}

func with(v []GPUVerdict, i int, reason, msg string) []GPUVerdict {
	v[i] = GPUVerdict{Index: i, Health: Failed, Reason: reason, Message: msg}
	return v
}

func TestQualify(t *testing.T) {
	adv := node4()
	mutate := func(f func([]core.GPU)) []core.GPU { g := node4(); f(g); return g }
	allFail := []byte(fixture(t, "diag-v4-all.json"))
	skips := []byte(`{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"name":"memory","results":[
		{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Skip"},{"entity_group":"GPU","entity_group_id":1,"entity_id":1,"status":"Not Run"}],
		"test_summary":{"status":"Skip"}}]}]},"metadata":{"version":"4.2.0"}}`)
	for _, tc := range []struct {
		name        string
		ev          Evidence
		requireDCGM bool
		want        Verdict
	}{
		{"matching evidence passes", evidence(adv), true, Verdict{Pass: true, GPUs: healthy(4)}},
		{"a GPU short fails the node", evidence(adv[:3]), false, Verdict{Reason: ReasonGPUCountMismatch,
			Message: "nvidia-smi -L lists 3 GPUs, the node advertises 4",
			GPUs:    with(healthy(4), 3, ReasonTopologyMismatch, "nvidia-smi topo -m does not show advertised GPU 3")}},
		{"another model fails the node and that GPU", evidence(mutate(func(g []core.GPU) { g[2].Model = "NVIDIA A100-SXM4-80GB" })), false,
			Verdict{Reason: ReasonGPUModelMismatch,
				Message: `nvidia-smi -L: GPU 2 is "NVIDIA A100-SXM4-80GB", the node advertises "NVIDIA H100 80GB HBM3"`,
				GPUs:    with(healthy(4), 2, ReasonGPUModelMismatch, `nvidia-smi -L: GPU 2 is "NVIDIA A100-SXM4-80GB", the node advertises "NVIDIA H100 80GB HBM3"`)}},
		{"model compared without NVIDIA prefix or case", evidence(mutate(func(g []core.GPU) {
			for i := range g {
				g[i].Model = "h100 80GB HBM3"
			}
		})), false, Verdict{Pass: true, GPUs: healthy(4)}},
		{"another UUID fails the node", evidence(mutate(func(g []core.GPU) { g[1].UUID = "GPU-ffffffff" })), false,
			Verdict{Reason: ReasonGPUUUIDMismatch, Message: "nvidia-smi -L: GPU 1 has UUID GPU-ffffffff, the node advertises GPU-00000001",
				GPUs: with(healthy(4), 1, ReasonGPUUUIDMismatch, "nvidia-smi -L: GPU 1 has UUID GPU-ffffffff, the node advertises GPU-00000001")}},
		{"other NVLink domains fail the node", func() Evidence {
			ev := evidence(adv)
			ev.Topo = SimTopo(mutate(func(g []core.GPU) { g[1].Domain = 1 }))
			return ev
		}(), false, Verdict{Reason: ReasonTopologyMismatch,
			Message: "GPUs 0 and 1 are advertised in NVLink domain 0, nvidia-smi topo -m links them by SYS", GPUs: healthy(4)}},
		{"domain labels may differ", func() Evidence {
			ev := evidence(adv)
			ev.Topo = SimTopo(mutate(func(g []core.GPU) { g[0].Domain, g[1].Domain, g[2].Domain, g[3].Domain = 7, 7, 3, 3 }))
			return ev
		}(), false, Verdict{Pass: true, GPUs: healthy(4)}},
		{"no NVLink does not match NVLink domains", func() Evidence {
			ev := evidence(adv)
			ev.Topo = fixture(t, "topo-pcie-nic.txt")
			return ev
		}(), false, Verdict{Reason: ReasonTopologyMismatch,
			Message: "GPUs 0 and 1 are advertised in NVLink domain 0, nvidia-smi topo -m links them by PIX", GPUs: healthy(4)}},
		{"a failing GPU fails only that GPU", evidence(adv, SimFault{GPU: 1, Diag: "memory"}), true,
			Verdict{Pass: true, Reason: ReasonDiagnosticFailed, Message: "dcgmi diag failed GPU 1",
				GPUs: with(healthy(4), 1, ReasonDiagnosticFailed, "memory: GPU 1: simulated fault injected into the memory test")}},
		{"a failing all-GPU test fails every GPU", func() Evidence { ev := evidence(adv); ev.Diag = allFail; return ev }(), true,
			Verdict{Pass: true, Reason: ReasonDiagnosticFailed, Message: "dcgmi diag failed GPU 0, 1, 2, 3", GPUs: func() []GPUVerdict {
				v := healthy(4)
				for i := range v {
					with(v, i, ReasonDiagnosticFailed, "software: The system has a pending reboot")
				}
				return v
			}()}},
		{"skip and not run are no failure", func() Evidence { ev := evidence(adv); ev.Diag = skips; return ev }(), true,
			Verdict{Pass: true, GPUs: healthy(4)}},
		{"a failing dcgmi diag exit with JSON is read", func() Evidence {
			ev := evidence(adv, SimFault{GPU: 3, Diag: "pcie"})
			ev.DiagErr = errors.New("exit status 226")
			return ev
		}(), true, Verdict{Pass: true, Reason: ReasonDiagnosticFailed, Message: "dcgmi diag failed GPU 3",
			GPUs: with(healthy(4), 3, ReasonDiagnosticFailed, "pcie: GPU 3: simulated fault injected into the pcie test")}},
		{"dcgmi missing with requireDCGM fails the node", func() Evidence { ev := evidence(adv); ev.DCGMAvailable = false; return ev }(), true,
			Verdict{Reason: ReasonDCGMNotAvailable, Message: "dcgmi is not available and qualification.requireDCGM is set", GPUs: healthy(4)}},
		{"dcgmi missing without requireDCGM passes with a note", func() Evidence { ev := evidence(adv); ev.DCGMAvailable = false; ev.Diag = nil; return ev }(), false,
			Verdict{Pass: true, Reason: ReasonDCGMNotAvailable, Message: "dcgmi is not available: no diagnostics ran", GPUs: healthy(4)}},
		{"nvidia-smi failing fails the node", func() Evidence { ev := evidence(adv); ev.ListErr = errors.New("exit status 9"); return ev }(), false,
			Verdict{Reason: ReasonCommandFailed, Message: "nvidia-smi -L: exit status 9", GPUs: healthy(4)}},
		{"unreadable diag fails the node", func() Evidence {
			ev := evidence(adv)
			ev.Diag, ev.DiagErr = []byte("Error: host engine not running\n"), errors.New("exit status 1")
			return ev
		}(), false, Verdict{Reason: ReasonCommandFailed, Message: "dcgmi diag: exit status 1\ndcgmi diag: no JSON in output", GPUs: healthy(4)}},
		{"a diag runtime error fails the node", func() Evidence {
			ev := evidence(adv)
			ev.Diag = []byte(fixture(t, "diag-v4-runtime-error.txt"))
			return ev
		}(), false, Verdict{Reason: ReasonCommandFailed,
			Message: "dcgmi diag: Error: unable to establish a connection to the specified host: localhost", GPUs: healthy(4)}},
		{"dcgmi discovery short of a GPU fails the node", func() Evidence { ev := evidence(adv); ev.Discovery = SimDCGMDiscovery(adv[:2]); return ev }(), false,
			Verdict{Reason: ReasonGPUCountMismatch, Message: "dcgmi discovery finds 2 GPUs, the node advertises 4", GPUs: healthy(4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Qualify(Advertised{GPUs: adv}, tc.ev, tc.requireDCGM)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// A node without NVLink advertises its GPUs in one flat domain (0), as
// internal/gpu does when the topology shows no NVLink.
func TestQualifyFlatWithoutNVLink(t *testing.T) {
	flat := node4()
	for i := range flat {
		flat[i].Domain = 0
	}
	ev := evidence(flat)
	ev.Topo = fixture(t, "topo-pcie-nic.txt")
	if got := Qualify(Advertised{GPUs: flat}, ev, true); !got.Pass || got.Reason != "" {
		t.Errorf("got %+v, want a clean pass", got)
	}
}

// DCGM's GPU IDs are mapped to indices by UUID where discovery prints them.
func TestQualifyMapsDCGMIDsByUUID(t *testing.T) {
	adv := node4()
	ev := evidence(adv)
	// DCGM numbers the GPUs in reverse; its GPU 0 is index 3.
	rev := make([]core.GPU, 4)
	for i, g := range adv {
		g.Index = 3 - i
		rev[3-i] = g
	}
	ev.Discovery = SimDCGMDiscovery(rev)
	ev.Diag = SimDCGMDiag(rev, 2, []SimFault{{GPU: 0, Diag: "memory"}})
	got := Qualify(Advertised{GPUs: adv}, ev, true)
	want := with(healthy(4), 3, ReasonDiagnosticFailed, "memory: GPU 0: simulated fault injected into the memory test")
	if d := cmp.Diff(want, got.GPUs); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
