package api

import (
	"encoding/json"
	"strings"
	"testing"
)

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
