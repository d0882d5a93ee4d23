package gpu

import (
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
