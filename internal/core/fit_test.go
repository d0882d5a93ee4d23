package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
)

const (
	h100Model = "NVIDIA H100 80GB HBM3"
	h100MiB   = 81920
)

// testNode is a schedulable node with four H100s, 16 CPUs and 64 GiB of host
// memory.
func testNode() *core.Node {
	n := &core.Node{Name: "n1", Schedulable: true, MilliCPU: 16000, MemoryMiB: 65536}
	for i := range 4 {
		n.GPUs = append(n.GPUs, core.GPU{Index: i, UUID: uuid(i), Model: h100Model, MemoryMiB: h100MiB})
	}
	return n
}

func uuid(i int) string { return "GPU-" + string(rune('a'+i)) }

// share is an assignment of milli-GPU on device i of testNode, with the
// matching memory.
func share(i int, milli int64) core.Assignment {
	return core.Assignment{Node: "n1", GPUIndex: i, GPUUUID: uuid(i), MilliGPU: milli, MemoryMiB: h100MiB * milli / 1000}
}

// used is a NodeUsage holding milli-GPU (with matching memory) per device.
func used(milli map[int]int64) *core.NodeUsage {
	u := &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
	for i, m := range milli {
		u.GPUs[i] = core.GPUUse{MilliGPU: m, MemoryMiB: h100MiB * m / 1000}
	}
	return u
}

