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

// Add appends the problem of field, written as fmt.Sprintf writes format
// and args.
func (fe *FieldErrors) Add(field, format string, args ...any) {
	*fe = append(*fe, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
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
