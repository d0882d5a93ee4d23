package apiserver

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/spec"
)

// MaxCostComputations bounds the reports, series and exports computed at
// once: each reads a window of allocation intervals and may take seconds
// over a long one; more wait their turn (within the request's time).
const MaxCostComputations = 2

// costSlots holds a token per computation running.
var costSlots = make(chan struct{}, MaxCostComputations)

// costTurn waits for a slot; the returned func gives it back.
func costTurn(c *call) (func(), error) {
	select {
	case costSlots <- struct{}{}:
		return func() { <-costSlots }, nil
	case <-c.r.Context().Done():
		return nil, c.r.Context().Err()
	}
}

// MaxHourlyExport bounds the window of an export by the hour (an export by
// the day may cover the whole window a report may).
const MaxHourlyExport = 31 * 24 * time.Hour

// costOff is the answer of the cost routes on a server without a ledger.
var costOff = &refusal{msg: "this server keeps no cost ledger", kind: core.ErrUnavailable}

// ledgerError turns the ledger's and the cost domain's field errors into
// the API's.
func ledgerError(err error) error {
	var fe *ledger.FieldErrors
	if errors.As(err, &fe) {
		return &fieldErrors{fields: fe.Fields}
	}
	var afe api.FieldErrors
	if errors.As(err, &afe) {
		return &fieldErrors{fields: afe}
	}
	return err
}

// visibility is what rows of a cost report the caller may see: an admin
// every team and the idle row, anyone else its teams.
func visibility(u *core.User) cost.Visibility {
	if u.Admin {
		return cost.Visibility{All: true}
	}
	v := cost.Visibility{Teams: map[core.TeamName]bool{}}
	for _, m := range u.Memberships {
		v.Teams[m.Team] = true
	}
	return v
}

// costWindow reads the window of a cost route as of now: from and to (RFC
// 3339), or since (a duration back from now: 24h, 7d); the last 24 hours by
// default. The report is computed as of the same now, so that a window
// ending now holds what is still running.
func costWindow(c *call, now time.Time) (from, to time.Time, err error) {
	q := c.r.URL.Query()
	to = now
	if v := q.Get("to"); v != "" {
		if to, err = time.Parse(time.RFC3339, v); err != nil {
			return from, to, invalid("to", "must be an RFC 3339 time such as 2026-12-01T00:00:00Z")
		}
	}
	switch since, f := q.Get("since"), q.Get("from"); {
	case since != "" && f != "":
		return from, to, invalid("since", "give since or from, not both")
	case since != "":
		d, perr := quantity.ParsePeriod(since)
		if perr != nil || d <= 0 {
			return from, to, invalid("since", "must be a positive duration such as 24h, 7d or 30d")
		}
		if d > api.MaxCostWindow {
			return from, to, invalid("since", "the window is at most 400 days")
		}
		from = to.Add(-d)
	case f != "":
		if from, err = time.Parse(time.RFC3339, f); err != nil {
			return from, to, invalid("from", "must be an RFC 3339 time such as 2026-11-01T00:00:00Z")
		}
	default:
		from = to.Add(-24 * time.Hour)
	}
	lo, hi := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	switch {
	case from.Before(lo) || from.After(hi):
		return from, to, invalid("from", "%s: want a time from 2000 to 2200", from.UTC().Format(time.RFC3339))
	case to.Before(lo) || to.After(hi):
		return from, to, invalid("to", "%s: want a time from 2000 to 2200", to.UTC().Format(time.RFC3339))
	case from.After(to):
		return from, to, invalid("from", "%s is after to (%s)", from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	case to.Sub(from) > api.MaxCostWindow:
		return from, to, invalid("to", "the window from %s is longer than 400 days", from.UTC().Format(time.RFC3339))
	}
	return from.UTC(), to.UTC(), nil
}

func costBy(c *call) (string, error) {
	by := c.r.URL.Query().Get("by")
	switch {
	case by == "":
		return api.CostByTeam, nil
	case by == api.CostByTeam, by == api.CostByPool, by == api.CostByWorkload, by == api.CostByUser:
		return by, nil
	case strings.HasPrefix(by, api.CostByLabel) && len(by) > len(api.CostByLabel) && len(by) <= len(api.CostByLabel)+63:
		return by, nil
	}
	return "", invalid("by", "%q: want team, pool, workload, user or label:KEY", by)
}

// costArgs reads what every cost route takes: the ledger, the rows' by
// and the window as of now, each checked.
func (s *Server) costArgs(c *call, now time.Time) (l *ledger.Ledger, by string, from, to time.Time, err error) {
	if l = s.opts.Ledger; l == nil {
		return nil, "", from, to, costOff
	}
	if by, err = costBy(c); err != nil {
		return nil, "", from, to, err
	}
	from, to, err = costWindow(c, now)
	return l, by, from, to, err
}

// costReport answers GET /cost: the cost of the window's work by team,
// pool, workload, user or label, with the rows the caller may see.
func (s *Server) costReport(c *call) (reply, error) {
	now := s.opts.Now().UTC()
	l, by, from, to, err := s.costArgs(c, now)
	if err != nil {
		return reply{}, err
	}
	done, err := costTurn(c)
	if err != nil {
		return reply{}, err
	}
	defer done()
	rep, err := l.Report(c.r.Context(), by, from, to, now, visibility(c.u))
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: rep}, nil
}

