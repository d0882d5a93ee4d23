package reclaim

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Reasons of the events and stops Decide asks for.
const (
	ReasonIdleWarning    = "IdleWarning"
	ReasonIdle           = "Idle"
	ReasonMemoryWarning  = "GPUMemoryLimitWarning"
	ReasonMemoryExceeded = "GPUMemoryLimitExceeded"
)

// ProductionClass is never stopped for idleness, whatever the rules say.
const ProductionClass = "production"

// IdleRule stops workloads of a kind and team whose GPUs stay below
// Threshold for Timeout. Empty Kind or Team match any; when several rules
// match, the one naming the team wins over one naming only the kind, which
// wins over one naming neither. Timeout 0 turns idle reclaim off for what
// the rule matches.
type IdleRule struct {
	Kind      core.Kind
	Team      core.TeamName
	Threshold float64
	Timeout   time.Duration
	// Warning is how long before the stop the IdleWarning event is
	// recorded.
	Warning time.Duration
}

func (r IdleRule) specificity() int {
	s := 0
	if r.Team != "" {
		s += 2
	}
	if r.Kind != "" {
		s++
	}
	return s
}

// MemoryRule enforces the GPU memory share of fractional workloads.
type MemoryRule struct {
	Enabled bool
	// GraceSamples is how many consecutive samples over the share are
	// tolerated before the stop: 0 stops at the first.
	GraceSamples int
}

// Rules are the idle and memory rules.
type Rules struct {
	Idle   []IdleRule
	Memory MemoryRule
}

// Match returns the idle rule that applies to w, if any.
func (rs Rules) Match(w *core.Workload) (IdleRule, bool) {
	best, found := IdleRule{}, false
	for _, r := range rs.Idle {
		if (r.Kind != "" && r.Kind != w.Kind) || (r.Team != "" && r.Team != w.Team) {
			continue
		}
		if !found || r.specificity() > best.specificity() {
			best, found = r, true
		}
	}
	return best, found
}

// Track is what Decide remembers of one workload attempt between samples.
type Track struct {
	Attempt int
	// IdleSince is the time of the first sample of the current idle
	// stretch; zero when the workload is not idle.
	IdleSince time.Time
	// IdleWarned: the IdleWarning of this stretch is recorded.
	IdleWarned bool
	// OverSamples counts consecutive samples over the memory share.
	OverSamples int
}

// State is Decide's memory, per running workload.
type State map[core.WorkloadID]Track

// IdleSince returns, per workload, the start of its idle stretch.
func (s State) IdleSince() map[core.WorkloadID]time.Time {
	out := map[core.WorkloadID]time.Time{}
	for id, t := range s {
		if !t.IdleSince.IsZero() {
			out[id] = t.IdleSince
		}
	}
	return out
}

// ActionKind is what to do to a workload.
type ActionKind int

// Action kinds.
const (
	// Warn records a Warning event.
	Warn ActionKind = iota + 1
	// Stop stops the workload: it ends Failed with the action's reason.
	Stop
)

// Action is one thing to do to a workload.
type Action struct {
	Kind     ActionKind
	Workload core.WorkloadID
	Attempt  int
	Team     core.TeamName
	Reason   string
	Message  string
}

// Input is what Decide decides from.
type Input struct {
	Now time.Time
	// Sample is the latest sample; a workload it does not cover keeps its
	// state and gets no action.
	Sample  core.Sample
	Running []*core.Workload
	Rules   Rules
}

