package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/plan"
	"github.com/gpufleet/gpufleet/internal/store"
)

// issueBrief is issue 18's check: 8B parameters, 32 layers, 8 KV heads of
// dimension 128, bf16, context 8192, concurrency 16.
const issueBrief = `{"kind":"WorkloadBrief","workload":"inference","precision":"bf16","contextLength":8192,"concurrency":16,` +
	`"model":{"parameters":8030000000,"layers":32,"kvHeads":8,"headDim":128,"hidden":4096}`

func putGPUNode(t *testing.T, st *store.Store, name, pool, model string, mib int64, gpus int) {
	t.Helper()
	node := core.Node{Name: core.NodeName(name), Pool: pool, Region: "eu-west", Schedulable: true}
	for i := range gpus {
		node.GPUs = append(node.GPUs, core.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", name, i), Model: model, MemoryMiB: mib})
	}
	if err := st.PutNode(context.Background(), node); err != nil {
		t.Fatal(err)
	}
}

// TestPlanRoute: POST /plan answers any caller with the advice on the
// store's fleet, priced from the ledger; a bad brief is a 400 naming the
// field.
func TestPlanRoute(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{}, func(o *Options) {
		o.Ledger = &ledger.Ledger{Store: o.Store, Currency: "USD", Since: fixtureStart,
			FilePrices: []api.Price{{Pool: "h100", Kind: api.PriceOnDemand, Rate: 2 * quantity.MoneyUnit}}}
	})
	putGPUNode(t, f.st, "h", "h100", "H100", 81920, 8)

	t.Run("the issue's brief on an H100 fleet: a fraction or one GPU, priced", func(t *testing.T) {
		var p api.Plan
		f.must("bob", "POST", "/api/v1/plan", issueBrief+`,"targets":{"throughputPerSecond":20}}`, http.StatusOK, &p)
		best := plan.Best(&p)
		if best == nil || (best.Scope != api.ScopeFraction && best.Scope != api.ScopeGPU) {
			t.Fatalf("best = %+v (verdict %q), want a fraction or one GPU", best, p.Verdict)
		}
		if p.Memory.KVCacheBytes != 2*32*8*128*2*8192*16 || p.Memory.WeightsBytes != 16_060_000_000 {
			t.Errorf("memory = %+v", p.Memory)
		}
		share, _ := quantity.ParseMilli(best.GPUs)
		if best.CostPerHour == nil || *best.CostPerHour != quantity.Money(share)*2*quantity.MoneyUnit/1000 || p.Currency != "USD" || best.ExpectedWait != "0s" {
			t.Errorf("best = %+v, currency %q; want 2 USD a GPU-hour for its share, free now", best, p.Currency)
		}
	})
	t.Run("a bad brief is a 400 naming the field", func(t *testing.T) {
		for body, field := range map[string]string{
			`{"workload":"inference","precision":"fp12","contextLength":8,"model":{"name":"llama-3-8b"}}`: "precision",
			`{"workload":"inference","contextLength":8,"model":{"parameters":20000000000000}}`:            "model.parameters",
			`{"workload":"inference","contextLength":8,"model":{"name":"gpt-9"}}`:                         "model.name",
			`{"workload":"serving","contextLength":8,"model":{"name":"llama-3-8b"}}`:                      "workload",
			`{"workload":"inference","contextLength":8,"model":{"name":"llama-3-8b"},"colour":"red"}`:     "colour",
			`{"workload":"inference","contextLength":"long","model":{"name":"llama-3-8b"}}`:               "contextLength",
		} {
			a := f.do("bob", "POST", "/api/v1/plan", body)
			if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"field":"`+field+`"`) {
				t.Errorf("%s: answer %d %s, want 400 naming %s", body, a.status, a.body, field)
			}
		}
	})
	t.Run("no token is a 401", func(t *testing.T) {
		if a := f.do("", "POST", "/api/v1/plan", issueBrief+`}`); a.status != http.StatusUnauthorized {
			t.Errorf("answer %d %s, want 401", a.status, a.body)
		}
	})
}

// TestPlanRouteA10: on a fleet of A10-24GB, the issue's brief needs more
// than one GPU.
func TestPlanRouteA10(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	putGPUNode(t, f.st, "a", "a10", "NVIDIA A10", 24576, 4)
	a := f.do("member", "POST", "/api/v1/plan", issueBrief+`}`)
	var p api.Plan
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.status != http.StatusOK {
		t.Fatalf("answer %d %s", a.status, a.body)
	}
	best := plan.Best(&p)
	if best == nil || best.Scope != api.ScopeNode || best.GPUs != "2" || !strings.Contains(p.Verdict, "needs more than one GPU") {
		t.Errorf("best %+v, verdict %q; want 2 A10 on one node and more than one GPU said", best, p.Verdict)
	}
	for _, c := range p.Candidates {
		if c.CostPerHour != nil {
			t.Errorf("a server without a ledger priced %+v", c)
		}
	}
}
