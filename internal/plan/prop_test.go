package plan

import (
	"fmt"
	"math/big"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// Property tests run with rapid under a fresh random seed every run; rapid
// prints it with a failure ("-rapid.seed=N"). No test sets a seed itself.

// genBrief draws a valid brief: a catalogue model or a shape, any
// workload kind and a precision it accepts, sizes up to the bounds.
func genBrief(t *rapid.T) api.WorkloadBrief {
	b := api.WorkloadBrief{Workload: rapid.SampledFrom(api.BriefWorkloads).Draw(t, "workload")}
	precisions := api.Precisions
	switch {
	case b.Workload == api.BriefFinetuneQLoRA:
		precisions = []string{"", api.PrecisionFP32, api.PrecisionBF16, api.PrecisionFP16}
	case Trains(b.Workload):
		precisions = []string{"", api.PrecisionFP32, api.PrecisionBF16, api.PrecisionFP16, api.PrecisionFP8}
	}
	b.Precision = rapid.SampledFrom(precisions).Draw(t, "precision")
	if rapid.Bool().Draw(t, "catalogue") {
		b.Model.Name = rapid.SampledFrom(Catalogue()).Draw(t, "model").Name
	} else {
		big := rapid.Bool().Draw(t, "huge")
		top := func(small, max int64) int64 {
			if big {
				return max
			}
			return small
		}
		b.Model = api.ModelSpec{
			Parameters: rapid.Int64Range(1, top(200_000_000_000, MaxParameters)).Draw(t, "parameters"),
			Layers:     rapid.Int64Range(1, top(128, MaxLayers)).Draw(t, "layers"),
			KVHeads:    rapid.Int64Range(1, top(64, MaxKVHeads)).Draw(t, "kvHeads"),
			HeadDim:    rapid.Int64Range(1, top(256, MaxHeadDim)).Draw(t, "headDim"),
			Hidden:     rapid.Int64Range(1, top(16384, MaxHidden)).Draw(t, "hidden"),
		}
	}
	b.ContextLength = rapid.Int64Range(1, 131072).Draw(t, "contextLength")
	n := rapid.Int64Range(0, 256).Draw(t, "sequences")
	if Trains(b.Workload) || rapid.Bool().Draw(t, "batch") {
		b.Batch = n
	} else {
		b.Concurrency = n
	}
	if rapid.Bool().Draw(t, "throughput") {
		b.Targets.ThroughputPerSecond = float64(rapid.IntRange(1, 10000).Draw(t, "tps"))
	}
	return b
}

// genFleet draws pools of nodes with GPUs of a few kinds, some busy, some
// unhealthy, some nodes cordoned, some priced.
func genFleet(t *rapid.T) Fleet {
	f := Fleet{Prices: map[string]*big.Rat{}, Pending: rapid.IntRange(0, 5).Draw(t, "pending")}
	kinds := []GPU{{Model: "A10", MemoryMiB: 24576}, {Model: "L40S", MemoryMiB: 46068}, {Model: "H100", MemoryMiB: 81920}, {Model: "B200", MemoryMiB: 183359}}
	for p := range rapid.IntRange(0, 3).Draw(t, "pools") {
		pool := fmt.Sprintf("p%d", p)
		if rapid.Bool().Draw(t, "priced") {
			f.Prices[pool] = big.NewRat(rapid.Int64Range(0, 20_000_000).Draw(t, "rate"), 1)
		}
		kind := rapid.SampledFrom(kinds).Draw(t, "kind")
		for i := range rapid.IntRange(0, 4).Draw(t, "nodes") {
			n := Node{Name: fmt.Sprintf("%s-%d", pool, i), Pool: pool, Region: rapid.SampledFrom([]string{"eu-west", "us-east"}).Draw(t, "region"),
				Schedulable: rapid.Float64Range(0, 1).Draw(t, "schedulable") < 0.9}
			for range rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "gpus") {
				g := kind
				g.Healthy = rapid.Float64Range(0, 1).Draw(t, "healthy") < 0.95
				g.FreeMilli = rapid.SampledFrom([]int64{0, 250, 500, 1000}).Draw(t, "free")
				g.Domain = rapid.IntRange(0, 1).Draw(t, "domain")
				n.GPUs = append(n.GPUs, g)
			}
			f.Nodes = append(f.Nodes, n)
		}
	}
	return f
}

func TestPlanProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genBrief(t)
		f := genFleet(t)
		if rapid.Bool().Draw(t, "residency") {
			b.Residency = []string{"eu-west"}
		}
		p, err := Advise(b, f, now)
		if err != nil {
			t.Fatalf("a valid brief was refused: %v (%+v)", err, b)
		}
		m := p.Memory

		// The total is the sum of the lines, and of the terms.
		var sum int64
		for _, l := range m.Lines {
			if l.Bytes < 0 || l.Formula == "" {
				t.Fatalf("line %+v: negative or without a formula", l)
			}
			sum += l.Bytes
		}
		if sum != m.TotalBytes {
			t.Fatalf("total %d, lines sum to %d", m.TotalBytes, sum)
		}
		if terms := m.WeightsBytes + m.KVCacheBytes + m.ActivationsBytes + m.OptimizerBytes + m.OverheadBytes; terms != m.TotalBytes {
			t.Fatalf("total %d, terms sum to %d", m.TotalBytes, terms)
		}

		// Candidates are least exclusive first: scopes in order, then
		// fewer GPUs.
		if !slices.IsSortedFunc(p.Candidates, Less) {
			t.Fatalf("candidates not in order: %+v", p.Candidates)
		}
		for i := 1; i < len(p.Candidates); i++ {
			a, c := p.Candidates[i-1], p.Candidates[i]
			if scopeRank(a.Scope) > scopeRank(c.Scope) || (a.Scope == c.Scope && TotalMilli(a) > TotalMilli(c)) {
				t.Fatalf("candidate %d (%s %s) is more exclusive than %d (%s %s)", i-1, a.Scope, a.GPUs, i, c.Scope, c.GPUs)
			}
		}

		// A candidate that fits holds the estimate within its headroom,
		// in a region of the residency, and its gpus is what submit takes.
		for _, c := range p.Candidates {
			q, err := quantity.ParseMilli(c.GPUs)
			if err != nil || q <= 0 || (q < 1000 && c.Scope != api.ScopeFraction) || (q > 1000 && q%1000 != 0) {
				t.Fatalf("gpus %q of a %s candidate is not a request", c.GPUs, c.Scope)
			}
			if len(b.Residency) > 0 && c.Region != "eu-west" {
				t.Fatalf("candidate in %s outside the residency", c.Region)
			}
			if !c.Fits {
				continue
			}
			n := TotalMilli(c) / 1000
			given := (c.GPUMemoryMiB << 20) * int64(q) / 1000
			if n == 0 {
				n = 1
			} else {
				given = c.GPUMemoryMiB << 20
			}
			if need := perGPU(m, n); need*10 > given*9 {
				t.Fatalf("%+v fits, but needs %d bytes a GPU of %d given", c, need, given)
			}
		}
		if p.Verdict == "" || p.Needs == "" {
			t.Fatalf("verdict %q, needs %q", p.Verdict, p.Needs)
		}
	})
}
