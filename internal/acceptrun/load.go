package acceptrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/loadgen"
)

// loadPlan is a load stage's generator as the stage runs it: the card's
// load spec, the declared port it drives, the request bodies, and the
// stage's deadline, which bounds the load.
type loadPlan struct {
	spec     *api.LoadSpec
	port     int
	requests [][]byte
	deadline time.Time
}

// loadRun is the generator's run against one workload.
type loadRun struct {
	done   chan struct{}
	cancel context.CancelFunc
	steps  []accept.LoadStepRecord
	err    error
}

// finished reports whether the run has ended (true for none).
func (l *loadRun) finished() bool {
	if l == nil {
		return true
	}
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// stop ends the run, if any, and waits for it.
func (l *loadRun) stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}

// notes says what cut the run short, if anything.
func (l *loadRun) notes() []string {
	var out []string
	for _, s := range l.steps {
		if s.Note != "" {
			out = append(out, fmt.Sprintf("load step at concurrency %d: %s", s.Concurrency, s.Note))
		}
	}
	if l.err != nil && !errors.Is(l.err, context.Canceled) && !errors.Is(l.err, context.DeadlineExceeded) {
		out = append(out, "load generator: "+l.err.Error())
	}
	return out
}

// loadPort is the number of the declared port a load stage drives.
func loadPort(st api.Stage) int {
	p, _ := accept.DeclaredPort(st.Workload, st.Load.Port)
	return p.Port
}

// startLoad starts the generator against a workload that serves, until
// the stage's deadline; it reaches the workload through Dial, as the
// proxy does.
func (r *Runner) startLoad(ctx context.Context, p *loadPlan, id core.WorkloadID) *loadRun {
	lctx, cancel := context.WithDeadline(ctx, p.deadline)
	l := &loadRun{done: make(chan struct{}), cancel: cancel}
	cfg := loadgen.Config{
		Protocol: p.spec.Protocol,
		Path:     accept.LoadPath(p.spec),
		Host:     fmt.Sprintf("localhost:%d", p.port),
		Requests: p.requests,
		Steps:    accept.LoadSteps(p.spec),
		Duration: accept.LoadStepDuration(p.spec),
		Count:    p.spec.Count,
		Warmup:   accept.LoadWarmup(p.spec),
		Dial: func(ctx context.Context) (net.Conn, error) {
			return r.Dial.DialWorkload(ctx, id, p.port)
		},
	}
	go func() {
		defer close(l.done)
		l.steps, l.err = loadgen.Run(lctx, cfg)
	}()
	return l
}

// loadProblem says why a load stage's generator measured nothing: a
// workload that ended before it served, or whose port never accepted a
// connection. "" when each was loaded.
func loadProblem(ws []*watched) string {
	var problems []string
	for _, x := range ws {
		switch {
		case x.load == nil:
			problems = append(problems, fmt.Sprintf("workload %s ended (%s) before it served: no load was sent", x.id, x.w.Status.Phase))
		case len(x.load.steps) == 0:
			why := "the stage ended first"
			if x.load.err != nil {
				why = x.load.err.Error()
			}
			problems = append(problems, fmt.Sprintf("workload %s: no load was measured: %s", x.id, why))
		}
	}
	return strings.Join(problems, "; ")
}

// loadRequests reads the request bodies of each load stage with a
// generator, by stage index: the card's own, or the lines of its
// requestsFile in one of the team's volumes. A card whose load this
// server cannot run (no way to reach a workload's port, a volume file it
// cannot read) or whose load outlasts the stage's timeout is refused,
// naming the field.
func (r *Runner) loadRequests(ctx context.Context, team core.TeamName, card api.AcceptanceCard) (map[int][][]byte, error) {
	out := map[int][][]byte{}
	for i, st := range card.Stages {
		if st.Load == nil {
			continue
		}
		at := fmt.Sprintf("stages[%d].load", i)
		if r.Dial == nil {
			return nil, api.FieldErrors{{Field: at, Problem: "this server cannot reach workloads' ports (its executor gives no endpoints): it runs no load generator"}}
		}
		l := st.Load
		steps := time.Duration(len(accept.LoadSteps(l)))
		if need, timeout := steps*(accept.LoadWarmup(l)+accept.LoadStepDuration(l)), r.stageTimeout(st.Workload); need >= timeout {
			return nil, api.FieldErrors{{Field: at + ".duration", Problem: fmt.Sprintf("%d steps of %s warm-up and %s take %s, as long as the stage's timeout (%s)", steps, accept.LoadWarmup(l), accept.LoadStepDuration(l), need, timeout)}}
		}
		if l.RequestsFile == "" {
			for _, b := range l.Requests {
				out[i] = append(out[i], []byte(b))
			}
			continue
		}
		reqs, err := r.readRequestsFile(ctx, team, l)
		if err != nil {
			var fe api.FieldErrors
			if errors.As(err, &fe) {
				fe[0].Field = at + ".requestsFile"
			}
			return nil, err
		}
		out[i] = reqs
	}
	return out, nil
}

// readRequestsFile reads a load's requestsFile from the team's volume:
// JSON lines, each a request body the protocol takes.
func (r *Runner) readRequestsFile(ctx context.Context, team core.TeamName, l *api.LoadSpec) ([][]byte, error) {
	refuse := func(format string, args ...any) error {
		return api.FieldErrors{{Problem: fmt.Sprintf(format, args...)}}
	}
	vol, file, _ := accept.SplitRequestsFile(l.RequestsFile)
	if _, err := r.Store.Volume(ctx, team, vol); errors.Is(err, core.ErrNotFound) {
		return nil, refuse("team %s has no volume %q: a requestsFile is a file in one of the team's volumes (VOLUME/PATH)", team, vol)
	} else if err != nil {
		return nil, err
	}
	if r.ReadVolume == nil {
		return nil, refuse("this server cannot read team volumes (they live where its executor runs workloads): give the requests in the card")
	}
	b, err := r.ReadVolume(ctx, team, vol, file, accept.MaxLoadFileBytes)
	if err != nil {
		return nil, refuse("%s: %v", l.RequestsFile, err)
	}
	var out [][]byte
	for n, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if problem := accept.LoadRequestProblem(l.Protocol, json.RawMessage(line)); problem != "" {
			return nil, refuse("%s line %d: %s", l.RequestsFile, n+1, problem)
		}
		if len(out) == accept.MaxLoadRequests {
			return nil, refuse("%s has more than %d requests", l.RequestsFile, accept.MaxLoadRequests)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, refuse("%s holds no request (one JSON request body a line)", l.RequestsFile)
	}
	return out, nil
}
