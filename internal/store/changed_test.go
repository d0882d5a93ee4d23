package store

import (
	"fmt"
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// TestLastChange: a transaction's index of its changes (last) answers as
// a scan of changed from its end does, through appends of every size and
// savepoint rollbacks (truncateChanged) at any point, on both sides of the
// length where it starts indexing; and handedOut agrees.
func TestLastChange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tx := &wtx{}
		ids := rapid.IntRange(1, 40).Draw(t, "ids")
		for step := range rapid.IntRange(1, 200).Draw(t, "steps") {
			if len(tx.changed) > 0 && rapid.IntRange(0, 9).Draw(t, "op") == 0 {
				tx.truncateChanged(rapid.IntRange(0, len(tx.changed)).Draw(t, "n"))
			} else {
				for range rapid.IntRange(1, 20).Draw(t, "appended") {
					w := &core.Workload{ID: core.WorkloadID(fmt.Sprintf("wl-%d", rapid.IntRange(0, ids).Draw(t, "id")))}
					if rapid.Bool().Draw(t, "keep") {
						tx.keep(w)
					} else {
						tx.changed = append(tx.changed, w)
					}
				}
			}
			for i := 0; i <= ids; i++ {
				id := core.WorkloadID(fmt.Sprintf("wl-%d", i))
				var want *core.Workload
				for j := len(tx.changed) - 1; j >= 0; j-- {
					if tx.changed[j].ID == id {
						want = tx.changed[j]
						break
					}
				}
				if got := tx.last(id); got != want {
					t.Fatalf("step %d, %d changes: last(%s) = %p, want %p", step, len(tx.changed), id, got, want)
				}
				if want != nil && tx.handedOut(want) == tx.kept[want] {
					t.Fatalf("step %d: handedOut(%s) = %v, kept %v", step, id, tx.handedOut(want), tx.kept[want])
				}
			}
		}
	})
}
