package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
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
				subs := make([]heldSubmit, tc.n)
				for i := range subs {
					if tc.noTeam[i] {
						subs[i].team = "nosuchteam"
					}
					subs[i].taken = tc.taken[i]
				}
				s, results := heldBatch(t, Options{}, func(*wtx) error { return nil }, subs)
				var want []string
				var made []*core.Workload
				for i, r := range results {
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
						want = append(want, string(r.w.ID))
					}
				}
				for i := range tc.n {
					if tc.taken[i] {
						want = append(want, fmt.Sprintf("wl-%02d-again", i))
					}
				}
				stored, audited := storedAfterFirst(t, s)
				bySeq := map[int64]core.WorkloadID{}
				for _, w := range stored {
					bySeq[w.Seq] = w.ID
				}
				for _, w := range made {
					if bySeq[w.Seq] != w.ID {
						t.Errorf("%s answered with seq %d, which is the row of %q", w.ID, w.Seq, bySeq[w.Seq])
					}
				}
				if diff := cmp.Diff(want, idsOf(stored)); diff != "" {
					t.Errorf("workloads stored, by seq (-want +got):\n%s", diff)
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

// heldSubmit is one submit of a held batch: its team ("" is "a"), its
// owner ("" is alice), its idempotency key ("" none), and whether the
// first ID it draws is taken (wl-first's; it draws wl-NN-again next).
type heldSubmit struct {
	team, owner, key string
	taken            bool
}

type heldResult struct {
	w   *core.Workload
	err error
}

// heldBatch opens a store (opts, IDs wl-00, wl-01, … in submission
// order, but for a taken one), submits wl-first, then holds the writer in a batch running
// setup, queues subs behind it (so that they share the next batch) and
// releases it; it returns the store and each submit's outcome.
func heldBatch(t *testing.T, opts Options, setup func(tx *wtx) error, subs []heldSubmit) (*Store, []heldResult) {
	ctx := context.Background()
	// The IDs drawn, in order: wl-first's, then each submit's (wl-NN, by
	// its place), then, for the submits whose first is taken, the next,
	// and for any submit after the batch the next wl-NN.
	var mu sync.Mutex
	planned := []core.WorkloadID{"wl-first"}
	var retaken []int
	later := len(subs) - 1
	for i, sub := range subs {
		if sub.taken {
			planned = append(planned, "wl-first")
			retaken = append(retaken, i)
		} else {
			planned = append(planned, core.WorkloadID(fmt.Sprintf("wl-%02d", i)))
		}
	}
	opts.NoSync = true
	opts.NewID = func() core.WorkloadID {
		mu.Lock()
		defer mu.Unlock()
		if len(planned) > 0 {
			id := planned[0]
			planned = planned[1:]
			return id
		}
		if len(retaken) > 0 {
			i := retaken[0]
			retaken = retaken[1:]
			return core.WorkloadID(fmt.Sprintf("wl-%02d-again", i))
		}
		later++ // a submit after the batch
		return core.WorkloadID(fmt.Sprintf("wl-%02d", later))
	}
	s := teamStore(t, filepath.Join(t.TempDir(), "gpufleet.db"), opts)
	if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); err != nil {
		t.Fatal(err)
	}
	hold, held := make(chan struct{}), make(chan struct{})
	setupErr := make(chan error, 1)
	go func() {
		setupErr <- s.do(ctx, func(tx *wtx) error {
			err := setup(tx)
			close(held)
			<-hold
			return err
		})
	}()
	<-held
	results := make([]chan heldResult, len(subs))
	for i, sub := range subs {
		w := workload(1000)
		if sub.team != "" {
			w.Team = core.TeamName(sub.team)
		}
		if sub.owner != "" {
			w.Owner = sub.owner
		}
		var idem *Idempotency
		if sub.key != "" {
			idem = &Idempotency{Key: sub.key, Hash: "h"}
		}
		results[i] = make(chan heldResult, 1)
		actx := WithAudit(ctx, &core.AuditEntry{Time: t0, User: w.Owner, Action: "submit", Method: "POST", Path: "/api/v1/workloads", Status: 201})
		go func() {
			w, _, err := s.CreateWorkload(actx, w, idem, t0)
			results[i] <- heldResult{w, err}
		}()
		synctest.Wait()
	}
	if got := len(s.ops); got != len(subs) {
		t.Fatalf("%d writes queued behind the held batch, want %d", got, len(subs))
	}
	close(hold)
	if err := <-setupErr; err != nil {
		t.Fatalf("setup: %v", err)
	}
	out := make([]heldResult, len(subs))
	for i := range subs {
		out[i] = <-results[i]
	}
	return s, out
}

