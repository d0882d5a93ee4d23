package accept

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

// fieldOf is the field a FieldErrors names first ("" for another error).
func fieldOf(err error) string {
	var fe api.FieldErrors
	if errors.As(err, &fe) && len(fe) > 0 {
		return fe[0].Field
	}
	return ""
}

// Two decisions on a passing run are both kept, in order; the latest is
// Decision too.
func TestDecideAppends(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	run := &api.AcceptanceRun{ID: "ar-1", Status: api.RunPassed}
	if err := Decide(run, api.Decision{Decision: api.DecisionExtend, Note: "two more weeks"}, "alice", at); err != nil {
		t.Fatal(err)
	}
	if err := Decide(run, api.Decision{Decision: api.DecisionReserve}, "bob", at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	want := []api.Decision{
		{Decision: api.DecisionExtend, Note: "two more weeks", By: "alice", At: at},
		{Decision: api.DecisionReserve, By: "bob", At: at.Add(time.Hour)},
	}
	if diff := cmp.Diff(want, run.Decisions); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if run.Decision == nil || *run.Decision != want[1] {
		t.Errorf("decision = %+v, want the latest", run.Decision)
	}
}

// A run recorded with one decision and no history keeps that decision
// as the first of its history.
func TestDecideKeepsAnEarlierSingleDecision(t *testing.T) {
	old := api.Decision{Decision: api.DecisionReject, By: "carol", At: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	run := &api.AcceptanceRun{ID: "ar-1", Status: api.RunFailed, Decision: &old}
	if err := Decide(run, api.Decision{Decision: api.DecisionReserve, Override: true, Note: "fixed upstream"}, "dan", time.Now()); err != nil {
		t.Fatal(err)
	}
	if len(run.Decisions) != 2 || run.Decisions[0] != old || run.Decision.Decision != api.DecisionReserve || !run.Decision.Override {
		t.Errorf("decisions %+v, decision %+v", run.Decisions, run.Decision)
	}
}

func TestDecideRefuses(t *testing.T) {
	failed := func() *api.AcceptanceRun {
		return &api.AcceptanceRun{ID: "ar-2", Status: api.RunFailed, Message: "stage load failed: p95_ttft_ms <= 20"}
	}
	for _, tc := range []struct {
		name  string
		run   *api.AcceptanceRun
		d     api.Decision
		field string
		want  string
	}{
		{"reserve on a failed run", failed(), api.Decision{Decision: api.DecisionReserve}, "override", "did not pass (Failed: stage load failed: p95_ttft_ms <= 20)"},
		{"scale on an errored run", &api.AcceptanceRun{ID: "ar-3", Status: api.RunError}, api.Decision{Decision: api.DecisionScale}, "override", "did not pass"},
		{"an override without a note", failed(), api.Decision{Decision: api.DecisionDedicate, Override: true, Note: "  "}, "note", "needs a note"},
		{"an override of a passing run", &api.AcceptanceRun{ID: "ar-4", Status: api.RunPassed}, api.Decision{Decision: api.DecisionReserve, Override: true, Note: "x"}, "override", "nothing to override"},
		{"an override of a reject", failed(), api.Decision{Decision: api.DecisionReject, Override: true, Note: "x"}, "override", "commits nothing"},
		{"an unknown decision", failed(), api.Decision{Decision: "keep"}, "decision", "unknown decision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := *tc.run
			err := Decide(tc.run, tc.d, "alice", time.Now())
			if fieldOf(err) != tc.field || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a problem with %s saying %q", err, tc.field, tc.want)
			}
			if tc.run.Decision != before.Decision || len(tc.run.Decisions) != 0 {
				t.Errorf("a refused decision changed the run: %+v", tc.run)
			}
		})
	}
	if err := Decide(&api.AcceptanceRun{ID: "ar-5", Status: api.RunRunning}, api.Decision{Decision: api.DecisionReject}, "a", time.Now()); !errors.Is(err, ErrStillRunning) {
		t.Errorf("a running run: got %v", err)
	}
	// Reject needs no override on a failed run; a failed run may be
	// overridden with a note.
	run := failed()
	if err := Decide(run, api.Decision{Decision: api.DecisionReject, Note: "too slow"}, "a", time.Now()); err != nil {
		t.Errorf("reject on a failed run: %v", err)
	}
	if err := Decide(run, api.Decision{Decision: api.DecisionReserve, Override: true, Note: "the SLO was relaxed"}, "a", time.Now()); err != nil {
		t.Errorf("an override with a note: %v", err)
	}
	if got := DecisionSummary(*run.Decision); got != "reserve (override: the SLO was relaxed)" {
		t.Errorf("summary %q", got)
	}
	full := &api.AcceptanceRun{ID: "ar-6", Status: api.RunPassed, Decisions: make([]api.Decision, MaxDecisions)}
	if err := Decide(full, api.Decision{Decision: api.DecisionReject}, "a", time.Now()); fieldOf(err) != "decision" {
		t.Errorf("past the bound: got %v", err)
	}
}
