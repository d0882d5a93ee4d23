package plan

import (
	"fmt"

	"github.com/gpufleet/gpufleet/api"
)

// Constants of the estimate; doc.go says where each comes from.
const (
	// Headroom is the share of an allocation's GPU memory kept free
	// (vLLM's gpu_memory_utilization 0.9).
	Headroom = 0.10
	// headroomTenths is Headroom in tenths, for integer arithmetic.
	headroomTenths = 1
	// OverheadBytes is what each GPU of a workload holds besides the
	// model: the CUDA context, the libraries' workspaces and the
	// allocator's slack (an allowance: 1 GiB).
	OverheadBytes = 1 << 30
	// kvBlockTokens is vLLM's default KV block size: the cache is
	// allocated in whole blocks of this many tokens.
	kvBlockTokens = 16
	// AdapterPercent is the share of the parameters a LoRA or QLoRA
	// fine-tune trains (its adapters), in per cent.
	AdapterPercent = 1
	// qloraBitsPerParamX1000 is the NF4 base's bits per parameter in
	// thousandths: 4 bits plus 0.127 bits of double-quantised constants.
	qloraBitsPerParamX1000 = 4127
)

// halfBytes returns a precision's bytes per value, in halves (int4 is one
// half-byte).
func halfBytes(precision string) int64 {
	switch precision {
	case api.PrecisionFP32:
		return 8
	case api.PrecisionBF16, api.PrecisionFP16:
		return 4
	case api.PrecisionFP8, api.PrecisionINT8:
		return 2
	case api.PrecisionINT4:
		return 1
	}
	return 4
}

// kvBytes is the bytes of one cached key or value element: the precision's,
// except that int8 and int4 quantise only the weights and keep the cache in
// 16 bits.
func kvBytes(precision string) int64 {
	switch precision {
	case api.PrecisionFP32:
		return 4
	case api.PrecisionFP8:
		return 1
	}
	return 2
}

// activationBytes is the bytes of one activation: 4 in fp32, else 2 (fp8
// and the integer formats compute in 16 bits).
func activationBytes(precision string) int64 {
	if precision == api.PrecisionFP32 {
		return 4
	}
	return 2
}

func bytesWord(halves int64) string {
	if halves%2 == 0 {
		return fmt.Sprint(halves / 2)
	}
	return fmt.Sprintf("%d.5", halves/2)
}

