package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/api"
)

// GPUBandwidth is a GPU model's memory bandwidth, from its datasheet.
type GPUBandwidth struct {
	Name   string
	GBps   float64 // 10^9 bytes a second
	Source string
}

// Datasheets the bandwidth figures come from.
const (
	srcH100  = "NVIDIA H100 Tensor Core GPU datasheet (https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)"
	srcH200  = "NVIDIA H200 product page (https://www.nvidia.com/en-us/data-center/h200/)"
	srcA100  = "NVIDIA A100 datasheet (https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
	srcB200  = "NVIDIA DGX B200 datasheet: 64 TB/s of HBM3e over 8 GPUs (https://www.nvidia.com/en-us/data-center/dgx-b200/)"
	srcL40S  = "NVIDIA L40S datasheet (https://www.nvidia.com/en-us/data-center/l40s/)"
	srcL40   = "NVIDIA L40 datasheet (https://www.nvidia.com/en-us/data-center/l40/)"
	srcL4    = "NVIDIA L4 datasheet (https://www.nvidia.com/en-us/data-center/l4/)"
	srcA10   = "NVIDIA A10 datasheet (https://www.nvidia.com/en-us/data-center/products/a10-gpu/)"
	srcT4    = "NVIDIA T4 datasheet (https://www.nvidia.com/en-us/data-center/tesla-t4/)"
	srcV100  = "NVIDIA V100 datasheet (https://www.nvidia.com/en-us/data-center/v100/)"
	srcMI300 = "AMD Instinct MI300X datasheet (https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html)"
)

// gpuCatalogue holds GPU models by the tokens of their names, most
// specific first: a device matches the first entry all of whose tokens
// are among its name's (nvidia-smi's "NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-40GB", a simulated "H100"), and, where given, whose
// memory is at most maxMiB (the A100's 40 GB part).
var gpuCatalogue = []struct {
	tokens []string
	maxMiB int64
	bw     GPUBandwidth
}{
	{[]string{"B200"}, 0, GPUBandwidth{"B200", 8000, srcB200}},
	{[]string{"H200"}, 0, GPUBandwidth{"H200", 4800, srcH200}},
	{[]string{"H100", "NVL"}, 0, GPUBandwidth{"H100 NVL", 3900, srcH100}},
	{[]string{"H100", "PCIE"}, 0, GPUBandwidth{"H100 PCIe", 2000, srcH100}},
	{[]string{"H100"}, 0, GPUBandwidth{"H100 SXM", 3350, srcH100}},
	{[]string{"A100"}, 48 << 10, GPUBandwidth{"A100 40GB", 1555, srcA100}},
	{[]string{"A100", "PCIE"}, 0, GPUBandwidth{"A100 80GB PCIe", 1935, srcA100}},
	{[]string{"A100"}, 0, GPUBandwidth{"A100 80GB SXM", 2039, srcA100}},
	{[]string{"L40S"}, 0, GPUBandwidth{"L40S", 864, srcL40S}},
	{[]string{"L40"}, 0, GPUBandwidth{"L40", 864, srcL40}},
	{[]string{"L4"}, 0, GPUBandwidth{"L4", 300, srcL4}},
	{[]string{"A10G"}, 0, GPUBandwidth{"A10G", 600, srcA10}},
	{[]string{"A10"}, 0, GPUBandwidth{"A10", 600, srcA10}},
	{[]string{"T4"}, 0, GPUBandwidth{"T4", 320, srcT4}},
	{[]string{"V100"}, 0, GPUBandwidth{"V100", 900, srcV100}},
	{[]string{"MI300X"}, 0, GPUBandwidth{"MI300X", 5300, srcMI300}},
}

