package acceptrun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
	"github.com/gpufleet/gpufleet/internal/core"
)

// stageSpec is the workload a stage submits: the stage's spec in the
// card's team, pinned to the target, labelled with the run and stage. A
// load stage's workload takes the brief's data boundary as its network
// policy (egress and the dependencies it may reach), unless its spec
// gives one.
func stageSpec(run *api.AcceptanceRun, st api.Stage) *api.Workload {
	w := *st.Workload
	if w.Team == "" {
		w.Team = run.Team
	}
	w.Labels = maps.Clone(w.Labels)
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[LabelRun], w.Labels[LabelStage] = run.ID, st.Name
	if p := run.Card.Target.Pool; p != "" {
		w.NodeSelector = maps.Clone(w.NodeSelector)
		if w.NodeSelector == nil {
			w.NodeSelector = map[string]string{}
		}
		w.NodeSelector[core.LabelPool] = p
	}
	if m := run.Card.Target.GPUModel; m != "" && len(w.Resources.GPUModels) == 0 {
		w.Resources.GPUModels = []string{m}
	}
	if w.Name == "" {
		w.Name = run.Card.Name + "-" + st.Name
	}
	if b := run.Card.Brief; st.Type == api.StageLoad && w.Network == nil && b != nil && b.DataBoundary != nil && b.DataBoundary.Egress != "" {
		w.Network = &api.Network{Egress: b.DataBoundary.Egress, Allow: b.DataBoundary.Dependencies}
	}
	return &w
}

// egressNote says what became of a stage workload's egress policy: ""
// when it has none.
func (r *Runner) egressNote(spec *api.Workload) string {
	if spec.Network == nil || spec.Network.Egress == "" {
		return ""
	}
	if r.EnforcesEgress {
		return fmt.Sprintf("network egress %s enforced by the executor", spec.Network.Egress)
	}
	return fmt.Sprintf("network egress %s is carried to the workload (network.egress) but this server's executor does not enforce it", spec.Network.Egress)
}

// watched is what the runner follows of one stage workload.
type watched struct {
	id        core.WorkloadID
	w         *core.Workload
	disrupted *time.Time // when the failure stage disrupted it
	recovered *time.Time // when it ran (and served) again after
	readyAt   *time.Time // when it was first Running (and Ready, with a readyPath)
	stopped   bool       // the runner cancelled it (a service whose stage is over)
	load      *loadRun   // the load generator's run against it, once started
}

// stageTimeout bounds a stage: StageTimeout (default 30 minutes), or the
// workload's max runtime and a minute when that is longer.
func (r *Runner) stageTimeout(spec *api.Workload) time.Duration {
	timeout := r.StageTimeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	if spec.MaxRuntimeSeconds > 0 {
		timeout = max(timeout, time.Duration(spec.MaxRuntimeSeconds)*time.Second+time.Minute)
	}
	return timeout
}