// MaxSeriesPoints bounds the steps of GET /cost/series.
const MaxSeriesPoints = 2000

// costSeries answers GET /cost/series: each step's rows, for plots.
func (s *Server) costSeries(c *call) (reply, error) {
	now := s.opts.Now().UTC()
	l, by, from, to, err := s.costArgs(c, now)
	if err != nil {
		return reply{}, err
	}
	step := time.Hour
	if v := c.r.URL.Query().Get("step"); v != "" {
		d, perr := quantity.ParsePeriod(v)
		if perr != nil || d < time.Minute {
			return reply{}, invalid("step", "must be a duration of at least 1m, such as 1h or 1d")
		}
		step = d
	}
	if to.Sub(from)/step > MaxSeriesPoints {
		return reply{}, invalid("step", "%s gives more than %d points over the window", step, MaxSeriesPoints)
	}
	done, err := costTurn(c)
	if err != nil {
		return reply{}, err
	}
	defer done()
	series, err := l.Series(c.r.Context(), by, step, from, to, now, visibility(c.u))
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: series}, nil
}

// costExport answers GET /cost/export?format=focus: the window's charges
// as FinOps FOCUS 1.3 CSV, with the rows the caller may see.
func (s *Server) costExport(w http.ResponseWriter, c *call) error {
	l := s.opts.Ledger
	if l == nil {
		return costOff
	}
	q := c.r.URL.Query()
	if f := q.Get("format"); f != "" && f != "focus" {
		return invalid("format", "%q: the one export format is focus", f)
	}
	gran := 24 * time.Hour
	switch g := q.Get("granularity"); g {
	case "", "day":
	case "hour":
		gran = time.Hour
	default:
		return invalid("granularity", "%q: want hour or day", g)
	}
	now := s.opts.Now().UTC()
	from, to, err := costWindow(c, now)
	if err != nil {
		return err
	}
	if gran == time.Hour && to.Sub(from) > MaxHourlyExport {
		return invalid("granularity", "an export by the hour covers at most 31 days; this window is %s: export by the day, or a shorter window", to.Sub(from).Round(time.Hour))
	}
	done, err := costTurn(c)
	if err != nil {
		return err
	}
	defer done()
	// Written to memory first: an error must still be a JSON answer.
	var buf bytes.Buffer
	if err := l.ExportFOCUS(c.r.Context(), &buf, gran, from, to, now, visibility(c.u), "gpufleet"); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="gpufleet-focus.csv"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(buf.Bytes()); err != nil {
		s.log.Debug("cost export: client went away", "err", err)
	}
	return nil
}

// prices answers GET /prices: every price version (the configuration's
// and those admins added), for every caller.
func (s *Server) prices(c *call) (reply, error) {
	l := s.opts.Ledger
	if l == nil {
		return reply{}, costOff
	}
	ps, err := l.Prices(c.r.Context())
	if err != nil {
		return reply{}, err
	}
	if ps == nil {
		ps = []api.Price{}
	}
	return reply{status: http.StatusOK, body: api.PriceList{Currency: l.Currency, Items: ps}}, nil
}

// costEstimate answers POST /cost/estimate (any caller): what GPUs for a
// time cost at a pool's price now or at a kind and rate, compared with
// other kinds (cost.Estimate). Nothing is stored.
func (s *Server) costEstimate(c *call) (reply, error) {
	l := s.opts.Ledger
	if l == nil {
		return reply{}, costOff
	}
	var req api.EstimateRequest
	if err := decode(c.r, &req); err != nil {
		return reply{}, err
	}
	c.setObject(req.Pool)
	prices, err := l.Prices(c.r.Context())
	if err != nil {
		return reply{}, err
	}
	est, err := cost.Estimate(req, prices, l.Currency, s.opts.Now().UTC())
	if err != nil {
		return reply{}, ledgerError(err)
	}
	return reply{status: http.StatusOK, body: est}, nil
}

