package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/burst"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// burstNode is a Kubernetes burst node as its cluster lists it, placed,
// reported at at.
func burstNode(name string, at time.Time) core.Node {
	return core.Node{Name: core.NodeName(name), Cluster: "cloud", Pool: "cloud", PoolKind: core.PoolBurst, Region: "us-east", Schedulable: true,
		Labels:   map[string]string{"gpufleet.io/pool": "cloud"},
		MilliCPU: 8000, MemoryMiB: 65536, UpdatedAt: at,
		GPUs: []core.GPU{{Index: 0, UUID: name + "/gpu0", Model: "H100", MemoryMiB: 81920}, {Index: 1, UUID: name + "/gpu1", Model: "H100", MemoryMiB: 81920}}}
}

// setState gives a node a status of state, as the lifecycle or the
// Releaser would, with a device's health.
func setState(t *testing.T, st *store.Store, name core.NodeName, state core.NodeState, at time.Time) {
	t.Helper()
	_, err := st.UpdateNodeStatus(t.Context(), name, at, func(n *core.Node, s *core.NodeStatus) ([]core.NodeEvent, error) {
		s.State, s.Since = state, at
		s.GPUs = map[int]core.GPUStatus{0: {Health: core.GPUHealthy}}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNodeSyncKeepsUnchangedRecords: at a server's start the nodes its
// Kubernetes cluster lists are compared with the store's records, not
// with the nodes merged with their status: a node whose record is the
// same apart from updatedAt is not written again, so a burst node that
// ran no work keeps its idle time (the Releaser reads it from updatedAt)
// across the restart, whatever its status (Ready, device health). A node
// that changed is written; so is one whose status hides its record's
// Schedulable (Cordoned), and a node whose record another server wrote
// meanwhile is written again at the leader's resync.
func TestNodeSyncKeepsUnchangedRecords(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, filepath.Join(t.TempDir(), "gpufleet.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	for _, name := range []string{"idle", "bare", "grown", "released", "other"} {
		if err := st.PutNode(ctx, burstNode(name, before)); err != nil {
			t.Fatal(err)
		}
	}
	setState(t, st, "idle", core.NodeReady, before)
	setState(t, st, "grown", core.NodeReady, before)
	setState(t, st, "released", core.NodeCordoned, before)
	updated := func() map[core.NodeName]time.Time {
		t.Helper()
		nodes, err := st.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[core.NodeName]time.Time{}
		for _, n := range nodes {
			out[n.Name] = n.UpdatedAt
		}
		return out
	}

	// The restart: the cluster lists the same nodes, reported now; grown
	// has more memory, released is cordoned in its cluster.
	now := time.Now().UTC()
	listed := func() []core.Node {
		var out []core.Node
		for _, name := range []string{"idle", "bare", "grown", "released", "other"} {
			n := burstNode(name, now)
			switch name {
			case "grown":
				n.MemoryMiB *= 2
			case "released":
				// Its autoscaler cordoned it: the same as the store's
				// node merged with its Cordoned status, not as its
				// record (schedulable).
				n.Schedulable = false
			}
			out = append(out, n)
		}
		return out
	}
	ns := &nodeSync{st: st, log: slog.New(slog.DiscardHandler), cluster: "cloud"}
	if err := ns.load(ctx); err != nil {
		t.Fatal(err)
	}
	ns.put(ctx, listed())
	got := updated()
	for _, name := range []core.NodeName{"idle", "bare", "other"} {
		if !got[name].Equal(before) {
			t.Errorf("node %s unchanged but for updatedAt: updatedAt %v after the start's sync, want %v kept", name, got[name], before)
		}
	}
	for _, name := range []core.NodeName{"grown", "released"} {
		if got[name].Equal(before) {
			t.Errorf("node %s: not written at the start's sync (updatedAt %v), want it written", name, got[name])
		}
	}
	nodes, _ := st.Nodes(ctx)
	for _, n := range nodes {
		if n.Name == "grown" && n.MemoryMiB != 2*65536 {
			t.Errorf("node grown: memory %d MiB in the store, want %d", n.MemoryMiB, 2*65536)
		}
		if n.Name == "idle" && (n.State != core.NodeReady || !n.Schedulable) {
			t.Errorf("node idle: %+v, want its status kept and schedulable", n)
		}
	}

	// Another server, leading meanwhile, wrote node other NotReady; this
	// one's resync, as the next leader, writes what its cluster lists.
	lost := burstNode("other", now)
	lost.NotReady, lost.Schedulable = true, false
	if err := st.PutNode(ctx, lost); err != nil {
		t.Fatal(err)
	}
	ns.resync(ctx, listed())
	nodes, _ = st.Nodes(ctx)
	for _, n := range nodes {
		if n.Name == "other" && (n.NotReady || !n.Schedulable) {
			t.Errorf("node other after the resync: NotReady %v, schedulable %v, want the cluster's Ready node written over the other server's", n.NotReady, n.Schedulable)
		}
	}
	if got := updated(); !got["idle"].Equal(before) {
		t.Errorf("node idle: updatedAt %v after the resync, want %v kept", got["idle"], before)
	}
}

// TestStartExecutorsUnreachableReported: of two clusters, the Kubernetes
// one that does not answer reads unreachable in GET /clusters' view
// (fleetOf), this machine's reachable; its executor's Nodes gives the
// nodes the store knew, NotReady and unschedulable, before its start is
// finished.
func TestStartExecutorsUnreachableReported(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	st, err := store.OpenWith(ctx, filepath.Join(dir, "gpufleet.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutNode(ctx, burstNode("k1", time.Now().UTC())); err != nil {
		t.Fatal(err)
	}
	kubeconfig, _ := deadKubeconfig(t, dir)
	cfg := config.Default()
	cfg.DataDir, cfg.NodeName, cfg.Local.Isolation = dir, "here", "off"
	cfg.ClusterList = []config.Cluster{
		{Name: "onprem", Executor: "local", FakeGPUs: "1xH100-80GB"},
		{Name: "cloud", Executor: "kubernetes", Kubeconfig: kubeconfig},
	}
	cfg.PoolList = []config.Pool{
		{Name: "onprem", Cluster: "onprem", Region: "eu-west", Kind: "owned"},
		{Name: "cloud", Cluster: "cloud", Region: "us-east", Kind: "owned"},
	}
	xs, err := startExecutors(ctx, cfg, st, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatalf("startExecutors with cluster cloud unreachable: %v", err)
	}
	defer xs.close()
	f := fleetOf(cfg, xs)
	for _, tc := range []struct {
		cluster         string
		reachable, says bool
	}{{"onprem", true, true}, {"cloud", false, true}, {"nowhere", false, false}} {
		if r, ok := f.Reachable(tc.cluster); r != tc.reachable || ok != tc.says {
			t.Errorf("Reachable(%s) = %v, %v; want %v, %v", tc.cluster, r, ok, tc.reachable, tc.says)
		}
	}
	if !strings.Contains(xs.where, "its 1 known nodes NotReady") {
		t.Errorf("banner %q: want the cluster's 1 known node counted", xs.where)
	}
	nodes := xs.kubes[0].Nodes()
	if len(nodes) != 1 || nodes[0].Name != "k1" || !nodes[0].NotReady || nodes[0].Schedulable {
		t.Errorf("Nodes of the cluster not started: %+v, want k1 NotReady and unschedulable", nodes)
	}
}

// TestReleasedBefore: a leader runs the Releaser without burst pools when
// the store holds nodes it released (to take them back), and not
// otherwise.
func TestReleasedBefore(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, filepath.Join(t.TempDir(), "gpufleet.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Now().UTC().Truncate(time.Second)
	for _, name := range []core.NodeName{"a", "b"} {
		if err := st.PutNode(ctx, burstNode(string(name), at)); err != nil {
			t.Fatal(err)
		}
	}
	setState(t, st, "a", core.NodeCordoned, at)
	if releasedBefore(ctx, st) {
		t.Error("releasedBefore with no node released: true")
	}
	if _, err := st.UpdateNodeStatus(ctx, "b", at, func(n *core.Node, s *core.NodeStatus) ([]core.NodeEvent, error) {
		s.State, s.Reason, s.Since = core.NodeCordoned, burst.ReasonIdleReleased, at
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !releasedBefore(ctx, st) {
		t.Error("releasedBefore with b released: false")
	}
}
