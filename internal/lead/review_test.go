package lead

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
	"github.com/gpufleet/gpufleet/internal/store/pgtest"
)

// TestTermFenceIsTheTerms: a write made with the context of an earlier
// term (a goroutine of that term's work that outlived it, or one detached
// with context.WithoutCancel) is refused once the same server leads again
// under a new token: the fence a term's context carries is that term's
// token, not whatever token the elector holds now.
func TestTermFenceIsTheTerms(t *testing.T) {
	url := pgtest.DB(t)
	st := openPG(t, url)
	type term struct {
		token int64
		ctx   context.Context
	}
	terms := make(chan term, 4)
	e := New(Options{Store: st, Name: "a", Addr: "a:1", PID: 1, TTL: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	go e.Run(ctx, func(wctx context.Context) {
		n++
		terms <- term{e.Token(), wctx}
		if n == 1 {
			return // the first term's work stops by itself: the elector steps down, then leads again
		}
		<-wctx.Done()
	})
	first := <-terms
	var second term
	select {
	case second = <-terms:
	case <-time.After(10 * time.Second):
		t.Fatal("no second term")
	}
	if second.token <= first.token || e.Token() != second.token {
		t.Fatalf("tokens: first %d, second %d, elector %d", first.token, second.token, e.Token())
	}
	late := context.WithoutCancel(first.ctx) // the first term's fence, its ctx kept alive
	err := st.CreateTeam(late, core.NewTeam("late", time.Now()))
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a write under term %d's fence during term %d: %v, want ErrFenced", first.token, second.token, err)
	}
	if err := st.CreateTeam(second.ctx, core.NewTeam("now", time.Now())); err != nil {
		t.Fatalf("the current term's write: %v", err)
	}
}
