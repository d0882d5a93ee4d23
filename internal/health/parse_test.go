package health

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseNvidiaSMIList(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []ListedGPU
	}{
		{"smi-list-h100.txt", []ListedGPU{
			{Index: 0, Model: "NVIDIA H100 80GB HBM3", UUID: "GPU-c7a0294c-c2c2-5476-438c-fb468eaa223b"},
			{Index: 1, Model: "NVIDIA H100 80GB HBM3", UUID: "GPU-27196ced-a067-4406-2159-46448710fc9c"},
		}},
		{"smi-list-mig.txt", []ListedGPU{
			{Index: 0, Model: "NVIDIA A100-SXM4-80GB", UUID: "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77",
				MIG: []string{"MIG-b3061c09-3a4c-5d6e-8f70-112233445566", "MIG-c4172d1a-4b5d-6e7f-9081-223344556677"}},
			{Index: 1, Model: "NVIDIA A100-SXM4-80GB", UUID: "GPU-6e6cb1e7-e44e-3c3d-635e-af4e9e3c9b88"},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ParseNvidiaSMIList(fixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestParseNvidiaSMIListRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"empty":             "",
		"no devices":        "No devices were found\n",
		"driver error":      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
		"repeated index":    "GPU 0: A (UUID: GPU-1)\nGPU 0: A (UUID: GPU-2)\n",
		"MIG before a GPU":  "  MIG 1g.10gb Device 0: (UUID: MIG-1)\n",
		"line without UUID": "GPU 0: NVIDIA H100\n",
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := ParseNvidiaSMIList(out); err == nil {
				t.Errorf("got %+v, want an error", got)
			}
		})
	}
}

func links(n int, code func(i, j int) string) map[[2]int]string {
	m := map[[2]int]string{}
	for i := range n {
		for j := range n {
			if i == j {
				m[[2]int{i, j}] = "X"
			} else {
				m[[2]int{i, j}] = code(i, j)
			}
		}
	}
	return m
}

func labels(n int) []string {
	var s []string
	for i := range n {
		s = append(s, "GPU"+string(rune('0'+i)))
	}
	return s
}

func TestParseTopo(t *testing.T) {
	all := func(code string) func(i, j int) string { return func(int, int) string { return code } }
	one := map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0}
	h100 := Topology{GPUs: labels(8), Link: links(8, all("NV18")), Domains: one, NVLink: true}
	for _, tc := range []struct {
		file string
		want Topology
	}{
		{"topo-h100.txt", h100},
		{"topo-h100-ansi.txt", h100},
		{"topo-a100-nic.txt", Topology{GPUs: labels(8), Link: links(8, all("NV12")), Domains: one, NVLink: true}},
		{"topo-pcie-nic.txt", Topology{GPUs: labels(4), Link: links(4, func(i, j int) string {
			switch {
			case i/2 != j/2:
				return "SYS"
			case i < 2:
				return "PIX"
			}
			return "PXB"
		}), Domains: map[int]int{0: 0, 1: 0, 2: 0, 3: 0}}},
		{"topo-two-pairs-spaces.txt", Topology{GPUs: labels(4), Link: links(4, func(i, j int) string {
			if i/2 == j/2 {
				return "NV4"
			}
			return "SYS"
		}), Domains: map[int]int{0: 0, 1: 0, 2: 1, 3: 1}, NVLink: true}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ParseTopo(fixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestParseTopoRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"empty":           "",
		"legend only":     topoLegend,
		"missing row":     "\tGPU0\tGPU1\nGPU0\t X \tNV4\n",
		"short row":       "\tGPU0\tGPU1\nGPU0\t X \nGPU1\tNV4\t X \n",
		"row not column":  "\tGPU0\nGPU0\t X \nGPU3\tSYS\n",
		"unexpected row":  "\tGPU0\nGPU0\t X \nwhat\tSYS\n",
		"repeated column": "\tGPU0\tGPU0\nGPU0\t X \t X \n",
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := ParseTopo(out); err == nil {
				t.Errorf("got %+v, want an error", got)
			}
		})
	}
}

