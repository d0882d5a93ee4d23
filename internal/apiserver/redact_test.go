package apiserver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestOtherTeamsWorkloadsAreRedacted: research's workload reclaims the GPU
// of one of vision's. Vision sees, in the victim's status, list entry and
// events, before and after it is requeued, "a workload of another team"
// and never the preemptor's ID or team; an admin, and a user of both
// teams, see everything.
func TestOtherTeamsWorkloadsAreRedacted(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	ctx := context.Background()
	var both api.User
	f.must("admin", "POST", "/api/v1/users", `{"name":"both","memberships":[{"team":"research","role":"viewer"},{"team":"vision","role":"viewer"}]}`, http.StatusCreated, &both)
	f.token["both"] = both.Token
	n := core.Node{Name: "n1", Schedulable: true, GPUs: []core.GPU{{Index: 0, UUID: "GPU-n1-0", Model: "H100", MemoryMiB: 81920}}}
	if err := f.st.PutNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	victim := core.WorkloadID(f.submit("bob", "vision"))
	preemptor := core.WorkloadID(f.submit("member", "research"))
	now := fixtureStart.Add(time.Minute)
	place := core.Plan{Placements: []core.Placement{{Workload: victim, Assignments: []core.Assignment{{Node: "n1", GPUIndex: 0, GPUUUID: "GPU-n1-0", MilliGPU: 1000, MemoryMiB: 81920}}}}}
	if res, err := f.st.ApplyPlan(ctx, place, now); err != nil || res[0].Err != nil {
		t.Fatalf("place: %v %+v", err, res)
	}
	p, err := f.st.Workload(ctx, preemptor)
	if err != nil {
		t.Fatal(err)
	}
	// The message as the scheduler writes it.
	msg := "reclaimed by " + core.Mention(p) + ": team vision runs over its quota, and the preempting team reclaims its guarantee"
	preempt := core.Plan{Preemptions: []core.Preemption{{Victim: victim, Attempt: 1, Preemptor: preemptor, Reason: "Reclaimed", Message: msg}}}
	if _, err := f.st.ApplyPlan(ctx, preempt, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	redacted := "reclaimed by a workload of another team: team vision runs over its quota, and the preempting team reclaims its guarantee"

	check := func(t *testing.T, phase string) {
		t.Run("vision sees a workload of another team", func(t *testing.T) {
			var w api.Workload
			f.must("bob", "GET", "/api/v1/workloads/"+string(victim), "", http.StatusOK, &w)
			if w.Status.Phase != phase || w.Status.Message != redacted || w.Status.PreemptedBy != "" {
				t.Errorf("status %+v, want %s with message %q and no preemptedBy", w.Status, phase, redacted)
			}
			var l api.List[api.Workload]
			f.must("bob", "GET", "/api/v1/workloads", "", http.StatusOK, &l)
			var evs api.List[api.Event]
			f.must("bob", "GET", "/api/v1/workloads/"+string(victim)+"/events", "", http.StatusOK, &evs)
			seen := 0
			for _, e := range evs.Items {
				if strings.Contains(e.Message, "a workload of another team") {
					seen++
				}
			}
			if seen == 0 {
				t.Errorf("no event says who reclaimed it: %+v", evs.Items)
			}
			for what, v := range map[string]any{"workload": w, "list": l, "events": evs} {
				if s := fmtJSON(v); strings.Contains(s, string(preemptor)) || strings.Contains(s, "research") {
					t.Errorf("%s names research or its workload %s: %s", what, preemptor, s)
				}
			}
		})
		for _, user := range []string{"admin", "both"} {
			t.Run(user+" sees the preemptor", func(t *testing.T) {
				var w api.Workload
				f.must(user, "GET", "/api/v1/workloads/"+string(victim), "", http.StatusOK, &w)
				if w.Status.Message != msg {
					t.Errorf("message %q, want %q", w.Status.Message, msg)
				}
				var evs api.List[api.Event]
				f.must(user, "GET", "/api/v1/workloads/"+string(victim)+"/events", "", http.StatusOK, &evs)
				if s := fmtJSON(evs); !strings.Contains(s, string(preemptor)) || strings.Contains(s, core.ForeignWorkload) {
					t.Errorf("events %s: want the preemptor named, nothing redacted", s)
				}
			})
		}
	}
	t.Run("while it stops", func(t *testing.T) {
		check(t, api.PhaseRunning)
		var w api.Workload
		f.must("admin", "GET", "/api/v1/workloads/"+string(victim), "", http.StatusOK, &w)
		if w.Status.PreemptedBy != string(preemptor) {
			t.Errorf("the admin sees preemptedBy %q, want %s", w.Status.PreemptedBy, preemptor)
		}
	})
	// The control loop requeues it with the message of its stop request.
	if _, err := f.st.Requeue(ctx, victim, 1, core.Preempted, "Reclaimed", msg, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Run("once requeued", func(t *testing.T) { check(t, api.PhasePending) })
	t.Run("its own team's workloads stay named", func(t *testing.T) {
		var w api.Workload
		f.must("member", "GET", "/api/v1/workloads/"+string(preemptor), "", http.StatusOK, &w)
		if w.ID != string(preemptor) {
			t.Errorf("got %s", w.ID)
		}
	})
}
