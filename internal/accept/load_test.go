package accept

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

func metricsByName(ms []api.Metric) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ms {
		out[m.Name] = m.Value
	}
	return out
}

// One step: its metrics are the stage's, rates over the measured window,
// latencies over the answered requests only.
func TestLoadResultsOneStep(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ok := func(i int) LoadRequest {
		return LoadRequest{Start: t0.Add(time.Duration(i) * time.Second), LatencyMs: float64(200 + i), TTFTMs: float64(100 + i), ITLMs: []float64{10, 10}, OutputTokens: 3}
	}
	step := LoadStepRecord{Concurrency: 4, Start: t0, End: t0.Add(10 * time.Second),
		Requests: []LoadRequest{ok(0), ok(1), ok(2), {Start: t0, LatencyMs: 5, TTFTMs: math.NaN(), Err: "HTTP 503"}}}
	stage, steps, samples := LoadResults([]LoadStepRecord{step})
	got := metricsByName(stage)
	for name, want := range map[string]float64{
		"requests_total": 4, "error_rate": 0.25, "requests_per_second": 0.3, "output_tokens_per_second": 0.9,
		"p50_latency_ms": 201, "p95_latency_ms": 202, "count_latency_ms": 3, "p50_ttft_ms": 101, "mean_ttft_ms": 101,
		"count_itl_ms": 6, "p95_itl_ms": 10, "p50_tpot_ms": 50,
	} {
		if v, ok := got[name]; !ok || math.Abs(v-want) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if len(steps) != 1 || steps[0].Concurrency != 4 || !cmp.Equal(steps[0].Metrics, stage) {
		t.Errorf("steps %+v", steps)
	}
	if len(samples) != 6 || samples[0].Name != MetricLatency || samples[3].Name != MetricTTFT {
		t.Errorf("samples %+v, want 3 latency and 3 ttft (the failed request left out)", samples)
	}
}

// Several steps: the stage's figures are of every request together, the
// rates over the steps' windows added up, and each step's figures are
// there too, prefixed with its concurrency.
func TestLoadResultsSteps(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	req := func(lat float64) LoadRequest {
		return LoadRequest{Start: t0, LatencyMs: lat, TTFTMs: math.NaN(), OutputTokens: 1}
	}
	steps := []LoadStepRecord{
		{Concurrency: 1, Start: t0, End: t0.Add(2 * time.Second), Requests: []LoadRequest{req(10), req(20)}},
		{Concurrency: 8, Start: t0.Add(time.Minute), End: t0.Add(time.Minute + 2*time.Second), Requests: []LoadRequest{req(30), req(40), req(50), req(60)}},
	}
	stage, per, _ := LoadResults(steps)
	got := metricsByName(stage)
	for name, want := range map[string]float64{
		"requests_total": 6, "requests_per_second": 1.5, "p50_latency_ms": 30, "c1.requests_total": 2, "c1.p50_latency_ms": 10,
		"c8.requests_total": 4, "c8.requests_per_second": 2, "c8.p95_latency_ms": 60,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if _, ok := got["p50_ttft_ms"]; ok {
		t.Error("no request streamed, yet a TTFT is reported")
	}
	if len(per) != 2 || per[1].Concurrency != 8 || metricsByName(per[1].Metrics)["requests_total"] != 4 {
		t.Errorf("per step %+v", per)
	}
	if stage, _, _ := LoadResults([]LoadStepRecord{{Concurrency: 2, Start: t0, End: t0}}); len(stage) != 1 || stage[0].Value != 0 {
		t.Errorf("a step that measured nothing: %+v, want requests_total 0 alone", stage)
	}
}

// The charts keep at most maxChartSamples a series, the first and last
// among them, in time order.
func TestChartSamplesAreBounded(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var reqs []LoadRequest
	for i := 5000; i > 0; i-- {
		reqs = append(reqs, LoadRequest{Start: t0.Add(time.Duration(i) * time.Millisecond), LatencyMs: float64(i), TTFTMs: math.NaN()})
	}
	_, _, samples := LoadResults([]LoadStepRecord{{Concurrency: 1, Start: t0, End: t0.Add(6 * time.Second), Requests: reqs}})
	if len(samples) != maxChartSamples || samples[0].Value != 1 || samples[len(samples)-1].Value != 5000 {
		t.Errorf("%d samples from %v to %v", len(samples), samples[0].Value, samples[len(samples)-1].Value)
	}
}

func TestFailureProblem(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	later := at.Add(3 * time.Second)
	for _, tc := range []struct {
		name string
		w    Disrupted
		want string
	}{
		{"disrupted and recovered", Disrupted{Workload: "wl-1", DisruptedAt: &at, RecoveredAt: &later}, ""},
		{"ended before the disruption", Disrupted{Workload: "wl-1", Phase: "Succeeded", Ran: 3 * time.Second, DisruptAfter: 10 * time.Second},
			"workload wl-1 ended (Succeeded) after running 3s, before it was disrupted (the stage disrupts it once it has run 10s, disruptAfterSeconds): nothing was tested"},
		{"never ran again", Disrupted{Workload: "wl-1", Phase: "Failed", DisruptedAt: &at}, "never ran again: it ended Failed without recovering"},
		{"not within the timeout", Disrupted{Workload: "wl-1", Phase: "Pending", DisruptedAt: &at, Timeout: time.Minute}, "did not recover within the stage's timeout of 1m0s (it is Pending)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FailureProblem([]Disrupted{tc.w})
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