func TestFits(t *testing.T) {
	tests := []struct {
		name string
		node func(*core.Node) // changes testNode; nil keeps it
		used *core.NodeUsage
		req  core.Request
		as   []core.Assignment
		// wantErr is a part of the error message; "" means it fits.
		wantErr string
		// wantGPU is FitError.GPUIndex when it does not fit.
		wantGPU int
	}{
		{
			name: "a fraction fits on a free device",
			req:  core.Request{MilliGPU: 500},
			as:   []core.Assignment{share(0, 500)},
		},
		{
			name: "a fraction fits next to another on the same device",
			used: used(map[int]int64{0: 500}),
			req:  core.Request{MilliGPU: 500},
			as:   []core.Assignment{share(0, 500)},
		},
		{
			name: "no usage at all means a free node",
			used: nil,
			req:  core.Request{MilliGPU: 2000},
			as:   []core.Assignment{share(0, 1000), share(1, 1000)},
		},
		{
			name:    "fraction over the device's remaining share is refused",
			used:    used(map[int]int64{0: 600}),
			req:     core.Request{MilliGPU: 500},
			as:      []core.Assignment{share(0, 500)},
			wantErr: "400 milli-GPU free, 500 asked",
			wantGPU: 0,
		},
		{
			name:    "fraction over the device's remaining memory is refused",
			used:    &core.NodeUsage{GPUs: map[int]core.GPUUse{2: {MilliGPU: 100, MemoryMiB: h100MiB - 1000}}},
			req:     core.Request{MilliGPU: 500},
			as:      []core.Assignment{share(2, 500)},
			wantErr: "1000 MiB of GPU memory free, 40960 asked",
			wantGPU: 2,
		},
		{
			name: "a memory request takes the matching fraction of the device",
			req:  core.Request{GPUMemoryMiB: 20480},
			as:   []core.Assignment{{Node: "n1", GPUIndex: 1, GPUUUID: uuid(1), MilliGPU: 250, MemoryMiB: 20480}},
		},
		{
			name:    "a memory request placed with the wrong milli-GPU is refused",
			req:     core.Request{GPUMemoryMiB: 20480},
			as:      []core.Assignment{{Node: "n1", GPUIndex: 1, GPUUUID: uuid(1), MilliGPU: 200, MemoryMiB: 20480}},
			wantErr: "does not match the request",
			wantGPU: 1,
		},
		{
			name:    "an assignment smaller than the request is refused",
			req:     core.Request{MilliGPU: 500},
			as:      []core.Assignment{share(0, 400)},
			wantErr: "does not match the request",
			wantGPU: 0,
		},
		{
			name: "whole GPUs fit on distinct free devices",
			used: used(map[int]int64{0: 500}),
			req:  core.Request{MilliGPU: 2000},
			as:   []core.Assignment{share(1, 1000), share(3, 1000)},
		},
		{
			name:    "whole-GPU request on a partly used device is refused",
			used:    used(map[int]int64{1: 1}),
			req:     core.Request{MilliGPU: 2000},
			as:      []core.Assignment{share(0, 1000), share(1, 1000)},
			wantErr: "999 milli-GPU free, 1000 asked",
			wantGPU: 1,
		},
		{
			name:    "a whole GPU placed as a fraction is refused",
			req:     core.Request{MilliGPU: 1000},
			as:      []core.Assignment{share(0, 500)},
			wantErr: "does not match the request",
			wantGPU: 0,
		},
		{
			name:    "unschedulable node is refused",
			node:    func(n *core.Node) { n.Schedulable = false },
			req:     core.Request{MilliGPU: 500},
			as:      []core.Assignment{share(0, 500)},
			wantErr: "not schedulable",
			wantGPU: -1,
		},
		{
			name:    "assignment naming another node is refused",
			req:     core.Request{MilliGPU: 500},
			as:      []core.Assignment{{Node: "n2", GPUIndex: 0, GPUUUID: uuid(0), MilliGPU: 500, MemoryMiB: h100MiB / 2}},
			wantErr: "assignment names node n2",
			wantGPU: 0,
		},
		{
			name:    "wrong UUID is refused",
			req:     core.Request{MilliGPU: 500},
			as:      []core.Assignment{{Node: "n1", GPUIndex: 0, GPUUUID: uuid(1), MilliGPU: 500, MemoryMiB: h100MiB / 2}},
			wantErr: "device UUID is GPU-a, not GPU-b",
			wantGPU: 0,
		},
		{
			name:    "a device the node does not have is refused",
			req:     core.Request{MilliGPU: 500},
			as:      []core.Assignment{{Node: "n1", GPUIndex: 7, GPUUUID: uuid(7), MilliGPU: 500, MemoryMiB: h100MiB / 2}},
			wantErr: "no such device",
			wantGPU: 7,
		},
		{
			name:    "duplicate device is refused",
			req:     core.Request{MilliGPU: 2000},
			as:      []core.Assignment{share(2, 1000), share(2, 1000)},
			wantErr: "device assigned twice",
			wantGPU: 2,
		},
		{
			name:    "model not allowed is refused",
			req:     core.Request{MilliGPU: 500, GPUModels: []string{"A100"}},
			as:      []core.Assignment{share(0, 500)},
			wantErr: "model NVIDIA H100 80GB HBM3 is not among [A100]",
			wantGPU: 0,
		},
		{
			name: "a model named by part of its name is allowed",
			req:  core.Request{MilliGPU: 500, GPUModels: []string{"A100", "h100"}},
			as:   []core.Assignment{share(0, 500)},
		},
		{
			name:    "host CPU exhausted is refused",
			used:    &core.NodeUsage{MilliCPU: 12000},
			req:     core.Request{MilliGPU: 500, MilliCPU: 8000},
			as:      []core.Assignment{share(0, 500)},
			wantErr: "4000 milli-CPU free, 8000 asked",
			wantGPU: -1,
		},
		{
			name:    "host memory exhausted is refused",
			used:    &core.NodeUsage{MemoryMiB: 60000},
			req:     core.Request{MilliGPU: 500, MemoryMiB: 8192},
			as:      []core.Assignment{share(0, 500)},
			wantErr: "5536 MiB of host memory free, 8192 asked",
			wantGPU: -1,
		},
		{
			name: "host CPU and memory exactly used up fit",
			used: &core.NodeUsage{MilliCPU: 8000, MemoryMiB: 32768},
			req:  core.Request{MilliGPU: 500, MilliCPU: 8000, MemoryMiB: 32768},
			as:   []core.Assignment{share(0, 500)},
		},
		{
			name: "a node that declares no host CPU or memory does not limit them",
			node: func(n *core.Node) { n.MilliCPU, n.MemoryMiB = 0, 0 },
			used: &core.NodeUsage{MilliCPU: 1 << 40, MemoryMiB: 1 << 40},
			req:  core.Request{MilliGPU: 500, MilliCPU: 64000, MemoryMiB: 1 << 20},
			as:   []core.Assignment{share(0, 500)},
		},
		{
			name:    "count mismatch: two GPUs on one device is refused",
			req:     core.Request{MilliGPU: 2000},
			as:      []core.Assignment{share(0, 1000)},
			wantErr: "request for 2 GPUs placed on 1 devices",
			wantGPU: -1,
		},
		{
			name:    "count mismatch: one GPU on two devices is refused",
			req:     core.Request{MilliGPU: 1000},
			as:      []core.Assignment{share(0, 1000), share(1, 1000)},
			wantErr: "request for 1 GPUs placed on 2 devices",
			wantGPU: -1,
		},
		{
			name:    "count mismatch: a fraction over two devices is refused",
			req:     core.Request{MilliGPU: 500},
			as:      []core.Assignment{share(0, 500), share(1, 500)},
			wantErr: "takes exactly one device, not 2",
			wantGPU: -1,
		},
		{
			name:    "count mismatch: a fraction with no device is refused",
			req:     core.Request{MilliGPU: 500},
			as:      nil,
			wantErr: "takes exactly one device, not 0",
			wantGPU: -1,
		},
		{
			name:    "count mismatch: a request without GPUs placed on a device is refused",
			req:     core.Request{MilliCPU: 1000},
			as:      []core.Assignment{share(0, 500)},
			wantErr: "request without GPUs placed on devices",
			wantGPU: -1,
		},
		{
			name: "a request without GPUs and without devices fits",
			req:  core.Request{MilliCPU: 1000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := testNode()
			if tt.node != nil {
				tt.node(n)
			}
			err := core.Fits(n, tt.used, tt.req, tt.as)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Fits = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Fits = nil, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Fits = %q, want it to contain %q", err, tt.wantErr)
			}
			var fe *core.FitError
			if !errors.As(err, &fe) {
				t.Fatalf("Fits returned %T, want *core.FitError", err)
			}
			if fe.Node != "n1" || fe.GPUIndex != tt.wantGPU {
				t.Errorf("FitError names node %s gpu %d, want node n1 gpu %d", fe.Node, fe.GPUIndex, tt.wantGPU)
			}
		})
	}
}

