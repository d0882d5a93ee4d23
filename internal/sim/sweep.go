package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/trace"
)

// SelectPolicies returns the packing policies named (each name trimmed), in
// the order of Policies (the production policy first), each once; no names
// select them all. An unknown name is an error that lists the known ones.
func SelectPolicies(names []string) ([]string, error) {
	all := Policies()
	want := make([]string, 0, len(names))
	for _, p := range names {
		p = strings.TrimSpace(p)
		if !slices.Contains(all, p) {
			return nil, fmt.Errorf("%q: want one of %s", p, strings.Join(all, ", "))
		}
		want = append(want, p)
	}
	var out []string
	for _, p := range all {
		if len(want) == 0 || slices.Contains(want, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// GPUCount is the number of GPUs of the nodes.
func GPUCount(nodes []core.Node) int {
	n := 0
	for _, node := range nodes {
		n += len(node.GPUs)
	}
	return n
}

// SweepConfig is a set of packing runs: every policy with every seed, on
// the same nodes and pods.
type SweepConfig struct {
	Nodes    []core.Node
	Pods     []trace.Pod
	Policies []string
	Seeds    []int64
	// Order, Inflate and Report are those of every run (see
	// PackingConfig).
	Order   string
	Inflate float64
	Report  []float64
	// Parallel is the number of runs at a time; 1 when below 1.
	Parallel int
	// Start, Advance and Finish, when set, are called from the workers as
	// run i (an index into the result) starts, places pods and ends; label
	// names the run ("fgd seed 42"). They must be safe for concurrent use.
	Start   func(i int, label string)
	Advance func(i, done, total int)
	Finish  func(i int, label string)
}

// Workers is the number of runs that go at once: Parallel, at least 1 and
// at most the number of runs.
func (c SweepConfig) Workers() int {
	return max(1, min(c.Parallel, len(c.Policies)*len(c.Seeds)))
}

// Sweep runs each policy with each seed, Workers at a time, and returns the
// runs policy by policy, seed by seed (the same whatever Parallel is). The
// first failing run stops the others and its error, naming the run, is
// returned; so is ctx's error when it ends first.
func Sweep(ctx context.Context, cfg SweepConfig) ([]PackingRun, error) {
	type job struct {
		policy string
		seed   int64
	}
	var jobs []job
	for _, p := range cfg.Policies {
		for _, s := range cfg.Seeds {
			jobs = append(jobs, job{p, s})
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each seed's sequence has its bounds, found once by the first of its
	// runs, for all of them.
	type seqBounds struct {
		once sync.Once
		v    []float64
		err  error
	}
	bounds := map[int64]*seqBounds{}
	for _, s := range cfg.Seeds {
		bounds[s] = &seqBounds{}
	}
	report := cfg.Report
	if report == nil {
		report = DefaultReport
	}
	capacity := int64(GPUCount(cfg.Nodes)) * 1000
	runs := make([]PackingRun, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Workers() {
		wg.Go(func() {
			for i := range next {
				j := jobs[i]
				label := fmt.Sprintf("%s seed %d", j.policy, j.seed)
				if cfg.Start != nil {
					cfg.Start(i, label)
				}
				sb := bounds[j.seed]
				sb.once.Do(func() {
					seq, err := Sequence(cfg.Pods, cfg.Order, j.seed, cfg.Inflate, capacity)
					if err == nil {
						sb.v, err = LevelBounds(cfg.Nodes, seq, report)
					}
					sb.err = err
				})
				pc := PackingConfig{Nodes: cfg.Nodes, Pods: cfg.Pods, Policy: j.policy, Seed: j.seed, Order: cfg.Order, Inflate: cfg.Inflate, Report: cfg.Report, Bounds: sb.v}
				if cfg.Advance != nil {
					pc.Progress = func(done, total int) { cfg.Advance(i, done, total) }
				}
				runs[i], errs[i] = Packing(pc)
				if errs[i] == nil {
					errs[i] = sb.err
				}
				if errs[i] != nil {
					errs[i] = fmt.Errorf("%s: %w", label, errs[i])
					cancel()
				}
				if cfg.Finish != nil {
					cfg.Finish(i, label)
				}
			}
		})
	}
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return runs, nil
}