// storedAfterFirst returns the IDs stored after wl-first, by seq, and the
// audit entries' objects, in order.
func storedAfterFirst(t *testing.T, s *Store) (stored []*core.Workload, audited []string) {
	ctx := context.Background()
	ws, err := s.Workloads(ctx, WorkloadFilter{})
	if err != nil {
		t.Fatal(err)
	}
	audit, err := s.Audit(ctx, AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range audit {
		audited = append(audited, e.Object)
	}
	return ws[1:], audited
}

func idsOf(ws []*core.Workload) []string {
	var out []string
	for _, w := range ws {
		out = append(out, string(w.ID))
	}
	return out
}

// TestFlushFailureFailsEveryWrite: a batch of 40 deferred submits
// whose flush fails with an error that is not a constraint's, in the
// second INSERT of workloads (after the first 32 rows were written), or in
// the INSERTs of audit entries (after every workload row was written):
// every submit fails, none is stored, no audit entry is left, and the
// store writes again afterwards.
func TestFlushFailureFailsEveryWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   string
		noSpace bool
	}{
		{name: "an error in the second INSERT of workloads",
			setup: `CREATE TRIGGER fail_here BEFORE INSERT ON workloads WHEN NEW.id = 'wl-35' BEGIN SELECT json('not json'); END`},
		{name: "an error in the first INSERT of audit entries",
			setup: `CREATE TRIGGER fail_here BEFORE INSERT ON audit WHEN NEW.object = 'wl-03' BEGIN SELECT json('not json'); END`},
		{name: "an error in the second INSERT of audit entries",
			setup: `CREATE TRIGGER fail_here BEFORE INSERT ON audit WHEN NEW.object = 'wl-35' BEGIN SELECT json('not json'); END`},
		{name: "a full disk in the second INSERT of workloads", noSpace: true,
			setup: `CREATE TRIGGER fail_here BEFORE INSERT ON workloads WHEN NEW.id = 'wl-35' BEGIN INSERT INTO filler VALUES (zeroblob(8000000)); END`},
		{name: "a full disk in the second INSERT of audit entries", noSpace: true,
			setup: `CREATE TRIGGER fail_here BEFORE INSERT ON audit WHEN NEW.object = 'wl-35' BEGIN INSERT INTO filler VALUES (zeroblob(8000000)); END`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sqliteOnly(t)
				setup := func(tx *wtx) error {
					if _, err := tx.Exec(`CREATE TABLE filler (b BLOB)`); err != nil {
						return err
					}
					if _, err := tx.Exec(tc.setup); err != nil {
						return err
					}
					if tc.noSpace {
						var pages int64
						if err := tx.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
							return err
						}
						if _, err := tx.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+200)); err != nil {
							return err
						}
					}
					return nil
				}
				s, results := heldBatch(t, Options{}, setup, make([]heldSubmit, 40))
				for i, r := range results {
					switch {
					case r.err == nil:
						t.Errorf("submit %d acknowledged (%s, seq %d) in a batch whose flush failed", i, r.w.ID, r.w.Seq)
					case isRefusal(r.err):
						t.Errorf("submit %d refused as its own: %v", i, r.err)
					case tc.noSpace && !errors.Is(r.err, core.ErrNoSpace):
						t.Errorf("submit %d: %v, want ErrNoSpace", i, r.err)
					}
				}
				stored, audited := storedAfterFirst(t, s)
				if len(stored) != 0 || slices.ContainsFunc(audited, func(o string) bool { return o != "" && o != "wl-first" }) {
					t.Errorf("after a failed flush, stored %q, audited %q", idsOf(stored), audited)
				}
				if n := s.PendingCount(); n != 1 {
					t.Errorf("PendingCount %d after a failed batch, want 1 (wl-first)", n)
				}
				// The store writes again once the cause is gone.
				if err := s.do(context.Background(), func(tx *wtx) error {
					_, err := tx.Exec(`DROP TRIGGER fail_here`)
					if err == nil {
						_, err = tx.Exec(`PRAGMA max_page_count = 1000000000`)
					}
					return err
				}); err != nil {
					t.Fatal(err)
				}
				w, _, err := s.CreateWorkload(context.Background(), workload(1000), nil, t0)
				if err != nil {
					t.Fatalf("submit after the failure: %v", err)
				}
				stored, _ = storedAfterFirst(t, s)
				if len(stored) != 1 || stored[0].ID != w.ID || stored[0].Seq != w.Seq {
					t.Errorf("after recovery stored %q (seq %v), want %s seq %d", idsOf(stored), stored, w.ID, w.Seq)
				}
			})
		})
	}
}

