package store

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"pgregory.net/rapid"
)

// TestWorkloadIDSpelling pins the spelling of a workload ID: "wl-", the
// time's 8 base32 digits and the random bits' 8, in base32's digits in
// ASCII order.
func TestWorkloadIDSpelling(t *testing.T) {
	epoch := time.UnixMilli(idEpoch)
	for _, c := range []struct {
		t    time.Time
		b    [5]byte
		want core.WorkloadID
	}{
		{epoch, [5]byte{}, "wl-2222222222222222"},
		{epoch.Add(time.Millisecond), [5]byte{0, 0, 0, 0, 1}, "wl-2222222322222223"},
		{epoch.Add(31 * time.Millisecond), [5]byte{0, 0, 0, 0, 32}, "wl-2222222z22222232"},
		{epoch.Add(-time.Millisecond), [5]byte{0xff, 0xff, 0xff, 0xff, 0xff}, "wl-zzzzzzzzzzzzzzzz"}, // before the epoch wraps
		{time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC), [5]byte{0x9a, 0x3c, 0, 0x7f, 0x80}, "wl-4pzdpzk2ncy22zw2"},
	} {
		if got := workloadID(c.t, c.b); got != c.want {
			t.Errorf("workloadID(%v, %x) = %q, want %q", c.t, c.b, got, c.want)
		}
	}
	re := regexp.MustCompile(`^wl-[a-z2-7]{16}$`)
	seen := map[core.WorkloadID]bool{}
	for range 1000 {
		id := NewWorkloadID()
		if !re.MatchString(string(id)) {
			t.Fatalf("NewWorkloadID() = %q, not wl- and 16 base32 digits", id)
		}
		if seen[id] {
			t.Fatalf("NewWorkloadID() repeated %q", id)
		}
		seen[id] = true
	}
}

// TestWorkloadIDsSortByTime: of two IDs made a millisecond or more apart
// (before the clock wraps in 2058), the earlier sorts first, whatever
// their random bits; so IDs written in a row are neighbours in the index.
func TestWorkloadIDsSortByTime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		span := int64(1)<<40 - 1
		a := rapid.Int64Range(0, span-1).Draw(t, "a")
		b := rapid.Int64Range(a+1, span).Draw(t, "b")
		ra := [5]byte(rapid.SliceOfN(rapid.Byte(), 5, 5).Draw(t, "ra"))
		rb := [5]byte(rapid.SliceOfN(rapid.Byte(), 5, 5).Draw(t, "rb"))
		ida, idb := workloadID(time.UnixMilli(idEpoch+a), ra), workloadID(time.UnixMilli(idEpoch+b), rb)
		if ida >= idb {
			t.Fatalf("made at +%d ms: %s; at +%d ms: %s, which does not sort after it", a, ida, b, idb)
		}
	})
}

