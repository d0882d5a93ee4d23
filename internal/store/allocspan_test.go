package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestAllocationsBetweenIsTheOverlap: AllocationsBetween answers exactly the
// intervals that overlap the window (begun before its end, not ended by its
// start, open ones included), oldest first, whatever their lengths (every
// class of spanClass and its bounds) and wherever the window lies in the
// history.
func TestAllocationsBetweenIsTheOverlap(t *testing.T) {
	s := fixture(t)
	ctx := context.Background()
	day := int64(24 * time.Hour)
	lengths := []int64{0, 1, int64(time.Hour) - 1, int64(time.Hour), int64(time.Hour) + 1, day, day + 1, 7 * day, 7*day + 1, 35 * day, 35*day + 1, 400 * day}
	rapid.Check(t, func(rt *rapid.T) {
		type iv struct {
			start, end int64 // end 0: open
		}
		n := rapid.IntRange(0, 30).Draw(rt, "n")
		ivs := make([]iv, n)
		for i := range ivs {
			start := rapid.Int64Range(0, 500*day).Draw(rt, "start")
			var end int64
			if !rapid.Bool().Draw(rt, "open") {
				length := rapid.SampledFrom(lengths).Draw(rt, "length")
				if rapid.Bool().Draw(rt, "jitter") {
					length = rapid.Int64Range(0, 60*day).Draw(rt, "any length")
				}
				end = start + length
			}
			ivs[i] = iv{start, end}
		}
		from := rapid.Int64Range(0, 550*day).Draw(rt, "from")
		to := from + rapid.Int64Range(1, 40*day).Draw(rt, "window")
		var want []int
		err := s.do(ctx, func(tx *wtx) error {
			if _, err := tx.Exec("DELETE FROM allocations"); err != nil {
				return err
			}
			for i, x := range ivs {
				var end any // NULL: open
				if x.end != 0 {
					end = x.end
				}
				if _, err := tx.Exec(`INSERT INTO allocations (workload_id, team, attempt, node, gpu_index, gpu_uuid, milli_gpu, memory_mib, start, "end")
					VALUES (?, 'a', 1, 'n1', 0, 'u', 1000, 0, ?, ?)`, "wl-"+strings.Repeat("x", i+1), x.start, end); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			rt.Fatal(err)
		}
		for i, x := range ivs {
			if x.start < to && (x.end == 0 || x.end > from) {
				want = append(want, i+1)
			}
		}
		got, err := s.AllocationsBetween(ctx, time.Unix(0, from), time.Unix(0, to))
		if err != nil {
			rt.Fatal(err)
		}
		var gotIdx []int // the interval's number, its workload ID's length
		for _, a := range got {
			gotIdx = append(gotIdx, len(a.WorkloadID)-len("wl-"))
		}
		if !slices.Equal(gotIdx, want) {
			rt.Fatalf("window [%d, %d): intervals %v, want %v (of %v)", from, to, gotIdx, want, ivs)
		}
	})
}

// TestAllocationsBetweenUsesTheIndex: on SQLite every part of
// AllocationsBetween's query reads allocations through allocations_span,
// never the whole table.
func TestAllocationsBetweenUsesTheIndex(t *testing.T) {
	_, path := fileFixture(t)
	db := rawDB(t, path)
	var args []any
	for range strings.Count(allocationsBetween, "?") {
		args = append(args, int64(0))
	}
	rows, err := db.Query("EXPLAIN QUERY PLAN "+allocationsBetween, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	parts := 0
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(detail, "allocations") {
			parts++
			if !strings.Contains(detail, "USING INDEX allocations_span") {
				t.Errorf("a part of the query: %q, want it to use allocations_span", detail)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if parts != len(spanBounds)+2 {
		t.Errorf("%d parts read allocations, want %d", parts, len(spanBounds)+2)
	}
}
