// Package sched is one scheduling cycle: a pure function from a frozen
// core.Snapshot to a core.Plan (placements, preemptions, explanations and
// each team's fair share). It does no I/O, reads no clock (time is an
// argument), starts no goroutines and logs nothing. The control loop applies
// the plan, and the store checks every placement again with core.Fits.
//
// # Policy
//
// Teams hold a guarantee, a limit and a weight (milli-GPU). Fair shares come
// from package fairshare: guarantees first, then the rest by weight among
// teams with demand (water-filling). A running workload is within quota when,
// taking the team's workloads by class, then start time, then submission
// (the order a cycle decides them in), it fits in the guarantee; the rest
// runs over quota on borrowed capacity. A team may also
// guarantee GPU models (GuaranteedByModel): a workload asking for exactly
// one such model is within quota against that model's guarantee, and work
// on those devices beyond it is over quota. It may guarantee pools too
// (GuaranteedByPool): a running workload on a node of pool P counts against
// the team's guarantee in P when it has one (a model guarantee covering the
// device, when one does, takes precedence), and a pending workload bound to P
// by its node selector (gpufleet.io/pool=P), asking for no guaranteed model,
// is within quota when the team's use in P at its class and above plus its
// ask stays within that guarantee. Other work counts against the total
// guarantee; a pending workload judged against the total counts all the
// team's work there, the work its model and pool guarantees cover included.
//
// Which of a team's workloads the guarantee covers decides what starts
// and what counts as borrowed, not which one reclaim takes: where a team
// runs more than a guarantee at a class and above, reclaim may take any
// of that work (a workload within quota once it has run MinRuntime) as
// long as the team keeps the guarantee, and a workload over quota as long
// as it would not be within the guarantee if submitted again (reclaim.go,
// quotaBucket). So a fraction reclaims a fraction of a team that runs a
// gang over quota next to fractions within it, not the gang.
//
// Only a schedulable node (its state Ready, see core.Node.Apply) takes
// work, and on it no device whose health is Failed or Validating
// (core.GPU.Usable): such a device counts as full, by a whole device more
// than what runs there, so that no future frees it either.
//
// Pending workloads are taken by class (highest first), then by the team
// furthest below its fair share (recomputed after every placement), then by
// submission; the workloads that run within their team's guarantee are
// decided before those that would borrow, so that work placed on borrowed
// capacity is never placed where guaranteed work of the same cycle would
// reclaim it in the next. For each:
//
//  0. a task of a job array whose array already runs as many tasks as its
//     cap (core.ArrayTask.MaxRunning: running, or placed earlier in this
//     cycle) waits (ArrayLimit, array.go) and holds no node (nor do the
//     tasks beyond the cap count in its team's demand for fair shares); a
//     team whose hard budget is spent (Snapshot.BudgetExceeded) starts
//     none of its work of preemptible classes (BudgetExceeded), and such
//     work holds no node; production still runs;
//  1. a request no schedulable node could hold even empty says so
//     (core.Feasible, which the API server also runs at submission), before
//     any quota reason; with no schedulable node at all (every node
//     cordoned, draining, being qualified) nothing is "never": it waits;
//  2. its team's limit must allow it (QuotaLimit), and a class that may not
//     borrow (production) must stay within the guarantee (OverQuota). Quota,
//     limit and fair share charge what the ledger records: a count or a
//     fraction as asked, a request by memory the share it takes on the
//     device it lands on (at least its smallest share on the models it
//     accepts; a placement whose share there exceeds what the team may
//     still take is refused there);
//  3. a workload the scheduler stopped less than MinRuntime ago
//     (Status.PreemptedAt) starts again only within its team's guarantee
//     while work of another team, within its guarantee, waits in this
//     cycle (RecentlyPreempted): that work would reclaim it at once;
//  4. it is placed on free capacity when it fits, on nodes its residency
//     allows, where the packing policy (below) says it costs the workload
//     mix least; burst nodes only as the burst policy says (below);
//  5. otherwise it may preempt: lower classes of its own team, batch of any
//     team, work of other teams beyond their guarantees (as above) when it
//     reclaims its guarantee, and, with fair-share reclaim on, such work
//     that ran at least MinRuntime of teams that stay at or above their
//     fair share without it and every victim taken from them before in
//     the cycle. Production is never a
//     victim; batch never preempts; gangs do not preempt (their victims
//     would span nodes). A request by memory is judged, node by node, by
//     the share it takes there (reclaimOn): it reclaims a guarantee or a
//     fair share only where that share stays within it, and frees room
//     only on a device whose share its limit (and, for a class that may
//     not borrow, its guarantee) allows, so that it is never refused the
//     room it freed and its victims restarted in the next cycle. The
//     preemptor waits (Preempting), nominated to the node of its victims;
//  6. otherwise it waits with a reason and a sentence (Unschedulable,
//     WaitingForIdleCapacity for batch).
//
// # Residency and bursting
//
// A workload with a residency (Request.Regions) runs only on nodes whose
// Region is one of them: it is never placed, nominated or given a
// reservation elsewhere, and its victims are chosen only among the nodes
// it could use (one rule, mayUse, for all four). A residency no node has
// is "never" (core.Feasible names the field residency, and the API server
// refuses it at submission). When it waits, its message starts with what
// residency does: "residency eu-west: the nodes there are full (onprem);
// nodes in us-east have room but are outside its residency".
//
// A node of a burst pool (core.Node.Burst: paid capacity for peaks) is the
// last resort, as Options.Burst (BurstPolicy) says: a workload goes there
// only when its class is one of Burst.Classes (production and training by
// default), it has waited Burst.After (2 minutes by default) since the
// later of its submission and its last preemption, so that a preemption
// never moves work into a paid pool by itself, and nothing outside the
// burst pools has room for it now. Placement makes two passes: every node
// but the burst ones, then, for a workload that may burst and found no
// room, the burst nodes alone, where the cheapest pool (Burst.Prices; a
// pool without a price after the priced ones) wins and the packing policy
// breaks ties; a gang is never split between the two. A workload that may
// not burst neither preempts on a burst node nor reserves one (a workload
// that may, may: work running on a burst node is preempted like any
// other). Its message says why it does not burst: "waits for capacity; may
// burst to pool cloud after 2m (waited 40s)" (the wait rounded down to
// 10 s, so that the message changes at most that often) or "class batch
// may not burst". A team's spent budget is checked before any of this
// (rule 0). With no burst node in the snapshot none of it costs anything;
// the zero BurstPolicy lets no class burst. BurstPolicy.Allows gives the
// policy's verdict alone (class and wait), for the control loop to decide
// what to ask an elastic burst pool for.
//
// # Eviction rules
//
// Among the workloads a preemptor may stop, it stops the cheapest set that
// lets it fit (findVictims, victimSet), whether it preempts within its
// team, takes batch, or reclaims a guarantee or a fair share (a set that
// reclaim's rules admit as a whole: reclaim.go); a starvation reservation
// chooses its node by the same order, over what it waits for to end
// there (below):
//
//   - on one node only;
//   - no gang while a set without one suffices on some node;
//   - then the least GPU capacity evicted, a victim counting all it holds
//     (every replica): never more than the smallest sufficient set, within
//     what the search sees (whole GPUs: the cheapest set of devices to
//     clear, found exactly on nodes of up to ten such devices, device by
//     device, cheapest first, beyond; a share goes to the device whose
//     cheapest sufficient set of occupants costs least, found exactly
//     among a few; then every victim not needed is dropped, the largest
//     first);
//   - for a fraction, a set of fractional victims before one with whole
//     GPUs;
//   - then the fewest victims, the smallest node, the name; at a tie, the
//     victim order (team furthest above its share, lowest class, newest).
//
// A decision is stable: a workload reclaimed or preempted is not started
// again, for MinRuntime, where guaranteed work already waiting would
// reclaim it (rule 3), guaranteed work is decided before borrowing work
// (no GPU stays idle for work that has not arrived), a preemptor evicts
// only for room it may take (rule 5), and a starvation reservation never
// holds capacity against a team's guarantee (below).
// The invariant tests check each rule on random clusters, with a fresh
// seed each run; CI also replays the seeds that once failed
// (testdata/failed-seeds.txt, hack/failed-seeds.sh).
//
// # Nominations: promised capacity
//
// Victims take their grace period to stop, so a preemptor is placed a few
// cycles after it preempts. Meanwhile its node is held for it: the node's
// future (the stops under way done, the waiting preemptors placed) is what
// later preemptors plan against, so several can share a node without
// over-asking, and a workload within its guarantee may also wait for room
// that stops already under way will free, without a victim of its own.
// Other workloads, and the holders themselves, may still use a held node
// where their placement also fits its future (on other devices than the
// packing policy would choose, if need be), and every earlier stage of it:
// a preemptor counts only on its own victims and those chosen before it,
// so what is placed now may not take room that only a later preemptor's
// victims would give back. Holds carry over between
// cycles through the workload's nominated node, and the workloads holding
// one are decided first in the next cycle; a hold its holder no longer
// needs is given back at once, and a preemptor its quota rules no longer
// admit (its team took the room meanwhile) holds nothing and is decided
// afresh. So is, in its turn after the work within guarantees, one whose
// victims are gone that the scheduler stopped less than MinRuntime ago
// and that would now borrow (its team's higher classes, decided before
// it, took its guarantee): started first, it could take room that another
// team's guaranteed work, decided later, would reclaim in the next cycle.
//
// Gangs (replicas × GPUs) are placed replica by replica, each on the best
// node given the ones before, and undone entirely if one does not fit.
//
// # Packing
//
// Where a workload fits in several places, Options.Packing chooses. The
// production policy, gpufleet (frag.go), is fragmentation-aware in the
// manner of FGD (Weng et al., ATC'23), measured against it on Alibaba's
// production trace with gpufleet sim packing (package sim): for each GPU
// shape of the mix of running and pending work, it counts how many more of
// that shape the node could hold if filled with it alone (devices, CPU and
// memory), and scores a placement by the GPU share of the places it
// destroys, each shape weighed by its share of the mix over the square of
// its remaining supply in the cluster. Ties go to the device, then the
// node, left with the least free share. fgd, firstfit, bestfit, random,
// dotproduct, gpupacking and reservation (a fraction takes a whole device)
// are baselines on the same code path, so that comparisons are fair.
// Spanning NVLink domains outweighs any packing gain. Packer runs the same
// choice one request at a time over persistent node states, for the
// packing experiment, where a snapshot per request would cost minutes.
//
// # Backfill and starvation
//
// A workload that does not fit never blocks the ones behind it: they are
// placed if they fit (backfill). So that a large workload is not starved by
// a stream of small ones, the workload that has waited longest past
// Options.StarvationAfter (highest class first) gets a reservation on the
// node where it waits for the least to end (reserve.go, drainCost): the
// cheapest set of what runs there whose end leaves it room, in the order
// of the eviction rules (no gang while a node needs none, then for a
// fraction only fractions, the least capacity, the fewest workloads),
// then the most free devices, the fewest running workloads, the name. The node drains for it as
// its workloads finish, but the reservation holds only what the reserved
// workload will use, as Slurm's backfill does: another workload may still
// take the node where, next to what will still run there when the reserved
// one can start, the reserved one keeps room (the devices it cannot use
// stay available), or where it will be gone by its max runtime before the
// reserved one can start (its start is known from the max runtimes of what
// runs there, and the grace periods of stops under way). The waiting
// message names what it waits for there and, when known, by when. A
// reservation for a workload that would borrow on its node (a request by
// memory is judged at the share it takes there: an A10 taken whole for
// 20 GiB can be beyond a guarantee that an H100's quarter is within) never
// holds against a workload within its team's guarantee, which places and
// preempts there
// as anywhere else, and such a reserved workload is decided in its turn
// rather than first. The reservation lasts, through its nomination, until
// the workload runs; there is one at a time. We chose a reservation over
// aging because aging only reorders the queue, and reordering does not
// help a workload that no node can hold while small ones keep arriving.
//
// # Speed
//
// Each node has summaries (free whole devices, largest free share) so that
// a full node is skipped at once; a request shape that fitted nowhere is not
// tried again in the cycle (usage only grows within a cycle; nor, while
// the starvation reservation that refused it lasts, one that fitted only
// where the reservation refused it, for workloads it binds alike and of
// the same max runtime: its refusals only grow too), nor is a
// victim search that failed for the same team, class and shape (the keys
// are the shape's number, given when the pending records are read, and
// the team's and class's records: no string to hash). The
// packing policy's weights are set once a cycle, so a node's score for a
// request shape changes only when the node does; scores are remembered per
// shape and node version, and a placement rescores only the node it
// changed. Each shape also has an index of the nodes it fits, by score
// (index.go): a workload of one replica visits nodes best score first and
// stops once no node left can beat the best found (a hold, a reservation
// or the budget only ever moves it to a device that scored no better), so
// that a placement costs the nodes near the top, not every node; a gang,
// the burst pass, the random policy, and the explanation when nothing fits
// still scan every node, and choose what the index would. On a node held
// for preemptors, whether a placement also fits its future is remembered
// with the score, by the versions of the node, its future and its stages.
// Fit checks and victim searches allocate nothing per node (the victim
// search works on one reused copy of the node, with reused tables of what
// each candidate holds on each device, and allocates only the set it
// returns). What a cycle makes per workload or per node is made in few
// allocations: the running workloads' records in one array, a node's
// packing cache in three arrays, a tier's tables by device in one; a
// victim's message in one buffer, with its preemptor's mention made once,
// and one message shared by consecutive victims alike in team, class, rule
// and whether they are of the preemptor's team. What a cycle makes by
// pending workload (the records, their flags, queues and lists, the list
// of those that borrow), its node states, its nodes' stages and its
// memo's scores by node are kept for the next cycle (pendingBuffers, in
// one slot, zeroed when given back: so the buffers for the longest queue
// scheduled stay allocated between cycles, but for the scores beyond 32
// MB, one array a request shape), since what a cycle allocates
// sets how often the collector marks the whole snapshot. The loops over a
// node's devices read each device in place, not a copy of its 96-byte
// core.GPU, and ask allows and shareMilli, which answer without calling
// core.Request's methods (not inlined: they copy the request) where the
// request names no model and asks its share in milli-GPU. Holds are
// listed by workload (holders) only for the nominated, whose held nodes
// are looked up again. Whether a shape could never run (neverMessage)
// asks core.Feasible of the first schedulable node alone before the whole
// fleet: nodes that could hold it, any more nodes could too.
//
// A victim search weighs the whole cluster and finds its cheapest set
// (victim cost, then the smaller node, then the name) through the shape's
// victim index (victimindex.go): the nodes ordered by a lower bound of
// what a set there could cost, counting only what some preemptor could
// take there (not non-preemptible or stopping work, nor this cycle's
// placements, nor preemptors pictured in a node's future, nor victims
// already chosen), by tier (work over its quota for a preemptor within
// its guarantee; batch and what fair-share reclaim may take now for one
// within its fair share; batch alone for the rest), plus, on the nodes
// where the preemptor's team runs work, that work (its own lower classes
// may be taken). The search visits nodes by bound and stops once the next
// bound cannot beat the best set found, so it weighs the few nodes near
// the top. The bounds stay tight as victims are chosen: a node's tiers are
// made again from the workloads left when one is chosen (the least and
// most one holds, whether one is a fraction), and the fewest victims a set
// needs is counted from the four largest holdings, not the largest alone;
// at 12,500 nodes this cut the nodes weighed from 8 to about 1 per search.
// Before issue 20 the search stopped, as Kubernetes' default
// preemption does, once it had found sets on max(100, 10%) of the nodes
// (at most 250) from a node that depended on the workload, and stopped at
// once on a single victim no larger than the request: it could choose a
// costlier set than one elsewhere, and on large clusters weighed 250
// nodes per preemptor. The golden plans were written again for this
// change: the same sets where the old search saw the cheapest, and where
// it did not, a cheaper set, or one as cheap on a smaller node or one
// earlier by name (over the golden cases' first cycles: 1.5% less
// capacity evicted per preemptor, 4.5% more preemptors served). A node
// where even every candidate gone would not leave room is skipped before
// its victims are sorted.
//
// A node held for preemptors whose future has no room for a shape (the
// check remembered with the score, which does not depend on who asks) is
// parked out of the shape's placement index until its future or holds
// change; a workload the node is held for weighs its own held nodes
// itself. Without it, every placement after a wave of preemptions popped
// the held nodes first (700 per placement at 12,500 nodes).
//
// The victim index keeps, per team, its orders lazily: a team's orders
// catch up, from the team's own list of changed nodes, when a search of
// the team uses them, and skip, without reading them, the nodes where the
// team runs nothing below the preemptor's class (known once the cycle
// starts: teamState.lowest). A shape's own orders (one per tier, and the
// nodes freeing room) are lazy too: each is made when a search first uses
// it, and the nodes changed since it was last used are bounded again there
// when one next does (a node changed several times between two uses is
// bounded once: about a third fewer bounds at 1,000 nodes than bounding
// every order at every change). The upkeep is kept small besides: a
// node's stamp (the state its entries were made at) is one number, the
// sum of its versions, which only grow; an entry is 32 bytes; an entry
// taken out of a heap leaves its hole to go down by the lesser child and
// the heap's last entry to go up from the leaf (a comparison a level, not
// two); a team's changed nodes are listed by their place in its nodes,
// with the team's place among each node's teams (teamState.in), so that
// its orders find its work there without a search; whether a shape may
// use a node at all is found once.
//
// A plain pending workload (it holds no node, has no victims stopping,
// was not preempted lately, is no array task, asks for no region, the
// cluster has no burst pool) that is decided like
// the last one of its team, class and shape while its team holds what it
// held then reuses that decision (decisionKey), and a placement the index
// finds no place for reuses the last scan's explanation while no node
// changed (scanKey): the scan of every node only explains. What a
// decision reads of a pending workload that cannot change within the
// cycle (its team, class, ask, shape by number, the guarantee it is
// judged against, whether it is plain) is found once, when the cycle
// starts (readPending, pendingWork), so that a reused decision reads
// nothing of the workload itself (not even whether it is nominated, which
// its record says) and hashes no string.
//
// A decision reused from the cache is found in its team's table by class
// and shape number (teamState.decided) where the classes times the shapes
// are few (decisionTableAt), in a map otherwise.
//
// Parts of the cycle's setup run on GOMAXPROCS goroutines, over
// contiguous parts of their input, where the input is large: the records
// of a pending queue of 4,096 or more (readPending), the node states and
// each node's eligible work in its tiers at 256 nodes or more (inParts),
// the futures and stamps of a new victim index's nodes and the bounds of
// the nodes in a new order of it (256 nodes or more), and those in a
// team's new victim order (64 or more). Each goroutine only reads what
// the cycle holds and writes its own part (the records of its part of the
// queue, its own nodes, its own table of shapes and its own scratch);
// what depends on an order is done afterwards on one goroutine in the
// order the sequential code used: the shapes are numbered in the order
// first seen (each part's new shapes after those of the parts before it),
// the packing mix counts the workloads in the snapshot's order, teams the
// snapshot does not list, levels and queues are made as first seen, the
// nodes join their teams' lists in the nodes' order, the index entries
// are set in the heaps in the nodes' order, and the starving workload is
// the least of the parts' by class, wait, submission and place in the
// queue (the first of equals). So a cycle's plan is the same at any
// GOMAXPROCS (TestParallelSetupDecidesAsSequential compares plans at 1
// with 2, 3 and 5, where at 1 the victim indexes are built by the code
// that catches them up; TestPendingReadInPartsAsInOrder the cycle's
// start), and the scheduler stays a function of its snapshot. The
// decisions themselves are made one after the other: each depends on
// those before it.
//
// BenchmarkCycle measures one cycle of 8-GPU nodes, 50 teams with
// guarantees of half the cluster, 3/4 full, by size (nodes=N/pending=P);
// TestPlansUnchanged holds the decisions of a fixed set of clusters.
// Measured on this project's shared 2-core machine (whose speed varies by
// a fifth to a third from one minute to the next with the load of others
// and of the host), one cycle: nodes=12500/pending=50000 125-150 s and 6.0
// GB before issue 20, 14.9-22.5 s and 381 MB after its first part,
// 1.31-2.0 s and 195 MB after its second, 0.79/0.85/0.99 s (min/median/
// max of 3 runs) and 151 MB before the parallel setup, then 0.70/0.83/0.91
// s and 153 MB (16,176 preemptions planned; 13,084 victim searches weigh
// 13,517 nodes); nodes=1000/pending=50000 1.30-1.44 s, then 0.73-1.2 s,
// then 0.14-0.24 s and 25 MB, then 105/114/123 ms, then 112/117/129 ms
// (min/median/max of 5 runs) and 25 MB, in a session where the code before
// the parallel setup took 113/132/137 ms (and 0.86/0.89/0.93 s at 12,500
// nodes); nodes=1000/pending=10000 74/79/83 ms and 15 MB (the code before:
// 70/76/80 ms, within the noise). With fewer allocations (the first
// paragraph of this section), in a slower session:
// nodes=1000/pending=50000 117/123/130 ms, 24.6 MB and 75k allocations a
// cycle, against 120/124/143 ms, 25.1 MB and 112k for the code before,
// alternating; nodes=12500/pending=50000 0.88/0.90/0.95 s, 149 MB and 539k
// allocations, against 0.78/0.96/0.97 s, 153 MB and 892k (the same code
// in a quieter spell afterwards, as in the README: nodes=1000/pending=
// 50000 106/115/128 ms over 5 runs, nodes=12500 0.79/0.83/0.88 s,
// nodes=1000/pending=10000 70/73/74 ms). With the victim index's lazy
// shape orders and leaner upkeep, the devices read in place, the cached
// decisions reused before the full decision and the rest of this
// section's last changes, alternating with the code before in a loaded
// spell (where that code took 121/144/160 ms, against the 106/115/128 of
// the quiet spell above): nodes=1000/pending=50000 88/107/195 ms over 24
// runs (5 runs as the README's command: 86/97/102 ms; in one more, 89/105/
// 117), 21.3 MB and 71k allocations a cycle, against 121/144/160 ms, 24.6
// MB and 75k; nodes=12500/pending=50000 0.60/0.62/0.68 s, 124 MB and 523k
// allocations, against 0.80/0.81/0.88 s, 149 MB and 539k;
// nodes=1000/pending=10000 51/60/64 ms and 12.3 MB, against 73/78/80 ms
// and 14.7 MB. With the buffers kept for the next cycle
// (pendingBuffers): nodes=1000/pending=50000 12.9 MB and 63.5k
// allocations a cycle, against 21.3 MB and 71k, so that the benchmark's
// three timed cycles after the snapshot is built usually see no
// collection (the code before, one); alternating with the code before in
// a loaded spell, 88/103/160 ms (min/median/max of 30 runs as the
// README's command) against 100/112/133 ms; at -benchtime 30x, where
// collections fall in every run alike, within the noise (68-91 ms
// against 83-92 over 7 runs each); nodes=12500/pending=50000
// 0.59/0.79/0.87 s and 104 MB over 9 runs, against 0.64/0.80/1.00 s and
// 124 MB. In a quiet spell at the end of that session, as in the
// README: nodes=1000/pending=50000 71/88/110 ms over 8 runs (the first of
// each series, which makes the buffers, 103 and 110), nodes=1000/pending=
// 10000 47/53/55 ms, nodes=12500/pending=50000 0.60/0.63/0.65 s and
// 94-102 MB; time then grows as nodes^0.73 over 250-12,500 nodes at
// 50,000 pending (medians 36, 88, 239 and 631 ms at 250, 1,000, 4,000 and
// 12,500; nodes^0.78 from 1,000) and as pending^0.31 from 10,000 to
// 50,000 at 1,000 nodes. Before these, time grew as nodes^0.67 over 250-12,500 nodes
// (nodes^0.76 from 1,000) and as pending^0.46 from 10,000 to 50,000 at
// 1,000 nodes (5,000 pending, 139-170 ms, cost more than 10,000: the
// starving workload's reservation then refused shapes that fitted nowhere
// else either, softly, so that each was tried again, and the scan of
// every node explained each anew; such refusals are now remembered while
// the reservation lasts, noFitResv, and BenchmarkCycleReserved holds a
// reservation through the whole queue: docs/PERFORMANCE.md). What
// remains at 12,500 nodes (by CPU profile): the placements (about 27%
// of the cycle's own work), the victim searches (about 31%: the victim
// index's upkeep about 19, the walks 12), the garbage collector (which shares the second core with the
// parallel setup; at 1,000 nodes a cycle with the collector off took
// about 6 ms less); at 1,000 nodes, the victim searches (about 22 ms, from
// 37: the teams' orders about 8, made about 870 times a cycle, bounding
// about 17,500 nodes, and caught up; the walks with their victim sets
// about 9; the shapes' orders about 5), the collector (before the buffers were
// kept, a collection every second or third cycle, about 15 ms of CPU a
// cycle, marking about 55 MB, most of it the snapshot; now one every
// four or five), the decisions that the cache cannot reuse (about
// 6,000), and reading the 50,000 records once each as they are decided
// (a cache miss each: they lie in the snapshot's order, taken queue by
// queue; laying them out queue by queue saved nothing measurable). Tried
// and not kept: the teams' orders built on several goroutines (fewer than
// 64 nodes, and again from 16: they cost more than they saved); and, by
// count, a lower bound of a team's nodes that would spare making its
// order while the walk stops before it: counting every eligible workload
// of a node it would spare about half the orders, but keeping such bounds
// current costs about what those orders cost.
//
// # Known limits
//
// Placement is greedy: with mixed sizes a reclaim can fragment (a small
// workload planned onto the only node a large one of the same team fits),
// and where preemptors share a node the devices pictured for the earlier
// ones may not be the ones they get. Both cost time, never safety: every
// placement is checked with core.Fits, here and again in the store.
//
// Fair shares are computed over every schedulable GPU, burst nodes
// included. A gang is kept within or outside the burst pools, and within
// one cluster (node.Cluster): where the nodes span several, each cluster
// is tried in turn, by name, and the first that holds every replica wins
// (not the one where the gang would pack best). Residency is checked
// again at commit (core.Fits); a gang's one cluster is not.
//
// sched imports core and sched/fairshare only.
package sched