// Decide returns the next state and the actions to take, in the order of
// in.Running; for one workload a warning comes before its stop:
//
//  1. workloads already being stopped, or without a sample of their
//     current attempt, are left alone (their state is kept while they run);
//  2. memory: a fractional workload using more GPU memory on a device than
//     its placement's share there is warned at the first such sample and
//     stopped once more than GraceSamples samples in a row were over (every
//     priority class: the share protects the workloads it shares with);
//  3. idle: a workload whose rule has a timeout, and whose class is not
//     production, starts an idle stretch at its first sample below the
//     threshold; a sample at or above the threshold ends it. It is warned
//     once the stretch reaches Timeout-Warning, and stopped once it reaches
//     Timeout, provided the warning was recorded at an earlier sample (so
//     that the warning always comes first, by at least one sample).
func Decide(prev State, in Input) (State, []Action) {
	next := State{}
	var acts []Action
	for _, w := range in.Running {
		t, had := prev[w.ID]
		if !had || t.Attempt != w.Status.Attempts {
			t = Track{Attempt: w.Status.Attempts}
		}
		s, ok := in.Sample.Workloads[w.ID]
		if w.Status.StopRequested != "" || !ok || s.Attempt != w.Status.Attempts {
			if had {
				next[w.ID] = t
			}
			continue
		}
		act := func(kind ActionKind, reason, msg string) {
			acts = append(acts, Action{Kind: kind, Workload: w.ID, Attempt: w.Status.Attempts, Team: w.Team, Reason: reason, Message: msg})
		}

		// 2. Memory.
		if in.Rules.Memory.Enabled && w.Request.Fractional() {
			if over, msg := overShare(w, s); over {
				t.OverSamples++
				if t.OverSamples == 1 {
					act(Warn, ReasonMemoryWarning, msg)
				}
				if t.OverSamples > in.Rules.Memory.GraceSamples {
					act(Stop, ReasonMemoryExceeded, msg)
					continue
				}
			} else {
				t.OverSamples = 0
			}
		}

		// 3. Idle.
		rule, ok := in.Rules.Match(w)
		if !ok || rule.Timeout <= 0 || w.Priority == ProductionClass || s.Utilization >= rule.Threshold {
			t.IdleSince, t.IdleWarned = time.Time{}, false
			next[w.ID] = t
			continue
		}
		if t.IdleSince.IsZero() {
			t.IdleSince = in.Now
		}
		idle := in.Now.Sub(t.IdleSince)
		switch {
		case idle >= rule.Timeout && t.IdleWarned:
			act(Stop, ReasonIdle, fmt.Sprintf("GPU utilisation stayed below %s for %s (%s at the last sample): stopped by idle reclaim",
				pct(rule.Threshold), round(idle), pct(s.Utilization)))
			continue
		case !t.IdleWarned && idle >= rule.Timeout-rule.Warning:
			t.IdleWarned = true
			stopAt := t.IdleSince.Add(rule.Timeout)
			if stopAt.Before(in.Now) {
				stopAt = in.Now
			}
			act(Warn, ReasonIdleWarning, fmt.Sprintf("GPU utilisation below %s since %s (%s now): the workload will be stopped at %s unless it uses its GPUs",
				pct(rule.Threshold), t.IdleSince.UTC().Format(time.RFC3339), pct(s.Utilization), stopAt.UTC().Format(time.RFC3339)))
		}
		next[w.ID] = t
	}
	return next, acts
}

// overShare reports whether w uses more memory on one of its devices than
// its placement holds there, and says so.
func overShare(w *core.Workload, s core.WorkloadSample) (bool, string) {
	limits := map[core.GPURef]int64{}
	var refs []core.GPURef
	var total int64
	for _, a := range w.Status.Placement {
		r := core.GPURef{Node: a.Node, Index: a.GPUIndex}
		if _, ok := limits[r]; !ok {
			refs = append(refs, r)
		}
		limits[r] += a.MemoryMiB
		total += a.MemoryMiB
	}
	if len(s.PerGPUMemoryMiB) == 0 {
		if total > 0 && s.MemoryUsedMiB > total {
			return true, fmt.Sprintf("uses %d MiB of GPU memory, above its share of %d MiB", s.MemoryUsedMiB, total)
		}
		return false, ""
	}
	slices.SortFunc(refs, func(a, b core.GPURef) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Index, b.Index))
	})
	for _, r := range refs {
		if used := s.PerGPUMemoryMiB[r]; limits[r] > 0 && used > limits[r] {
			return true, fmt.Sprintf("uses %d MiB of GPU memory on %s GPU %d, above its share of %d MiB", used, r.Node, r.Index, limits[r])
		}
	}
	return false, ""
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

func round(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}
