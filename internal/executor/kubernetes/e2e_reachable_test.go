package kubernetes

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// TestE2EStartCutServerReachable: the real gpufleet binary with two
// clusters (see newCutServer), started while the Kubernetes one is cut:
// get clusters says cloud is not reachable (reachable false in -o json,
// REACHABLE no in the table) and this machine is; once the proxy is
// restored, with no restart, cloud reads reachable.
func TestE2EStartCutServerReachable(t *testing.T) {
	c := newCutServer(t)
	x := c.x
	if cl := x.clusterOf("cloud"); cl.Reachable == nil || *cl.Reachable {
		t.Errorf("cluster cloud while cut: %+v, want reachable false", cl)
	}
	if cl := x.clusterOf("onprem"); cl.Reachable == nil || !*cl.Reachable {
		t.Errorf("cluster onprem: %+v, want reachable true", cl)
	}
	table := string(x.cli("get", "clusters"))
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "cloud" && f[2] != "no" {
			t.Errorf("get clusters while cloud is cut:\n%s\nwant REACHABLE no for cloud", table)
		}
	}
	c.proxy.setCut(false)
	x.waitFor(60*time.Second, "cluster cloud reachable", func() (bool, string) {
		cl := x.clusterOf("cloud")
		return cl.Reachable != nil && *cl.Reachable, fmt.Sprintf("%+v", cl)
	})
	x.cli("cancel", c.id)
}

// TestE2ERestartKeepsNodeRecord: a server's start does not write again a
// Kubernetes node that did not change, though it has a status (cordoned
// and uncordoned: Ready with a reason): its updatedAt, from which the
// Releaser counts a burst node's idle time, is the same after a restart.
func TestE2ERestartKeepsNodeRecord(t *testing.T) {
	x := newE2E(t, 1, 4)
	s := x.start()
	node := x.nodes[0]
	x.cli("cordon", "node", node)
	x.cli("uncordon", "node", node)
	updated := func(s *server) (api.Node, bool) {
		nodes, err := s.client.Nodes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.Name == node {
				return n, true
			}
		}
		return api.Node{}, false
	}
	before, ok := updated(s)
	if !ok || before.State != "Ready" || before.StateReason == "" {
		t.Fatalf("node %s before the restart: %+v, want it Ready with a reason (a status of its own)", node, before)
	}
	s.stop(t)
	time.Sleep(1100 * time.Millisecond) // a rewrite would show in updatedAt
	s = x.start()
	// The first sync is done before the server serves.
	after, ok := updated(s)
	if !ok || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("node %s after the restart: updatedAt %v, want %v kept (nothing of it changed)", node, after.UpdatedAt, before.UpdatedAt)
	}
	if after.State != "Ready" || !after.Schedulable {
		t.Errorf("node %s after the restart: %+v, want Ready and schedulable", node, after)
	}
}
