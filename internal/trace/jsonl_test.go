package trace

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

// sample is a trace as ReadJSONL returns it: made-up UUIDs, simulated GPUs,
// every node schedulable.
func sample() Trace {
	gpus := func(node string, models ...string) []core.GPU {
		var out []core.GPU
		for i, m := range models {
			out = append(out, core.GPU{Index: i, UUID: "GPU-" + node + "-" + string(rune('0'+i)), Model: m, MemoryMiB: 81920, Simulated: true})
		}
		return out
	}
	mixed := gpus("mixed", "H100", "A10")
	mixed[1].MemoryMiB, mixed[1].Domain = 24576, 1
	return Trace{
		Source: "test",
		Nodes: []core.Node{
			{Name: "big", MilliCPU: 96000, MemoryMiB: 786432, Schedulable: true, GPUs: gpus("big", "H100", "H100", "H100", "H100")},
			{Name: "mixed", Pool: "lab", Region: "eu", Labels: map[string]string{"rack": "r1"}, Schedulable: true, GPUs: mixed},
			{Name: "cpu", MilliCPU: 32000, Schedulable: true},
		},
		Teams: []Team{
			{Name: "research", Guaranteed: 2500, Limit: 4000, Weight: 2},
			{Name: "vision", Limit: core.Unlimited, Weight: 1},
		},
		Tasks: []Task{
			{Name: "frac", Team: "research", Submitted: 12500 * time.Millisecond, Runtime: 10 * time.Minute,
				Request: core.Request{MilliGPU: 250, MilliCPU: 4000, MemoryMiB: 8192}},
			{Name: "whole", Submitted: time.Hour, Runtime: time.Nanosecond, Priority: "production",
				Request: core.Request{MilliGPU: 2000, GPUModels: []string{"H100"}, Replicas: 2}},
			{Name: "by-memory", Team: "vision", Submitted: time.Hour, Runtime: 0, Request: core.Request{GPUMemoryMiB: 20480}},
			{Name: "never-ran", Submitted: 2 * time.Hour, Runtime: UnknownRuntime, Request: core.Request{MilliGPU: 1000}},
			{Name: "cpu-only", Submitted: 3 * time.Hour, Runtime: time.Second, Request: core.Request{MilliCPU: 1000}},
		},
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	want := sample()
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, want); err != nil {
		t.Fatal(err)
	}
	written := buf.String()
	got, err := ReadJSONL(strings.NewReader(written))
	if err != nil {
		t.Fatalf("reading what WriteJSONL wrote: %v\n%s", err, written)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	var again bytes.Buffer
	if err := WriteJSONL(&again, got); err != nil {
		t.Fatal(err)
	}
	if again.String() != written {
		t.Errorf("writing what was read gives other bytes:\n%s\nwant:\n%s", again.String(), written)
	}
	// The format as documented in docs/TRACE-FORMAT.md.
	for _, line := range []string{
		`{"kind":"header","format":"gpufleet-trace","version":1,"source":"test"}`,
		`{"kind":"node","name":"big","gpuCount":4,"gpuModel":"H100","gpuMemoryMiB":81920,"milliCPU":96000,"memoryMiB":786432}`,
		`{"kind":"node","name":"mixed","gpus":[{"model":"H100","memoryMiB":81920},{"model":"A10","memoryMiB":24576,"domain":1}],"pool":"lab","region":"eu","labels":{"rack":"r1"}}`,
		`{"kind":"team","name":"research","guaranteedGPUs":2.5,"limitGPUs":4,"weight":2}`,
		`{"kind":"team","name":"vision"}`,
		`{"kind":"task","name":"frac","team":"research","submitted":12.5,"runtimeSeconds":600,"gpus":0.25,"milliCPU":4000,"memoryMiB":8192}`,
		`{"kind":"task","name":"whole","submitted":3600,"runtimeSeconds":0.000000001,"gpus":2,"gpuModels":["H100"],"priority":"production","replicas":2}`,
		`{"kind":"task","name":"never-ran","submitted":7200,"gpus":1}`,
	} {
		if !strings.Contains(written, line+"\n") {
			t.Errorf("written trace lacks the line\n%s\nit is:\n%s", line, written)
		}
	}
}

func TestReadJSONLAcceptsHandWrittenTraces(t *testing.T) {
	in := `
{"kind":"node","name":"n1","gpus":[{"model":"T4"}]}

{"kind":"task","submitted":0,"runtimeSeconds":60,"gpus":0.5}
{"kind":"task","submitted":1.5,"runtimeSeconds":null,"gpus":1.000,"team":"a"}
`
	got, err := ReadJSONL(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Trace{
		Nodes: []core.Node{{Name: "n1", Schedulable: true, GPUs: []core.GPU{{UUID: "GPU-n1-0", Model: "T4", Simulated: true}}}},
		Tasks: []Task{
			{Runtime: time.Minute, Request: core.Request{MilliGPU: 500}},
			{Team: "a", Submitted: 1500 * time.Millisecond, Runtime: UnknownRuntime, Request: core.Request{MilliGPU: 1000}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestReadJSONLIsStrict(t *testing.T) {
	const node = `{"kind":"node","name":"n1","gpuCount":1,"gpuModel":"T4"}` + "\n"
	tests := []struct {
		name, in string
		want     string // in the error
	}{
		{"unknown field", node + `{"kind":"task","submitted":0,"gpus":1,"gpu":1}`, `line 2: unknown field "gpu"`},
		{"unknown kind", `{"kind":"pod","name":"x"}`, `line 1: field "kind": unknown kind "pod"`},
		{"no kind", `{"name":"x"}`, `line 1: field "kind" is missing`},
		{"not JSON", node + `{"kind":"team","name":"a"}` + "\n" + `{"kind":"task",`, `line 3: not a JSON object`},
		{"two values on a line", `{"kind":"team","name":"a"} {"kind":"team","name":"b"}`, `line 1: not a JSON object: invalid character '{' after top-level value`},
		{"wrong type", `{"kind":"task","submitted":0,"gpus":1,"milliCPU":"lots"}`, `line 1: field "milliCPU": a JSON string is not allowed`},
		{"GPUs as a string", `{"kind":"task","name":"t","submitted":0,"gpus":"2"}`, `line 1: task "t" field "gpus": "2" is a string`},
		{"one and a half GPUs", `{"kind":"task","name":"t","submitted":0,"gpus":1.5}`, `line 1: task "t" field "gpus": 1.5: above one GPU the count is whole`},
		{"too precise a fraction", `{"kind":"task","name":"t","submitted":0,"gpus":0.2505}`, `task "t" field "gpus": 0.2505 has more than 3 decimal places`},
		{"negative GPUs", `{"kind":"task","name":"t","submitted":0,"gpus":-1}`, `task "t" field "gpus": -1 is not a plain decimal`},
		{"exponent", `{"kind":"task","name":"t","submitted":1e3,"gpus":1}`, `task "t" field "submitted": 1e3 is not a plain decimal`},
		{"no submission time", `{"kind":"task","name":"t","gpus":1}`, `task "t" field "submitted": is missing`},
		{"negative runtime", `{"kind":"task","name":"t","submitted":0,"runtimeSeconds":-5,"gpus":1}`, `field "runtimeSeconds": -5 is not a plain decimal`},
		{"GPUs and GPU memory", `{"kind":"task","name":"t","submitted":0,"gpus":0.5,"gpuMemoryMiB":1024}`, `field "gpuMemoryMiB": give either gpus or gpuMemoryMiB`},
		{"node with both GPU forms", `{"kind":"node","name":"n","gpuCount":1,"gpuModel":"T4","gpus":[{"model":"T4"}]}`, `node "n" field "gpus": give either`},
		{"node count without model", `{"kind":"node","name":"n","gpuCount":2}`, `node "n" field "gpuModel": must be set`},
		{"node without name", `{"kind":"node","gpuCount":2,"gpuModel":"T4"}`, `line 1: node field "name": must not be empty`},
		{"node twice", node + node, `line 2: node field "name": node "n1" appears twice`},
		{"team limit below guarantee", `{"kind":"team","name":"a","guaranteedGPUs":4,"limitGPUs":2}`, `team "a" field "limitGPUs": 2 is below the guarantee 4`},
		{"team weight not whole", `{"kind":"team","name":"a","weight":1.5}`, `line 1: field "weight": a JSON number 1.5 is not allowed`},
		{"header after data", node + `{"kind":"header","format":"gpufleet-trace","version":1}`, `line 2: header: must be the first line`},
		{"newer version", `{"kind":"header","format":"gpufleet-trace","version":2}`, `line 1: header field "version": 2`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadJSONL(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.in)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFromPods(t *testing.T) {
	pods := []Pod{
		{Name: "ran-from-zero", Phase: "Running", Creation: 0, Scheduled: 0, Deletion: 100, Request: core.Request{MilliGPU: 1000}},
		{Name: "queued", Phase: "Succeeded", Creation: 10, Scheduled: 40, Deletion: 100, Request: core.Request{MilliGPU: 250}},
		{Name: "pending", Phase: "Pending", Creation: 10, Deletion: 500, Request: core.Request{MilliGPU: 1000}},
		{Name: "no-deletion", Phase: "Failed", Creation: 5, Request: core.Request{MilliGPU: 1000}},
		{Name: "cpu", Phase: "Running", Creation: 1, Scheduled: 1, Deletion: 2, Request: core.Request{MilliCPU: 1000}},
	}
	want := []Task{
		{Name: "ran-from-zero", Runtime: 100 * time.Second, Request: core.Request{MilliGPU: 1000}},
		{Name: "queued", Submitted: 10 * time.Second, Runtime: 60 * time.Second, Request: core.Request{MilliGPU: 250}},
		{Name: "pending", Submitted: 10 * time.Second, Runtime: UnknownRuntime, Request: core.Request{MilliGPU: 1000}},
		{Name: "no-deletion", Submitted: 5 * time.Second, Runtime: UnknownRuntime, Request: core.Request{MilliGPU: 1000}},
		{Name: "cpu", Submitted: time.Second, Runtime: time.Second, Request: core.Request{MilliCPU: 1000}},
	}
	if diff := cmp.Diff(want, FromPods(pods)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
