package cli

import (
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// A job stopped by a drain is told why before its SIGTERM
// ($GPUFLEET_STOP_FILE), keeps what it wrote in $GPUFLEET_CHECKPOINT_DIR,
// and its next attempt finds it there.
func TestLiveCheckpointSurvivesARequeue(t *testing.T) {
	s := startLiveServer(t)
	script := `n=$(cat "$GPUFLEET_CHECKPOINT_DIR/count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$GPUFLEET_CHECKPOINT_DIR/count"
if [ $n -ge 2 ]; then echo "attempt $n found its count; the stop was $(cat "$GPUFLEET_CHECKPOINT_DIR/stop")"; exit 0; fi
trap 'cp "$GPUFLEET_STOP_FILE" "$GPUFLEET_CHECKPOINT_DIR/stop"; exit 0' TERM
echo "attempt $n ready"
while true; do sleep 0.1; done`
	id := strings.TrimSpace(s.must(t, "submit", "--gpus", "1", "--", "sh", "-c", script))
	running := func() string {
		var w api.Workload
		mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
		if w.Status.Phase != "Running" {
			return w.Status.Phase
		}
		return ""
	}
	eventually(t, "attempt 1 running", running)
	// Drained only once it has counted and set its trap: a stop before
	// would find no count to keep.
	eventually(t, "attempt 1 ready", func() string {
		if logs := s.must(t, "logs", id); !strings.Contains(logs, "attempt 1 ready") {
			return logs
		}
		return ""
	})
	s.must(t, "drain", "node", "node-a", "--wait", "--timeout", "30s")
	s.must(t, "uncordon", "node", "node-a")
	if r := s.run(t, s.admin, "wait", id, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait: %+v", r)
	}
	var w api.Workload
	mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
	logs := s.must(t, "logs", id)
	if w.Status.Attempts != 2 || !strings.Contains(logs, "attempt 2 found its count; the stop was GPUFLEET_STOP_REASON=Drained") {
		t.Errorf("attempts %d, logs:\n%s", w.Status.Attempts, logs)
	}
}
