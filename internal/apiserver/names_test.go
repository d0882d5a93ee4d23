package apiserver

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestListByName: ?name= keeps the workloads of that name among the
// caller's teams' (names are not unique), pages through workloads of other
// names, and refuses what is not a name.
func TestListByName(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	sub := func(user, team, name string) string {
		var w api.Workload
		f.must(user, "POST", "/api/v1/workloads", `{"team":"`+team+`","name":"`+name+`","command":["true"],"resources":{"gpus":1}}`, http.StatusCreated, &w)
		return w.ID
	}
	var want []string
	for i := range 5 {
		want = append(want, sub("member", "research", "train"))
		sub("member", "research", "other")
		if i == 2 {
			sub("bob", "vision", "train")
		}
	}
	ids := func(user, query string) []string {
		var got []string
		q := query
		for pages := 0; ; pages++ {
			var l api.List[api.Workload]
			f.must(user, "GET", "/api/v1/workloads?"+q, "", http.StatusOK, &l)
			for _, w := range l.Items {
				got = append(got, w.ID)
			}
			if l.NextPageToken == "" || pages > 20 {
				return got
			}
			q = query + "&pageToken=" + l.NextPageToken
		}
	}
	if diff := cmp.Diff(want, ids("member", "name=train")); diff != "" {
		t.Errorf("research's train as member (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, ids("member", "name=train&limit=2")); diff != "" {
		t.Errorf("paged by 2 (-want +got):\n%s", diff)
	}
	if got := ids("bob", "name=train"); len(got) != 1 {
		t.Errorf("bob's train: %v, want vision's one", got)
	}
	if got := ids("admin", "name=train&team=vision"); len(got) != 1 {
		t.Errorf("admin, vision's train: %v, want one", got)
	}
	if got := ids("member", "name=nothing"); len(got) != 0 {
		t.Errorf("name=nothing: %v, want none", got)
	}
	a := f.do("member", "GET", "/api/v1/workloads?name=Not_A_Name", "")
	if e := a.errorBody(t); a.status != http.StatusBadRequest || len(e.Fields) != 1 || e.Fields[0].Field != "name" {
		t.Errorf("name=Not_A_Name: %d %s, want 400 naming name", a.status, a.body)
	}
}

// TestListPhaseAnyCase: ?phase= takes a phase in any case, and an unknown
// one is a 400 that lists the phases.
func TestListPhaseAnyCase(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	id := f.submit("member", "research")
	var l api.List[api.Workload]
	f.must("member", "GET", "/api/v1/workloads?phase=pending,RUNNING", "", http.StatusOK, &l)
	if len(l.Items) != 1 || l.Items[0].ID != id {
		t.Errorf("phase=pending,RUNNING: %+v, want %s", l.Items, id)
	}
	a := f.do("member", "GET", "/api/v1/workloads?phase=runing", "")
	e := a.errorBody(t)
	if a.status != http.StatusBadRequest || len(e.Fields) != 1 || e.Fields[0].Field != "phase" ||
		!strings.Contains(e.Fields[0].Problem, "Pending, Running, Succeeded, Failed, Cancelled") {
		t.Errorf("phase=runing: %d %s, want 400 naming phase and listing the phases", a.status, a.body)
	}
}
