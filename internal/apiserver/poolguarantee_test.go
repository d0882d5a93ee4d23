package apiserver

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestPoolGuarantees: an admin sets a team's pool guarantees; they read back
// on the team and in the list, {} clears them, and each bad value is a 400
// naming guaranteedByPoolMilliGPU or guaranteedByPoolMilliGPU.POOL.
func TestPoolGuarantees(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{}, func(o *Options) {
		o.Fleet = Fleet{Pools: []api.Pool{{Name: "onprem"}, {Name: "cloud"}}}
	})
	var tm api.Team
	f.must("admin", "PATCH", "/api/v1/teams/research", `{"guaranteedMilliGPU":8000,"guaranteedByPoolMilliGPU":{"onprem":6000,"cloud":2000}}`, http.StatusOK, &tm)
	want := map[string]int64{"onprem": 6000, "cloud": 2000}
	if diff := cmp.Diff(want, tm.GuaranteedByPoolMilliGPU); diff != "" {
		t.Errorf("PATCH answer's pool guarantees (-want +got):\n%s", diff)
	}
	var l api.List[api.Team]
	f.must("admin", "GET", "/api/v1/teams", "", http.StatusOK, &l)
	for _, it := range l.Items {
		var w map[string]int64
		if it.Name == "research" {
			w = want
		}
		if diff := cmp.Diff(w, it.GuaranteedByPoolMilliGPU); diff != "" {
			t.Errorf("team %s's pool guarantees as listed (-want +got):\n%s", it.Name, diff)
		}
	}

	// A change without the field leaves them.
	var kept api.Team
	f.must("admin", "PATCH", "/api/v1/teams/research", `{"weight":2}`, http.StatusOK, &kept)
	if diff := cmp.Diff(want, kept.GuaranteedByPoolMilliGPU); diff != "" {
		t.Errorf("after a weight change (-want +got):\n%s", diff)
	}

	bad := []struct {
		name, body string
		want       []api.FieldError
	}{
		{"an unknown pool", `{"guaranteedByPoolMilliGPU":{"nowhere":1000}}`,
			[]api.FieldError{{Field: "guaranteedByPoolMilliGPU.nowhere", Problem: `unknown pool "nowhere" (known: cloud, onprem)`}}},
		{"a negative guarantee", `{"guaranteedByPoolMilliGPU":{"onprem":-1}}`,
			[]api.FieldError{{Field: "guaranteedByPoolMilliGPU.onprem", Problem: "must be from 0 to a million GPUs"}}},
		{"more than the team's guarantee", `{"guaranteedByPoolMilliGPU":{"onprem":6000,"cloud":4000}}`,
			[]api.FieldError{{Field: "guaranteedByPoolMilliGPU", Problem: "the pool guarantees add up to 10 GPUs, more than the team's guarantee of 8; raise the guarantee too"}}},
		{"a guarantee lowered below them", `{"guaranteedMilliGPU":4000}`,
			[]api.FieldError{{Field: "guaranteedByPoolMilliGPU", Problem: "the pool guarantees add up to 8 GPUs, more than the team's guarantee of 4; raise the guarantee too"}}},
	}
	for _, tc := range bad {
		a := f.do("admin", "PATCH", "/api/v1/teams/research", tc.body)
		if a.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, a.status, a.body)
			continue
		}
		if diff := cmp.Diff(tc.want, a.errorBody(t).Fields); diff != "" {
			t.Errorf("%s: fields (-want +got):\n%s", tc.name, diff)
		}
	}

	// A team-admin may not change them.
	if a := f.do("tadmin", "PATCH", "/api/v1/teams/research", `{"guaranteedByPoolMilliGPU":{}}`); a.status != http.StatusForbidden {
		t.Errorf("team-admin: %d %s, want 403", a.status, a.body)
	}

	// {} clears them.
	var cleared api.Team
	f.must("admin", "PATCH", "/api/v1/teams/research", `{"guaranteedByPoolMilliGPU":{}}`, http.StatusOK, &cleared)
	if cleared.GuaranteedByPoolMilliGPU != nil {
		t.Errorf("after {}: %v, want none", cleared.GuaranteedByPoolMilliGPU)
	}

	// A new team may carry them; an unknown pool is refused there too.
	var created api.Team
	f.must("admin", "POST", "/api/v1/teams", `{"name":"infra","guaranteedMilliGPU":4000,"guaranteedByPoolMilliGPU":{"cloud":4000}}`, http.StatusCreated, &created)
	if diff := cmp.Diff(map[string]int64{"cloud": 4000}, created.GuaranteedByPoolMilliGPU); diff != "" {
		t.Errorf("created team (-want +got):\n%s", diff)
	}
	if a := f.do("admin", "POST", "/api/v1/teams", `{"name":"infra2","guaranteedMilliGPU":4000,"guaranteedByPoolMilliGPU":{"mars":1000}}`); a.status != http.StatusBadRequest {
		t.Errorf("create with an unknown pool: %d %s, want 400", a.status, a.body)
	}
}
