package gpu

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

func TestParseNvidiaSMI(t *testing.T) {
	out := "0, GPU-5f4e1a2b-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3, 81559\n1, GPU-aa, NVIDIA A10, 23028\n"
	got, err := ParseNvidiaSMI(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.GPU{
		{Index: 0, UUID: "GPU-5f4e1a2b-0000-1111-2222-333344445555", Model: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559},
		{Index: 1, UUID: "GPU-aa", Model: "NVIDIA A10", MemoryMiB: 23028},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parse (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"0, GPU-a, H100\n", "x, GPU-a, H100, 10\n", "0, GPU-a, H100, lots\n"} {
		if _, err := ParseNvidiaSMI(bad); err == nil {
			t.Errorf("ParseNvidiaSMI(%q) accepted bad output", bad)
		}
	}
}

func TestFakeIsStableAndDistinct(t *testing.T) {
	a, err := Fake("n1", "2xH100-80GB,2xA10-24GB")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Fake("n1", "2xH100-80GB,2xA10-24GB")
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("fake GPUs differ between calls:\n%s", diff)
	}
	seen := map[string]bool{}
	for i, g := range a {
		if g.Index != i || seen[g.UUID] || !g.Simulated {
			t.Errorf("gpu %d: %+v (duplicate UUID or wrong index)", i, g)
		}
		seen[g.UUID] = true
	}
	if a[0].Model != "H100" || a[0].MemoryMiB != 81920 || a[3].Model != "A10" || a[3].MemoryMiB != 24576 {
		t.Errorf("models/memory wrong: %+v", a)
	}
	c, _ := Fake("n2", "2xH100-80GB,2xA10-24GB")
	if c[0].UUID == a[0].UUID {
		t.Error("two nodes got the same fake UUID")
	}
	if _, err := Fake("n1", "4xH100"); err == nil {
		t.Error("bad spec accepted")
	}
}

func TestSetDomains(t *testing.T) {
	// Two NVLink pairs on PCIe, as on a 4-GPU workstation, with a NIC row
	// and the legend that nvidia-smi prints.
	pairs := "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" +
		"GPU0\t X \tNV4\tSYS\tSYS\tPIX\t0-31\t0\t\tN/A\n" +
		"GPU1\tNV4\t X \tSYS\tSYS\tPIX\t0-31\t0\t\tN/A\n" +
		"GPU2\tSYS\tSYS\t X \tNV4\tSYS\t32-63\t1\t\tN/A\n" +
		"GPU3\tSYS\tSYS\tNV4\t X \tSYS\t32-63\t1\t\tN/A\n" +
		"NIC0\tPIX\tPIX\tSYS\tSYS\t X \n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
	flat := "\tGPU0\tGPU1\tCPU Affinity\n GPU0\t X \tPHB\t0-7\nGPU1\tPHB\t X \t0-7\n"
	switched := "\tGPU0\tGPU1\tGPU2\n" + "GPU0\t X \tNV18\tNV18\n" + "GPU1\tNV18\t X \tNV18\n" + "GPU2\tNV18\tNV18\t X \n"
	// An underlined header, as nvidia-smi prints it on a terminal, over
	// two NVLink pairs: the first row is not the header.
	underlined := "\x1b[4m\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\x1b[0m\n" +
		"GPU0\t X \tNV4\tSYS\tSYS\t0-31\nGPU1\tNV4\t X \tSYS\tSYS\t0-31\nGPU2\tSYS\tSYS\t X \tNV4\t32-63\nGPU3\tSYS\tSYS\tNV4\t X \t32-63\n"
	cases := []struct {
		name string
		out  string
		want []int
	}{
		{"two NVLink pairs make two domains", pairs, []int{0, 0, 1, 1}},
		{"PCIe only is one flat domain", flat, []int{0, 0}},
		{"NVSwitch joins every GPU", switched, []int{0, 0, 0}},
		{"an underlined header is read", underlined, []int{0, 0, 1, 1}},
		{"one H200 without NVLink peers (real output)", h200(t, "topo.txt"), []int{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gpus := make([]core.GPU, len(tc.want))
			for i := range gpus {
				gpus[i] = core.GPU{Index: i, Domain: 9}
			}
			if err := setDomains(gpus, tc.out); err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, g := range gpus {
				got = append(got, g.Domain)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("domains (-want +got):\n%s", diff)
			}
		})
	}
	if err := setDomains(nil, "nothing here\n"); err == nil {
		t.Error("output without a GPU header accepted")
	}
}

// TestDiscoveryOfAnH200: the query discovery runs, as an H200 answered it.
func TestDiscoveryOfAnH200(t *testing.T) {
	got, err := ParseNvidiaSMI(h200(t, "query-discover.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []core.GPU{{Index: 0, UUID: "GPU-0ba79ed6-f6d3-59ad-f6ce-8ab2e3e621da", Model: "NVIDIA H200", MemoryMiB: 143771, PCIBusID: "00000000:00:06.0"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// h200 reads a real output captured on an H200 machine
// (internal/health/testdata/h200, where its README says which command).
func h200(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "health", "testdata", "h200", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
