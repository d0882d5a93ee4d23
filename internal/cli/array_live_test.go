package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/config"
)

// TestLiveArray: submit --array makes one task per index in one request;
// the %cap holds on a server with room for more; get folds the array into
// one row unless --expand; wait, logs and cancel take the array or one
// task (ARRAYID-INDEX, or Slurm's ARRAYID_INDEX).
func TestLiveArray(t *testing.T) {
	s := startLiveServerWith(t, func(c *config.Config) { c.Limits.MaxPendingPerTeam = 20 })
	id := strings.TrimSpace(s.must(t, "submit", "--array", "0-5%2", "--name", "sweep", "--gpus", "1", "--",
		"sh", "-c", `echo "task $GPUFLEET_ARRAY_INDEX of $GPUFLEET_ARRAY_ID"; sleep 0.5`))
	if !strings.HasPrefix(id, "wl-") || strings.Count(id, "-") != 1 {
		t.Fatalf("submit --array printed %q, want an array ID", id)
	}
	// Watch the tasks while they run: never more than 2 at once, though
	// the node has 4 GPUs.
	var mu sync.Mutex
	most, limited := 0, false
	stop := make(chan struct{})
	var watching sync.WaitGroup
	watching.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var l api.List[api.Workload]
			r := s.run(t, s.admin, "get", "workloads", "-o", "json")
			if r.code == 0 && json.Unmarshal([]byte(r.stdout), &l) == nil {
				n := 0
				for _, w := range l.Items {
					if w.Array != nil && w.Array.ID == id && w.Status.Phase == api.PhaseRunning {
						n++
					}
					if w.Array != nil && w.Array.ID == id && w.Status.Reason == "ArrayLimit" {
						mu.Lock()
						limited = true
						mu.Unlock()
					}
				}
				mu.Lock()
				most = max(most, n)
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond) // the sampler's pace
		}
	})
	if r := s.run(t, s.admin, "wait", id, "--timeout", "60s"); r.code != 0 {
		t.Fatalf("wait %s: exit %d %s%s", id, r.code, r.stdout, r.stderr)
	}
	close(stop)
	watching.Wait()
	if most > 2 {
		t.Errorf("%d tasks ran at once, over the cap of 2", most)
	}
	if !limited {
		t.Errorf("no task was seen waiting with reason ArrayLimit")
	}
	// One row for the array, its tasks counted; --expand lists them.
	table := s.must(t, "get", "workloads")
	if !strings.Contains(table, id) || !strings.Contains(table, "sweep[0-5%2]") || !strings.Contains(table, "Succeeded 6") || strings.Contains(table, id+"-") {
		t.Errorf("get workloads does not fold the array into one row:\n%s", table)
	}
	expanded := s.must(t, "get", "workloads", "--expand")
	for i := range 6 {
		if !strings.Contains(expanded, fmt.Sprintf("%s-%d ", id, i)) {
			t.Errorf("get workloads --expand lacks task %d:\n%s", i, expanded)
		}
	}
	// The tasks' env, through their logs: the array's, and one task's.
	logs := s.must(t, "logs", id)
	for i := range 6 {
		head, body, _ := strings.Cut(logs, fmt.Sprintf("==> %s-%d <==\n", id, i))
		if next, _, _ := strings.Cut(body, "==>"); head == logs || !strings.Contains(next, fmt.Sprintf("task %d of %s\n", i, id)) {
			t.Errorf("logs %s lacks task %d:\n%s", id, i, logs)
		}
	}
	if got := s.must(t, "logs", id+"_3"); !strings.HasSuffix(got, fmt.Sprintf("\ntask 3 of %s\n", id)) || strings.Contains(got, "==>") {
		t.Errorf("logs %s_3 = %q", id, got)
	}
	var task api.Workload
	mustJSON(t, s.must(t, "get", "workload", id+"-4", "-o", "json"), &task)
	if task.Array == nil || task.Array.ID != id || task.Array.Index == nil || *task.Array.Index != 4 || task.Env["GPUFLEET_ARRAY_INDEX"] != "4" {
		t.Errorf("task 4: array %+v env %v", task.Array, task.Env)
	}

	// Cancel one task, then the array; wait then fails.
	long := strings.TrimSpace(s.must(t, "submit", "--array", "0-9%1", "--gpus", "1", "--grace-period", "1s", "--", "sleep", "300"))
	if out := s.must(t, "cancel", long+"_9"); !strings.Contains(out, long+"-9 cancelled") {
		t.Errorf("cancel %s_9: %q", long, out)
	}
	var a api.Array
	mustJSON(t, s.must(t, "cancel", long, "-o", "json"), &a)
	if a.Tasks != 10 || a.Phases[api.PhasePending] != 0 {
		t.Errorf("cancel %s: %+v", long, a)
	}
	if r := s.run(t, s.admin, "wait", long, "--timeout", "60s"); r.code != 1 || !strings.Contains(r.stderr, "did not succeed") {
		t.Errorf("wait on a cancelled array: exit %d %q", r.code, r.stderr)
	}

	// Refused, naming the field: a bad range here, and beyond the team's
	// pending bound (20) at the server, storing nothing.
	if r := s.run(t, s.admin, "submit", "--array", "5-3", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "array") {
		t.Errorf("--array 5-3: exit %d %q", r.code, r.stderr)
	}
	r := s.run(t, s.admin, "submit", "--array", "0-20", "--gpus", "1", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "pending") {
		t.Errorf("an array over the pending bound: exit %d %q", r.code, r.stderr)
	}
	var l api.List[api.Workload]
	mustJSON(t, s.must(t, "get", "workloads", "-o", "json"), &l)
	if len(l.Items) != 16 {
		t.Errorf("%d workloads stored, want the 16 tasks of the two arrays", len(l.Items))
	}
}