func TestFitsDoesNotModifyItsArguments(t *testing.T) {
	n := testNode()
	u := used(map[int]int64{0: 500})
	req := core.Request{MilliGPU: 500, GPUModels: []string{"H100"}}
	as := []core.Assignment{share(0, 500)}
	n0, u0, as0 := n.Clone(), u.Clone(), append([]core.Assignment(nil), as...)
	if err := core.Fits(n, u, req, as); err != nil {
		t.Fatalf("Fits = %v, want nil", err)
	}
	if diff := cmp.Diff(n0, n); diff != "" {
		t.Errorf("node changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(u0, u); diff != "" {
		t.Errorf("usage changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(as0, as); diff != "" {
		t.Errorf("assignments changed (-before +after):\n%s", diff)
	}
}

func TestShareOn(t *testing.T) {
	h100 := core.GPU{Index: 0, UUID: "GPU-a", Model: h100Model, MemoryMiB: h100MiB}
	tests := []struct {
		name      string
		req       core.Request
		gpu       core.GPU
		wantMilli int64
		wantMem   int64
		wantOK    bool
	}{
		{"a whole GPU takes all of the device", core.Request{MilliGPU: 1000}, h100, 1000, h100MiB, true},
		{"several whole GPUs take all of each device", core.Request{MilliGPU: 4000}, h100, 1000, h100MiB, true},
		{"a fraction takes that fraction of the memory", core.Request{MilliGPU: 250}, h100, 250, 20480, true},
		{"a fraction's memory rounds down", core.Request{MilliGPU: 333}, core.GPU{MemoryMiB: 1001}, 333, 333, true},
		{"the smallest fraction takes one milli-GPU", core.Request{MilliGPU: 1}, h100, 1, 81, true},
		{"a fraction on a device of unknown memory takes no memory", core.Request{MilliGPU: 500}, core.GPU{}, 500, 0, true},
		{"memory converts to milli-GPU", core.Request{GPUMemoryMiB: 20480}, h100, 250, 20480, true},
		{"memory converts to milli-GPU rounded up", core.Request{GPUMemoryMiB: 20481}, h100, 251, 20481, true},
		{"one MiB takes one milli-GPU", core.Request{GPUMemoryMiB: 1}, h100, 1, 1, true},
		{"all of the device's memory takes the whole device", core.Request{GPUMemoryMiB: h100MiB}, h100, 1000, h100MiB, true},
		{"memory larger than the device is refused", core.Request{GPUMemoryMiB: h100MiB + 1}, h100, 0, 0, false},
		{"memory on a device of unknown memory is refused", core.Request{GPUMemoryMiB: 1024}, core.GPU{}, 0, 0, false},
		{"a request for no GPU is refused", core.Request{MilliCPU: 1000}, h100, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			milli, mem, ok := tt.req.ShareOn(tt.gpu)
			if milli != tt.wantMilli || mem != tt.wantMem || ok != tt.wantOK {
				t.Errorf("ShareOn = (%d, %d, %t), want (%d, %d, %t)", milli, mem, ok, tt.wantMilli, tt.wantMem, tt.wantOK)
			}
		})
	}
}

func FuzzShareOn(f *testing.F) {
	f.Add(int64(500), int64(0), int64(h100MiB))
	f.Add(int64(1000), int64(0), int64(h100MiB))
	f.Add(int64(8000), int64(0), int64(0))
	f.Add(int64(1), int64(0), int64(1))
	f.Add(int64(999), int64(0), int64(1))
	f.Add(int64(0), int64(20481), int64(h100MiB))
	f.Add(int64(0), int64(1), int64(1<<40))
	f.Add(int64(0), int64(h100MiB), int64(h100MiB))
	f.Add(int64(0), int64(h100MiB+1), int64(h100MiB))
	f.Add(int64(-5), int64(100), int64(1000))
	f.Add(int64(999), int64(0), int64(1<<62))
	f.Add(int64(0), int64(1<<62), int64(1<<62))
	f.Fuzz(func(t *testing.T, milliGPU, gpuMemMiB, devMemMiB int64) {
		if devMemMiB < 0 {
			t.Skip("a device never has negative memory")
		}
		req := core.Request{MilliGPU: milliGPU, GPUMemoryMiB: gpuMemMiB}
		milli, mem, ok := req.ShareOn(core.GPU{MemoryMiB: devMemMiB})
		if !ok {
			if milli != 0 || mem != 0 {
				t.Errorf("ShareOn = (%d, %d, false), want zeros when refused", milli, mem)
			}
			if milliGPU > 0 {
				t.Errorf("ShareOn refused %d milli-GPU; a GPU count always has a share", milliGPU)
			}
			return
		}
		if milli < 1 || milli > 1000 {
			t.Errorf("ShareOn(%+v) on %d MiB: milli = %d, want 1 to 1000", req, devMemMiB, milli)
		}
		if mem < 0 || mem > devMemMiB {
			t.Errorf("ShareOn(%+v) on %d MiB: memory = %d, want 0 to %d", req, devMemMiB, mem, devMemMiB)
		}
		switch {
		case milliGPU >= 1000:
			if milli != 1000 || mem != devMemMiB {
				t.Errorf("ShareOn(%+v) = (%d, %d), want the whole device (1000, %d)", req, milli, mem, devMemMiB)
			}
		case milliGPU > 0:
			if milli != milliGPU {
				t.Errorf("ShareOn(%+v) milli = %d, want the fraction asked, %d", req, milli, milliGPU)
			}
		default:
			if mem != gpuMemMiB {
				t.Errorf("ShareOn(%+v) memory = %d, want the memory asked, %d", req, mem, gpuMemMiB)
			}
		}
	})
}

func TestModelAllowed(t *testing.T) {
	tests := []struct {
		name   string
		models []string
		model  string
		want   bool
	}{
		{"no list accepts every model", nil, h100Model, true},
		{"an empty list accepts every model", []string{}, "anything", true},
		{"the exact model is allowed", []string{h100Model}, h100Model, true},
		{"a part of the model name is allowed", []string{"H100"}, h100Model, true},
		{"matching ignores case", []string{"h100 80gb"}, h100Model, true},
		{"any one of several names is enough", []string{"A100", "L4", "H100"}, h100Model, true},
		{"another model is refused", []string{"A100"}, h100Model, false},
		{"a name longer than the model is refused", []string{"NVIDIA H100 80GB HBM3e"}, h100Model, false},
		{"an empty name matches nothing", []string{""}, h100Model, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := core.Request{MilliGPU: 1000, GPUModels: tt.models}
			if got := r.ModelAllowed(tt.model); got != tt.want {
				t.Errorf("ModelAllowed(%q) with %q = %t, want %t", tt.model, tt.models, got, tt.want)
			}
		})
	}
}

