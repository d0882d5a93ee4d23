package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
)

// decodeWorkloadFile reads a workload spec written as YAML or JSON, with the
// API's field names, strictly: a field the API does not know is an error
// that names it. Two things a person writes by hand are accepted besides the
// API's form: a command written as one line ("command: python train.py
// --epochs 3") is split into words as a shell would, though no shell runs
// it; resources.gpuMemoryMiB and resources.memoryMiB take a size with a
// unit ("20GiB", "8G"; quantity.MemoryUnits) as well as a number of MiB; a
// port in ports may be a number (8888) or a "NAME=NUMBER" string as --port
// takes it, besides the API's {name, port} mapping; and a
// number or a boolean where the API wants a string (command: [sleep, 2],
// env: {EPOCHS: 3}) is the text it was written as. Every problem names its
// field in the file's terms, never Go's.
func decodeWorkloadFile(b []byte) (*api.Workload, error) {
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		msg = strings.TrimPrefix(msg, "yaml: ")
		msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
		msg = strings.ReplaceAll(msg, "already set in map", "appears twice")
		return nil, fmt.Errorf("%s", msg)
	}
	j = bytes.TrimSpace(j)
	if len(j) == 0 || string(j) == "null" {
		return nil, fmt.Errorf("is empty: a workload spec is expected (command, resources, ...)")
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("must be a workload spec, a mapping of fields (command, resources, ...), not a list or a single value")
	}
	var errs api.FieldErrors
	// YAML reads [sleep, 2] as a string and a number, and {A: 1} as a
	// number: where the API wants strings, a number or a boolean stands
	// for the text it was written as.
	if words, ok := doc["command"].([]any); ok {
		for i, v := range words {
			words[i] = asText(v)
		}
	}
	for _, k := range []string{"env", "labels", "nodeSelector"} {
		if m, ok := doc[k].(map[string]any); ok {
			for key, v := range m {
				m[key] = asText(v)
			}
		}
	}
	if s, ok := doc["command"].(string); ok {
		words, err := splitCommand(s)
		if err != nil {
			errs = append(errs, api.FieldError{Field: "command", Problem: err.Error()})
		} else {
			doc["command"] = words
		}
	}
	if res, ok := doc["resources"].(map[string]any); ok {
		for _, k := range []string{"gpuMemoryMiB", "memoryMiB"} {
			s, ok := res[k].(string)
			if !ok {
				continue
			}
			mib, err := quantity.ParseMemoryMiB(s)
			if err != nil {
				errs = append(errs, api.FieldError{Field: "resources." + k, Problem: fmt.Sprintf("%q: %v", s, err)})
				continue
			}
			res[k] = mib
		}
	}
	// ports: [8888, "http=8000", {name: metrics, port: 9100}] (open.go).
	if ports, ok := doc["ports"].([]any); ok {
		for i, v := range ports {
			var s string
			switch v := v.(type) {
			case json.Number:
				s = v.String()
			case string:
				s = v
			default:
				continue // a mapping, for the strict decoder to judge
			}
			p, err := parsePort(s)
			if err != nil {
				errs = append(errs, api.FieldError{Field: fmt.Sprintf("ports[%d]", i), Problem: fmt.Sprintf("%q: %v", s, err)})
				continue
			}
			ports[i] = p
		}
	}
	if len(errs) > 0 {
		return nil, fileErrors(errs)
	}
	j, err = json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var w api.Workload
	if err := api.DecodeStrict(j, &w); err != nil {
		if fe, ok := err.(api.FieldErrors); ok {
			return nil, fileErrors(fe)
		}
		return nil, err
	}
	return &w, nil
}

// asText turns a number or a boolean into its text, and leaves anything
// else for the strict decoder to judge.
func asText(v any) any {
	switch v := v.(type) {
	case json.Number:
		return v.String()
	case bool:
		return fmt.Sprint(v)
	}
	return v
}

// fileWords puts the API's JSON words in a file's: lists and mappings.
var fileWords = strings.NewReplacer(
	"an array of strings", "a list of strings", "an object of strings", "a mapping of strings",
	"an array", "a list", "an object", "a mapping",
	"a JSON array", "a list", "a JSON object", "a mapping", "a JSON ", "a ")

// fileErrors renders the problems of a file on one line, each naming its
// field: `unknown field "colour"`, `replicas: must be a whole number, not a
// string`.
func fileErrors(fe api.FieldErrors) error {
	parts := make([]string, len(fe))
	for i, f := range fe {
		if f.Problem == "unknown field" {
			parts[i] = fmt.Sprintf("unknown field %q", f.Field)
			continue
		}
		if f.Field == "body" { // the file as a whole, or a field the decoder did not name
			parts[i] = fileWords.Replace(f.Problem)
			continue
		}
		parts[i] = f.Field + ": " + fileWords.Replace(f.Problem)
	}
	return fmt.Errorf("%s", strings.Join(parts, "; "))
}

// splitCommand splits a command line into words as a POSIX shell would:
// blanks separate words, single quotes keep everything, double quotes keep
// everything but \" \\ \$ and \`, and a backslash outside quotes keeps the
// next character. Nothing else a shell does happens (no shell runs the
// command), so the characters that would ask for it, unquoted, are refused
// with a message saying how to write the command instead.
func splitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	const shellOnly = "|&;<>()$`*?"
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '\'':
			j := i + 1
			for j < len(rs) && rs[j] != '\'' {
				j++
			}
			if j == len(rs) {
				return nil, fmt.Errorf("%q has a ' that is not closed", s)
			}
			cur.WriteString(string(rs[i+1 : j]))
			inWord, i = true, j
		case r == '"':
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' && j+1 < len(rs) && strings.ContainsRune("\"\\$`", rs[j+1]) {
					j++
				}
				cur.WriteRune(rs[j])
			}
			if j == len(rs) {
				return nil, fmt.Errorf("%q has a \" that is not closed", s)
			}
			inWord, i = true, j
		case r == '\\':
			if i+1 == len(rs) {
				return nil, fmt.Errorf("%q ends with a lone \\", s)
			}
			i++
			cur.WriteRune(rs[i])
			inWord = true
		case strings.ContainsRune(shellOnly, r) || (r == '#' || r == '~') && !inWord:
			return nil, fmt.Errorf("%q uses the shell's %q, but no shell runs the command: quote the character, or write the command as a list, e.g. [sh, -c, %q]", s, r, s)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("must not be empty: give the program to run and its arguments")
	}
	return words, nil
}
