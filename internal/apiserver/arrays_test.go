package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestArrayRoutes: POST /arrays stores a task per index and answers the
// array; bad ranges, a body without array (or /workloads with one) and
// env the server sets are 400s naming the field; an array beyond the
// pending bound is a 429 storing nothing; GET and DELETE follow the
// team's roles, another team's array being "not found".
func TestArrayRoutes(t *testing.T) {
	f := newFixture(t, store.Options{MaxPendingPerTeam: 12}, RateLimit{})
	body := `{"team":"research","name":"sweep","command":["python","sweep.py"],"resources":{"gpus":1},"array":{"start":0,"end":4,"maxRunning":2}}`
	a := f.do("member", "POST", "/api/v1/arrays", body)
	if a.status != http.StatusCreated {
		t.Fatalf("POST /arrays: %d %s", a.status, a.body)
	}
	var arr api.Array
	if err := json.Unmarshal([]byte(a.body), &arr); err != nil {
		t.Fatal(err)
	}
	if arr.Tasks != 5 || arr.Phases[api.PhasePending] != 5 || arr.Start != 0 || arr.End != 4 || arr.MaxRunning != 2 || arr.Name != "sweep" ||
		len(arr.TaskIDs) != 5 || arr.TaskIDs[3] != arr.ID+"-3" || a.header.Get("Location") != "/api/v1/arrays/"+arr.ID {
		t.Errorf("POST /arrays answered %+v (Location %q)", arr, a.header.Get("Location"))
	}
	var task api.Workload
	f.must("viewer", "GET", "/api/v1/workloads/"+arr.ID+"-3", "", http.StatusOK, &task)
	if task.Array == nil || task.Array.ID != arr.ID || task.Array.Index == nil || *task.Array.Index != 3 || task.Env["GPUFLEET_ARRAY_INDEX"] != "3" {
		t.Errorf("task 3: array %+v env %v", task.Array, task.Env)
	}
	// Refused, naming the field; nothing stored.
	for _, tt := range []struct{ path, body, field string }{
		{"/api/v1/workloads", body, `"array"`},
		{"/api/v1/arrays", `{"team":"research","command":["true"],"resources":{"gpus":1}}`, `"array"`},
		{"/api/v1/arrays", strings.Replace(body, `"end":4`, `"end":-2`, 1), `"array.end"`},
		{"/api/v1/arrays", strings.Replace(body, `"end":4`, `"end":100000`, 1), `"array"`},
		{"/api/v1/arrays", strings.Replace(body, `"maxRunning":2`, `"maxRunning":-1`, 1), `"array.maxRunning"`},
		{"/api/v1/arrays", strings.Replace(body, `"maxRunning":2`, `"maxRunning":2,"index":1`, 1), `"array.index"`},
		{"/api/v1/arrays", strings.Replace(body, `"resources"`, `"env":{"GPUFLEET_ARRAY_INDEX":"9"},"resources"`, 1), `"env"`},
	} {
		if a := f.do("member", "POST", tt.path, tt.body); a.status != http.StatusBadRequest || !strings.Contains(a.body, tt.field) {
			t.Errorf("POST %s %s: %d %s, want 400 naming %s", tt.path, tt.body, a.status, a.body, tt.field)
		}
	}
	// 5 pending + 8 is over the bound of 12: refused whole.
	if a := f.do("member", "POST", "/api/v1/arrays", strings.Replace(body, `"end":4`, `"end":7`, 1)); a.status != http.StatusTooManyRequests || !strings.Contains(a.body, "pending") {
		t.Errorf("over the pending bound: %d %s", a.status, a.body)
	}
	snap, err := f.st.Snapshot(context.Background())
	if err != nil || len(snap.Pending) != 5 {
		t.Fatalf("%d pending stored, want 5 (%v)", len(snap.Pending), err)
	}
	// Another team's array is not found; a viewer may read, not cancel.
	if a := f.do("bob", "GET", "/api/v1/arrays/"+arr.ID, ""); a.status != http.StatusNotFound {
		t.Errorf("bob reads research's array: %d %s", a.status, a.body)
	}
	if a := f.do("bob", "DELETE", "/api/v1/arrays/"+arr.ID, ""); a.status != http.StatusNotFound {
		t.Errorf("bob cancels research's array: %d %s", a.status, a.body)
	}
	if a := f.do("viewer", "DELETE", "/api/v1/arrays/"+arr.ID, ""); a.status != http.StatusForbidden {
		t.Errorf("a viewer cancels: %d %s", a.status, a.body)
	}
	if a := f.do("viewer", "GET", "/api/v1/arrays/wl-nosuch", ""); a.status != http.StatusNotFound {
		t.Errorf("a missing array: %d %s", a.status, a.body)
	}
	var got api.Array
	f.must("member", "DELETE", "/api/v1/arrays/"+arr.ID, "", http.StatusOK, &got)
	if got.Phases[api.PhaseCancelled] != 5 || got.Phases[api.PhasePending] != 0 {
		t.Errorf("after cancel: %+v", got.Phases)
	}
	f.must("viewer", "GET", "/api/v1/arrays/"+arr.ID, "", http.StatusOK, &got)
	if got.Phases[api.PhaseCancelled] != 5 {
		t.Errorf("GET after cancel: %+v", got.Phases)
	}
	// The same key and body replays the array.
	var ids []string
	for i, want := range []int{http.StatusCreated, http.StatusOK} {
		req, _ := http.NewRequest("POST", f.srv.URL+"/api/v1/arrays", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.token["member"])
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var a api.Array
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || resp.StatusCode != want {
			t.Fatalf("submission %d with a key: %d %v, want %d", i, resp.StatusCode, err, want)
		}
		ids = append(ids, a.ID)
	}
	if ids[0] == "" || ids[0] != ids[1] {
		t.Errorf("retry with the same key: arrays %v, want one", ids)
	}
	if tasks, _ := f.st.ArrayTasks(context.Background(), core.WorkloadID(ids[0])); len(tasks) != 5 {
		t.Errorf("%d tasks after a replayed submission, want 5", len(tasks))
	}
}
