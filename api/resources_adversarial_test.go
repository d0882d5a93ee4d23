package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// decodesAlike fails t unless the fast and the strict decoding of b give
// the same value and the same error.
func decodesAlike(t interface {
	Fatalf(string, ...any)
	Helper()
}, b []byte) {
	t.Helper()
	fast, ferr := decodeResources(b, true)
	strict, serr := decodeResources(b, false)
	if fmt.Sprint(ferr) != fmt.Sprint(serr) || !cmp.Equal(fast, strict) {
		t.Fatalf("%q: fast %+v, %v; strict %+v, %v", b, fast, ferr, strict, serr)
	}
}

// topKeys returns the keys of b's top-level object as a token stream reads
// them (escapes decoded), or ok false when b is not one valid object.
func topKeys(b []byte) (keys []string, ok bool) {
	if !json.Valid(b) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, false
		}
		keys = append(keys, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
	}
	return keys, true
}

// TestResourcesDecodeAlikeAdversarial: inputs made to tell the fast path
// from the strict one (repeated keys, other cases, escapes, numbers out of
// range, trailing data, deep nesting).
func TestResourcesDecodeAlikeAdversarial(t *testing.T) {
	for _, b := range []string{
		`{"gpus":1,"gpus":2}`, `{"gpus":1,"gpus":null}`, `{"gpus":null,"gpus":1}`,
		`{"gpuModels":["a"],"gpuModels":null}`, `{"gpus":1,"GPUS":2}`, `{"GPUS":2,"gpus":1}`,
		`{"gpu\u0073":5}`, `{"gpus":1,"gpu\u0073":5}`, `{"gpus":"1","x\"":1}`, `{"gpus":"\\","x":1}`,
		`{"gpus":"\"","x":1}`, `{"gpus":"\\\"","x":1}`, `{"gpus":[{"x":"}"}],"x":1}`, `{"gpus":[1,"]",{"a":"}"}],"gpuModels":["}",","]}`,
		`{"memoryMiB":9223372036854775807}`, `{"memoryMiB":9223372036854775808}`, `{"memoryMiB":1e400}`, `{"memoryMiB":-0}`,
		`{"memoryMiB":1.5}`, `{"memoryMiB":"1"}`, `{"gpus":1e999999}`, `{"gpus":-1}`, `{"gpus":"1e3"}`,
		`{"gpus":1}` + "\x00", `{"gpus":1}garbage`, `{"gpus":1}}`, `{"gpus":1}]`, `{"gpus":1},{"x":2}`,
		`{"cpu":{"gpus":1},"x":1}`, `{"cpu":{},"memoryMiB":1}`, `{"gpus":1 , "x" : 2 }`, "{\"gpus\":1\u00a0,\"x\":2}",
		"{\"gpus\"\u2028:1}", `{"gpus":tru}`, `{"gpus":true,"x":1}`, `{"gpus":nul,"x":1}`, `{"gpus":1,"x":1,}`,
		`{"gpuModels":["\ud800"]}`, "{\"gpuModels\":[\"\xff\"]}", "{\"gpu\xffs\":1}", `{"":1}`, `{"gpus":1,"":1}`,
		strings.Repeat("[", 20000) + strings.Repeat("]", 20000), `{"gpuModels":` + strings.Repeat("[", 11000) + strings.Repeat("]", 11000) + `}`,
		`{"gpus":"` + strings.Repeat(`\\`, 1000) + `","x":1}`,
	} {
		decodesAlike(t, []byte(b))
	}
}

// TestOnlyKeysNeverHidesAKey: onlyKeys answers true for no valid
// object with a key (as decoded) that is not an exact known one.
func TestOnlyKeysNeverHidesAKey(t *testing.T) {
	pieces := []string{`{`, `}`, `[`, `]`, `,`, `:`, `"`, `\`, `\"`, `\\`, ` `, `"gpus"`, `"cpu"`, `"x"`, `1`, `null`, `"a}"`, `"a,"`, `"a\"b"`, `{"x":1}`, `[1,2]`, `"gpus":`, `"x":`, `"\u0078":`}
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		b.WriteString("{")
		for range rapid.IntRange(0, 12).Draw(t, "n") {
			b.WriteString(rapid.SampledFrom(pieces).Draw(t, "p"))
		}
		b.WriteString(rapid.SampledFrom([]string{"}", "", "}}", " }"}).Draw(t, "end"))
		s := []byte(b.String())
		decodesAlike(t, s)
		if keys, ok := topKeys(s); ok && onlyKeys(s, resourcesKeys) {
			for _, k := range keys {
				if !slices.Contains(resourcesKeys, k) {
					t.Fatalf("%s: onlyKeys true with key %q", s, k)
				}
			}
		}
	})
}

// FuzzResourcesDecodeAlike: the fast and strict decodings agree on any bytes.
func FuzzResourcesDecodeAlike(f *testing.F) {
	for _, s := range []string{`{"gpus":1}`, `{"gpus":1,"x":2}`, `{"gpuModels":["a"],"cpu":"0.5","memoryMiB":1}`, `{"gpus":"\\","x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		decodesAlike(t, b)
		if keys, ok := topKeys(b); ok && onlyKeys(b, resourcesKeys) {
			for _, k := range keys {
				if !slices.Contains(resourcesKeys, k) {
					t.Fatalf("%q: onlyKeys true with key %q", b, k)
				}
			}
		}
	})
}