func TestParseDCGMDiscovery(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []DiscoveredGPU
	}{
		{"discovery-a100.txt", []DiscoveredGPU{{ID: 0, Name: "A100-SXM4-40GB", PCIBusID: "00000000:07:00.0", UUID: "GPU-1d82f4df-3cf9-150d-088b-52f18f8654e1"}}},
		{"discovery-h100-null.txt", []DiscoveredGPU{
			{ID: 0, Name: "", PCIBusID: "00000000:18:00.0", UUID: "GPU-c7a0294c-c2c2-5476-438c-fb468eaa223b"},
			{ID: 1, Name: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:2A:00.0", UUID: "GPU-27196ced-a067-4406-2159-46448710fc9c"},
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ParseDCGMDiscovery(fixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestParseDCGMDiscoveryRefuses(t *testing.T) {
	for name, out := range map[string]string{
		// The published sample was trimmed to one GPU of eight: a
		// truncated output must not pass for a node with one GPU.
		"count disagrees with rows": fixture(t, "discovery-a100-trimmed.txt"),
		"no count line":             "| 0      | Name: X |\n",
		"host engine down":          "Error: unable to establish a connection to the specified host: localhost\n",
		"repeated ID":               "2 GPUs found.\n| 0 | Name: A |\n| 0 | Name: B |\n",
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := ParseDCGMDiscovery(out); err == nil {
				t.Errorf("got %+v, want an error", got)
			}
		})
	}
}

func TestParseDCGMDiscoveryCounts(t *testing.T) {
	for out, want := range map[string]int{
		"0 GPUs found.\n":           0,
		"1 GPU found.\n| 0 | x |\n": 1,
	} {
		got, err := ParseDCGMDiscovery(out)
		if err != nil || len(got) != want {
			t.Errorf("ParseDCGMDiscovery(%q) = %v, %v; want %d GPUs", out, got, err, want)
		}
	}
}

func res(test, cat string, gpu int, status string, warns ...string) DiagResult {
	r := DiagResult{Test: test, Category: cat, GPU: gpu, Status: status}
	if len(warns) > 0 {
		r.Warnings = warns
	}
	return r
}

func perGPU(test, cat string, n int, status string, warns ...string) []DiagResult {
	var rs []DiagResult
	for i := range n {
		rs = append(rs, res(test, cat, i, status, warns...))
	}
	return rs
}

func TestParseDCGMDiag(t *testing.T) {
	var v13 []DiagResult
	for _, n := range []string{"Blacklist", "NVML Library", "CUDA Main Library", "Permissions and OS-related Blocks",
		"Persistence Mode", "Environmental Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"} {
		v13 = append(v13, perGPU(n, "Deployment", 4, DiagPass)...)
	}
	v13 = append(v13, res("memory", "Hardware", 0, DiagSkip, `ECC memory on this card is not currently active. Please use "nvidia-smi -i 0 -e 1" to enable and reboot.`),
		res("memory", "Hardware", 1, DiagPass), res("memory", "Hardware", 2, DiagPass), res("memory", "Hardware", 3, DiagPass))
	v13 = append(v13, perGPU("diagnostic", "Hardware", 4, DiagSkip, "Unable to find hardware diagnostic, skipping this test.")...)
	v13 = append(v13, perGPU("pcie", "Integration", 4, DiagPass)...)
	v13 = append(v13, perGPU("memory_bandwidth", "Stress", 4, DiagSkip, "The memory bandwidth test is skipped for this GPU.")...)
	v13 = append(v13, perGPU("sm_stress", "Stress", 4, DiagFail,
		"Max stress level of 2128.7 did not exceed desired stress level of 3000.0 for GPU 0",
		"Max stress level of 1096.5 did not exceed desired stress level of 3000.0 for GPU 2",
		"Max stress level of 1099.7 did not exceed desired stress level of 3000.0 for GPU 3")...)
	v13 = append(v13, perGPU("targeted_stress", "Stress", 4, DiagSkip)...)
	v13 = append(v13, perGPU("targeted_power", "Stress", 4, DiagSkip)...)

	for _, tc := range []struct {
		file string
		want Diag
	}{
		{"diag-v1.3.json", Diag{Version: "1.3", Results: v13, Overall: DiagFail}},
		{"diag-v3-pergpu.json", Diag{Version: "3.3.1", Driver: "545.23.08", Overall: DiagFail, Results: []DiagResult{
			res("Blacklist", "Deployment", 0, DiagPass), res("Blacklist", "Deployment", 1, DiagPass),
			res("diagnostic", "Hardware", 0, DiagSkip, "GPU 0: Unable to find hardware diagnostic, skipping this test."),
			res("diagnostic", "Hardware", 1, DiagSkip, "GPU 1: Unable to find hardware diagnostic, skipping this test."),
			res("sm_stress", "Stress", 0, DiagFail, "Max stress level of 2128.7 did not exceed desired stress level of 3000.0 for GPU 0"),
			res("sm_stress", "Stress", 1, DiagPass),
			res("targeted_power", "Stress", 1, DiagFail, "GPU 1: power draw below target"),
		}}},
		{"diag-v4-fail.json", Diag{Version: "4.2.0", Driver: "555.44", Overall: DiagFail, Results: append(append(append(
			perGPU("software", "Deployment", 4, DiagPass),
			res("memory", "Hardware", 0, DiagPass), res("memory", "Hardware", 1, DiagFail, "GPU 1: double-bit ECC error detected during the memory test"),
			res("memory", "Hardware", 2, DiagPass), res("memory", "Hardware", 3, DiagSkip)),
			perGPU("pcie", "Integration", 4, DiagPass)...),
			res("targeted_power", "Stress", -1, DiagNotRun))}},
		{"diag-v4-all.json", Diag{Version: "4.1.1", Driver: "550.90.07", Overall: DiagFail, Results: []DiagResult{
			res("software", "Deployment", -1, DiagFail, "The system has a pending reboot"),
		}}},
		{"diag-v4-iterations.json", Diag{Version: "4.2.0", Driver: "555.44", Overall: DiagFail, Results: []DiagResult{
			res("memory", "Hardware", 0, DiagPass), res("memory", "Hardware", 1, DiagPass),
			res("memory", "Hardware", 0, DiagPass), res("memory", "Hardware", 1, DiagFail, "GPU 1: memory test failed"),
		}}},
		{"diag-v4-runtime-error.txt", Diag{Version: "4.2.0", Overall: DiagFail,
			RuntimeError: "Error: unable to establish a connection to the specified host: localhost"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ParseDCGMDiag([]byte(fixture(t, tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestParseDCGMDiagRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"empty":          "",
		"not JSON":       "Error: dcgmi diag is not supported\n",
		"broken JSON":    `{"DCGM Diagnostic": {`,
		"other document": `{"hello": "world"}`,
		"unknown status": `{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"name":"memory","results":[{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Maybe"}]}]}]}}`,
		"bad gpu_ids":    `{"DCGM GPU Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"name":"memory","results":[{"gpu_ids":"0,x","status":"PASS"}]}]}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := ParseDCGMDiag([]byte(out)); err == nil {
				t.Errorf("got %+v, want an error", got)
			}
		})
	}
}

func TestParseDCGMDiagPassesWhenNothingFails(t *testing.T) {
	out := strings.ReplaceAll(fixture(t, "diag-v4-fail.json"), `"Fail"`, `"Pass"`)
	d, err := ParseDCGMDiag([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if d.Overall != DiagPass {
		t.Errorf("Overall = %q, want Pass", d.Overall)
	}
}
