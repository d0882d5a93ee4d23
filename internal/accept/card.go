package accept

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpufleet/gpufleet/api"
)

// MaxCardBytes bounds a card file.
const MaxCardBytes = 1 << 20

// maxProblems bounds the problems one CardError lists.
const maxProblems = 50

// LineError is one problem of a card file: the field, in the API's words
// ("stages[1].criteria[0]"; empty for the file as a whole), the line it is
// on (0 when unknown) and what is wrong.
type LineError struct {
	Field   string `json:"field"`
	Line    int    `json:"line,omitempty"`
	Problem string `json:"problem"`
}

func (e LineError) String() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// CardError is every problem ParseCard found.
type CardError struct {
	Problems []LineError
}

func (e *CardError) Error() string {
	s := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		s[i] = p.String()
	}
	return "acceptance card: " + strings.Join(s, "; ")
}

// FieldErrors is the problems as the API's field errors, the line folded
// into the problem ("line 12: criterion ... does not parse").
func (e *CardError) FieldErrors() api.FieldErrors {
	fe := make(api.FieldErrors, len(e.Problems))
	for i, p := range e.Problems {
		field := p.Field
		if field == "" {
			field = "card"
		}
		prob := p.Problem
		if p.Line > 0 {
			prob = fmt.Sprintf("line %d: %s", p.Line, prob)
		}
		fe[i] = api.FieldError{Field: field, Problem: prob}
	}
	return fe
}

// ParseCard reads an acceptance card written in YAML or JSON (JSON is read
// as YAML) and checks it (CheckCard). Every problem names
// its field and its line: syntax, unknown fields, values of the wrong
// type, a missing or wrong kind, and what CheckCard finds. The error is a
// *CardError.
func ParseCard(b []byte) (*api.AcceptanceCard, error) {
	if len(b) > MaxCardBytes {
		return nil, &CardError{[]LineError{{Problem: fmt.Sprintf("is %d bytes; a card is at most %d", len(b), MaxCardBytes)}}}
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		// JSON: its own parser says where a syntax error is, which the
		// YAML parser reads as the start of the flow.
		var v any
		var se *json.SyntaxError
		if err := json.Unmarshal(b, &v); errors.As(err, &se) {
			line := 1 + bytes.Count(b[:min(int(se.Offset), len(b))], []byte("\n"))
			return nil, &CardError{[]LineError{{Line: line, Problem: "malformed JSON: " + se.Error()}}}
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &CardError{[]LineError{{Problem: "is empty: want a card (kind: AcceptanceCard)"}}}
		}
		return nil, &CardError{[]LineError{syntaxError(err)}}
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		line := more.Line
		if err != nil {
			return nil, &CardError{[]LineError{syntaxError(err)}}
		}
		return nil, &CardError{[]LineError{{Line: line, Problem: "holds more than one YAML document"}}}
	}
	c := &converter{lines: map[string]int{}}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	tree := c.convert(root, "", reflect.TypeFor[api.AcceptanceCard]())
	if m, ok := tree.(map[string]any); ok {
		switch k, _ := m["kind"].(string); {
		case k == "" && m["kind"] == nil:
			c.add("kind", root.Line, "missing: a card file says kind: "+api.KindAcceptanceCard)
		case k != api.KindAcceptanceCard && m["kind"] != nil:
			c.add("kind", c.lines["kind"], fmt.Sprintf("must be %s, not %q", api.KindAcceptanceCard, k))
		}
	}
	// Decode and validate even after problems (the bad values left out),
	// so that one pass reports everything, but for what CheckCard says of
	// a field already reported.
	js, err := json.Marshal(tree)
	if err != nil {
		c.add("", 0, err.Error())
		return nil, &CardError{c.problems}
	}
	var card api.AcceptanceCard
	if err := api.DecodeStrict(js, &card); err != nil {
		c.dropBadWorkloads(tree)
		if js, err = json.Marshal(tree); err == nil {
			err = api.DecodeStrict(js, &card)
		}
		if err != nil {
			c.fieldProblems("", err)
			return nil, &CardError{c.problems}
		}
	}
	reported := slices.Collect(func(yield func(string) bool) {
		for _, p := range c.problems {
			if !yield(p.Field) {
				return
			}
		}
	})
	for _, fe := range CheckCard(&card) {
		if !slices.ContainsFunc(reported, func(f string) bool { return related(f, fe.Field) }) {
			c.add(fe.Field, c.lineOf(fe.Field), fe.Problem)
		}
	}
	if len(c.problems) > 0 {
		slices.SortStableFunc(c.problems, func(a, b LineError) int { return a.Line - b.Line })
		return nil, &CardError{c.problems}
	}
	return &card, nil
}

// related reports whether two field paths are the same field or one is
// inside the other.
func related(a, b string) bool {
	inside := func(x, y string) bool {
		return strings.HasPrefix(x, y) && (len(x) == len(y) || x[len(y)] == '.' || x[len(y)] == '[')
	}
	return a != "" && b != "" && (inside(a, b) || inside(b, a))
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// syntaxError turns a YAML syntax error into a LineError with its line.
func syntaxError(err error) LineError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimPrefix(strings.TrimPrefix(msg, m[0]), ": ")
	}
	return LineError{Line: line, Problem: "malformed YAML or JSON: " + msg}
}

// dropBadWorkloads decodes each stage's workload alone and, for one that
// does not decode (a quantity that does not parse, checked by its own
// type, not by the conversion), reports its problems under the stage's
// path and takes it out of the tree so that the rest can be decoded and
// validated.
func (c *converter) dropBadWorkloads(tree any) {
	m, _ := tree.(map[string]any)
	stages, _ := m["stages"].([]any)
	for i, s := range stages {
		sm, _ := s.(map[string]any)
		w, ok := sm["workload"]
		if !ok || w == nil {
			continue
		}
		js, err := json.Marshal(w)
		if err == nil {
			var wl api.Workload
			err = api.DecodeStrict(js, &wl)
		}
		if err == nil {
			continue
		}
		delete(sm, "workload")
		c.fieldProblems(fmt.Sprintf("stages[%d].workload.", i), err)
	}
}

