package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// A node's events are kept to the newest keepNodeEvents, and read to the
// newest MaxNodeEvents, oldest first.
func TestNodeEventsArePruned(t *testing.T) {
	ctx := context.Background()
	st, err := OpenWith(ctx, target(t, filepath.Join(t.TempDir(), "gpufleet.db")), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.PutNode(ctx, core.Node{Name: "n1", Schedulable: true}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	_, err = st.UpdateNodeStatus(ctx, "n1", now, func(*core.Node, *core.NodeStatus) ([]core.NodeEvent, error) {
		evs := make([]core.NodeEvent, keepNodeEvents+10)
		for i := range evs {
			evs[i] = core.NodeEvent{Reason: "R", Message: "event", GPU: i}
		}
		return evs, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.read.QueryRow("SELECT count(*) FROM node_events WHERE node = 'n1'").Scan(&n); err != nil || n != keepNodeEvents {
		t.Errorf("%d events kept (%v), want %d", n, err, keepNodeEvents)
	}
	evs, err := st.NodeEvents(ctx, "n1")
	if err != nil || len(evs) != MaxNodeEvents || evs[len(evs)-1].GPU != keepNodeEvents+9 || evs[0].ID >= evs[1].ID {
		t.Errorf("read %d events (%v), want the newest %d oldest first", len(evs), err, MaxNodeEvents)
	}
}
