package sim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestSelectPolicies(t *testing.T) {
	all := Policies()
	got, err := SelectPolicies(nil)
	if err != nil || !slices.Equal(got, all) {
		t.Errorf("SelectPolicies(nil) = %v, %v; want every policy %v", got, err, all)
	}
	// In the order of Policies whatever the order given, each once, trimmed.
	got, err = SelectPolicies([]string{" " + PolicyReservation, PolicyGPUFleet, PolicyReservation})
	if want := []string{PolicyGPUFleet, PolicyReservation}; err != nil || !slices.Equal(got, want) {
		t.Errorf("SelectPolicies = %v, %v; want %v", got, err, want)
	}
	_, err = SelectPolicies([]string{PolicyGPUFleet, "best"})
	if err == nil || !strings.Contains(err.Error(), `"best"`) || !strings.Contains(err.Error(), strings.Join(all, ", ")) {
		t.Errorf("an unknown policy: %v, want an error naming it and listing %v", err, all)
	}
}

func TestGPUCount(t *testing.T) {
	nodes, _ := testTrace(t)
	if got, want := GPUCount(nodes), int(capacityOf(nodes)/1000); got != want || got == 0 {
		t.Errorf("GPUCount = %d, want %d (and some)", got, want)
	}
}

// TestSweepOrderAndParallel runs every policy with every seed: the runs come
// policy by policy, seed by seed, equal to single runs given their
// sequence's bounds, whatever the number of workers; the callbacks see
// every run start, advance and finish.
func TestSweepOrderAndParallel(t *testing.T) {
	nodes, pods := testTrace(t)
	cfg := SweepConfig{Nodes: nodes, Pods: pods, Policies: []string{PolicyGPUFleet, PolicyReservation}, Seeds: []int64{3, 1, 2}, Inflate: 1.1}
	var want []PackingRun
	for _, p := range cfg.Policies {
		for _, s := range cfg.Seeds {
			seq, err := Sequence(pods, cfg.Order, s, cfg.Inflate, capacityOf(nodes))
			if err != nil {
				t.Fatal(err)
			}
			bounds, err := LevelBounds(nodes, seq, DefaultReport)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Packing(PackingConfig{Nodes: nodes, Pods: pods, Policy: p, Seed: s, Inflate: cfg.Inflate, Bounds: bounds})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, r)
		}
	}
	ignore := cmpopts.IgnoreFields(PackingRun{}, "Seconds")
	for _, parallel := range []int{0, 1, 4, 100} {
		c := cfg
		c.Parallel = parallel
		var mu sync.Mutex
		started, finished := map[int]string{}, map[int]string{}
		advanced := map[int]bool{}
		c.Start = func(i int, label string) { mu.Lock(); started[i] = label; mu.Unlock() }
		c.Advance = func(i, done, total int) { mu.Lock(); advanced[i] = true; mu.Unlock() }
		c.Finish = func(i int, label string) { mu.Lock(); finished[i] = label; mu.Unlock() }
		got, err := Sweep(context.Background(), c)
		if err != nil {
			t.Fatalf("parallel %d: %v", parallel, err)
		}
		if diff := cmp.Diff(want, got, ignore); diff != "" {
			t.Errorf("parallel %d: runs differ from single runs (-want +got):\n%s", parallel, diff)
		}
		if len(started) != 6 || len(finished) != 6 || len(advanced) != 6 {
			t.Errorf("parallel %d: %d started, %d advanced, %d finished; want 6 each", parallel, len(started), len(advanced), len(finished))
		}
		if started[4] != PolicyReservation+" seed 1" || finished[4] != started[4] {
			t.Errorf("parallel %d: run 4 labelled %q/%q, want %q", parallel, started[4], finished[4], PolicyReservation+" seed 1")
		}
	}
	if w := (SweepConfig{Policies: []string{"a"}, Seeds: []int64{1, 2}, Parallel: 16}).Workers(); w != 2 {
		t.Errorf("Workers = %d, want 2 (no more than the runs)", w)
	}
}

func TestSweepErrors(t *testing.T) {
	nodes, pods := testTrace(t)
	// A failing run names itself and stops the sweep.
	_, err := Sweep(context.Background(), SweepConfig{Nodes: nodes, Pods: pods, Policies: []string{PolicyGPUFleet}, Seeds: []int64{7}, Inflate: 0})
	if err == nil || !strings.HasPrefix(err.Error(), PolicyGPUFleet+" seed 7: ") {
		t.Errorf("inflate 0: %v, want an error naming the run", err)
	}
	// An ended context ends it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Sweep(ctx, SweepConfig{Nodes: nodes, Pods: pods, Policies: Policies(), Seeds: []int64{1, 2, 3}, Inflate: 1, Parallel: 1})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}
