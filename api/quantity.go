package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// Money is an amount of the server's currency, exact in micro-units
// (1_000_000 is one dollar, or euro, ...). On the wire it is a plain JSON
// number with up to six decimals, such as 576000 or 0.000278; a quoted
// string is accepted too. It is quantity.Money itself, whose parser and
// formatter are the wire form.
type Money = quantity.Money

// Milli is a decimal quantity in thousandths: 1000 is one GPU (or one
// CPU), 250 a quarter. On the wire it is a plain JSON number such as 0.25
// or 2 (a quoted string is accepted too), with at most three decimals. It
// is quantity.Milli itself.
type Milli = quantity.Milli

// MemoryUnits says which units ParseMemoryMiB accepts and what they mean,
// for help texts and errors.
const MemoryUnits = "MiB, GiB or TiB (also written M, G, T, Mi, Gi, Ti, MB, GB, TB, in any case), " +
	"all powers of 1024: 1G = 1GB = 1GiB = 1024MiB; a bare number is MiB"

// memoryUnits maps each unit, lowercased, to its size in MiB. Every unit is
// binary, however it is spelt: people who type GB for GPU memory mean GiB
// (an "80 GB" GPU reports 81920 MiB), and one rule is easier to remember
// than Kubernetes' two (there G is 10^9 and Gi 2^30).
var memoryUnits = map[string]int64{
	"": 1, "m": 1, "mi": 1, "mb": 1, "mib": 1,
	"g": 1 << 10, "gi": 1 << 10, "gb": 1 << 10, "gib": 1 << 10,
	"t": 1 << 20, "ti": 1 << 20, "tb": 1 << 20, "tib": 1 << 20,
}

// ParseMemoryMiB parses a memory size such as "20GiB", "20GB", "512MiB",
// "1.5T" or a bare number of MiB into MiB (see MemoryUnits: every unit is a
// power of 1024, whatever its case or spelling). It is the one parser of
// sizes: CLI flags and the MiB fields of workload files use it. A size
// that is not a whole number of MiB, or not positive, is an error.
func ParseMemoryMiB(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.LastIndexFunc(s, func(r rune) bool { return r >= '0' && r <= '9' || r == '.' })
	num, unit := strings.TrimSpace(s[:i+1]), strings.TrimSpace(s[i+1:])
	mul, ok := memoryUnits[strings.ToLower(unit)]
	if !ok || num == "" {
		return 0, fmt.Errorf("want a size such as 20GiB, 20GB or 512MiB: a number and one of the units %s", MemoryUnits)
	}
	q, err := quantity.ParseMilli(num)
	if err != nil {
		return 0, fmt.Errorf("want a size such as 20GiB, 20GB or 512MiB: %w", err)
	}
	if q <= 0 {
		return 0, fmt.Errorf("a memory size must be positive")
	}
	if q > Milli(MaxMemoryMiB)*1000 { // keeps the product below from wrapping
		return 0, fmt.Errorf("%s is too large", s)
	}
	v := int64(q) * mul
	if v%1000 != 0 {
		return 0, fmt.Errorf("%s is not a whole number of MiB (%s MiB)", s, Milli(v))
	}
	return v / 1000, nil
}

// ParseSizeBytes reads a storage size such as "100GiB" (ParseMemoryMiB's
// units, a whole number of MiB) into bytes, at most MaxVolumeBytes.
func ParseSizeBytes(s string) (int64, error) {
	mib, err := ParseMemoryMiB(s)
	if err != nil {
		return 0, err
	}
	if mib > MaxVolumeBytes>>20 {
		return 0, fmt.Errorf("%s is over 1 PiB", s)
	}
	return mib << 20, nil
}

// FieldErrors is a list of field problems; it is an error so that a decoder
// can return it and the server can name the fields.
type FieldErrors []FieldError

func (fe FieldErrors) Error() string {
	s := make([]string, len(fe))
	for i, f := range fe {
		s[i] = f.Field + ": " + f.Problem
	}
	return strings.Join(s, "; ")
}

// UnmarshalJSON decodes resources strictly and names the field of a bad
// quantity ("resources.gpus"), which encoding/json cannot do for values that
// decode themselves.
func (r *Resources) UnmarshalJSON(b []byte) error {
	var raw struct {
		GPUs         json.RawMessage `json:"gpus"`
		GPUMemoryMiB int64           `json:"gpuMemoryMiB"`
		GPUModels    []string        `json:"gpuModels"`
		CPU          json.RawMessage `json:"cpu"`
		MemoryMiB    int64           `json:"memoryMiB"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			if name := strings.Trim(f, `"`); name != "" {
				return FieldErrors{{Field: "resources." + name, Problem: "unknown field"}}
			}
			return FieldErrors{{Field: "resources", Problem: "has a field with an empty name"}}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" { // resources itself is not an object
				return FieldErrors{{Field: "resources", Problem: fmt.Sprintf("must be an object, not a JSON %s", te.Value)}}
			}
			return FieldErrors{{Field: "resources." + te.Field, Problem: fmt.Sprintf("must be %s, not a JSON %s", JSONType(te.Type), te.Value)}}
		}
		return FieldErrors{{Field: "resources", Problem: strings.TrimPrefix(msg, "json: ")}}
	}
	var errs FieldErrors
	out := Resources{GPUMemoryMiB: raw.GPUMemoryMiB, GPUModels: raw.GPUModels, MemoryMiB: raw.MemoryMiB}
	for _, q := range []struct {
		name string
		raw  json.RawMessage
		dst  *Milli
	}{{"gpus", raw.GPUs, &out.GPUs}, {"cpu", raw.CPU, &out.CPU}} {
		if len(q.raw) == 0 || string(q.raw) == "null" {
			continue
		}
		if err := q.dst.UnmarshalJSON(q.raw); err != nil {
			errs = append(errs, FieldError{Field: "resources." + q.name, Problem: err.Error()})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	*r = out
	return nil
}
