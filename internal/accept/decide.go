package accept

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// ErrStillRunning is Decide's refusal of a run that has not ended.
var ErrStillRunning = errors.New("the acceptance run is still running: decide once it has ended")

// Decide records a decision on a run, by a person at a time: it checks
// the decision (CheckDecision), refuses a run still running
// (ErrStillRunning), refuses extend, reserve, dedicate and scale on a run
// that did not pass unless the decision overrides it with a note, refuses
// an override with nothing to override, and appends it to the run's
// decisions (at most MaxDecisions), which it never rewrites; Decision
// becomes the latest. A run recorded with a decision but no history (before
// decisions were kept) starts its history with that decision. Problems
// with the decision are api.FieldErrors naming the field.
func Decide(run *api.AcceptanceRun, d api.Decision, by string, at time.Time) error {
	if fe := CheckDecision(&d); len(fe) > 0 {
		return api.FieldErrors(fe)
	}
	if run.Status == api.RunRunning {
		return fmt.Errorf("acceptance run %s: %w", run.ID, ErrStillRunning)
	}
	switch {
	case Commits(&d) && run.Status != api.RunPassed && !d.Override:
		why := run.Status
		if run.Message != "" {
			why += ": " + run.Message
		}
		return api.FieldErrors{{Field: "override", Problem: fmt.Sprintf("acceptance run %s did not pass (%s): %s commits capacity on it only with override and a note saying why (accept decide --override --note ...)", run.ID, why, d.Decision)}}
	case d.Override && !Commits(&d):
		return api.FieldErrors{{Field: "override", Problem: "reject needs no override: it commits nothing"}}
	case d.Override && run.Status == api.RunPassed:
		return api.FieldErrors{{Field: "override", Problem: fmt.Sprintf("acceptance run %s passed: there is nothing to override", run.ID)}}
	}
	if len(run.Decisions) == 0 && run.Decision != nil {
		run.Decisions = []api.Decision{*run.Decision}
	}
	if len(run.Decisions) >= MaxDecisions {
		return api.FieldErrors{{Field: "decision", Problem: fmt.Sprintf("acceptance run %s has %d decisions, the most one run keeps", run.ID, len(run.Decisions))}}
	}
	d.By, d.At = by, at.UTC()
	run.Decisions = append(run.Decisions, d)
	latest := d
	run.Decision = &latest
	return nil
}

// DecisionSummary says a decision in a line, for the audit trail and the
// checklist: "reserve (override: p95 met after the fix)" or "reject: too
// slow".
func DecisionSummary(d api.Decision) string {
	var b strings.Builder
	b.WriteString(d.Decision)
	switch {
	case d.Override:
		fmt.Fprintf(&b, " (override: %s)", d.Note)
	case d.Note != "":
		b.WriteString(": " + d.Note)
	}
	return b.String()
}
