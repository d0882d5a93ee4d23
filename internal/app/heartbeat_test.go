package app

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/testwait"
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
	testwait.Until(t, 10*time.Second, "a heartbeat to move updatedAt", func() (bool, string) {
		if nodes, err = s.admin.Nodes(ctx); err != nil {
			t.Fatal(err)
		}
		return nodes[0].UpdatedAt.After(first), fmt.Sprintf("it stays %v: the registration time, not the last heartbeat", nodes[0].UpdatedAt)
	})
	// A heartbeat every 100ms: the node read last is as fresh as the next
	// one's, at the most.
	if nodes, err = s.admin.Nodes(ctx); err != nil {
		t.Fatal(err)
	}
	if age := time.Since(nodes[0].UpdatedAt); age > 400*time.Millisecond {
		t.Errorf("updatedAt is %v old with a heartbeat every 100ms", age)
	}
	if !nodes[0].Schedulable || len(nodes[0].GPUs) != 4 {
		t.Errorf("the heartbeat changed the node: %+v", nodes[0])
	}
}
