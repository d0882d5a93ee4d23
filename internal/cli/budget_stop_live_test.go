package cli

import (
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// A hard budget with --stop-running, once spent, raises its alert on the
// team's running work and stops it; the work waits in the queue.
func TestLiveBudgetStopsRunningWork(t *testing.T) {
	s := startLiveServer(t)
	s.must(t, "set", "price", "local", "--on-demand", "3600")
	id := strings.TrimSpace(s.must(t, "submit", "--gpus", "1", "--priority", "training", "--", "sleep", "600"))
	eventually(t, id+" running", func() string {
		var w api.Workload
		mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
		if w.Status.Phase != "Running" {
			return w.Status.Phase
		}
		return ""
	})
	s.must(t, "set", "budget", "default", "--monthly", "0.000001", "--alert", "50%", "--hard", "--stop-running")
	var w api.Workload
	eventually(t, "the spent budget stops it", func() string {
		mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
		if w.Status.Phase != "Pending" || w.Status.Reason != "BudgetExceeded" {
			return w.Status.Phase + "/" + w.Status.Reason + ": " + w.Status.Message
		}
		return ""
	})
	if !strings.Contains(w.Status.Message, "hard budget is spent") {
		t.Errorf("waiting message %q", w.Status.Message)
	}
	if d := s.must(t, "describe", id); !strings.Contains(d, "BudgetAlert") || !strings.Contains(d, "BudgetExceeded") {
		t.Errorf("events: want the alert and the stop:\n%s", d)
	}
}