// Bandwidth is the memory bandwidth of one GPU of a model with mib of
// memory, from the catalogue; false for a model it does not know.
func Bandwidth(model string, mib int64) (GPUBandwidth, bool) {
	tokens := strings.FieldsFunc(strings.ToUpper(model), func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	for _, e := range gpuCatalogue {
		if e.maxMiB > 0 && (mib <= 0 || mib > e.maxMiB) {
			continue
		}
		if !slices.ContainsFunc(e.tokens, func(t string) bool { return !slices.Contains(tokens, t) }) {
			return e.bw, true
		}
	}
	return GPUBandwidth{}, false
}

// estimateWord labels every speed estimate.
const estimateWord = "an estimate: an upper bound on speed from memory bandwidth (each decode step reads the weights and every sequence's KV cache); an acceptance card's load stage measures the real figures"

// tokenUnits are the throughput target units counted in output tokens.
var tokenUnits = []string{"token", "tokens", "output-token", "output-tokens"}

// Speed estimates how fast an allocation of milli milli-GPUs of a GPU
// model (mib of memory each) may serve a resolved brief, and whether its
// targets look reachable there (SpeedEstimate); nil for training kinds.
// One decode step reads bytes = the weights (the active share of a
// mixture of experts) + the KV cache of every sequence at the full
// context (the estimate's kv cache line), over the allocation's bandwidth
// (each GPU's share of milli, summed): the inter-token latency is at
// least bytes / bandwidth, and the output tokens a second at most
// sequences × bandwidth / bytes. With outputTokens, a request's decode
// takes at least outputTokens inter-token latencies and the requests a
// second are at most the tokens a second over outputTokens. A p95 latency
// target is judged against that latency; a throughput target against the
// tokens a second (unit token or tokens) or the requests a second
// (request, the default).
func Speed(b api.WorkloadBrief, est api.MemoryEstimate, model string, mib, milli int64) *api.SpeedEstimate {
	if Trains(b.Workload) {
		return nil
	}
	s := &api.SpeedEstimate{Estimate: estimateWord}
	bw, ok := Bandwidth(model, mib)
	if !ok {
		s.Why = fmt.Sprintf("no memory bandwidth figure for GPU model %q: the speed is not estimated", model)
		return s
	}
	s.MemoryBandwidthGBps = bw.GBps * float64(milli) / 1000
	s.BandwidthSource = bw.Name + ": " + bw.Source
	s.BytesPerStep = activeWeights(b, est.WeightsBytes) + est.KVCacheBytes
	seqs := max(b.Concurrency, b.Batch, 1)
	step := float64(s.BytesPerStep) / (s.MemoryBandwidthGBps * 1e9)
	s.InterTokenLatencyMs = step * 1000
	s.DecodeTokensPerSecond = float64(seqs) / step
	if b.OutputTokens > 0 {
		lat := float64(b.OutputTokens) * s.InterTokenLatencyMs
		rps := s.DecodeTokensPerSecond / float64(b.OutputTokens)
		s.LatencyMs, s.RequestsPerSecond = &lat, &rps
	}
	var checks []string
	reachable, judged := true, false
	judge := func(ok bool, format string, args ...any) {
		judged = true
		reachable = reachable && ok
		word := "looks reachable"
		if !ok {
			word = "looks out of reach"
		}
		checks = append(checks, fmt.Sprintf(format, args...)+": "+word)
	}
	t := b.Targets
	switch {
	case t.P95LatencyMs > 0 && s.LatencyMs != nil:
		judge(*s.LatencyMs <= float64(t.P95LatencyMs), "latency at least %s ms (%d output tokens × %s ms) against p95LatencyMs %d",
			round(*s.LatencyMs), b.OutputTokens, round(s.InterTokenLatencyMs), t.P95LatencyMs)
	case t.P95LatencyMs > 0:
		checks = append(checks, "p95LatencyMs is not estimated: give outputTokens")
	}
	switch unit := strings.ToLower(t.Unit); {
	case t.ThroughputPerSecond <= 0:
	case slices.Contains(tokenUnits, unit):
		judge(s.DecodeTokensPerSecond >= t.ThroughputPerSecond, "at most %s output tokens/s (%d sequences) against %s %s/s",
			round(s.DecodeTokensPerSecond), seqs, num(t.ThroughputPerSecond), unit)
	case (unit == "" || unit == "request" || unit == "requests") && s.RequestsPerSecond != nil:
		judge(*s.RequestsPerSecond >= t.ThroughputPerSecond, "at most %s requests/s (%d output tokens each) against %s requests/s",
			round(*s.RequestsPerSecond), b.OutputTokens, num(t.ThroughputPerSecond))
	default:
		checks = append(checks, fmt.Sprintf("throughputPerSecond in %s is not estimated (it is for tokens, or for requests with outputTokens)", or(t.Unit, "requests")))
	}
	if judged {
		s.Reachable = &reachable
	}
	s.Why = strings.Join(checks, "; ")
	if s.Why == "" {
		s.Why = fmt.Sprintf("at most %s output tokens/s, at least %s ms between tokens; the brief has no target to judge", round(s.DecodeTokensPerSecond), round(s.InterTokenLatencyMs))
	}
	return s
}

// activeWeights is what one decode step reads of the weights: all of
// them, but for a catalogue mixture of experts, whose active share only
// is read for one token (an upper bound on speed: a batch touches more
// experts).
func activeWeights(b api.WorkloadBrief, weights int64) int64 {
	if m, ok := Lookup(b.Model.Name); ok && m.ActiveParameters > 0 && m.Parameters == b.Model.Parameters {
		return int64(float64(weights) * float64(m.ActiveParameters) / float64(m.Parameters))
	}
	return weights
}

// tooSlow reports whether a speed estimate puts the targets out of reach.
func tooSlow(s *api.SpeedEstimate) bool { return s != nil && s.Reachable != nil && !*s.Reachable }

// round writes a figure with at most one decimal, or none above 100.
func round(v float64) string {
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func num(v float64) string { return fmt.Sprintf("%g", v) }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
