// Package sim runs gpufleet's scheduler offline on cluster traces.
//
// Two experiments:
//
//   - Packing (packing.go) is the FGD paper's (Weng et al., ATC'23): pods
//     of a trace, shuffled by a seed and inflated with copies to 130% of
//     the GPU capacity (OrderShuffle), or in the trace's own order, each
//     once, to replay another simulator's sequence (OrderFile), or as the
//     FGD authors' simulator shuffles and inflates them for the same seed
//     (OrderAuthors, authors_order.go; authors_figures.go counts the
//     allocation as their published figures do), arrive one at a time and
//     never leave; each is placed by a packing policy or
//     fails. It records the allocation, the stranded capacity and the
//     failures as arrived demand grows, and beside them an upper bound on
//     the allocation any policy could reach with the same pods (bound.go:
//     a linear relaxation of the packing, solved once per sequence and
//     shared by its policies). It uses sched.Packer, the
//     scheduler's own placement code with persistent node states: a
//     snapshot and a full cycle per pod would cost minutes for what
//     placement alone decides. Two baselines follow the FGD authors'
//     definitions (authors.go): bestfit, their integer BestFit score, is
//     placed here, with the scheduler's fit rules and each placement
//     checked by core.Fits; fgd is
//     the scheduler's FGD scorer given the whole trace's mix before the
//     run. The scheduler's own best fit and online FGD stay as bestfit-gpu
//     and fgd-online.
//   - Replay (replay.go) plays a trace in time through what 'gpufleet
//     server' runs: a store (SQLite, no fsync), the control loop, the
//     scheduler and the fake executor, under a virtual clock that jumps
//     from event to event. Queueing, quotas, reclaim and preemption all
//     act as in production; nothing is re-implemented.
//
// Sweep (sweep.go) runs every packing policy with every seed on a pool of
// workers; ReplayPolicies (replays.go) replays a trace once per policy, side
// by side; ServerTrace turns what a live server's API answers into a trace.
// Summaries of packing runs and the mean curves behind their plots are in
// summary.go and curves.go; the plot itself is sim/plot's, which only
// cmd/gpufleet-sim links. Traces come from package trace: the Alibaba openb CSVs or
// gpufleet's own JSONL format (docs/TRACE-FORMAT.md). The CLI's 'gpufleet
// sim' parses flags, reads files and prints; the rest is here.
//
// sim imports api (wire types, for ServerTrace), core, sched, store,
// control, executor, executor/fake, cost and ledger (a replay's cost) and
// trace; only the cli and sim/plot import sim.
package sim
