// Package sched is one scheduling cycle. Options.Schedule takes a frozen
// core.Snapshot and the time and returns a core.Plan: which pending
// workloads start and where, which running ones are preempted or
// reclaimed for them, which node is held for whom, why every other pending
// workload waits, and each team's fair share. The control loop applies the
// plan; the store checks each placement again with core.Fits when it
// commits it, and rejects a stale one.
//
// # What it owns
//
// The policy of a cycle, whose rules docs/SCHEDULING.md states in full
// (the decision order, rules 0 to 6, the eviction rules, nominations,
// packing, backfill and starvation, residency and bursting), each applied
// here: the order of decisions and the quota rules (sched.go), preemption
// and its victim sets (preempt.go, victimindex.go), reclaim of guarantees
// and fair shares (reclaim.go), starvation reservations (reserve.go), job
// arrays' caps (array.go), burst pools (burst.go), the packing policies
// (packing.go, frag.go) and the waiting messages (explain.go). Packer
// (packer.go) places one request at a time with the same code, for the
// simulator's packing experiment. Fair shares come from package fairshare.
//
// A cycle's working state (cycle.go) is a few small types, each saying
// what it holds and when it stays true: the fleet's nodes and their free
// capacity (fleet), the teams' usage against their quotas (teamLedger),
// the pending order (pendingOrder, order.go), held and reserved capacity
// (holdBook, starvation), and the memos that spare repeated searches
// (memo.go: refusals, decisions, victim sets, scores).
//
// The scheduler checks fit with its own fitsAs and its node summaries
// (nodes.go), on its working copy of each node, not with core.Fits; the
// property tests (invariants_test.go, sched_test.go) check every placement
// it plans against core.Fits on random clusters, with a fresh seed each
// run, and CI replays the seeds that once failed
// (testdata/failed-seeds.txt). TestPlansUnchanged holds the decisions of a
// fixed set of clusters (testdata/golden-plans.txt).
//
// # Purity and concurrency
//
// It does no I/O, reads no clock (the time is an argument) and logs
// nothing. Where its input is large, parts of a cycle's setup run on
// GOMAXPROCS goroutines at once (inParts and readPending, pending.go),
// each writing only its own part, and are joined before the cycle goes
// on; no goroutine outlives a call, and the decisions are made one after
// the other. Between calls the package keeps one thing: pendingPool, one
// slot holding the last cycle's working arrays, zeroed when given back,
// for the next cycle to reuse. So a plan is a function of the snapshot,
// the options and the time alone, the same at any GOMAXPROCS
// (TestParallelSetupDecidesAsSequential). How the cycle stays fast, and
// what it costs: docs/PERFORMANCE.md.
//
// # Imports
//
// sched imports core and sched/fairshare only (docs/ARCHITECTURE.md,
// checked by internal/app's architecture test).
package sched