// TestRefusalsAtChunkEdges: refusals (a team that does not exist) at
// the edges of the 32-row INSERTs, several in one batch, and idempotency-
// keyed submits between the deferred ones: each refused submit fails
// alone, the others are stored once, in submission order by seq, each with
// the seq it was answered with and its audit entry in the same order; the
// view (Active, PendingCount) holds the same workloads with the same seqs.
func TestRefusalsAtChunkEdges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		noTeam []int
		keyed  map[int]string
	}{
		{name: "last row of the first INSERT", n: 40, noTeam: []int{31}},
		{name: "first row of the second INSERT", n: 40, noTeam: []int{32}},
		{name: "first row of all", n: 33, noTeam: []int{0}},
		{name: "rows in both INSERTs", n: 70, noTeam: []int{5, 40, 64, 69}},
		{name: "every row", n: 34, noTeam: func() []int {
			var all []int
			for i := range 34 {
				all = append(all, i)
			}
			return all
		}()},
		{name: "keyed submits between", n: 50, noTeam: []int{2, 45}, keyed: map[int]string{10: "k1", 20: "k2", 21: "k1", 33: "k3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sqliteOnly(t)
				subs := make([]heldSubmit, tc.n)
				for _, i := range tc.noTeam {
					subs[i].team = "nosuchteam"
				}
				for i, k := range tc.keyed {
					subs[i].key = k
				}
				s, results := heldBatch(t, Options{}, func(*wtx) error { return nil }, subs)
				var want, wantAudit []string
				answered := map[core.WorkloadID]int64{}
				for i, r := range results {
					if slices.Contains(tc.noTeam, i) {
						if !errors.Is(r.err, core.ErrNotFound) {
							t.Errorf("submit %d to no team: %v, want not found", i, r.err)
						}
						continue
					}
					if r.err != nil {
						t.Errorf("submit %d: %v", i, r.err)
						continue
					}
					if prev, ok := answered[r.w.ID]; ok {
						if prev != r.w.Seq {
							t.Errorf("%s answered with seqs %d and %d", r.w.ID, prev, r.w.Seq)
						}
						// The same key again: a replay, whose audit
						// entry names no object.
						wantAudit = append(wantAudit, "")
						continue
					}
					answered[r.w.ID] = r.w.Seq
					want = append(want, string(r.w.ID))
					wantAudit = append(wantAudit, string(r.w.ID))
				}
				stored, audited := storedAfterFirst(t, s)
				if diff := cmp.Diff(want, idsOf(stored)); diff != "" {
					t.Errorf("stored by seq (-want +got):\n%s", diff)
				}
				for _, w := range stored {
					if answered[w.ID] != w.Seq {
						t.Errorf("%s stored with seq %d, answered with %d", w.ID, w.Seq, answered[w.ID])
					}
				}
				// wl-first has no audit entry; a repeated key is audited
				// by the API server, not the store (created false).
				if diff := cmp.Diff(wantAudit, audited); diff != "" {
					t.Errorf("audit entries (-want +got):\n%s", diff)
				}
				pending, _ := s.Active()
				var view []string
				for _, w := range pending[1:] {
					view = append(view, string(w.ID))
					if answered[w.ID] != w.Seq {
						t.Errorf("%s in the view with seq %d, answered with %d", w.ID, w.Seq, answered[w.ID])
					}
				}
				if diff := cmp.Diff(want, view); diff != "" {
					t.Errorf("the view's pending workloads (-want +got):\n%s", diff)
				}
				if got := s.PendingCount(); got != len(want)+1 {
					t.Errorf("PendingCount %d, want %d", got, len(want)+1)
				}
			})
		})
	}
}