// addPrice answers POST /prices: a new version of a pool's price, from its
// effectiveFrom (now when absent) on.
func (s *Server) addPrice(c *call) (reply, error) {
	l := s.opts.Ledger
	if l == nil {
		return reply{}, costOff
	}
	var p api.Price
	if err := decode(c.r, &p); err != nil {
		return reply{}, err
	}
	c.setObject(p.Pool)
	out, err := l.AddPrice(c.r.Context(), p, s.opts.Now().UTC())
	if err != nil {
		return reply{}, ledgerError(err)
	}
	return reply{status: http.StatusCreated, body: out}, nil
}

// budgets answers GET /budgets: the budgets of the caller's teams (every
// team's for an admin), with what the month has spent.
func (s *Server) budgets(c *call) (reply, error) {
	l := s.opts.Ledger
	if l == nil {
		return reply{}, costOff
	}
	bs, err := l.Budgets(c.r.Context(), s.opts.Now().UTC(), ledger.BudgetRefresh)
	if err != nil {
		return reply{}, err
	}
	vis := visibility(c.u)
	out := api.BudgetList{Items: []api.BudgetStatus{}}
	for team, b := range bs {
		if vis.All || vis.Teams[team] {
			out.Items = append(out.Items, b)
		}
	}
	slices.SortFunc(out.Items, func(a, b api.BudgetStatus) int { return strings.Compare(a.Team, b.Team) })
	return reply{status: http.StatusOK, body: out}, nil
}

// budget answers GET /teams/{name}/budget.
func (s *Server) budget(c *call) (reply, error) {
	l := s.opts.Ledger
	if l == nil {
		return reply{}, costOff
	}
	team := core.TeamName(c.r.PathValue("name"))
	if err := c.authorize(team, "team", string(team)); err != nil {
		return reply{}, err
	}
	bs, err := l.Budgets(c.r.Context(), s.opts.Now().UTC(), ledger.BudgetRefresh)
	if err != nil {
		return reply{}, err
	}
	b, ok := bs[team]
	if !ok {
		return reply{}, &refusal{msg: "team " + string(team) + " has no budget", kind: core.ErrNotFound}
	}
	return reply{status: http.StatusOK, body: b}, nil
}

// setBudget answers PUT /teams/{name}/budget (admins).
func (s *Server) setBudget(c *call) (reply, error) {
	l := s.opts.Ledger
	if l == nil {
		return reply{}, costOff
	}
	team := c.r.PathValue("name")
	c.setObject(team)
	c.audit.Team = team
	var b api.Budget
	if err := decode(c.r, &b); err != nil {
		return reply{}, err
	}
	if b.Team != "" && b.Team != team {
		return reply{}, invalid("team", "%q is not the team of the path (%s)", b.Team, team)
	}
	out, err := l.SetBudget(c.r.Context(), core.TeamName(team), b)
	if errors.Is(err, core.ErrNotFound) {
		return reply{}, notFound("team", team)
	}
	if err != nil {
		return reply{}, ledgerError(err)
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// deleteBudget answers DELETE /teams/{name}/budget (admins).
func (s *Server) deleteBudget(c *call) (reply, error) {
	l := s.opts.Ledger
	if l == nil {
		return reply{}, costOff
	}
	team := c.r.PathValue("name")
	c.setObject(team)
	c.audit.Team = team
	if err := l.DeleteBudget(c.r.Context(), core.TeamName(team)); err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusNoContent}, nil
}

// reportOutputs answers POST /workloads/{id}/outputs: completed work a
// member of the workload's team reports for it, added to its sums and
// recorded at now (cost reports count it from then on, running or not).
func (s *Server) reportOutputs(c *call) (reply, error) {
	var o api.Outputs
	if err := decode(c.r, &o); err != nil {
		return reply{}, err
	}
	w, err := s.workload(c)
	if err != nil {
		return reply{}, err
	}
	if fe := spec.CheckOutputs(o); len(fe) > 0 {
		return reply{}, &fieldErrors{fields: fe}
	}
	if o.Accepted == 0 && o.Rejected == 0 {
		return reply{}, invalid("accepted", "report at least one accepted or rejected output")
	}
	out, err := s.opts.Store.AddOutputs(c.r.Context(), w.ID, core.Outputs{Accepted: o.Accepted, Rejected: o.Rejected, Unit: o.Unit}, s.opts.Now().UTC())
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: s.redactor(c).workload(s.withLive(s.toAPI(out), out))}, nil
}