func TestNodeUsageAdd(t *testing.T) {
	tests := []struct {
		name  string
		start core.NodeUsage
		req   core.Request
		as    []core.Assignment
		want  core.NodeUsage
	}{
		{
			name:  "adding to the zero value makes the device map",
			start: core.NodeUsage{},
			req:   core.Request{MilliGPU: 500, MilliCPU: 2000, MemoryMiB: 4096},
			as:    []core.Assignment{share(1, 500)},
			want:  core.NodeUsage{GPUs: map[int]core.GPUUse{1: {MilliGPU: 500, MemoryMiB: 40960}}, MilliCPU: 2000, MemoryMiB: 4096},
		},
		{
			name:  "shares on the same device add up",
			start: core.NodeUsage{GPUs: map[int]core.GPUUse{1: {MilliGPU: 250, MemoryMiB: 20480}}, MilliCPU: 1000, MemoryMiB: 1024},
			req:   core.Request{MilliGPU: 500, MilliCPU: 2000, MemoryMiB: 4096},
			as:    []core.Assignment{share(1, 500)},
			want:  core.NodeUsage{GPUs: map[int]core.GPUUse{1: {MilliGPU: 750, MemoryMiB: 61440}}, MilliCPU: 3000, MemoryMiB: 5120},
		},
		{
			name:  "whole GPUs mark every device",
			start: core.NodeUsage{GPUs: map[int]core.GPUUse{0: {MilliGPU: 250, MemoryMiB: 20480}}},
			req:   core.Request{MilliGPU: 2000},
			as:    []core.Assignment{share(2, 1000), share(3, 1000)},
			want:  core.NodeUsage{GPUs: map[int]core.GPUUse{0: {MilliGPU: 250, MemoryMiB: 20480}, 2: {MilliGPU: 1000, MemoryMiB: h100MiB}, 3: {MilliGPU: 1000, MemoryMiB: h100MiB}}},
		},
		{
			name:  "a workload with nothing on the node adds nothing",
			start: core.NodeUsage{GPUs: map[int]core.GPUUse{}},
			req:   core.Request{MilliCPU: 500, MemoryMiB: 256},
			want:  core.NodeUsage{GPUs: map[int]core.GPUUse{}},
		},
		{
			name:  "host resources count once per gang replica on the node, other nodes' shares not at all",
			start: core.NodeUsage{GPUs: map[int]core.GPUUse{}},
			req:   core.Request{MilliGPU: 1000, Replicas: 3, MilliCPU: 500, MemoryMiB: 256},
			as: []core.Assignment{
				{Replica: 0, Node: "n1", GPUIndex: 0, GPUUUID: uuid(0), MilliGPU: 1000, MemoryMiB: h100MiB},
				{Replica: 1, Node: "n1", GPUIndex: 1, GPUUUID: uuid(1), MilliGPU: 1000, MemoryMiB: h100MiB},
				{Replica: 2, Node: "n2", GPUIndex: 0, GPUUUID: "other", MilliGPU: 1000, MemoryMiB: h100MiB},
			},
			want: core.NodeUsage{GPUs: map[int]core.GPUUse{0: {MilliGPU: 1000, MemoryMiB: h100MiB}, 1: {MilliGPU: 1000, MemoryMiB: h100MiB}}, MilliCPU: 1000, MemoryMiB: 512},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.start
			u.Add("n1", tt.req, tt.as)
			if diff := cmp.Diff(tt.want, u); diff != "" {
				t.Errorf("usage after Add (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodeUsageClone(t *testing.T) {
	t.Run("a clone equals the original", func(t *testing.T) {
		u := used(map[int]int64{0: 500, 3: 1000})
		u.MilliCPU, u.MemoryMiB = 4000, 8192
		if diff := cmp.Diff(u, u.Clone()); diff != "" {
			t.Errorf("clone differs (-original +clone):\n%s", diff)
		}
	})
	t.Run("changing the clone leaves the original alone", func(t *testing.T) {
		u := used(map[int]int64{0: 500})
		before := &core.NodeUsage{GPUs: map[int]core.GPUUse{0: u.GPUs[0]}}
		c := u.Clone()
		c.Add("n1", core.Request{MilliGPU: 500, MilliCPU: 1000, MemoryMiB: 1024}, []core.Assignment{share(0, 500)})
		c.GPUs[2] = core.GPUUse{MilliGPU: 1000}
		if diff := cmp.Diff(before, u); diff != "" {
			t.Errorf("original changed through its clone (-before +after):\n%s", diff)
		}
	})
	t.Run("a clone of the zero value can be added to", func(t *testing.T) {
		var u core.NodeUsage
		c := u.Clone()
		c.Add("n1", core.Request{MilliGPU: 1000}, []core.Assignment{share(0, 1000)})
		if u.GPUs != nil {
			t.Errorf("original GPUs = %v, want nil", u.GPUs)
		}
		if got := c.GPUs[0].MilliGPU; got != 1000 {
			t.Errorf("clone GPU 0 = %d milli-GPU, want 1000", got)
		}
	})
}

// A placement outside the request's residency is refused at commit, as the
// scheduler never makes one.
func TestFitsChecksResidency(t *testing.T) {
	n := &core.Node{Name: "n", Region: "us-east", Schedulable: true, GPUs: []core.GPU{{Index: 0, UUID: "g0", MemoryMiB: 81920}}}
	as := []core.Assignment{{Node: "n", GPUIndex: 0, GPUUUID: "g0", MilliGPU: 1000, MemoryMiB: 81920}}
	if err := core.Fits(n, &core.NodeUsage{}, core.Request{MilliGPU: 1000, Regions: []string{"eu-west"}}, as); err == nil || !strings.Contains(err.Error(), "residency") {
		t.Errorf("a placement in us-east for a residency of eu-west: %v, want refused", err)
	}
	if err := core.Fits(n, &core.NodeUsage{}, core.Request{MilliGPU: 1000, Regions: []string{"eu-west", "us-east"}}, as); err != nil {
		t.Errorf("a placement within its residency: %v", err)
	}
}

func TestNodeUsageAddCountsReplicasOnce(t *testing.T) {
	// A gang of three replicas of 2 GPUs, 4 CPUs and 1 GiB each: two
	// replicas on n1 (one GPU shared by both), one on n2. n1 holds two
	// replicas' host CPU and memory, and each of its devices what the
	// assignments on it say.
	req := core.Request{MilliGPU: 2000, MilliCPU: 4000, MemoryMiB: 1024, Replicas: 3}
	as := []core.Assignment{
		{Replica: 0, Node: "n1", GPUIndex: 0, MilliGPU: 1000, MemoryMiB: 80},
		{Replica: 0, Node: "n1", GPUIndex: 1, MilliGPU: 500, MemoryMiB: 40},
		{Replica: 1, Node: "n2", GPUIndex: 0, MilliGPU: 1000, MemoryMiB: 80},
		{Replica: 1, Node: "n2", GPUIndex: 1, MilliGPU: 1000, MemoryMiB: 80},
		{Replica: 2, Node: "n1", GPUIndex: 1, MilliGPU: 500, MemoryMiB: 40},
		{Replica: 2, Node: "n1", GPUIndex: 2, MilliGPU: 1000, MemoryMiB: 80},
	}
	var n1, n2 core.NodeUsage
	for i, a := range as {
		if core.FirstOnNode(as, i) {
			map[core.NodeName]*core.NodeUsage{"n1": &n1, "n2": &n2}[a.Node].Add(a.Node, req, as)
		}
	}
	want1 := core.NodeUsage{GPUs: map[int]core.GPUUse{0: {1000, 80}, 1: {1000, 80}, 2: {1000, 80}}, MilliCPU: 8000, MemoryMiB: 2048}
	want2 := core.NodeUsage{GPUs: map[int]core.GPUUse{0: {1000, 80}, 1: {1000, 80}}, MilliCPU: 4000, MemoryMiB: 1024}
	if diff := cmp.Diff(want1, n1); diff != "" {
		t.Errorf("n1 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want2, n2); diff != "" {
		t.Errorf("n2 (-want +got):\n%s", diff)
	}
	if got := core.Nodes(as); !cmp.Equal(got, []core.NodeName{"n1", "n2"}) {
		t.Errorf("Nodes = %v, want [n1 n2]", got)
	}
}
