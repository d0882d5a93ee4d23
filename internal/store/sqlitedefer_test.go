package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/gpufleet/gpufleet/internal/core"
)

// TestSQLiteBatchOfSubmitsWrittenTogether queues submits behind a held
// batch, so that they share the next one, and checks what its deferred
// rows' INSERTs of many rows (sqlitedefer.go) stored: each submit's own
// seq (the seqs of a VALUES list are read from the last one's), in
// submission order, with its audit entry, in the same order. A submit to a
// team that does not exist, or whose ID is taken, fails alone: the rows
// are then written one INSERT each, and the taken ID is drawn again.
func TestSQLiteBatchOfSubmitsWrittenTogether(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		// noTeam and taken: the submits (by place) to a team that does
		// not exist, and whose first ID drawn is taken.
		noTeam, taken map[int]bool
		// statements: the INSERTs of many rows the batch ran (by their
		// rows), prepared after it.
		statements []int
	}{
		{name: "forty submits in two INSERTs a table", n: 40, statements: []int{32, 8}},
		{name: "a team that does not exist and a taken ID fail alone", n: 10, noTeam: map[int]bool{3: true}, taken: map[int]bool{6: true}},
		{name: "a row refused in the second INSERT leaves the first's rows once", n: 40, noTeam: map[int]bool{35: true}, statements: []int{32}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sqliteOnly(t)
				ctx := context.Background()
				next := make(chan core.WorkloadID, 1)
				s := teamStore(t, filepath.Join(t.TempDir(), "gpufleet.db"), Options{NoSync: true, NewID: func() core.WorkloadID { return <-next }})
				next <- "wl-first"
				first, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0)
				if err != nil {
					t.Fatal(err)
				}
				// The writer is held inside a batch, so that the
				// submits queue, in order, and share the next one.
				hold, held := make(chan struct{}), make(chan struct{})
				go s.do(ctx, func(tx *wtx) error { close(held); <-hold; return nil })
				<-held
				type result struct {
					w   *core.Workload
					err error
				}
				results := make([]chan result, tc.n)
				for i := range tc.n {
					w := workload(1000)
					if tc.noTeam[i] {
						w.Team = "nosuchteam"
					}
					id := core.WorkloadID(fmt.Sprintf("wl-%02d", i))
					if tc.taken[i] {
						id = first.ID
					}
					next <- id
					results[i] = make(chan result, 1)
					actx := WithAudit(ctx, &core.AuditEntry{Time: t0, User: "alice", Action: "submit", Method: "POST", Path: "/api/v1/workloads"})
					go func() {
						w, _, err := s.CreateWorkload(actx, w, nil, t0)
						results[i] <- result{w, err}
					}()
					synctest.Wait()
				}
				if n := len(s.ops); n != tc.n {
					t.Fatalf("%d writes queued behind the held batch, want the %d submits", n, tc.n)
				}
				close(hold)
				for i := range tc.n {
					if tc.taken[i] {
						synctest.Wait() // its batch is done: it draws again
						next <- core.WorkloadID(fmt.Sprintf("wl-%02d-again", i))
					}
				}
				var want []core.WorkloadID
				var made []*core.Workload
				for i := range tc.n {
					r := <-results[i]
					switch {
					case tc.noTeam[i]:
						if !errors.Is(r.err, core.ErrNotFound) {
							t.Errorf("submit %d to a team that does not exist: %v, want not found", i, r.err)
						}
						continue
					case r.err != nil:
						t.Errorf("submit %d: %v", i, r.err)
						continue
					}
					made = append(made, r.w)
					if !tc.taken[i] {
						want = append(want, r.w.ID)
					}
				}
				for i := range tc.n {
					if tc.taken[i] {
						want = append(want, core.WorkloadID(fmt.Sprintf("wl-%02d-again", i)))
					}
				}
				stored, err := s.Workloads(ctx, WorkloadFilter{})
				if err != nil {
					t.Fatal(err)
				}
				bySeq := map[int64]core.WorkloadID{}
				for _, w := range stored {
					bySeq[w.Seq] = w.ID
				}
				for _, w := range made {
					if bySeq[w.Seq] != w.ID {
						t.Errorf("%s answered with seq %d, which is the row of %q", w.ID, w.Seq, bySeq[w.Seq])
					}
				}
				var got []core.WorkloadID
				for _, w := range stored[1:] { // by seq, after wl-first
					got = append(got, w.ID)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("workloads stored, by seq (-want +got):\n%s", diff)
				}
				audit, err := s.Audit(ctx, AuditFilter{Limit: 1000})
				if err != nil {
					t.Fatal(err)
				}
				var audited []core.WorkloadID
				for _, e := range audit {
					audited = append(audited, core.WorkloadID(e.Object))
				}
				if diff := cmp.Diff(want, audited); diff != "" {
					t.Errorf("audit entries, by ID (-want +got):\n%s", diff)
				}
				s.Close() // the writer is done: its statements can be read
				for _, rows := range tc.statements {
					for _, q := range []*rowsQuery{&workloadRows, &auditRows} {
						if s.stmts[manyRows(q, rows)] == nil {
							t.Errorf("no INSERT of %d rows prepared: %s", rows, q.head)
						}
					}
				}
			})
		})
	}
}
