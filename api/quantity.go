package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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

// rawResources is Resources as it is decoded, before its quantities are.
type rawResources struct {
	GPUs         json.RawMessage `json:"gpus"`
	GPUMemoryMiB int64           `json:"gpuMemoryMiB"`
	GPUModels    []string        `json:"gpuModels"`
	CPU          json.RawMessage `json:"cpu"`
	MemoryMiB    int64           `json:"memoryMiB"`
}

// resourcesKeys are rawResources's keys, as spelt on the wire.
var resourcesKeys = []string{"gpus", "gpuMemoryMiB", "gpuModels", "cpu", "memoryMiB"}

// UnmarshalJSON decodes resources strictly and names the field of a bad
// quantity ("resources.gpus"), which encoding/json cannot do for values that
// decode themselves. An object whose keys are all spelt as rawResources's
// and that decodes without error, as nearly every one does, is decoded with
// json.Unmarshal; anything else with a json.Decoder that refuses unknown
// fields (decodeStrict), which answers the same for such an object and
// names what is wrong with any other, but costs about 1 µs and 1 KB more:
// each submit's request and answer holds one.
func (r *Resources) UnmarshalJSON(b []byte) error {
	out, err := decodeResources(b, true)
	if err != nil {
		return err
	}
	*r = out
	return nil
}

// decodeResources is UnmarshalJSON's decoding: with a json.Decoder only
// (decodeStrict) unless fast.
func decodeResources(b []byte, fast bool) (Resources, error) {
	var raw rawResources
	if !fast || !onlyKeys(b, resourcesKeys) || json.Unmarshal(b, &raw) != nil {
		raw = rawResources{}
		if err := decodeStrict(b, &raw); err != nil {
			return Resources{}, err
		}
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
		return Resources{}, errs
	}
	return out, nil
}

// decodeStrict decodes b into raw refusing unknown fields, and answers
// what is wrong as FieldErrors naming the field.
func decodeStrict(b []byte, raw *rawResources) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(raw); err != nil {
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
	return nil
}

// onlyKeys reports whether b is a JSON object each of whose keys is one of
// keys, spelt exactly so (no escape): then a decoder that refuses unknown
// fields finds none. It reads only as far as it must to tell the keys
// apart, and may answer true for b that is not valid JSON (which
// json.Unmarshal then refuses), never for a valid object with another key.
func onlyKeys(b []byte, keys []string) bool {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		if b[i] != '"' {
			return false
		}
		end := bytes.IndexByte(b[i+1:], '"')
		if end < 0 {
			return false
		}
		if !slices.ContainsFunc(keys, func(k string) bool { return k == string(b[i+1:i+1+end]) }) {
			return false // an escape, another spelling, another key
		}
		i = skipSpace(b, i+2+end)
		if i == len(b) || b[i] != ':' {
			return false
		}
		if i = skipValue(b, skipSpace(b, i+1)); i < 0 {
			return false
		}
		i = skipSpace(b, i)
		if i == len(b) {
			return false
		}
		switch b[i] {
		case '}':
			return true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return false
		}
	}
	return false
}

// skipSpace returns the place of the first byte of b from i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the place just past the JSON value at b[i:] (a string,
// an array or object with what it holds, or a number or literal, read up
// to the byte that ends it), or -1 when b ends first.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch c := b[i]; {
		case c == '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if i >= len(b) {
				return -1
			}
			i++
		case c == '[' || c == '{':
			depth++
			i++
		case c == ']' || c == '}':
			if depth == 0 {
				return i
			}
			depth--
			i++
		case c == ',' && depth == 0:
			return i
		default:
			i++
		}
		if depth == 0 && i < len(b) && (b[i] == ',' || b[i] == '}') {
			return i
		}
	}
	return -1
}
