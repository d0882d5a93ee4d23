package acceptrun

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Labels on the workloads of a run's stages (core's: the cost ledger
// tells a stage's outputs from a team's by them).
const (
	LabelRun   = core.LabelAcceptanceRun
	LabelStage = core.LabelAcceptanceStage
)

// Submitter submits a workload as a user, through every check of the API
// (the API server's SubmitAs): a stage's workload is the caller's own.
type Submitter interface {
	SubmitAs(ctx context.Context, u *core.User, w *api.Workload) (*core.Workload, error)
}

// Dialer opens a connection to a declared port of a running workload the
// way the API server's proxy reaches it (apiserver's DialWorkload), so
// that a load stage's requests take the proxy's path wherever the
// executor puts the workload.
type Dialer interface {
	DialWorkload(ctx context.Context, id core.WorkloadID, port int) (net.Conn, error)
}

// VolumeReader reads a file of a team volume, at most limit bytes (the
// local executor's ReadVolumeFile), for a load stage's requestsFile.
type VolumeReader func(ctx context.Context, team core.TeamName, volume, file string, limit int64) ([]byte, error)

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
	Usage UsageHistory
	// Dial reaches a stage workload's port for a load stage's generator;
	// nil refuses a card with one. ReadVolume reads a load stage's
	// requestsFile; nil refuses a card with one.
	Dial       Dialer
	ReadVolume VolumeReader
	// EnforcesEgress says whether the executor enforces a workload's
	// network egress policy: a load stage that carries the brief's
	// dataBoundary says whether it was enforced.
	EnforcesEgress bool
	Logger         *slog.Logger
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
	// requests are the request bodies of each load stage with a
	// generator, by stage index, read at Start.
	requests map[int][][]byte
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

// Start checks a card for u and starts a run of it: the card as accept.CheckCard
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
	if fe := accept.CheckCard(&card); len(fe) > 0 {
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
	var err error
	if o.requests, err = r.loadRequests(ctx, team, card); err != nil {
		return nil, err
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
		} else if err := r.stage(ctx, u, run, i, o.requests[i]); err != nil {
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

// Save stores a run as it is (a decision recorded on it).
func (r *Runner) Save(ctx context.Context, run *api.AcceptanceRun) error { return r.save(ctx, run) }