// stage runs one stage's workloads to their end and judges them. An error
// fails the stage with its message. requests are a load stage's request
// bodies.
func (r *Runner) stage(ctx context.Context, u *core.User, run *api.AcceptanceRun, i int, requests [][]byte) error {
	st, sr := run.Card.Stages[i], &run.Stages[i]
	spec := stageSpec(run, st)
	ws := make([]*watched, 0, accept.StageWorkloads(st))
	for range accept.StageWorkloads(st) {
		w, err := r.Submit.SubmitAs(ctx, u, spec)
		if err != nil {
			return fmt.Errorf("submit the stage's workload: %w", err)
		}
		ws = append(ws, &watched{id: w.ID, w: w})
		sr.Workloads = append(sr.Workloads, string(w.ID))
	}
	r.saveLogged(ctx, r.Logger, run)
	timeout := r.stageTimeout(spec)
	deadline := r.now().Add(timeout)
	poll := r.Poll
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	var load *loadPlan
	if st.Load != nil {
		load = &loadPlan{spec: st.Load, port: loadPort(st), requests: requests, deadline: deadline}
	}
	problem := r.watch(ctx, st, ws, load, deadline, poll, timeout)
	if problem != nil && st.Type == api.StageFailure && errors.Is(problem, errTimeout) {
		if p := accept.FailureProblem(r.disrupted(ctx, st, ws, timeout)); p != "" {
			problem = errors.New(p)
		}
	}
	for _, x := range ws {
		x.load.stop()
	}
	if problem != nil {
		for _, x := range ws {
			if x.w == nil || !x.w.Status.Phase.Terminal() {
				r.Store.RequestStop(context.WithoutCancel(ctx), x.id, "Cancelled", "the acceptance stage ended: "+problem.Error(), r.now())
			}
		}
		return problem
	}
	r.judge(ctx, st, sr, ws, timeout)
	if note := r.egressNote(spec); note != "" {
		sr.Message = strings.TrimPrefix(sr.Message+"; "+note, "; ")
	}
	return nil
}

// errTimeout is a stage that did not end within its timeout.
var errTimeout = errors.New("the stage did not end within")