// TestTakenIDDrawnAgain: a submit or an array whose drawn ID is taken gets
// the next ID drawn, on both backends; three taken draws in a row fail
// with nothing stored.
func TestTakenIDDrawnAgain(t *testing.T) {
	ctx := context.Background()
	next := make(chan core.WorkloadID, 8)
	s := teamStore(t, target(t, filepath.Join(t.TempDir(), "gpufleet.db")), Options{NewID: func() core.WorkloadID { return <-next }})
	next <- "wl-one"
	if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); err != nil {
		t.Fatal(err)
	}
	next <- "wl-one"
	next <- "wl-two"
	w, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0)
	if err != nil || w.ID != "wl-two" {
		t.Fatalf("submit whose first ID was taken: %v, %v; want wl-two", w, err)
	}
	if got, err := s.Workload(ctx, "wl-two"); err != nil || got.Seq != w.Seq {
		t.Fatalf("wl-two stored as %v, %v; want seq %d", got, err, w.Seq)
	}
	next <- "wl-arr"
	if _, _, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 0}, nil, t0); err != nil {
		t.Fatal(err)
	}
	next <- "wl-arr" // its task wl-arr-0 is taken
	next <- "wl-three"
	a, _, err := s.CreateArray(ctx, workload(1000), ArrayRange{Start: 0, End: 1}, nil, t0)
	if err != nil || a.ID != "wl-three" {
		t.Fatalf("array: %v, %v; want wl-three", a, err)
	}
	// An array's task takes the ID of wl-three's task 0: drawn again.
	next <- "wl-three-0"
	next <- "wl-four"
	if w, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); err != nil || w.ID != "wl-four" {
		t.Fatalf("submit on an array task's ID: %v, %v; want wl-four", w, err)
	}
	for range idDraws {
		next <- "wl-one"
	}
	// Three taken: nothing written, an error to try again in the
	// store's words, not the database's.
	if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); !errors.Is(err, core.ErrUnavailable) || strings.Contains(err.Error(), "constraint") || strings.Contains(err.Error(), "workloads_id_key") {
		t.Fatalf("three taken IDs: %v, want core.ErrUnavailable without the database's words", err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil || len(snap.Pending) != 6 {
		t.Fatalf("%d pending (%v), want 6: wl-one, wl-two, three tasks, wl-four", len(snap.Pending), err)
	}
	if len(next) != 0 {
		t.Fatalf("%d IDs left undrawn", len(next))
	}
}

// TestTakenIDFailsAlone: on SQLite a submit runs with no savepoint
// (doBare); when its ID is taken, it is drawn again and the writes that
// shared its batch are not failed with it (they were: the UNIQUE error was
// not a refusal, and a bare write failing otherwise fails its batch).
func TestTakenIDFailsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sqliteOnly(t) // PostgreSQL runs every write under a savepoint
		ctx := context.Background()
		next := make(chan core.WorkloadID, 8)
		s := teamStore(t, filepath.Join(t.TempDir(), "gpufleet.db"), Options{NoSync: true, NewID: func() core.WorkloadID { return <-next }})
		next <- "wl-one"
		if _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); err != nil {
			t.Fatal(err)
		}
		// The writer is held inside a batch, so that the next two writes
		// queue and share the next one.
		hold, held := make(chan struct{}), make(chan struct{})
		go s.do(ctx, func(tx *wtx) error { close(held); <-hold; return nil })
		<-held
		team := make(chan error, 1)
		go func() { team <- s.CreateTeam(ctx, core.NewTeam("b", t0)) }()
		synctest.Wait()
		if n := len(s.ops); n != 1 {
			t.Fatalf("%d writes queued behind the held batch, want CreateTeam's", n)
		}
		next <- "wl-one" // taken
		next <- "wl-two"
		sub := make(chan error, 1)
		go func() { _, _, err := s.CreateWorkload(ctx, workload(1000), nil, t0); sub <- err }()
		synctest.Wait()
		if n := len(s.ops); n != 2 {
			t.Fatalf("%d writes queued behind the held batch, want CreateTeam's and the submit's", n)
		}
		close(hold)
		if err := <-sub; err != nil {
			t.Errorf("submit drawn again: %v", err)
		}
		if err := <-team; err != nil {
			t.Errorf("CreateTeam in the batch of a taken ID: %v", err)
		}
		if _, err := s.Workload(ctx, "wl-two"); err != nil {
			t.Errorf("wl-two: %v", err)
		}
	})
}

// TestIDTakenIsTheIDs: a UNIQUE failure of the idempotency index (owner,
// key) is not a taken ID.
func TestIDTakenIsTheIDs(t *testing.T) {
	sqliteOnly(t)
	s := teamStore(t, filepath.Join(t.TempDir(), "gpufleet.db"), Options{})
	ctx := context.Background()
	ins := `INSERT INTO workloads (id, team, owner, phase, created_at, idem_key, idem_hash, spec, status) VALUES (?, 'a', 'alice', 'Pending', 0, 'k', 'h', x'7b7d', x'7b7d')`
	if _, err := s.write.ExecContext(ctx, ins, "wl-one"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.write.ExecContext(ctx, ins, "wl-two"); err == nil || isIDTaken(err) {
		t.Errorf("a second row with the same idempotency key: %v, isIDTaken %v; want an error that is not a taken ID", err, isIDTaken(err))
	}
	if _, err := s.write.ExecContext(ctx, ins[:len(ins)-len("'k', 'h', x'7b7d', x'7b7d')")]+"NULL, NULL, x'7b7d', x'7b7d')", "wl-one"); !isIDTaken(err) {
		t.Errorf("a second row wl-one: %v, want a taken ID", err)
	}
}
