package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// DecodeStrict decodes the one JSON value of b into v, refusing fields v
// does not have, and reports every problem as FieldErrors in the API's
// words (the field's path and the JSON type it takes), never Go's: "command:
// must be an array of strings, not a JSON string", not "cannot unmarshal
// string into Go struct field Workload.command of type []string".
func DecodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return DecodeProblem(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return FieldErrors{{Field: "body", Problem: "holds more than one JSON value"}}
	}
	return nil
}

// DecodeProblem turns an error of encoding/json into FieldErrors naming the
// field in the API's words.
func DecodeProblem(err error) error {
	var fe FieldErrors
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case errors.As(err, &fe):
		return fe
	case errors.Is(err, io.EOF):
		return FieldErrors{{Field: "body", Problem: "is empty: a JSON object is expected"}}
	case errors.As(err, &se):
		return FieldErrors{{Field: "body", Problem: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)}}
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		if n, ok := strings.CutPrefix(te.Value, "number "); ok { // a number of the wrong kind or size
			why := "not whole"
			if !strings.ContainsAny(n, ".eE") {
				why = "too large"
			}
			return FieldErrors{{Field: field, Problem: fmt.Sprintf("must be %s, not %s (%s)", JSONType(te.Type), n, why)}}
		}
		return FieldErrors{{Field: field, Problem: fmt.Sprintf("must be %s, not a JSON %s", JSONType(te.Type), te.Value)}}
	case errors.As(err, &pe):
		return FieldErrors{{Field: "body", Problem: fmt.Sprintf("a time must be RFC 3339, such as 2025-06-01T12:00:00Z, not %q", pe.Value)}}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		if name := strings.Trim(f, `"`); name != "" {
			return FieldErrors{{Field: name, Problem: "unknown field"}}
		}
		return FieldErrors{{Field: "body", Problem: "has a field with an empty name"}}
	}
	return FieldErrors{{Field: "body", Problem: strings.TrimPrefix(msg, "json: ")}}
}

// JSONType names, in words, the JSON a Go type decodes from: "an array of
// strings", "a whole number", "an object".
func JSONType(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Milli]():
		return "a number"
	case reflect.TypeFor[Money]():
		return "an amount (a number with at most six decimals, at most a billion)"
	}
	switch t.Kind() {
	case reflect.Struct:
		return "an object"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object of strings"
		}
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return JSONType(t.Elem())
	}
	return "a " + t.Kind().String()
}
