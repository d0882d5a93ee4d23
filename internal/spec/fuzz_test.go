package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gpufleet/gpufleet/api"
)

// decodeStrict decodes a submitted workload the way the server does: one
// JSON object, unknown fields refused.
func decodeStrict(b []byte) (*api.Workload, error) {
	var w api.Workload
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errMore
	}
	return &w, nil
}

var errMore = api.FieldErrors{{Field: "body", Problem: "holds more than one JSON value"}}

// knownField matches every field name CheckWorkload and the decoder may report.
// A problem must name one of them (a map key or an index may follow).
var knownField = regexp.MustCompile(`^(name|team|priority|kind|replicas|command|command\[\d+\]|env|env\..*|workingDir|` +
	`maxRuntimeSeconds|gracePeriodSeconds|labels|labels\..*|nodeSelector|nodeSelector\..*|id|owner|status|createdAt|` +
	`resources|resources\.(gpus|cpu|gpuMemoryMiB|memoryMiB|gpuModels|gpuModels\[\d+\]|.+)|body)$`)

// workloadSeeds are submitted specs, valid and invalid, the fuzzer starts
// from.
var workloadSeeds = []string{
	`{"command":["true"],"resources":{"gpus":1}}`,
	`{"name":"train-1","team":"research","kind":"job","priority":"training","command":["python","train.py","--lr","0.1"],"resources":{"gpus":2,"cpu":"1.5","memoryMiB":4096,"gpuModels":["H100"]},"env":{"A":"1","B_2":"x"},"workingDir":"runs/a","labels":{"app":"x"},"nodeSelector":{"gpufleet.io/pool":"local"},"maxRuntimeSeconds":60,"gracePeriodSeconds":10}`,
	`{"command":["sh","-c","echo hi"],"resources":{"gpus":0.25}}`,
	`{"command":["sh"],"resources":{"gpus":"0.5"}}`,
	`{"command":["nb"],"kind":"notebook","resources":{"gpuMemoryMiB":20480}}`,
	`{"command":["x"],"replicas":4,"resources":{"gpus":8}}`,
	`{"command":["true"],"resources":{"gpus":0}}`,
	`{"command":["true"],"resources":{"gpus":-1}}`,
	`{"command":["true"],"resources":{"gpus":1.5}}`,
	`{"command":["true"],"resources":{"gpus":0.0001}}`,
	`{"command":["true"],"resources":{"gpus":1e3}}`,
	`{"command":["true"],"resources":{"gpus":1,"gpuMemoryMiB":10}}`,
	`{"command":["true"],"resources":{"gpus":1,"gpuz":1}}`,
	`{"command":["true"],"resources":{"gpus":99999999999999999999}}`,
	`{"command":[],"resources":{"gpus":1}}`,
	`{"command":[""],"resources":{"gpus":1}}`,
	`{"command":"true","resources":{"gpus":1}}`,
	`{"command":["a\u0000b"],"resources":{"gpus":1}}`,
	`{"command":["true"],"kind":"daemon","resources":{"gpus":1}}`,
	`{"command":["true"],"workingDir":"../../etc","resources":{"gpus":1}}`,
	`{"command":["true"],"workingDir":"/etc","resources":{"gpus":1}}`,
	`{"command":["true"],"env":{"A-B":"1"},"resources":{"gpus":1}}`,
	`{"command":["true"],"env":{"GPUFLEET_TOKEN":"1"},"resources":{"gpus":1}}`,
	`{"command":["true"],"labels":{"-bad":"x"},"resources":{"gpus":1}}`,
	`{"command":["true"],"nodeSelector":{"k":"bad value"},"resources":{"gpus":1}}`,
	`{"command":["true"],"priority":"Production!","resources":{"gpus":1}}`,
	`{"command":["true"],"team":"Research","resources":{"gpus":1}}`,
	`{"command":["true"],"replicas":-1,"resources":{"gpus":1}}`,
	`{"command":["true"],"gracePeriodSeconds":99999,"resources":{"gpus":1}}`,
	`{"command":["true"],"maxRuntimeSeconds":9223372037,"resources":{"gpus":1}}`,
	`{"command":["true"],"maxRuntimeSeconds":18446744074,"resources":{"gpus":1}}`,
	`{"command":["true"],"maxRuntimeSeconds":99999999999999999999,"resources":{"gpus":1}}`,
	`{"command":["true"],"maxRuntimeSeconds":31536000,"gracePeriodSeconds":3600,"replicas":256,"resources":{"gpus":8,"cpu":1024,"memoryMiB":16777216}}`,
	`{"command":["true"],"resources":{"gpuMemoryMiB":1048577}}`,
	`{"command":["true"],"resources":{"gpus":1,"cpu":"1099511627775.999","memoryMiB":9223372036854775807}}`,
	`{"command":["true"],"id":"wl-abc","owner":"eve","resources":{"gpus":1}}`,
	`{"command":["true"],"resources":{"gpus":1},"status":{"phase":"Succeeded"}}`,
	`{"command":["true"],"resources":{"gpus":1},"createdAt":"2020-01-01T00:00:00Z"}`,
	`{"command":["true"],"resources":{"gpus":1}}{"command":["x"]}`,
	`{"command":["true"`,
	`[]`,
	`null`,
	``,
}

