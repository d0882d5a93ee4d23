package app

import (
	"context"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/config"
)

// TestLocalNodeUpdatedAtIsItsLastHeartbeat: the local node's updatedAt is
// when the server last reported it (every usage sample), not when it
// registered: a node the server still runs is never minutes old (issue 14).
func TestLocalNodeUpdatedAtIsItsLastHeartbeat(t *testing.T) {
	s := startObs(t, t.TempDir(), func(c *config.Config) {
		c.Usage.SampleInterval = config.Duration{Duration: 100 * time.Millisecond}
	})
	ctx := context.Background()
	nodes, err := s.admin.Nodes(ctx)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	first := nodes[0].UpdatedAt
	time.Sleep(600 * time.Millisecond)
	nodes, err = s.admin.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := nodes[0].UpdatedAt
	if !got.After(first) {
		t.Fatalf("updatedAt stays %v after 6 sample intervals: it is the registration time, not the last heartbeat", got)
	}
	if age := time.Since(got); age > 400*time.Millisecond {
		t.Errorf("updatedAt is %v old with a heartbeat every 100ms", age)
	}
	if !nodes[0].Schedulable || len(nodes[0].GPUs) != 4 {
		t.Errorf("the heartbeat changed the node: %+v", nodes[0])
	}
}
