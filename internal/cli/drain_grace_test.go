package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// drain --grace caps the grace period of the work it stops: a workload
// that ignores SIGTERM with a grace period of 60 s is killed after the
// drain's 1 s.
func TestLiveDrainGrace(t *testing.T) {
	s := startLiveServer(t)
	id := strings.TrimSpace(s.must(t, "submit", "--gpus", "1", "--grace-period", "60s", "--", "sh", "-c", `trap "" TERM; sleep 600`))
	eventually(t, id+" running", func() string {
		var w api.Workload
		mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
		if w.Status.Phase != "Running" {
			return w.Status.Phase + ": " + w.Status.Message
		}
		return ""
	})
	start := time.Now()
	r := s.run(t, s.admin, "drain", "node", "node-a", "--grace", "1s", "--wait", "--timeout", "30s")
	if r.code != 0 || !strings.Contains(r.stdout, "node/node-a drained") {
		t.Fatalf("drain --grace 1s --wait: %+v", r)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("drain took %s, want about the drain's grace of 1 s, not the workload's 60 s", took)
	}
}
