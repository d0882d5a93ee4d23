package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// resourcesPieces are what the objects TestResourcesDecodeAlike draws are
// made of: the keys, other spellings of them (case, escapes, Unicode
// folding) and other keys; values of every JSON kind, some holding the
// bytes that end a value; and white space.
var resourcesPieces = struct{ keys, values, spaces []string }{
	keys: []string{`"gpus"`, `"gpuMemoryMiB"`, `"gpuModels"`, `"cpu"`, `"memoryMiB"`,
		`"GPUs"`, `"Cpu"`, `"gpu\u0073"`, `"gpu\"s"`, `"cpuſ"`, `"memorymib"`, `"colour"`, `""`, `"gpus `},
	values: []string{`1`, `0.25`, `"0.5"`, `1e3`, `-1`, `0.0001`, `null`, `true`, `[]`, `["a100"]`, `["a,}"]`,
		`{"a":1}`, `"a\"b"`, `"x\\"`, `"}"`, `[1,{"b":[2]}]`, `20480`, `"20GiB"`, `[`, `{`, `"`, ``},
	spaces: []string{``, ` `, "\n\t", "\r "},
}

// TestResourcesDecodeAlike: Resources decoded as UnmarshalJSON does, which
// takes json.Unmarshal's way when every key is spelt as a known one,
// answer exactly what a decoder refusing unknown fields alone answers (the
// way it always took), value and error, for objects drawn from
// resourcesPieces and for some bytes that are not objects at all.
func TestResourcesDecodeAlike(t *testing.T) {
	alike := func(t interface{ Fatalf(string, ...any) }, b []byte) {
		fast, ferr := decodeResources(b, true)
		strict, serr := decodeResources(b, false)
		if fmt.Sprint(ferr) != fmt.Sprint(serr) || !cmp.Equal(fast, strict) {
			t.Fatalf("%s: decoded %+v, %v; the decoder alone: %+v, %v", b, fast, ferr, strict, serr)
		}
	}
	for _, b := range []string{`{}`, `null`, `[]`, `"gpus"`, `{"gpus":1}`, `{"gpus":1} {"x":1}`, `{"gpus":1,}`, ` { "gpus" : 1 } `, `{"gpus":1 2}`, `{"gpus"}`, `{"gpus":`, `{`, ``} {
		alike(t, []byte(b))
	}
	p := resourcesPieces
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 5).Draw(t, "n")
		var b strings.Builder
		space := func() { b.WriteString(rapid.SampledFrom(p.spaces).Draw(t, "space")) }
		space()
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			space()
			b.WriteString(rapid.SampledFrom(p.keys).Draw(t, "key"))
			space()
			b.WriteString(":")
			space()
			b.WriteString(rapid.SampledFrom(p.values).Draw(t, "value"))
			space()
		}
		b.WriteString("}")
		space()
		alike(t, []byte(b.String()))
	})
}
