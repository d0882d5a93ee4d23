package apiserver

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestClustersReachable: GET /clusters says whether each cluster is
// reachable as Fleet.Reachable says at that request (a cluster that
// comes back reads reachable at the next one), and leaves the field out
// for a cluster it cannot say of, and for every cluster without it.
func TestClustersReachable(t *testing.T) {
	var cloudUp atomic.Bool
	f := newFixture(t, store.Options{}, RateLimit{}, func(o *Options) {
		o.Fleet = Fleet{
			Clusters: []api.Cluster{{Name: "onprem", Executor: "local"}, {Name: "cloud", Executor: "kubernetes"}, {Name: "other", Executor: "kubernetes"}},
			Reachable: func(cluster string) (bool, bool) {
				switch cluster {
				case "onprem":
					return true, true
				case "cloud":
					return cloudUp.Load(), true
				}
				return false, false
			},
		}
	})
	reach := func() map[string]string {
		var l api.List[api.Cluster]
		f.must("viewer", "GET", "/api/v1/clusters", "", http.StatusOK, &l)
		out := map[string]string{}
		for _, c := range l.Items {
			out[c.Name] = "absent"
			if c.Reachable != nil {
				out[c.Name] = map[bool]string{true: "true", false: "false"}[*c.Reachable]
			}
		}
		return out
	}
	if got := reach(); got["onprem"] != "true" || got["cloud"] != "false" || got["other"] != "absent" {
		t.Errorf("reachable with cloud down: %v, want onprem true, cloud false, other absent", got)
	}
	cloudUp.Store(true)
	if got := reach(); got["cloud"] != "true" {
		t.Errorf("reachable once cloud answers: %v, want cloud true", got)
	}
	// The wire: false is written, not left out (omitempty on a pointer).
	cloudUp.Store(false)
	if a := f.do("viewer", "GET", "/api/v1/clusters", ""); !strings.Contains(a.body, `"reachable":false`) {
		t.Errorf("GET /clusters with cloud down: %s, want \"reachable\":false", a.body)
	}

	plain := newFixture(t, store.Options{}, RateLimit{}, func(o *Options) {
		o.Fleet = Fleet{Clusters: []api.Cluster{{Name: "onprem", Executor: "local"}}}
	})
	if a := plain.do("viewer", "GET", "/api/v1/clusters", ""); a.status != http.StatusOK || strings.Contains(a.body, "reachable") {
		t.Errorf("GET /clusters without Fleet.Reachable: %d %s, want no reachable", a.status, a.body)
	}
}
