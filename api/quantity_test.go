package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParseMemoryMiB: the units people type, in any case, all powers of
// 1024; a bad size says what is accepted.
func TestParseMemoryMiB(t *testing.T) {
	good := map[string]int64{
		"512": 512, "512M": 512, "512MiB": 512, "512Mi": 512, "512MB": 512, "512mb": 512, "512 MiB": 512,
		"20G": 20480, "20GB": 20480, "20GiB": 20480, "20Gi": 20480, "20gb": 20480, "20gib": 20480, "20g": 20480,
		"1.5G": 1536, "0.5GiB": 512, "1T": 1 << 20, "1TB": 1 << 20, "1TiB": 1 << 20, "1ti": 1 << 20,
	}
	for in, want := range good {
		got, err := ParseMemoryMiB(in)
		if err != nil || got != want {
			t.Errorf("ParseMemoryMiB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	// --memory 8G and --gpu-memory 8GB mean the same.
	a, _ := ParseMemoryMiB("8G")
	b, _ := ParseMemoryMiB("8GB")
	if a != b || a != 8192 {
		t.Errorf("8G = %d MiB, 8GB = %d MiB; want both 8192", a, b)
	}
	bad := map[string]string{
		"":             "want a size such as 20GiB",
		"GiB":          "want a size such as 20GiB",
		"20 gigs":      "one of the units MiB, GiB or TiB (also written M, G, T, Mi, Gi, Ti, MB, GB, TB, in any case)",
		"20KiB":        "all powers of 1024",
		"20PB":         "a bare number is MiB",
		"0G":           "must be positive",
		"-1G":          "must be positive",
		"0.1G":         "not a whole number of MiB (102.4 MiB)",
		"1.2345G":      "more than three decimals",
		"1e3":          "not a number",
		"99999999999T": "too large",
	}
	for in, want := range bad {
		_, err := ParseMemoryMiB(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseMemoryMiB(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

// TestDecodeStrictSpeaksJSON: decoding errors name the field and the JSON
// it takes, never a Go type.
func TestDecodeStrictSpeaksJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"command":"sleep 2"}`, "command: must be an array of strings, not a JSON string"},
		{`{"env":["A=1"]}`, "env: must be an object of strings, not a JSON array"},
		{`{"replicas":"2"}`, "replicas: must be a whole number, not a JSON string"},
		{`{"resources":{"gpuMemoryMiB":"20GiB"}}`, "resources.gpuMemoryMiB: must be a whole number, not a JSON string"},
		{`{"resources":{"gpus":[1]}}`, "resources.gpus"},
		{`{"colour":"red"}`, "colour: unknown field"},
		{`{"name":"a"} {}`, "body: holds more than one JSON value"},
		{`{"maxRuntimeSeconds":true}`, "maxRuntimeSeconds: must be a whole number, not a JSON bool"},
	}
	for _, tt := range tests {
		var w Workload
		err := DecodeStrict([]byte(tt.in), &w)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("DecodeStrict(%s) = %v, want %q", tt.in, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "int64") || strings.Contains(err.Error(), "[]string")) {
			t.Errorf("DecodeStrict(%s) = %v: speaks Go", tt.in, err)
		}
	}
	var w Workload
	if err := DecodeStrict([]byte(`{"name":"a","command":["true"]}`), &w); err != nil || w.Name != "a" {
		t.Errorf("a good workload: %v, %+v", err, w)
	}
	if err := json.Unmarshal([]byte(`{"gpuMemoryMiB":"x"}`), &w.Resources); err == nil || strings.Contains(err.Error(), "int64") {
		t.Errorf("Resources with a string gpuMemoryMiB: %v, want an error in JSON words", err)
	}
}

// TestParsePhase: any case; an unknown phase lists the phases.
func TestParsePhase(t *testing.T) {
	for in, want := range map[string]string{"running": PhaseRunning, "PENDING": PhasePending, " Succeeded ": PhaseSucceeded, "cancelled": PhaseCancelled} {
		if got, err := ParsePhase(in); err != nil || got != want {
			t.Errorf("ParsePhase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	_, err := ParsePhase("done")
	if err == nil || err.Error() != `unknown phase "done": want one of Pending, Running, Succeeded, Failed, Cancelled` {
		t.Errorf("ParsePhase(done) = %v", err)
	}
}

// TestLabelErrorsSayTheRule: a label key or value that breaks the rule
// says the rule.
func TestLabelErrorsSayTheRule(t *testing.T) {
	w := Workload{Command: []string{"true"}, Resources: Resources{GPUs: 1000}, Labels: map[string]string{"team": "ünïcode", "bad key!": "x"},
		NodeSelector: map[string]string{"zone": "a b"}}
	got := map[string]string{}
	for _, e := range w.Validate() {
		got[e.Field] += e.Problem
	}
	for _, f := range []string{"labels.team", "labels.bad key!", "nodeSelector.zone"} {
		if !strings.Contains(got[f], LabelRule) {
			t.Errorf("%s: %q, want the rule %q", f, got[f], LabelRule)
		}
	}
}
