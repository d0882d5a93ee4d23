package acceptrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Labels on the workloads of a run's stages.
const (
	LabelRun   = "gpufleet.io/acceptance-run"
	LabelStage = "gpufleet.io/acceptance-stage"
)

// Submitter submits a workload as a user, through every check of the API
// (the API server's SubmitAs): a stage's workload is the caller's own.
type Submitter interface {
	SubmitAs(ctx context.Context, u *core.User, w *api.Workload) (*core.Workload, error)
}

// UsageHistory is a workload's GPU usage samples (usage.Tracker).
type UsageHistory interface {
	WorkloadHistory(id core.WorkloadID, window time.Duration, now time.Time) []core.WorkloadUsagePoint
}

// Runner runs acceptance cards. Start stores a run and runs its stages in
// the background; every change is stored as it happens, so that a reader
// (the CLI's progress, the portal) sees the run advance.
type Runner struct {
	Store  *store.Store
	Submit Submitter
	// Drain drains a node, for a failure stage's disrupt: drain (the
	// node lifecycle); nil refuses such a stage.
	Drain func(ctx context.Context, node core.NodeName, reason string) error
	// Usage, when set, gives the load and failure stages their GPU
	// memory samples (gpu_memory_peak_mib, memory_headroom_ratio).
	Usage  UsageHistory
	Logger *slog.Logger
	// Poll is how often a stage's workloads are looked at (default
	// 200 ms); StageTimeout bounds a stage (default 30 minutes).
	Poll         time.Duration
	StageTimeout time.Duration
	Now          func() time.Time
	// Server is this server's name; Alive, when set, lists the servers
	// sharing the store that are alive (seen within their lease): a run
	// another live server drives is its, and left alone by Open and
	// Sweep.
	Server string
	Alive  func(ctx context.Context) (map[string]bool, error)

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// Options of one run.
type Options struct {
	// Continue runs every stage even after one fails.
	Continue bool
	// Pool replaces the card's target pool.
	Pool string
}

// Open marks the runs that a stopped server left Running as Error (their
// stages' workloads are not watched any more) and readies the runner;
// Close stops the runs in progress and waits for them.
func (r *Runner) Open(ctx context.Context) error {
	r.ctx, r.stop = context.WithCancel(context.WithoutCancel(ctx))
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	return r.Sweep(ctx, true)
}

// Sweep marks as Error the Running runs whose server is gone: this one's
// own at its start (mine: a run of this server's name is a previous
// process's), and those of servers no longer alive (Alive). A run another
// live server drives is left alone.
func (r *Runner) Sweep(ctx context.Context, mine bool) error {
	runs, err := r.Store.AcceptanceRuns(ctx, nil, 1000)
	if err != nil {
		return err
	}
	var alive map[string]bool
	if r.Alive != nil {
		if alive, err = r.Alive(ctx); err != nil {
			return err
		}
	}
	for _, rec := range runs {
		if rec.Status != api.RunRunning {
			continue
		}
		run, err := Decode(rec)
		if err != nil {
			return err
		}
		switch {
		case run.Server == r.Server && !mine:
			continue // this process's own, running
		case run.Server != r.Server && run.Server != "" && alive[run.Server]:
			continue // another live server's
		case run.Server == "" && !mine:
			continue
		}
		run.Status, run.Message = api.RunError, "the server stopped during the run"
		now := r.now()
		run.FinishedAt = &now
		if err := r.save(ctx, run); err != nil {
			return err
		}
	}
	return nil
}

// Close stops the runs in progress (each ends as Error) and waits for
// them.
func (r *Runner) Close() {
	if r.stop != nil {
		r.stop()
	}
	r.wg.Wait()
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

// Decode reads a stored run.
func Decode(rec store.AcceptanceRun) (*api.AcceptanceRun, error) {
	var run api.AcceptanceRun
	if err := json.Unmarshal(rec.Spec, &run); err != nil {
		return nil, fmt.Errorf("acceptance run %s: %w", rec.ID, err)
	}
	return &run, nil
}

func (r *Runner) save(ctx context.Context, run *api.AcceptanceRun) error {
	b, err := json.Marshal(run)
	if err != nil {
		return err
	}
	return r.Store.PutAcceptanceRun(ctx, store.AcceptanceRun{ID: run.ID, Team: core.TeamName(run.Team), Status: run.Status, CreatedAt: run.StartedAt, Spec: b})
}

// Start checks a card for u and starts a run of it: the card as Validate
// checks it, a team of which u is a member, a target pool that some node
// is in. It returns the stored run, Running, whose stages then run in the
// background.
func (r *Runner) Start(ctx context.Context, u *core.User, card api.AcceptanceCard, o Options) (*api.AcceptanceRun, error) {
	if r.ctx == nil {
		return nil, fmt.Errorf("the acceptance runner is not open: %w", core.ErrUnavailable)
	}
	if o.Pool != "" {
		card.Target.Pool = o.Pool
	}
	if fe := card.Validate(); len(fe) > 0 {
		return nil, api.FieldErrors(fe)
	}
	if card.BriefFile != "" {
		return nil, api.FieldErrors{{Field: "briefFile", Problem: "the CLI reads a brief file into brief: send the brief itself"}}
	}
	if card.Team == "" {
		if len(u.Memberships) != 1 {
			return nil, api.FieldErrors{{Field: "team", Problem: "is required: you belong to several teams, or none"}}
		}
		card.Team = string(u.Memberships[0].Team)
	}
	team := core.TeamName(card.Team)
	if u.InTeam(team) && !u.Can(team, core.RoleMember) {
		return nil, fmt.Errorf("running acceptance cards of team %s needs the member role: %w", team, core.ErrForbidden)
	}
	if !u.Can(team, core.RoleMember) {
		return nil, api.FieldErrors{{Field: "team", Problem: fmt.Sprintf("team %q does not exist or you are not a member who may submit", team)}}
	}
	if card.Target.Pool != "" || card.Target.GPUModel != "" {
		if err := r.checkTarget(ctx, card.Target); err != nil {
			return nil, err
		}
	}
	for _, st := range card.Stages {
		if st.Type == api.StageFailure && st.Disrupt == api.DisruptDrain && (r.Drain == nil || !u.Admin) {
			return nil, api.FieldErrors{{Field: "stages." + st.Name + ".disrupt", Problem: "drain takes a node out of service: only an admin may run a card that drains"}}
		}
	}
	run := &api.AcceptanceRun{ID: store.NewRunID(), Card: card, Team: card.Team, Status: api.RunRunning, StartedAt: r.now(), Server: r.Server}
	for _, st := range card.Stages {
		run.Stages = append(run.Stages, api.StageRun{Name: st.Name, Type: st.Type, Status: api.StagePending})
	}
	if err := r.save(ctx, run); err != nil {
		return nil, err
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.execute(r.ctx, u, run, o)
	}()
	return run, nil
}

// checkTarget refuses a target no node has.
func (r *Runner) checkTarget(ctx context.Context, t api.CardTarget) error {
	nodes, err := r.Store.Nodes(ctx)
	if err != nil {
		return err
	}
	var pools, models []string
	for _, n := range nodes {
		pools = append(pools, n.Pool)
		for _, g := range n.GPUs {
			models = append(models, g.Model)
		}
	}
	slices.Sort(pools)
	pools = slices.Compact(pools)
	if t.Pool != "" && !slices.Contains(pools, t.Pool) {
		return api.FieldErrors{{Field: "target.pool", Problem: fmt.Sprintf("no node is in pool %q (pools: %v)", t.Pool, pools)}}
	}
	if t.GPUModel != "" && !slices.ContainsFunc(models, func(m string) bool { return core.Request{GPUModels: []string{t.GPUModel}}.ModelAllowed(m) }) {
		return api.FieldErrors{{Field: "target.gpuModel", Problem: fmt.Sprintf("no GPU of the fleet is a %q", t.GPUModel)}}
	}
	return nil
}

// execute runs the stages in order, storing the run after each change.
func (r *Runner) execute(ctx context.Context, u *core.User, run *api.AcceptanceRun, o Options) {
	log := r.Logger.With("run", run.ID)
	failed := false
	for i, st := range run.Card.Stages {
		sr := &run.Stages[i]
		if failed && !o.Continue {
			sr.Status, sr.Message = api.StageSkipped, "an earlier stage failed (accept run --continue runs every stage)"
			continue
		}
		start := r.now()
		sr.Status, sr.StartedAt = api.StageRunning, &start
		r.saveLogged(ctx, log, run)
		if st.Type == api.StageReview {
			sr.Criteria = accept.Review(accept.TargetsOf(run.Card.Brief), st.Criteria, run.Stages[:i])
			sr.Status, sr.Message = accept.StageVerdict(sr.Criteria)
		} else if err := r.stage(ctx, u, run, i); err != nil {
			sr.Status, sr.Message = api.StageFailed, err.Error()
		}
		end := r.now()
		sr.FinishedAt = &end
		if sr.Status == api.StageFailed {
			failed = true
		}
		r.saveLogged(ctx, log, run)
		if ctx.Err() != nil {
			break
		}
	}
	end := r.now()
	run.FinishedAt = &end
	run.Status, run.Message = accept.RunStatus(run)
	if ctx.Err() != nil {
		run.Status, run.Message = api.RunError, "the server stopped during the run"
	}
	// The last save must land even as the server stops.
	r.saveLogged(context.WithoutCancel(ctx), log, run)
	log.Info("acceptance run ended", "status", run.Status, "message", run.Message)
}

func (r *Runner) saveLogged(ctx context.Context, log *slog.Logger, run *api.AcceptanceRun) {
	if err := r.save(context.WithoutCancel(ctx), run); err != nil {
		log.Error("store the acceptance run", "err", err)
	}
}

// stageSpec is the workload a stage submits: the stage's spec in the
// card's team, pinned to the target, labelled with the run and stage.
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
	return &w
}

// watched is what the runner follows of one stage workload.
type watched struct {
	id        core.WorkloadID
	w         *core.Workload
	disrupted *time.Time // when the failure stage disrupted it
	recovered *time.Time // when it ran again after
	readyAt   *time.Time // when it was first Running (and Ready, with a readyPath)
	stopped   bool       // the runner cancelled it (a service whose stage is over)
}

// stage runs one stage's workloads to their end and judges them. An error
// fails the stage with its message.
func (r *Runner) stage(ctx context.Context, u *core.User, run *api.AcceptanceRun, i int) error {
	st, sr := run.Card.Stages[i], &run.Stages[i]
	spec := stageSpec(run, st)
	ws := make([]*watched, 0, st.Workloads())
	for range st.Workloads() {
		w, err := r.Submit.SubmitAs(ctx, u, spec)
		if err != nil {
			return fmt.Errorf("submit the stage's workload: %w", err)
		}
		ws = append(ws, &watched{id: w.ID, w: w})
		sr.Workloads = append(sr.Workloads, string(w.ID))
	}
	r.saveLogged(ctx, r.Logger, run)
	timeout := r.StageTimeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	if spec.MaxRuntimeSeconds > 0 {
		timeout = max(timeout, time.Duration(spec.MaxRuntimeSeconds)*time.Second+time.Minute)
	}
	deadline := r.now().Add(timeout)
	poll := r.Poll
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	var problem error
	for {
		done, err := r.observe(ctx, st, ws)
		if err != nil {
			problem = err
			break
		}
		if done {
			break
		}
		if r.now().After(deadline) {
			problem = fmt.Errorf("the stage did not end within %s", timeout)
			break
		}
		select {
		case <-ctx.Done():
			problem = ctx.Err()
		case <-time.After(poll):
		}
		if problem != nil {
			break
		}
	}
	if problem != nil {
		for _, x := range ws {
			if x.w == nil || !x.w.Status.Phase.Terminal() {
				r.Store.RequestStop(context.WithoutCancel(ctx), x.id, "Cancelled", "the acceptance stage ended: "+problem.Error(), r.now())
			}
		}
		return problem
	}
	r.judge(ctx, st, sr, ws)
	return nil
}

// observe reads each workload once and acts: the failure stage's
// disruption, the end of a service's stage. It reports whether every
// workload has ended.
func (r *Runner) observe(ctx context.Context, st api.Stage, ws []*watched) (bool, error) {
	now := r.now()
	done := true
	for _, x := range ws {
		w, err := r.Store.Workload(ctx, x.id)
		if err != nil {
			return false, err
		}
		x.w = w
		if w.Status.Phase.Terminal() {
			continue
		}
		done = false
		serving := w.Status.Phase == core.Running && (w.ReadyPath == "" || w.Status.Ready)
		if serving && x.readyAt == nil {
			x.readyAt = &now
		}
		if st.Type == api.StageFailure {
			switch {
			case x.disrupted == nil && serving && now.Sub(*x.readyAt) >= st.DisruptAfter():
				if err := r.disrupt(ctx, st, w); err != nil {
					return false, err
				}
				x.disrupted = &now
				continue
			case x.disrupted != nil && x.recovered == nil && serving && w.Status.Attempts >= 2:
				x.recovered = &now
			}
		}
		// A service or notebook never ends by itself: its stage is over
		// once it serves (after its recovery, in a failure stage).
		if w.Kind != core.KindJob && serving && !x.stopped && (st.Type != api.StageFailure || x.recovered != nil) {
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

// judge measures the stage's platform metrics, adds what its workloads
// reported, and judges the stage's criteria: with several workloads, a
// criterion must hold for each, and the stage shows the metrics of the
// worst one (the first whose criteria fail, else the first).
func (r *Runner) judge(ctx context.Context, st api.Stage, sr *api.StageRun, ws []*watched) {
	criteria := accept.StageCriteria(st)
	var shown []api.Metric
	var shownResults []api.CriterionResult
	for k, x := range ws {
		platform, samples := r.platformMetrics(ctx, st, x)
		metrics, notes := accept.Merge(platform, reportedMetrics(x.w))
		results := accept.Evaluate(criteria, metrics)
		if k == 0 || (accept.Passed(shownResults) && !accept.Passed(results)) {
			shown, shownResults = metrics, results
			sr.Samples = samples
			if len(notes) > 0 {
				sr.Message = fmt.Sprint(notes)
			}
		}
	}
	sr.Metrics, sr.Criteria = shown, shownResults
	status, msg := accept.StageVerdict(shownResults)
	sr.Status = status
	if msg != "" {
		sr.Message = msg
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

// platformMetrics are what gpufleet measured of one workload: its exit
// code, queue wait, restarts, recovery after a disruption, and, with usage
// samples, its GPU memory peak and headroom.
func (r *Runner) platformMetrics(ctx context.Context, st api.Stage, x *watched) ([]api.Metric, []api.Sample) {
	w := x.w
	m := func(name string, v float64, unit string) api.Metric {
		return api.Metric{Name: name, Value: v, Unit: unit, Source: api.SourcePlatform}
	}
	var out []api.Metric
	if w.Status.ExitCode != nil && !x.stopped {
		out = append(out, m(accept.MetricExitCode, float64(*w.Status.ExitCode), ""))
	} else if x.stopped && w.Status.Phase == core.Cancelled {
		// A service the stage stopped once it served: it did its part.
		out = append(out, m(accept.MetricExitCode, 0, ""))
	}
	out = append(out, m(accept.MetricRestarts, float64(max(0, w.Status.Attempts-1)), ""))
	// From the workload's events: the first start (queue wait) and the
	// first start after the disruption (recovery), which a short second
	// attempt may begin and end between two looks.
	if evs, err := r.Store.Events(ctx, w.ID); err == nil {
		queued, recovered := false, false
		for _, e := range evs {
			if e.To != core.Running {
				continue
			}
			if !queued {
				out = append(out, m(accept.MetricQueueWait, e.Time.Sub(w.CreatedAt).Seconds(), "s"))
				queued = true
			}
			if x.disrupted != nil && !recovered && e.Time.After(*x.disrupted) {
				out = append(out, m(accept.MetricRecovery, e.Time.Sub(*x.disrupted).Seconds(), "s"))
				recovered = true
			}
		}
	}
	var samples []api.Sample
	if r.Usage != nil {
		since := r.now().Sub(w.CreatedAt) + time.Minute
		for _, p := range r.Usage.WorkloadHistory(w.ID, since, r.now()) {
			samples = append(samples,
				api.Sample{At: p.Time, Name: "gpu_utilization_ratio", Value: p.Utilization},
				api.Sample{At: p.Time, Name: accept.MetricGPUMemoryPeak, Value: float64(p.MemoryUsedMiB)})
		}
		if peak, ok := accept.Peak(samples, accept.MetricGPUMemoryPeak); ok {
			out = append(out, m(accept.MetricGPUMemoryPeak, peak, "MiB"))
			var limit int64
			for _, a := range w.Status.Placement {
				limit += a.MemoryMiB
			}
			if h, ok := accept.MemoryHeadroom(peak, float64(limit)); ok && !math.IsNaN(h.Value) {
				out = append(out, h)
			}
		}
	}
	return out, samples
}

// Save stores a run as it is (a decision recorded on it).
func (r *Runner) Save(ctx context.Context, run *api.AcceptanceRun) error { return r.save(ctx, run) }
