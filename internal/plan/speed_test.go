package plan

import (
	"math"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

func TestBandwidthOfGPUModels(t *testing.T) {
	for _, tc := range []struct {
		model string
		mib   int64
		want  float64
	}{
		{"NVIDIA H100 80GB HBM3", 81559, 3350},
		{"H100", 81920, 3350},
		{"NVIDIA H100 PCIe", 81559, 2000},
		{"NVIDIA H100 NVL", 95830, 3900},
		{"NVIDIA H200", 143771, 4800},
		{"NVIDIA A100-SXM4-80GB", 81920, 2039},
		{"NVIDIA A100-SXM4-40GB", 40960, 1555},
		{"NVIDIA A100 80GB PCIe", 81920, 1935},
		{"NVIDIA L40S", 46068, 864},
		{"NVIDIA L4", 23034, 300},
		{"NVIDIA A10G", 23028, 600},
		{"Tesla T4", 15360, 320},
	} {
		got, ok := Bandwidth(tc.model, tc.mib)
		if !ok || got.GBps != tc.want || got.Source == "" {
			t.Errorf("%s (%d MiB): %+v, %v; want %v GB/s with a source", tc.model, tc.mib, got, ok, tc.want)
		}
	}
	for _, unknown := range []string{"Radeon 7900", "", "L4000"} {
		if got, ok := Bandwidth(unknown, 1<<14); ok {
			t.Errorf("%q: %+v, want no figure", unknown, got)
		}
	}
}

// servingBrief is llama-3-8b in bf16, a 4096-token context, one
// sequence.
func servingBrief() api.WorkloadBrief {
	return api.WorkloadBrief{Workload: api.BriefInference, Model: api.ModelSpec{Name: "llama-3-8b"}, ContextLength: 4096, Concurrency: 1}
}

// A decode step reads the weights and the KV cache over the bandwidth:
// about 4.95 ms a token for llama-3-8b on one H100 SXM, 202 tokens/s; a
// quarter of the GPU has a quarter of its bandwidth.
func TestSpeedIsBytesOverBandwidth(t *testing.T) {
	b := mustResolve(t, servingBrief())
	est := Memory(b)
	s := Speed(b, est, "H100", 81920, 1000)
	bytes := float64(est.WeightsBytes + est.KVCacheBytes)
	if s == nil || s.BytesPerStep != int64(bytes) || math.Abs(s.InterTokenLatencyMs-bytes/3350e9*1000) > 1e-9 || s.Reachable != nil {
		t.Fatalf("speed %+v, want %v bytes a step over 3350 GB/s, no target judged", s, bytes)
	}
	if s.InterTokenLatencyMs < 4.8 || s.InterTokenLatencyMs > 5.1 || s.DecodeTokensPerSecond < 195 || s.DecodeTokensPerSecond > 210 {
		t.Errorf("llama-3-8b on an H100: %.2f ms a token, %.0f tokens/s; want about 4.95 and 202", s.InterTokenLatencyMs, s.DecodeTokensPerSecond)
	}
	if !strings.Contains(s.Estimate, "estimate") || !strings.Contains(s.Estimate, "load stage") || !strings.Contains(s.BandwidthSource, "datasheet") {
		t.Errorf("not labelled an estimate with its source: %+v", s)
	}
	if q := Speed(b, est, "H100", 81920, 250); math.Abs(q.DecodeTokensPerSecond-s.DecodeTokensPerSecond/4) > 1e-6 {
		t.Errorf("a quarter GPU: %.1f tokens/s, want a quarter of %.1f", q.DecodeTokensPerSecond, s.DecodeTokensPerSecond)
	}
	// A mixture of experts reads its active weights only.
	mb := mustResolve(t, api.WorkloadBrief{Workload: api.BriefInference, Model: api.ModelSpec{Name: "mixtral-8x7b"}, ContextLength: 4096})
	me := Memory(mb)
	if ms := Speed(mb, me, "H100", 81920, 2000); ms.BytesPerStep >= me.WeightsBytes {
		t.Errorf("mixtral reads %d bytes a step, not less than all its weights (%d)", ms.BytesPerStep, me.WeightsBytes)
	}
	if Speed(mustResolve(t, api.WorkloadBrief{Workload: api.BriefTraining, Model: api.ModelSpec{Name: "llama-3-8b"}, ContextLength: 4096}), est, "H100", 81920, 1000) != nil {
		t.Error("a training brief has a serving speed")
	}
	if u := Speed(b, est, "Radeon 7900", 24576, 1000); u == nil || u.Reachable != nil || !strings.Contains(u.Why, "no memory bandwidth figure") {
		t.Errorf("an unknown GPU: %+v", u)
	}
}

// Targets the speed can judge: a p95 latency with outputTokens, output
// tokens a second, requests a second with outputTokens; others say why
// they are not judged.
func TestSpeedJudgesTargets(t *testing.T) {
	b := servingBrief()
	b.OutputTokens = 256
	b.Targets = api.BriefTargets{P95LatencyMs: 2000, ThroughputPerSecond: 150, Unit: "tokens"}
	rb := mustResolve(t, b)
	s := Speed(rb, Memory(rb), "H100", 81920, 1000)
	if s.Reachable == nil || !*s.Reachable || s.LatencyMs == nil || *s.LatencyMs > 2000 || !strings.Contains(s.Why, "against p95LatencyMs 2000: looks reachable") {
		t.Errorf("reachable targets: %+v (%s)", s, s.Why)
	}
	b.Targets = api.BriefTargets{P95LatencyMs: 500}
	rb = mustResolve(t, b)
	if s := Speed(rb, Memory(rb), "H100", 81920, 1000); s.Reachable == nil || *s.Reachable || !strings.Contains(s.Why, "looks out of reach") {
		t.Errorf("256 tokens in 500 ms: %+v", s)
	}
	b.Targets = api.BriefTargets{ThroughputPerSecond: 2, Unit: "request"}
	rb = mustResolve(t, b)
	if s := Speed(rb, Memory(rb), "H100", 81920, 1000); s.Reachable == nil || *s.Reachable || s.RequestsPerSecond == nil || *s.RequestsPerSecond > 1 {
		t.Errorf("2 requests/s of 256 tokens from one sequence: %+v", s)
	}
	b.OutputTokens = 0
	b.Targets = api.BriefTargets{P95LatencyMs: 500, ThroughputPerSecond: 3, Unit: "images"}
	rb = mustResolve(t, b)
	if s := Speed(rb, Memory(rb), "H100", 81920, 1000); s.Reachable != nil || !strings.Contains(s.Why, "give outputTokens") || !strings.Contains(s.Why, "in images is not estimated") {
		t.Errorf("targets it cannot judge: %+v", s)
	}
}

// A target the smallest allocation that fits cannot reach moves the
// advice to one that can, and the verdict says so; without targets the
// advice is what memory says.
func TestTargetsChangeTheAdvice(t *testing.T) {
	f := Fleet{Nodes: fleet("local", "eu-west", "H100", 81920, 1, 8)}
	b := servingBrief()
	p, err := Advise(b, f, now)
	if err != nil {
		t.Fatal(err)
	}
	if best := Best(&p); best == nil || best.Scope != api.ScopeFraction || best.Speed == nil || best.Speed.Reachable != nil {
		t.Fatalf("no target: best %+v", best)
	}
	b.Targets = api.BriefTargets{ThroughputPerSecond: 500, Unit: "tokens"}
	p, err = Advise(b, f, now)
	if err != nil {
		t.Fatal(err)
	}
	best := Best(&p)
	if best == nil || best.Scope != api.ScopeNode || best.GPUs != "4" || best.Speed.Reachable == nil || !*best.Speed.Reachable {
		t.Fatalf("500 tokens/s of one sequence: best %+v (%s), want 4 GPUs of one node", best, p.Verdict)
	}
	for _, want := range []string{"ask for 4 × H100", "the targets look reachable there", "smaller allocations fit but look too slow"} {
		if !strings.Contains(p.Verdict, want) {
			t.Errorf("verdict %q, want it to say %q", p.Verdict, want)
		}
	}
	if first := p.Candidates[0]; !first.Fits || !tooSlow(first.Speed) {
		t.Errorf("the fraction still listed, fitting but too slow: %+v", first)
	}
	b.Targets = api.BriefTargets{ThroughputPerSecond: 1e6, Unit: "tokens"}
	p, _ = Advise(b, f, now)
	if best := Best(&p); best == nil || !strings.Contains(p.Verdict, "out of reach on every candidate that fits") {
		t.Errorf("an unreachable target: best %+v, verdict %q", best, p.Verdict)
	}
}
