package plan

import (
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/api"
)

// Model is the shape of a public architecture: what the memory terms need.
type Model struct {
	Name       string
	Parameters int64
	// ActiveParameters, for a mixture of experts, are those one token
	// uses; 0: all of them.
	ActiveParameters int64
	Layers           int64
	KVHeads          int64
	HeadDim          int64
	Hidden           int64
}

// catalogue holds public architectures by name. Each shape is the
// model's published config.json on Hugging Face (num_hidden_layers,
// num_key_value_heads, head_dim or hidden_size / num_attention_heads,
// hidden_size) and the parameter count its model card gives:
//
//   - llama-3-8b: meta-llama/Meta-Llama-3-8B (32 layers, 32 heads, 8 KV heads, hidden 4096)
//   - llama-3-70b: meta-llama/Meta-Llama-3-70B (80 layers, 64 heads, 8 KV heads, hidden 8192)
//   - mistral-7b: mistralai/Mistral-7B-v0.1 (32 layers, 32 heads, 8 KV heads, hidden 4096)
//   - mixtral-8x7b: mistralai/Mixtral-8x7B-v0.1 (32 layers, 32 heads, 8 KV heads, hidden 4096;
//     46.7e9 parameters in all, every expert resident, though 12.9e9 are active per token)
//   - qwen2-7b: Qwen/Qwen2-7B (28 layers, 28 heads, 4 KV heads, hidden 3584)
//   - gemma-2-9b: google/gemma-2-9b (42 layers, 16 heads, 8 KV heads, head_dim 256, hidden 3584)
//   - phi-3-mini: microsoft/Phi-3-mini-4k-instruct (32 layers, 32 heads, 32 KV heads, hidden 3072)
var catalogue = []Model{
	{Name: "llama-3-8b", Parameters: 8_030_000_000, Layers: 32, KVHeads: 8, HeadDim: 128, Hidden: 4096},
	{Name: "llama-3-70b", Parameters: 70_600_000_000, Layers: 80, KVHeads: 8, HeadDim: 128, Hidden: 8192},
	{Name: "mistral-7b", Parameters: 7_240_000_000, Layers: 32, KVHeads: 8, HeadDim: 128, Hidden: 4096},
	{Name: "mixtral-8x7b", Parameters: 46_700_000_000, ActiveParameters: 12_900_000_000, Layers: 32, KVHeads: 8, HeadDim: 128, Hidden: 4096},
	{Name: "qwen2-7b", Parameters: 7_620_000_000, Layers: 28, KVHeads: 4, HeadDim: 128, Hidden: 3584},
	{Name: "gemma-2-9b", Parameters: 9_240_000_000, Layers: 42, KVHeads: 8, HeadDim: 256, Hidden: 3584},
	{Name: "phi-3-mini", Parameters: 3_820_000_000, Layers: 32, KVHeads: 32, HeadDim: 96, Hidden: 3072},
}

// Catalogue returns the catalogue's models, by name.
func Catalogue() []Model { return slices.Clone(catalogue) }

// Lookup returns the catalogue's model of a name, in any case.
func Lookup(name string) (Model, bool) {
	for _, m := range catalogue {
		if strings.EqualFold(m.Name, strings.TrimSpace(name)) {
			return m, true
		}
	}
	return Model{}, false
}

// names lists the catalogue's names, for messages.
func names() string {
	s := make([]string, len(catalogue))
	for i, m := range catalogue {
		s[i] = m.Name
	}
	return strings.Join(s, ", ")
}

// Resolve returns the brief with the catalogue's shape filled in (fields
// the brief gives win) and the defaults made explicit (precision bf16;
// concurrency 1 for serving, batch 1 for training), or every problem as
// api.FieldErrors: those of CheckBrief, an unknown model name, and a shape
// too incomplete for the workload's memory terms (serving needs layers, KV
// heads and head dimension for the KV cache; training needs layers and
// hidden size for the activations).
func Resolve(b api.WorkloadBrief) (api.WorkloadBrief, error) {
	errs := api.FieldErrors(CheckBrief(&b))
	if len(errs) > 0 {
		return b, errs
	}
	b.Kind = api.KindWorkloadBrief
	b.Precision = Precision(&b)
	b.Residency = slices.Clone(b.Residency)
	if b.Model.Name != "" {
		m, ok := Lookup(b.Model.Name)
		if !ok {
			return b, api.FieldErrors{{Field: "model.name", Problem: "\"" + b.Model.Name + "\" is not in the catalogue (" + names() + "): give its shape (parameters, layers, kvHeads, headDim, hidden) instead"}}
		}
		b.Model.Name = m.Name
		fill := func(v *int64, c int64) {
			if *v == 0 {
				*v = c
			}
		}
		fill(&b.Model.Parameters, m.Parameters)
		fill(&b.Model.Layers, m.Layers)
		fill(&b.Model.KVHeads, m.KVHeads)
		fill(&b.Model.HeadDim, m.HeadDim)
		fill(&b.Model.Hidden, m.Hidden)
	}
	need := func(field string, v int64, what string) {
		if v == 0 {
			errs = append(errs, api.FieldError{Field: field, Problem: "is needed for " + what + " of " + b.Workload + ": give it, or a catalogue model.name (" + names() + ")"})
		}
	}
	if Trains(b.Workload) {
		need("model.layers", b.Model.Layers, "the activations")
		need("model.hidden", b.Model.Hidden, "the activations")
		if b.Batch == 0 {
			b.Batch = 1
		}
	} else {
		need("model.layers", b.Model.Layers, "the KV cache")
		need("model.kvHeads", b.Model.KVHeads, "the KV cache")
		need("model.headDim", b.Model.HeadDim, "the KV cache")
		if b.Concurrency == 0 && b.Batch == 0 {
			b.Concurrency = 1
		}
	}
	if len(errs) > 0 {
		return b, errs
	}
	return b, nil
}