// Memory estimates the GPU memory one copy of a resolved brief (Resolve)
// needs on one GPU, one line per term, each with its formula written out
// in the brief's numbers. TotalBytes is the sum of the lines.
func Memory(b api.WorkloadBrief) api.MemoryEstimate {
	m := b.Model
	p := b.Precision
	var est api.MemoryEstimate
	line := func(field *int64, name string, bytes int64, format string, args ...any) {
		bytes = min(bytes, MaxLineBytes)
		*field += bytes
		est.Lines = append(est.Lines, api.MemoryLine{Name: name, Bytes: bytes, Formula: fmt.Sprintf(format, args...)})
	}
	trains := Trains(b.Workload)
	hb := halfBytes(p)

	// 1. Weights: params × bytes per parameter (QLoRA: a 4-bit NF4 base),
	//    plus a LoRA's adapters in the precision.
	adapters := int64(0)
	switch b.Workload {
	case api.BriefFinetuneLoRA, api.BriefFinetuneQLoRA:
		adapters = (m.Parameters*AdapterPercent + 99) / 100
	}
	if b.Workload == api.BriefFinetuneQLoRA {
		base := (m.Parameters*qloraBitsPerParamX1000 + 7999) / 8000
		line(&est.WeightsBytes, "weights", base, "%d params × 4.127 bits (NF4 base with double-quantised constants) / 8", m.Parameters)
	} else {
		line(&est.WeightsBytes, "weights", (m.Parameters*hb+1)/2, "%d params × %s bytes (%s)", m.Parameters, bytesWord(hb), p)
	}
	if adapters > 0 {
		line(&est.WeightsBytes, "adapter weights", (adapters*hb+1)/2, "%d adapter params (%d%% of %d) × %s bytes (%s)", adapters, AdapterPercent, m.Parameters, bytesWord(hb), p)
	}

	// 2. KV cache (serving): 2 × layers × KV heads × head dim × bytes ×
	//    tokens × sequences, the tokens rounded up to whole blocks.
	seqs := b.Concurrency
	if seqs == 0 {
		seqs = b.Batch
	}
	if trains {
		line(&est.KVCacheBytes, "kv cache", 0, "none: training keeps no KV cache")
	} else {
		tokens := (b.ContextLength + kvBlockTokens - 1) / kvBlockTokens * kvBlockTokens
		kb := kvBytes(p)
		line(&est.KVCacheBytes, "kv cache", mul(2, m.Layers, m.KVHeads, m.HeadDim, kb, tokens, seqs),
			"2 × %d layers × %d KV heads × %d head dim × %d bytes × %d tokens × %d sequences", m.Layers, m.KVHeads, m.HeadDim, kb, tokens, seqs)
	}

	// 3. Activations: serving, an allowance of 20% of the weights at the
	//    activation precision; training, 34 × layers × sequence × batch ×
	//    hidden (16-bit, attention scores not kept), twice that in fp32.
	ab := activationBytes(p)
	if trains {
		k := 34 * ab / 2
		line(&est.ActivationsBytes, "activations", mul(k, m.Layers, b.ContextLength, b.Batch, m.Hidden),
			"%d × %d layers × %d tokens × %d batch × %d hidden (no recomputation)", k, m.Layers, b.ContextLength, b.Batch, m.Hidden)
	} else {
		line(&est.ActivationsBytes, "activations", (m.Parameters*ab+4)/5,
			"0.2 × %d params × %d bytes (an allowance for a forward pass)", m.Parameters, ab)
	}

	// 4. Gradients and optimizer state (training): fp32 gradients and
	//    AdamW's two moments, plus an fp32 master copy under mixed
	//    precision; for LoRA and QLoRA only the adapters carry them.
	if trains {
		trained, who := m.Parameters, "params"
		if adapters > 0 {
			trained, who = adapters, "adapter params"
		}
		line(&est.OptimizerBytes, "gradients", trained*4, "%d %s × 4 bytes (fp32)", trained, who)
		if p == api.PrecisionFP32 {
			line(&est.OptimizerBytes, "optimizer state", trained*8, "%d %s × 8 bytes (AdamW m and v, fp32)", trained, who)
		} else {
			line(&est.OptimizerBytes, "optimizer state", trained*12, "%d %s × 12 bytes (AdamW m and v, fp32 master copy)", trained, who)
		}
	}

	// 5. Overhead: the CUDA context and workspaces of one GPU.
	line(&est.OverheadBytes, "overhead", OverheadBytes, "1 GiB per GPU (CUDA context, library workspaces, allocator slack)")

	for _, l := range est.Lines {
		est.TotalBytes += l.Bytes
	}
	est.HeadroomRatio = Headroom
	return est
}

// MaxLineBytes caps one line of an estimate (64 PiB, far beyond any
// fleet), so that a brief at the bounds of api.WorkloadBrief multiplies
// into no overflow and a total of the lines stays exact.
const MaxLineBytes = 1 << 56

// mul multiplies non-negative factors, saturating at MaxLineBytes.
func mul(xs ...int64) int64 {
	r := int64(1)
	for _, x := range xs {
		if x == 0 {
			return 0
		}
		if r > MaxLineBytes/x {
			r = MaxLineBytes
			continue
		}
		r *= x
	}
	return min(r, MaxLineBytes)
}

// perGPU is what each of n GPUs holds when the work is split across them:
// the model's terms shared evenly (tensor, pipeline or fully sharded data
// parallelism), the overhead on every one.
func perGPU(est api.MemoryEstimate, n int64) int64 {
	shared := est.TotalBytes - est.OverheadBytes
	return (shared+n-1)/n + est.OverheadBytes
}

// usable is the memory of a GPU of mib MiB that the plan lets a workload
// fill, after the headroom.
func usable(mib int64) int64 { return (mib << 20) * (10 - headroomTenths) / 10 }
