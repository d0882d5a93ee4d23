package accept

import (
	"fmt"
	"strings"
	"time"
)

// Disrupted is what a failure stage saw of one of its workloads.
type Disrupted struct {
	Workload string
	// Phase is where the workload ended (Succeeded, Failed, ...), or
	// where it was when the stage stopped looking.
	Phase string
	// Ran is how long it ran (or served) before it ended or was disrupted;
	// DisruptAfter is when the stage disrupts it.
	Ran, DisruptAfter time.Duration
	// DisruptedAt and RecoveredAt are when the stage disrupted it and
	// when it ran (or served) again; nil when it did not.
	DisruptedAt, RecoveredAt *time.Time
	// Timeout is the stage's, when it ended the stage.
	Timeout time.Duration
}

// FailureProblem says why a failure stage tested nothing or its workload
// did not recover ("" when each workload was disrupted and recovered): a
// stage passes on its criteria only when the failure it is for happened.
// A workload that ended before its disruption tested nothing; one
// disrupted that never ran again did not recover, within the stage's
// timeout when that ended it.
func FailureProblem(ws []Disrupted) string {
	var problems []string
	for _, w := range ws {
		switch {
		case w.DisruptedAt == nil:
			problems = append(problems, fmt.Sprintf("workload %s ended (%s) after running %s, before it was disrupted (the stage disrupts it once it has run %s, disruptAfterSeconds): nothing was tested; give the stage work that outlasts the disruption",
				w.Workload, w.Phase, w.Ran.Round(100*time.Millisecond), w.DisruptAfter))
		case w.RecoveredAt == nil && w.Timeout > 0:
			problems = append(problems, fmt.Sprintf("workload %s, disrupted at %s, did not recover within the stage's timeout of %s (it is %s)",
				w.Workload, w.DisruptedAt.UTC().Format(time.RFC3339), w.Timeout, w.Phase))
		case w.RecoveredAt == nil:
			problems = append(problems, fmt.Sprintf("workload %s, disrupted at %s, never ran again: it ended %s without recovering",
				w.Workload, w.DisruptedAt.UTC().Format(time.RFC3339), w.Phase))
		}
	}
	return strings.Join(problems, "; ")
}