// FuzzWorkloadDecode decodes a submitted workload strictly and validates it:
// nothing panics, every problem names a known field, and a workload that
// passes validation survives encoding and decoding unchanged and still
// passes.
func FuzzWorkloadDecode(f *testing.F) {
	for _, s := range workloadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeStrict(b)
		if err != nil {
			var fe api.FieldErrors
			if errors.As(err, &fe) {
				checkFields(t, b, fe)
			}
			return
		}
		problems := CheckWorkload(w)
		checkFields(t, b, problems)
		if len(problems) > 0 {
			return
		}
		again, err := json.Marshal(w)
		if err != nil {
			t.Fatalf("a valid workload does not encode: %v\ninput: %q", err, b)
		}
		w2, err := decodeStrict(again)
		if err != nil {
			t.Fatalf("a valid workload, encoded, does not decode: %v\ninput: %q\nencoded: %s", err, b, again)
		}
		if diff := cmp.Diff(w, w2, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the workload (-first +second):\n%s\ninput: %q", diff, b)
		}
		if p := CheckWorkload(w2); len(p) > 0 {
			t.Fatalf("valid workload invalid after a round trip: %v\ninput: %q", p, b)
		}
		checkConversions(t, w, b)
	})
}

// checkConversions fails when a number of a valid workload does not survive
// the conversions the server makes: seconds to a time.Duration, MiB to
// bytes, and a quantity times the replicas.
func checkConversions(t *testing.T, w *api.Workload, in []byte) {
	t.Helper()
	for _, s := range []struct {
		field string
		v     int64
	}{{"maxRuntimeSeconds", w.MaxRuntimeSeconds}, {"gracePeriodSeconds", w.GracePeriodSeconds}} {
		if d := time.Duration(s.v) * time.Second; d < 0 || int64(d/time.Second) != s.v {
			t.Fatalf("valid %s %d overflows a time.Duration (%v)\ninput: %q", s.field, s.v, d, in)
		}
	}
	replicas := int64(max(w.Replicas, 1))
	r := w.Resources
	for _, q := range []struct {
		field string
		v     int64
		mul   int64
	}{
		{"resources.gpuMemoryMiB", r.GPUMemoryMiB, 1 << 20 * replicas},
		{"resources.memoryMiB", r.MemoryMiB, 1 << 20 * replicas},
		{"resources.cpu", int64(r.CPU), replicas},
		{"resources.gpus", int64(r.GPUs), replicas},
	} {
		if q.v != 0 && (q.v*q.mul)/q.mul != q.v {
			t.Fatalf("valid %s %d times %d overflows\ninput: %q", q.field, q.v, q.mul, in)
		}
	}
}

func checkFields(t *testing.T, in []byte, fe []api.FieldError) {
	t.Helper()
	for _, p := range fe {
		if p.Field == "" || p.Problem == "" || !knownField.MatchString(p.Field) {
			t.Fatalf("problem %+v does not name a known field\ninput: %q", p, in)
		}
	}
}

// TestKnownFieldPattern keeps the fuzz target's field check honest: it
// accepts what CheckWorkload reports and refuses what no workload has.
func TestKnownFieldPattern(t *testing.T) {
	for _, f := range []string{"resources.gpus", "env.A-B", "command[3]", "labels.x", "status", "createdAt", "resources.gpuModels[0]"} {
		if !knownField.MatchString(f) {
			t.Errorf("%q should be a known field", f)
		}
	}
	for _, f := range []string{"", "gpus", "commandx", "foo"} {
		if knownField.MatchString(f) {
			t.Errorf("%q should not be a known field", f)
		}
	}
}
