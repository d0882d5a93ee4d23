package plan

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// fleet builds nodes of n identical GPUs in one NVLink domain, all free.
func fleet(pool, region, model string, mib int64, nodes, gpus int) []Node {
	var out []Node
	for i := range nodes {
		n := Node{Name: pool + "-" + string(rune('a'+i)), Pool: pool, Region: region, Schedulable: true}
		for range gpus {
			n.GPUs = append(n.GPUs, GPU{Model: model, MemoryMiB: mib, Healthy: true, FreeMilli: 1000})
		}
		out = append(out, n)
	}
	return out
}

// brief8B is the inference brief of an 8B, 32-layer model with 8 KV heads
// of dimension 128, bf16, context 8192, concurrency 16.
func brief8B() api.WorkloadBrief {
	return api.WorkloadBrief{Workload: api.BriefInference, Precision: api.PrecisionBF16, ContextLength: 8192, Concurrency: 16,
		Model: api.ModelSpec{Parameters: 8_030_000_000, Layers: 32, KVHeads: 8, HeadDim: 128, Hidden: 4096}}
}

func within(got, want int64, pct float64) bool {
	return math.Abs(float64(got-want)) <= pct/100*float64(want)
}

// TestPlanSizesAn8BModel: the memory of brief8B's model, and the scope
// and verdict of its plan on H100 and A10 fleets.
func TestPlanSizesAn8BModel(t *testing.T) {
	est := Memory(mustResolve(t, brief8B()))
	if !within(est.WeightsBytes, 16_060_000_000, 10) {
		t.Errorf("weights = %d bytes, want about 16.06 GB", est.WeightsBytes)
	}
	if want := int64(2 * 32 * 8 * 128 * 2 * 8192 * 16); !within(est.KVCacheBytes, want, 10) {
		t.Errorf("kv cache = %d bytes, want %d (2×32×8×128×2×8192×16)", est.KVCacheBytes, want)
	}
	tests := []struct {
		name       string
		nodes      []Node
		wantScopes []string
		wantVerd   string
	}{
		{"an H100-80GB fleet gives a fraction or one GPU", fleet("local", "eu-west", "H100", 81920, 2, 8),
			[]string{api.ScopeFraction, api.ScopeGPU}, "fits"},
		{"an A10-24GB fleet of 4-GPU nodes needs more than one GPU", fleet("a10", "eu-west", "A10", 24576, 2, 4),
			[]string{api.ScopeNode}, "needs more than one GPU"},
		{"an A10-24GB fleet of 1-GPU nodes needs several nodes", fleet("a10", "eu-west", "A10", 24576, 3, 1),
			[]string{api.ScopeNodes}, "needs more than one GPU"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Advise(brief8B(), Fleet{Nodes: tc.nodes}, now)
			if err != nil {
				t.Fatal(err)
			}
			best := Best(&p)
			if best == nil {
				t.Fatalf("no candidate fits: %s\n%+v", p.Verdict, p.Candidates)
			}
			if !contains(tc.wantScopes, best.Scope) {
				t.Errorf("best scope = %s (gpus %s), want one of %v", best.Scope, best.GPUs, tc.wantScopes)
			}
			if !strings.Contains(p.Verdict, tc.wantVerd) {
				t.Errorf("verdict = %q, want it to say %q", p.Verdict, tc.wantVerd)
			}
			if best.ExpectedWait != "0s" {
				t.Errorf("expectedWait = %q on an idle fleet, want 0s", best.ExpectedWait)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func mustResolve(t *testing.T, b api.WorkloadBrief) api.WorkloadBrief {
	t.Helper()
	r, err := Resolve(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPlanBadBriefsNameTheField(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*api.WorkloadBrief)
		field string
	}{
		{"unknown precision", func(b *api.WorkloadBrief) { b.Precision = "fp12" }, "precision"},
		{"unknown workload kind", func(b *api.WorkloadBrief) { b.Workload = "serving" }, "workload"},
		{"unknown kind", func(b *api.WorkloadBrief) { b.Kind = "Workload" }, "kind"},
		{"absurd parameter count", func(b *api.WorkloadBrief) { b.Model.Parameters = 20_000_000_000_000 }, "model.parameters"},
		{"negative parameter count", func(b *api.WorkloadBrief) { b.Model.Parameters = -1 }, "model.parameters"},
		{"negative layers", func(b *api.WorkloadBrief) { b.Model.Layers = -32 }, "model.layers"},
		{"no context length", func(b *api.WorkloadBrief) { b.ContextLength = 0 }, "contextLength"},
		{"an unknown catalogue name", func(b *api.WorkloadBrief) { b.Model = api.ModelSpec{Name: "gpt-9"} }, "model.name"},
		{"no model at all", func(b *api.WorkloadBrief) { b.Model = api.ModelSpec{} }, "model"},
		{"serving without the KV shape", func(b *api.WorkloadBrief) { b.Model = api.ModelSpec{Parameters: 7e9} }, "model.layers"},
		{"training without the hidden size", func(b *api.WorkloadBrief) {
			b.Workload, b.Concurrency, b.Model = api.BriefTraining, 0, api.ModelSpec{Parameters: 7e9, Layers: 32}
		}, "model.hidden"},
		{"training takes batch, not concurrency", func(b *api.WorkloadBrief) { b.Workload = api.BriefFinetune }, "concurrency"},
		{"training in int4", func(b *api.WorkloadBrief) {
			b.Workload, b.Concurrency, b.Precision = api.BriefTraining, 0, api.PrecisionINT4
		}, "precision"},
		{"a bad region", func(b *api.WorkloadBrief) { b.Residency = []string{"eu west"} }, "residency[0]"},
		{"a bad duration", func(b *api.WorkloadBrief) { b.ExpectedDuration = "soon" }, "expectedDuration"},
		{"a negative throughput", func(b *api.WorkloadBrief) { b.Targets.ThroughputPerSecond = -1 }, "targets.throughputPerSecond"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := brief8B()
			tc.edit(&b)
			_, err := Advise(b, Fleet{}, now)
			fe, ok := err.(api.FieldErrors)
			if !ok {
				t.Fatalf("err = %v, want api.FieldErrors", err)
			}
			for _, f := range fe {
				if f.Field == tc.field {
					return
				}
			}
			t.Errorf("errors %v name no field %q", fe, tc.field)
		})
	}
}

func TestPlanMemoryTerms(t *testing.T) {
	const p = 8_030_000_000
	tests := []struct {
		name                     string
		workload, precision      string
		weights, kv, gradsAndOpt int64
	}{
		{"bf16 serving: 2 bytes a parameter, a KV cache, no optimizer", api.BriefInference, "bf16", p * 2, 2 * 32 * 8 * 128 * 2 * 4096 * 1, 0},
		{"int4 serving keeps a 16-bit cache", api.BriefInference, "int4", p / 2, 2 * 32 * 8 * 128 * 2 * 4096 * 1, 0},
		{"fp8 serving has a 1-byte cache", api.BriefInference, "fp8", p, 2 * 32 * 8 * 128 * 1 * 4096 * 1, 0},
		{"full fine-tune in bf16: 16 bytes a parameter of gradients and AdamW", api.BriefFinetune, "bf16", p * 2, 0, p * 16},
		{"full training in fp32: 12 bytes a parameter of gradients and AdamW", api.BriefTraining, "fp32", p * 4, 0, p * 12},
		{"LoRA: the base frozen, 1% adapters trained", api.BriefFinetuneLoRA, "bf16", p*2 + p/100*2, 0, p / 100 * 16},
		{"QLoRA: a 4.127-bit base", api.BriefFinetuneQLoRA, "bf16", (p*4127+7999)/8000 + p/100*2, 0, p / 100 * 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := api.WorkloadBrief{Workload: tc.workload, Precision: tc.precision, ContextLength: 4096, Model: api.ModelSpec{Name: "llama-3-8b"}}
			est := Memory(mustResolve(t, b))
			if est.WeightsBytes != tc.weights || est.KVCacheBytes != tc.kv || est.OptimizerBytes != tc.gradsAndOpt {
				t.Errorf("weights, kv, optimizer = %d, %d, %d; want %d, %d, %d\n%+v", est.WeightsBytes, est.KVCacheBytes, est.OptimizerBytes,
					tc.weights, tc.kv, tc.gradsAndOpt, est.Lines)
			}
			for _, l := range est.Lines {
				if l.Formula == "" {
					t.Errorf("line %s has no formula", l.Name)
				}
			}
		})
	}
}

func TestPlanFleetAnswers(t *testing.T) {
	h100 := fleet("local", "eu-west", "H100", 81920, 1, 8)
	busy := fleet("local", "eu-west", "H100", 81920, 1, 8)
	for i := range busy[0].GPUs {
		busy[0].GPUs[i].FreeMilli = 0
	}
	cordoned := fleet("local", "eu-west", "H100", 81920, 1, 8)
	cordoned[0].Schedulable = false
	usd := func(s string) quantity.Money { m, _ := quantity.ParseMoney(s); return m }
	priced := map[string]*big.Rat{"local": big.NewRat(int64(usd("2.50")), 1)}

	big := api.WorkloadBrief{Workload: api.BriefTraining, Precision: "fp32", ContextLength: 4096, Batch: 8, Model: api.ModelSpec{Name: "llama-3-70b"}}
	t.Run("nothing fits: says what would", func(t *testing.T) {
		p, err := Advise(big, Fleet{Nodes: fleet("a10", "eu-west", "A10", 24576, 1, 4)}, now)
		if err != nil {
			t.Fatal(err)
		}
		if Best(&p) != nil || !strings.Contains(p.Verdict, "nothing in the fleet fits") || !strings.Contains(p.Needs, "nodes of 8 × 24 GiB") {
			t.Errorf("verdict %q, needs %q; want nothing fits and nodes of 8 × 24 GiB", p.Verdict, p.Needs)
		}
	})
	t.Run("needs two GPUs of the fleet's largest", func(t *testing.T) {
		b := brief8B()
		b.Concurrency = 64
		p, err := Advise(b, Fleet{Nodes: fleet("a", "eu-west", "H100", 81920, 1, 1)}, now)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p.Needs, "at least 2 × 80 GiB in one NVLink domain") {
			t.Errorf("needs = %q, want at least 2 × 80 GiB in one NVLink domain", p.Needs)
		}
	})
	t.Run("residency leaves the other regions out", func(t *testing.T) {
		b := brief8B()
		b.Residency = []string{"us-east"}
		p, _ := Advise(b, Fleet{Nodes: h100}, now)
		if len(p.Candidates) != 0 || !strings.Contains(p.Verdict, "residency") {
			t.Errorf("candidates %d, verdict %q; want none and the residency named", len(p.Candidates), p.Verdict)
		}
	})
	t.Run("busy capacity fits but the wait is unknown", func(t *testing.T) {
		p, _ := Advise(brief8B(), Fleet{Nodes: busy, Pending: 3}, now)
		best := Best(&p)
		if best == nil || best.ExpectedWait != "unknown" || !strings.Contains(best.Why, "3 workloads wait") {
			t.Errorf("best = %+v, want it to fit with an unknown wait and say why", best)
		}
	})
	t.Run("a node being qualified is capacity, not free now", func(t *testing.T) {
		q := fleet("local", "eu-west", "H100", 81920, 1, 8)
		q[0].Schedulable, q[0].Qualifying = false, true
		p, _ := Advise(brief8B(), Fleet{Nodes: q}, now)
		best := Best(&p)
		if best == nil || best.ExpectedWait != "unknown" || !strings.Contains(best.Why, "1 nodes of it are being qualified") {
			t.Errorf("best = %+v, want it to fit, busy, qualifying said", best)
		}
	})
	t.Run("a cordoned node is not capacity", func(t *testing.T) {
		p, _ := Advise(brief8B(), Fleet{Nodes: cordoned}, now)
		if Best(&p) != nil {
			t.Errorf("a cordoned node gave %+v", Best(&p))
		}
	})
	t.Run("cost per hour and per request from the pool's rate", func(t *testing.T) {
		b := brief8B()
		b.Targets.ThroughputPerSecond = 10
		p, _ := Advise(b, Fleet{Nodes: h100, Prices: priced}, now)
		best := Best(&p)
		if best == nil || best.GPUs != "0.5" {
			t.Fatalf("best = %+v, want 0.5 of an H100", best)
		}
		// 0.5 × 2.50 = 1.25 an hour; 36000 requests an hour: 0.0000347.
		if *best.CostPerHour != usd("1.25") || *best.CostPerUnit != usd("0.000035") || best.Unit != "request" {
			t.Errorf("cost %s an hour, %s a %s; want 1.25 and 0.000035 a request", best.CostPerHour, best.CostPerUnit, best.Unit)
		}
	})
	t.Run("cost of the run over the expected duration", func(t *testing.T) {
		b := brief8B()
		b.ExpectedDuration = "8h"
		p, _ := Advise(b, Fleet{Nodes: h100, Prices: priced}, now)
		if best := Best(&p); best == nil || *best.CostPerUnit != usd("10") || best.Unit != "run" {
			t.Errorf("best = %+v, want 10 for the run", best)
		}
	})
	t.Run("a duration that ends after the deadline is said", func(t *testing.T) {
		b := brief8B()
		dl := now.Add(4 * time.Hour)
		b.ExpectedDuration, b.Targets.Deadline = "8h", &dl
		p, _ := Advise(b, Fleet{Nodes: h100}, now)
		if !strings.Contains(p.Verdict, "ends after the deadline") {
			t.Errorf("verdict = %q, want it to say the run ends after the deadline", p.Verdict)
		}
	})
	t.Run("no price: no cost, still a candidate", func(t *testing.T) {
		p, _ := Advise(brief8B(), Fleet{Nodes: h100}, now)
		if best := Best(&p); best == nil || best.CostPerHour != nil {
			t.Errorf("best = %+v, want a candidate without a cost", best)
		}
	})
	t.Run("a catalogue name fills the shape", func(t *testing.T) {
		b := api.WorkloadBrief{Workload: api.BriefInference, ContextLength: 8192, Model: api.ModelSpec{Name: "Gemma-2-9B"}}
		p, err := Advise(b, Fleet{Nodes: h100}, now)
		if err != nil {
			t.Fatal(err)
		}
		if m := p.Brief.Model; m.Name != "gemma-2-9b" || m.HeadDim != 256 || m.Layers != 42 || p.Brief.Precision != "bf16" || p.Brief.Concurrency != 1 {
			t.Errorf("resolved brief = %+v", p.Brief)
		}
	})
}