// watch looks at the stage's workloads every poll until each has ended
// (and its load has run), the deadline passes or ctx ends.
func (r *Runner) watch(ctx context.Context, st api.Stage, ws []*watched, load *loadPlan, deadline time.Time, poll, timeout time.Duration) error {
	for {
		done, err := r.observe(ctx, st, ws, load)
		if err != nil || done {
			return err
		}
		if r.now().After(deadline) {
			return fmt.Errorf("%w %s", errTimeout, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// observe reads each workload once and acts: the failure stage's
// disruption, a load stage's generator once the workload serves, the end
// of a service's stage. It reports whether every workload has ended and
// every load has run.
func (r *Runner) observe(ctx context.Context, st api.Stage, ws []*watched, load *loadPlan) (bool, error) {
	now := r.now()
	done := true
	for _, x := range ws {
		w, err := r.Store.Workload(ctx, x.id)
		if err != nil {
			return false, err
		}
		x.w = w
		if w.Status.Phase.Terminal() {
			// Its load, if any, has nothing left to reach.
			x.load.stop()
			if !x.load.finished() {
				done = false
			}
			continue
		}
		done = false
		serving := w.Status.Phase == core.Running && (w.ReadyPath == "" || w.Status.Ready)
		if serving && x.readyAt == nil {
			x.readyAt = &now
		}
		if st.Type == api.StageFailure {
			switch {
			case x.disrupted == nil && serving && now.Sub(*x.readyAt) >= accept.StageDisruptAfter(st):
				if err := r.disrupt(ctx, st, w); err != nil {
					return false, err
				}
				x.disrupted = &now
				continue
			case x.disrupted != nil && x.recovered == nil && serving && w.Status.Attempts >= 2:
				x.recovered = &now
			}
		}
		if load != nil && serving && x.load == nil {
			x.load = r.startLoad(ctx, load, x.id)
		}
		// A service or notebook never ends by itself: its stage is over
		// once it serves (after its recovery, in a failure stage; once
		// its load has run, in a load stage with a generator).
		over := serving
		switch {
		case st.Type == api.StageFailure:
			over = over && x.recovered != nil
		case load != nil:
			over = over && x.load.finished()
		}
		if w.Kind != core.KindJob && over && !x.stopped {
			if _, err := r.Store.RequestStop(ctx, x.id, "Cancelled", "the acceptance stage is over", now); err != nil {
				return false, err
			}
			x.stopped = true
		}
	}
	return done, nil
}

// disrupt applies a failure stage's disruption to a running workload.
func (r *Runner) disrupt(ctx context.Context, st api.Stage, w *core.Workload) error {
	msg := fmt.Sprintf("acceptance stage %s disrupts the workload (%s)", st.Name, st.Disrupt)
	switch st.Disrupt {
	case api.DisruptDrain:
		if len(w.Status.Placement) == 0 {
			return errors.New("the workload to disrupt holds no node")
		}
		return r.Drain(ctx, w.Status.Placement[0].Node, msg)
	default: // requeue, stop: the workload is stopped and put back in the queue
		_, err := r.Store.Disrupt(ctx, w.ID, msg, r.now())
		return err
	}
}

// recoveredAt is when a disrupted workload ran again: its first start
// after the disruption (from its events, which a short second attempt may
// begin and end between two looks), or, for one with a readyPath, when it
// was seen serving again.
func (r *Runner) recoveredAt(ctx context.Context, x *watched) *time.Time {
	if x.disrupted == nil {
		return nil
	}
	if x.w.ReadyPath != "" {
		return x.recovered
	}
	evs, err := r.Store.Events(ctx, x.id)
	if err != nil {
		return x.recovered
	}
	for _, e := range evs {
		if e.To == core.Running && e.Time.After(*x.disrupted) {
			t := e.Time
			return &t
		}
	}
	return x.recovered
}

// disrupted is what a failure stage saw of its workloads, for
// accept.FailureProblem; timeout is the stage's when it ended it (0
// otherwise).
func (r *Runner) disrupted(ctx context.Context, st api.Stage, ws []*watched, timeout time.Duration) []accept.Disrupted {
	out := make([]accept.Disrupted, 0, len(ws))
	for _, x := range ws {
		d := accept.Disrupted{Workload: string(x.id), Phase: string(x.w.Status.Phase), DisruptAfter: accept.StageDisruptAfter(st),
			DisruptedAt: x.disrupted, RecoveredAt: r.recoveredAt(ctx, x), Timeout: timeout}
		if s := x.w.Status.StartedAt; s != nil {
			end := r.now()
			if f := x.w.Status.FinishedAt; f != nil {
				end = *f
			}
			d.Ran = end.Sub(*s)
		}
		out = append(out, d)
	}
	return out
}

// judge measures the stage's platform metrics, adds what its workloads
// reported, and judges the stage's criteria: with several workloads, a
// criterion must hold for each, and the stage shows the metrics of the
// worst one (the first whose criteria fail, else the first). A failure
// stage whose workloads were not disrupted, or did not recover, fails
// whatever its criteria say; so does a load stage whose generator never
// reached its workload.
func (r *Runner) judge(ctx context.Context, st api.Stage, sr *api.StageRun, ws []*watched, timeout time.Duration) {
	criteria := accept.StageCriteria(st)
	var shown []api.Metric
	var shownResults []api.CriterionResult
	for k, x := range ws {
		measured := r.platformMetrics(ctx, x)
		metrics, notes := accept.Merge(measured.metrics, reportedMetrics(x.w))
		results := accept.Evaluate(criteria, metrics)
		if k == 0 || (accept.Passed(shownResults) && !accept.Passed(results)) {
			shown, shownResults = metrics, results
			sr.Samples, sr.Steps = measured.samples, measured.steps
			notes = append(notes, measured.notes...)
			if len(notes) > 0 {
				sr.Message = strings.Join(notes, "; ")
			}
		}
	}
	sr.Metrics, sr.Criteria = shown, shownResults
	status, msg := accept.StageVerdict(shownResults)
	sr.Status = status
	if msg != "" {
		sr.Message = msg
	}
	var problem string
	switch {
	case st.Type == api.StageFailure:
		ds := r.disrupted(ctx, st, ws, 0)
		for _, d := range ds {
			if d.DisruptedAt != nil {
				sr.Disruptions = append(sr.Disruptions, api.Disruption{Workload: d.Workload, At: d.DisruptedAt.UTC(), RecoveredAt: d.RecoveredAt})
			}
		}
		problem = accept.FailureProblem(ds)
	case st.Load != nil:
		problem = loadProblem(ws)
	}
	if problem != "" {
		sr.Status, sr.Message = api.StageFailed, problem
	}
}

// reportedMetrics are what a workload wrote about itself: the last value
// of each name and, for a name written more than once, the summaries of
// its values (p50_, p95_, p99_, mean_, count_), unless it wrote those
// names itself.
func reportedMetrics(w *core.Workload) []api.Metric {
	var reported []api.Metric
	var series []accept.Series
	for _, m := range w.Status.Metrics {
		reported = append(reported, api.Metric{Name: m.Name, Value: m.Value, Unit: m.Unit, Source: api.SourceWorkload})
		if len(m.Samples) > 0 {
			series = append(series, accept.Series{Name: m.Name, Unit: m.Unit, Source: api.SourceWorkload, Values: m.Samples})
		}
	}
	return accept.WithSummaries(reported, series)
}

// measured is what gpufleet measured of one stage workload.
type measured struct {
	metrics []api.Metric
	samples []api.Sample
	steps   []api.LoadStep
	notes   []string
}

// platformMetrics are what gpufleet measured of one workload: its exit
// code, queue wait, restarts, recovery after a disruption, with usage
// samples its GPU memory peak and headroom, and what its load generator
// measured.
func (r *Runner) platformMetrics(ctx context.Context, x *watched) measured {
	w := x.w
	m := func(name string, v float64, unit string) api.Metric {
		return api.Metric{Name: name, Value: v, Unit: unit, Source: api.SourcePlatform}
	}
	var out measured
	if w.Status.ExitCode != nil && !x.stopped {
		out.metrics = append(out.metrics, m(accept.MetricExitCode, float64(*w.Status.ExitCode), ""))
	} else if x.stopped && w.Status.Phase == core.Cancelled {
		// A service the stage stopped once it served: it did its part.
		out.metrics = append(out.metrics, m(accept.MetricExitCode, 0, ""))
	}
	out.metrics = append(out.metrics, m(accept.MetricRestarts, float64(max(0, w.Status.Attempts-1)), ""))
	if evs, err := r.Store.Events(ctx, w.ID); err == nil {
		for _, e := range evs {
			if e.To == core.Running {
				out.metrics = append(out.metrics, m(accept.MetricQueueWait, e.Time.Sub(w.CreatedAt).Seconds(), "s"))
				break
			}
		}
	}
	if rec := r.recoveredAt(ctx, x); rec != nil {
		out.metrics = append(out.metrics, m(accept.MetricRecovery, rec.Sub(*x.disrupted).Seconds(), "s"))
	}
	if r.Usage != nil {
		since := r.now().Sub(w.CreatedAt) + time.Minute
		for _, p := range r.Usage.WorkloadHistory(w.ID, since, r.now()) {
			out.samples = append(out.samples,
				api.Sample{At: p.Time, Name: "gpu_utilization_ratio", Value: p.Utilization},
				api.Sample{At: p.Time, Name: accept.MetricGPUMemoryPeak, Value: float64(p.MemoryUsedMiB)})
		}
		if peak, ok := accept.Peak(out.samples, accept.MetricGPUMemoryPeak); ok {
			out.metrics = append(out.metrics, m(accept.MetricGPUMemoryPeak, peak, "MiB"))
			var limit int64
			for _, a := range w.Status.Placement {
				limit += a.MemoryMiB
			}
			if h, ok := accept.MemoryHeadroom(peak, float64(limit)); ok && !math.IsNaN(h.Value) {
				out.metrics = append(out.metrics, h)
			}
		}
	}
	if x.load != nil && x.load.finished() {
		ms, steps, samples := accept.LoadResults(x.load.steps)
		out.metrics = append(out.metrics, ms...)
		out.steps = steps
		out.samples = append(out.samples, samples...)
		out.notes = append(out.notes, x.load.notes()...)
	}
	return out
}