// fieldProblems adds a decoding error's field errors, prefixed.
func (c *converter) fieldProblems(prefix string, err error) {
	var fe api.FieldErrors
	if !errors.As(api.DecodeProblem(err), &fe) {
		c.add(strings.TrimSuffix(prefix, "."), c.lineOf(strings.TrimSuffix(prefix, ".")), err.Error())
		return
	}
	for _, f := range fe {
		field := prefix + f.Field
		c.add(field, c.lineOf(field), f.Problem)
	}
}

// converter turns a YAML node tree into the JSON tree of the Go type it
// must decode into, checking on the way what encoding/json would report
// without a line (unknown fields, wrong JSON types) and recording the line
// of every field path.
type converter struct {
	lines    map[string]int
	problems []LineError
}

func (c *converter) add(field string, line int, problem string) {
	if len(c.problems) == maxProblems {
		c.problems = append(c.problems, LineError{Problem: "and more problems"})
	}
	if len(c.problems) > maxProblems {
		return
	}
	c.problems = append(c.problems, LineError{Field: field, Line: line, Problem: problem})
}

// lineOf is the line of a field path, or of the nearest enclosing path
// that has one ("stages[1].workload" for "stages[1].workload.command" when
// command was left out).
func (c *converter) lineOf(path string) int {
	for path != "" {
		if l, ok := c.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

var (
	rawMessage  = reflect.TypeFor[json.RawMessage]()
	timeType    = reflect.TypeFor[time.Time]()
	unmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarsh = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// leaf reports whether values of t are taken as they come (checked by t's
// own decoding): raw JSON, times, and non-struct types that decode
// themselves (a quantity such as "0.25").
func leaf(t reflect.Type) bool {
	if t == nil || t == rawMessage || t == timeType || t.Kind() == reflect.Interface {
		return true
	}
	p := reflect.PointerTo(t)
	return t.Kind() != reflect.Struct && (p.Implements(unmarshaler) || p.Implements(textUnmarsh))
}

// convert returns the JSON value of n as t will decode it (nil t: any
// value), and records problems and lines under the path at.
func (c *converter) convert(n *yaml.Node, at string, t reflect.Type) any {
	if at != "" {
		c.lines[at] = n.Line
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		c.add(at, n.Line, "YAML aliases are not supported: write the value out")
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if leaf(t) {
		t = nil
	}
	want := func(what string) any {
		c.add(at, n.Line, "must be "+what+", not "+describe(n))
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		if t != nil && t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
			return want(api.JSONType(t))
		}
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				c.add(at, k.Line, "keys must be plain names (no merge keys or complex keys)")
				continue
			}
			path := join(at, k.Value)
			if _, dup := out[k.Value]; dup {
				c.add(path, k.Line, "is given twice")
				continue
			}
			var vt reflect.Type
			switch {
			case t == nil:
			case t.Kind() == reflect.Map:
				vt = t.Elem()
			default:
				f, ok := fieldByTag(t, k.Value)
				if !ok {
					c.lines[path] = k.Line
					c.add(path, k.Line, "unknown field")
					continue
				}
				vt = f.Type
			}
			out[k.Value] = c.convert(v, path, vt)
			c.lines[path] = k.Line
		}
		return out
	case yaml.SequenceNode:
		if t != nil && t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return want(api.JSONType(t))
		}
		var et reflect.Type
		if t != nil {
			et = t.Elem()
		}
		out := make([]any, 0, len(n.Content))
		for i, e := range n.Content {
			out = append(out, c.convert(e, fmt.Sprintf("%s[%d]", at, i), et))
		}
		return out
	case yaml.ScalarNode:
		v, err := scalar(n)
		if err != nil {
			c.add(at, n.Line, err.Error())
			return nil
		}
		if t == nil {
			return v
		}
		switch t.Kind() {
		case reflect.String:
			if s, ok := v.(string); ok {
				return s
			}
			return want("a string (quote it)")
		case reflect.Bool:
			if _, ok := v.(bool); ok {
				return v
			}
			return want("true or false")
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if n.Tag == "!!int" {
				return v
			}
			return want("a whole number")
		case reflect.Float32, reflect.Float64:
			if _, ok := v.(json.Number); ok {
				return v
			}
			return want("a number")
		default:
			return want(api.JSONType(t))
		}
	}
	c.add(at, n.Line, "is not a value")
	return nil
}

// describe names what a node holds, for "must be X, not Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!int", "!!float":
		return "the number " + n.Value
	case "!!bool":
		return n.Value
	}
	return fmt.Sprintf("%q", n.Value)
}

// scalar is the JSON value of a YAML scalar: a string, a bool or a
// json.Number (finite). Timestamps stay the text they were written as.
func scalar(n *yaml.Node) (any, error) {
	switch n.Tag {
	case "!!str", "!!timestamp", "":
		return n.Value, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("%q is not true or false", n.Value)
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return nil, fmt.Errorf("%s is not a whole number that fits in 64 bits", n.Value)
		}
		return json.Number(strconv.FormatInt(i, 10)), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s is not a finite number", n.Value)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	return nil, fmt.Errorf("values tagged %s are not supported", n.Tag)
}

// fieldByTag finds the field of struct t that JSON names key (exactly, as
// the card is written).
func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				if g, ok := fieldByTag(f.Type, key); ok {
					return g, true
				}
				continue
			}
			name = f.Name
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
