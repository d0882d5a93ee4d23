package sched

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Reasons a workload stays pending, as stored in its status.
const (
	// ReasonUnschedulable: no node has room for it now.
	ReasonUnschedulable = "Unschedulable"
	// ReasonQuotaLimit: its team would go above its limit.
	ReasonQuotaLimit = "QuotaLimit"
	// ReasonOverQuota: its class runs only within the team's guarantee.
	ReasonOverQuota = "OverQuota"
	// ReasonPreempting: it waits for the workloads it preempted to stop.
	ReasonPreempting = "Preempting"
	// ReasonIdleOnly: its class runs only on idle capacity, and there is
	// none that fits.
	ReasonIdleOnly = "WaitingForIdleCapacity"
	// ReasonRecentlyPreempted: the scheduler stopped it less than
	// MinRuntime ago, and it would run over its team's guarantee.
	ReasonRecentlyPreempted = "RecentlyPreempted"
	// ReasonUnknownClass: its priority class no longer exists.
	ReasonUnknownClass = "UnknownPriorityClass"
	// ReasonBudgetExceeded: its team's hard budget is spent for the month
	// and its class may be preempted (production still runs).
	ReasonBudgetExceeded = "BudgetExceeded"
)

// tally counts why nodes were rejected, and remembers the best partial fit,
// for the pending message. It does not allocate until a message is made:
// the reasons are the fixed set in whyReasons.
type tally struct {
	counts [len(whyReasons)]int
	order  [len(whyReasons)]int8
	n      int8
	// best is the node with the most free room for the request, and how
	// much (free whole devices, or the largest free share).
	best     core.NodeName
	bestFree int64
}

// whyReasons are the reasons a node is not used, in a fixed order.
var whyReasons = [...]string{whyUnschedulable, whyNoGPU, whySelector, whyResidency, whyBurst, whyCluster, whyModel, whyCPU, whyMemory, whyWhole, whyShare, whyReserved, whyStarving, whyLimit}

func (t *tally) add(reason string) {
	for i, r := range whyReasons {
		if r == reason {
			if t.counts[i] == 0 {
				t.order[t.n] = int8(i)
				t.n++
			}
			t.counts[i]++
			return
		}
	}
}

// near records how close a node came to fitting req.
func (t *tally) near(ns *nodeState, req core.Request) {
	if !ns.node.Schedulable || !modelOK(ns, req) {
		return
	}
	var free int64
	if req.WholeGPUs() > 0 {
		free = int64(ns.freeOf(req))
	} else {
		free = ns.maxFree
	}
	if t.best == "" || free > t.bestFree {
		t.best, t.bestFree = ns.node.Name, free
	}
}

func modelOK(ns *nodeState, req core.Request) bool {
	for _, m := range ns.models {
		if req.ModelAllowed(m) {
			return true
		}
	}
	return false
}

// message explains why no node fits, e.g. "no node with 4 free H100 GPUs
// (best: node-3 with 2); 12 nodes considered: 9 not enough free whole GPUs,
// 3 no GPU of the requested model".
func (t *tally) message(nodes int, req core.Request) string {
	if nodes == 0 {
		return "no nodes are registered"
	}
	s := "no node with " + describe(req)
	switch {
	case t.best == "" || t.bestFree == 0:
	case req.WholeGPUs() > 0:
		s += fmt.Sprintf(" (best: %s with %d)", t.best, t.bestFree)
	case t.bestFree >= 1000:
		s += fmt.Sprintf(" (best: %s with a whole GPU free)", t.best)
	default:
		s += fmt.Sprintf(" (best: %s with %s of a GPU free)", t.best, gpus(t.bestFree))
	}
	parts := make([]string, 0, t.n)
	for _, i := range t.order[:t.n] {
		parts = append(parts, fmt.Sprintf("%d %s", t.counts[i], whyReasons[i]))
	}
	return s + fmt.Sprintf("; %d %s considered: %s", nodes, plural(nodes, "node", "nodes"), strings.Join(parts, ", "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// describe says what a request needs, e.g. "4 free H100 GPUs" or "0.25 of
// a free GPU".
func describe(r core.Request) string {
	model := ""
	if len(r.GPUModels) > 0 {
		model = strings.Join(r.GPUModels, " or ") + " "
	}
	switch {
	case r.WholeGPUs() > 0:
		return fmt.Sprintf("%d free %s%s", r.WholeGPUs(), model, plural(r.WholeGPUs(), "GPU", "GPUs"))
	case r.MilliGPU > 0:
		return fmt.Sprintf("%s of a free %sGPU", gpus(r.MilliGPU), model)
	default:
		return fmt.Sprintf("%d MiB free on one %sGPU", r.GPUMemoryMiB, model)
	}
}

// gpus renders milli-GPU as GPUs: 8000 → "8", 2500 → "2.5", 250 → "0.25".
func gpus(m int64) string {
	s := strconv.FormatInt(m/1000, 10)
	if f := m % 1000; f != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%03d", f), "0")
	}
	return s
}
