package apiserver

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
	"github.com/gpufleet/gpufleet/internal/acceptrun"
	"github.com/gpufleet/gpufleet/internal/core"
)

// acceptanceOff answers the acceptance routes on a server without a
// runner.
var acceptanceOff = &refusal{msg: "this server runs no acceptance cards", kind: core.ErrUnavailable}

// SubmitAs submits a workload for u through every check of POST
// /workloads (acceptrun.Submitter): an acceptance stage's workload is its
// caller's own.
func (s *Server) SubmitAs(ctx context.Context, u *core.User, in *api.Workload) (*core.Workload, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/api/v1/workloads", nil)
	if err != nil {
		return nil, err
	}
	c := &call{r: r, u: u, rt: &route{need: core.RoleMember, doing: "submitting workloads to team %s"}}
	w, err := s.toCore(c, in)
	if err != nil {
		return nil, err
	}
	out, _, err := s.opts.Store.CreateWorkload(ctx, w, nil, s.opts.Now())
	return out, err
}

// startAcceptance answers POST /acceptance/runs: a member of the card's
// team starts a run of it ({"card": {...}, "continue": false, "pool": ""}).
func (s *Server) startAcceptance(c *call) (reply, error) {
	if s.opts.Acceptance == nil {
		return reply{}, acceptanceOff
	}
	var in api.AcceptanceRunRequest
	if err := decode(c.r, &in); err != nil {
		return reply{}, err
	}
	c.setObject(in.Card.Name)
	run, err := s.opts.Acceptance.Start(c.r.Context(), c.u, in.Card, acceptrun.Options{Continue: in.Continue, Pool: in.Pool})
	var fe api.FieldErrors
	if errors.As(err, &fe) {
		for i := range fe {
			fe[i].Field = "card." + fe[i].Field
		}
		return reply{}, &fieldErrors{fields: fe}
	}
	if err != nil {
		return reply{}, err
	}
	if c.audit != nil {
		c.audit.Object, c.audit.Team = run.ID, run.Team
	}
	return reply{status: http.StatusCreated, body: run, header: http.Header{"Location": {"/api/v1/acceptance/runs/" + run.ID}}}, nil
}

// acceptanceRun reads the run of the path, for a caller of its team with
// the route's role.
func (s *Server) acceptanceRun(c *call) (*api.AcceptanceRun, error) {
	id := c.r.PathValue("id")
	c.setObject(id)
	rec, err := s.opts.Store.AcceptanceRunByID(c.r.Context(), id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, notFound("acceptance run", id)
	}
	if err != nil {
		return nil, err
	}
	if err := c.authorize(rec.Team, "acceptance run", id); err != nil {
		return nil, err
	}
	return acceptrun.Decode(rec)
}

// listAcceptance answers GET /acceptance/runs: the runs of the caller's
// teams (every team's for an admin), newest first; ?team= narrows,
// ?limit= bounds (default 100).
func (s *Server) listAcceptance(c *call) (reply, error) {
	var teams []core.TeamName
	if !c.u.Admin {
		teams = []core.TeamName{}
		for _, m := range c.u.Memberships {
			teams = append(teams, m.Team)
		}
	}
	if t := c.r.URL.Query().Get("team"); t != "" {
		if !c.u.Admin && !c.u.InTeam(core.TeamName(t)) {
			return reply{status: http.StatusOK, body: api.List[api.AcceptanceRun]{Items: []api.AcceptanceRun{}}}, nil
		}
		teams = []core.TeamName{core.TeamName(t)}
	}
	limit := 100
	if l := c.r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxPageSize {
			return reply{}, invalid("limit", "want 1 to %d", MaxPageSize)
		}
		limit = n
	}
	recs, err := s.opts.Store.AcceptanceRuns(c.r.Context(), teams, limit)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.AcceptanceRun]{Items: []api.AcceptanceRun{}}
	for _, rec := range recs {
		run, err := acceptrun.Decode(rec)
		if err != nil {
			return reply{}, err
		}
		out.Items = append(out.Items, *run)
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// getAcceptance answers GET /acceptance/runs/{id}.
func (s *Server) getAcceptance(c *call) (reply, error) {
	run, err := s.acceptanceRun(c)
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: run}, nil
}

// acceptanceReport answers GET /acceptance/runs/{id}/report: the run as a
// self-contained HTML page, with the qualification evidence of the nodes
// its workloads ran on and the readiness checklist.
func (s *Server) acceptanceReport(w http.ResponseWriter, c *call) error {
	run, err := s.acceptanceRun(c)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	nodes := map[core.NodeName]bool{}
	for _, st := range run.Stages {
		for _, id := range st.Workloads {
			wl, err := s.opts.Store.Workload(ctx, core.WorkloadID(id))
			if err != nil {
				continue
			}
			for _, a := range wl.Status.Placement {
				nodes[a.Node] = true
			}
		}
	}
	var evidence []api.Evidence
	for _, n := range slices.Sorted(maps.Keys(nodes)) {
		evs, err := s.opts.Store.Evidence(ctx, n)
		if err != nil {
			return err
		}
		for _, e := range evs {
			evidence = append(evidence, evidenceOut(e))
		}
	}
	page, err := accept.ReportHTML(run, evidence, accept.Checklist(run, evidence))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The page is its own: no script, nothing fetched, not framed by
	// others.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, err = bytes.NewReader(page).WriteTo(w)
	if err != nil {
		s.log.Debug("acceptance report: client went away", "err", err)
	}
	return nil
}

// decideAcceptance answers POST /acceptance/runs/{id}/decision
// (team-admins): the review's decision, with who and when, appended to the
// run's decisions (accept.Decide says what is refused). The audit entry
// records the decision and its note.
func (s *Server) decideAcceptance(c *call) (reply, error) {
	run, err := s.acceptanceRun(c)
	if err != nil {
		return reply{}, err
	}
	var d api.Decision
	if err := decode(c.r, &d); err != nil {
		return reply{}, err
	}
	var fe api.FieldErrors
	switch err := accept.Decide(run, d, c.u.Name, s.opts.Now()); {
	case errors.As(err, &fe):
		return reply{}, &fieldErrors{fields: fe}
	case errors.Is(err, accept.ErrStillRunning):
		return reply{}, &refusal{msg: err.Error(), kind: core.ErrConflict}
	case err != nil:
		return reply{}, err
	}
	if c.audit != nil {
		c.audit.Message = accept.DecisionSummary(*run.Decision)
	}
	if err := s.opts.Acceptance.Save(c.r.Context(), run); err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: run}, nil
}
