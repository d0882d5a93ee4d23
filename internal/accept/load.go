package accept

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// Names of the load generator's metrics, as vLLM's benchmark names them.
const (
	MetricRequestsTotal   = "requests_total"           // measured requests, answered or not
	MetricErrorRate       = "error_rate"               // failed / requests_total
	MetricRequestsPerSec  = "requests_per_second"      // answered requests over the measured time
	MetricOutputTokensSec = "output_tokens_per_second" // output tokens of answered requests over the measured time
	MetricTTFT            = "ttft_ms"                  // time to first token (streamed answers)
	MetricITL             = "itl_ms"                   // inter-token latency: each gap between two streamed chunks
	MetricTPOT            = "tpot_ms"                  // time per output token after the first: (latency - ttft) / (tokens - 1)
)

// maxChartSamples bounds the samples a load stage keeps of each series
// for its charts (every request counts in the metrics).
const maxChartSamples = 1000

// LoadRequest is one request the load generator sent and measured.
type LoadRequest struct {
	Start time.Time
	// LatencyMs is from the request's start to the last byte of its
	// answer (end-to-end latency).
	LatencyMs float64
	// TTFTMs is from the start to the first streamed token; NaN when the
	// answer streamed none (not streamed, or http).
	TTFTMs float64
	// ITLMs are the gaps between consecutive streamed chunks that carried
	// tokens.
	ITLMs []float64
	// OutputTokens is usage.completion_tokens when the answer gave it,
	// else the streamed chunks that carried tokens.
	OutputTokens int
	// Err says why the request failed; empty when it was answered.
	Err string
}

// LoadStepRecord is what the generator measured in one concurrency step:
// the requests it started after the warm-up, from Start (the warm-up's
// end) to End (the last of them answered).
type LoadStepRecord struct {
	Concurrency int
	Start, End  time.Time
	Requests    []LoadRequest
	// Note says what bounded the step, if anything but its duration or
	// count ("the stage's deadline").
	Note string
}

// LoadResults derives a load stage's figures from its steps: each step's
// metrics (requests_total, error_rate, requests_per_second,
// output_tokens_per_second, and Summarize of latency_ms, ttft_ms, itl_ms
// and tpot_ms over the requests answered), the stage's metrics, and the
// latency and TTFT series for the charts (at most maxChartSamples a
// series, evenly spread). With one step the stage's metrics are the
// step's; with several they are of every step together (the rates over
// the steps' measured times added up), and each step's are also there
// prefixed "cN." (c8.p95_ttft_ms for the step at concurrency 8).
func LoadResults(steps []LoadStepRecord) (stage []api.Metric, perStep []api.LoadStep, samples []api.Sample) {
	var all []LoadRequest
	var seconds float64
	for _, s := range steps {
		window := max(0, s.End.Sub(s.Start).Seconds())
		ms := loadMetrics(s.Requests, window)
		perStep = append(perStep, api.LoadStep{Concurrency: s.Concurrency, StartedAt: s.Start.UTC(), FinishedAt: s.End.UTC(), Metrics: ms})
		all = append(all, s.Requests...)
		seconds += window
	}
	if len(steps) == 1 {
		stage = perStep[0].Metrics
	} else if len(steps) > 1 {
		stage = loadMetrics(all, seconds)
		for _, s := range perStep {
			for _, m := range s.Metrics {
				m.Name = fmt.Sprintf("c%d.%s", s.Concurrency, m.Name)
				stage = append(stage, m)
			}
		}
	}
	return stage, perStep, chartSamples(all)
}

// loadMetrics are the figures of some requests measured over seconds.
func loadMetrics(reqs []LoadRequest, seconds float64) []api.Metric {
	m := func(name string, v float64, unit string) api.Metric {
		return api.Metric{Name: name, Value: v, Unit: unit, Source: api.SourcePlatform}
	}
	out := []api.Metric{m(MetricRequestsTotal, float64(len(reqs)), "requests")}
	if len(reqs) == 0 {
		return out
	}
	var failed, tokens int
	var latency, ttft, itl, tpot []float64
	for _, r := range reqs {
		if r.Err != "" {
			failed++
			continue
		}
		tokens += r.OutputTokens
		latency = append(latency, r.LatencyMs)
		itl = append(itl, r.ITLMs...)
		if !math.IsNaN(r.TTFTMs) {
			ttft = append(ttft, r.TTFTMs)
			if r.OutputTokens > 1 {
				tpot = append(tpot, (r.LatencyMs-r.TTFTMs)/float64(r.OutputTokens-1))
			}
		}
	}
	out = append(out, m(MetricErrorRate, float64(failed)/float64(len(reqs)), "ratio"))
	if seconds > 0 {
		out = append(out,
			m(MetricRequestsPerSec, float64(len(reqs)-failed)/seconds, "1/s"),
			m(MetricOutputTokensSec, float64(tokens)/seconds, "tokens/s"))
	}
	for _, s := range []Series{{Name: MetricLatency, Values: latency}, {Name: MetricTTFT, Values: ttft}, {Name: MetricITL, Values: itl}, {Name: MetricTPOT, Values: tpot}} {
		s.Unit, s.Source = "ms", api.SourcePlatform
		out = append(out, Summarize(s)...)
	}
	return out
}

// chartSamples are the latency and TTFT of the requests answered, at
// their start, at most maxChartSamples a series.
func chartSamples(reqs []LoadRequest) []api.Sample {
	var latency, ttft []api.Sample
	for _, r := range reqs {
		if r.Err != "" {
			continue
		}
		latency = append(latency, api.Sample{At: r.Start.UTC(), Name: MetricLatency, Value: r.LatencyMs})
		if !math.IsNaN(r.TTFTMs) {
			ttft = append(ttft, api.Sample{At: r.Start.UTC(), Name: MetricTTFT, Value: r.TTFTMs})
		}
	}
	byTime := func(a, b api.Sample) int { return a.At.Compare(b.At) }
	slices.SortStableFunc(latency, byTime)
	slices.SortStableFunc(ttft, byTime)
	return append(spread(latency, maxChartSamples), spread(ttft, maxChartSamples)...)
}

// spread keeps at most n of ss, evenly spaced, the first and last kept.
func spread(ss []api.Sample, n int) []api.Sample {
	if len(ss) <= n {
		return ss
	}
	out := make([]api.Sample, 0, n)
	for i := range n {
		out = append(out, ss[i*(len(ss)-1)/(n-1)])
	}
	return out
}
