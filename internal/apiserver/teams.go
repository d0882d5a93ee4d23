package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/spec"
)

func (s *Server) teams(c *call) (reply, error) {
	u := c.u
	ts, err := s.opts.Store.Teams(c.r.Context())
	if err != nil {
		return reply{}, err
	}
	shares := map[core.TeamName]core.TeamShare{}
	for _, sh := range s.opts.Store.Shares() {
		shares[sh.Team] = sh
	}
	out := api.List[api.Team]{Items: []api.Team{}}
	for _, t := range ts {
		if u.InTeam(t.Name) {
			out.Items = append(out.Items, toAPITeam(t, shares[t.Name]))
		}
	}
	return reply{status: http.StatusOK, body: out}, nil
}

func toAPITeam(t core.Team, sh core.TeamShare) api.Team {
	limit := t.Limit
	if limit < 0 {
		limit = core.Unlimited
	}
	return api.Team{Name: string(t.Name), GuaranteedMilliGPU: t.Guaranteed, LimitMilliGPU: &limit, Weight: t.Weight, GuaranteedByModelMilliGPU: t.GuaranteedByModel,
		GuaranteedByPoolMilliGPU: t.GuaranteedByPool, PriorityClasses: t.PriorityClasses, Residency: t.Residency, UsageMilliGPU: sh.Usage, FairShareMilliGPU: sh.FairShare, PendingMilliGPU: sh.Pending, CreatedAt: t.CreatedAt}
}

// quotaErrors checks the quota a team would be stored with, every field
// set, with spec.CheckQuota (the check the CLI runs too) and names
// each bad field; a pool guarantee must name a configured pool when the
// server is configured with pools (Options.Fleet).
func (s *Server) quotaErrors(t core.Team) []api.FieldError {
	errs := spec.CheckQuota(api.TeamQuota{GuaranteedMilliGPU: &t.Guaranteed, LimitMilliGPU: &t.Limit, Weight: &t.Weight,
		GuaranteedByModelMilliGPU: t.GuaranteedByModel, GuaranteedByPoolMilliGPU: t.GuaranteedByPool})
	if len(s.opts.Fleet.Pools) == 0 {
		return errs
	}
	known := make([]string, 0, len(s.opts.Fleet.Pools))
	for _, p := range s.opts.Fleet.Pools {
		known = append(known, p.Name)
	}
	slices.Sort(known)
	pools := make([]string, 0, len(t.GuaranteedByPool))
	for p := range t.GuaranteedByPool {
		pools = append(pools, p)
	}
	slices.Sort(pools)
	for _, p := range pools {
		if _, found := slices.BinarySearch(known, p); !found {
			errs = append(errs, api.FieldError{Field: "guaranteedByPoolMilliGPU." + p, Problem: fmt.Sprintf("unknown pool %q (known: %s)", p, strings.Join(known, ", "))})
		}
	}
	return errs
}

// updateTeam handles PATCH /teams/{name}: an admin changes the quota and
// the priority classes, the team's team-admin only the priority classes.
func (s *Server) updateTeam(c *call) (reply, error) {
	var in api.TeamQuota
	if err := decode(c.r, &in); err != nil {
		return reply{}, err
	}
	name := c.r.PathValue("name")
	c.setObject(name)
	err := c.authorize(core.TeamName(name), "team", name)
	if quota := quotaField(&in); quota != "" && !c.u.Admin && (err == nil || errors.Is(err, core.ErrForbidden)) {
		// In its own team, the caller is told what it lacks: the admin
		// role for the quota, whatever its role.
		return reply{}, forbidden("changing the quota of team %s (%s) needs the admin role; a team-admin may change only priorityClasses", name, quota)
	}
	if err != nil {
		return reply{}, err
	}
	if in.PriorityClasses != nil {
		if errs := s.classErrors(in.PriorityClasses); len(errs) > 0 {
			return reply{}, &fieldErrors{fields: errs}
		}
	}
	t, err := s.opts.Store.UpdateTeam(c.r.Context(), core.TeamName(name), func(t *core.Team) error {
		if in.GuaranteedMilliGPU != nil {
			t.Guaranteed = *in.GuaranteedMilliGPU
		}
		if in.LimitMilliGPU != nil {
			t.Limit = *in.LimitMilliGPU
		}
		if in.Weight != nil {
			t.Weight = *in.Weight
		}
		if in.GuaranteedByModelMilliGPU != nil {
			t.GuaranteedByModel = in.GuaranteedByModelMilliGPU
			if len(t.GuaranteedByModel) == 0 {
				t.GuaranteedByModel = nil
			}
		}
		if in.GuaranteedByPoolMilliGPU != nil {
			t.GuaranteedByPool = in.GuaranteedByPoolMilliGPU
			if len(t.GuaranteedByPool) == 0 {
				t.GuaranteedByPool = nil
			}
		}
		if in.Residency != nil {
			if errs := spec.ResidencyErrors(in.Residency); len(errs) > 0 {
				return &fieldErrors{fields: errs}
			}
			t.Residency = slices.Clip(in.Residency)
			if len(t.Residency) == 0 {
				t.Residency = nil
			}
		}
		if in.PriorityClasses != nil {
			t.PriorityClasses = slices.Clip(in.PriorityClasses)
			if len(t.PriorityClasses) == 0 {
				t.PriorityClasses = nil // the default: every preemptible class
			}
		}
		if errs := s.quotaErrors(*t); len(errs) > 0 {
			return &fieldErrors{fields: errs}
		}
		return nil
	})
	if errors.Is(err, core.ErrNotFound) {
		return reply{}, notFound("team", name)
	}
	if err != nil {
		return reply{}, err
	}
	var sh core.TeamShare
	for _, x := range s.opts.Store.Shares() {
		if x.Team == t.Name {
			sh = x
		}
	}
	return reply{status: http.StatusOK, body: toAPITeam(*t, sh)}, nil
}

// quotaField names a quota field the change sets, if any.
func quotaField(in *api.TeamQuota) string {
	switch {
	case in.GuaranteedMilliGPU != nil:
		return "guaranteedMilliGPU"
	case in.LimitMilliGPU != nil:
		return "limitMilliGPU"
	case in.Weight != nil:
		return "weight"
	case in.GuaranteedByModelMilliGPU != nil:
		return "guaranteedByModelMilliGPU"
	case in.GuaranteedByPoolMilliGPU != nil:
		return "guaranteedByPoolMilliGPU"
	case in.Residency != nil:
		return "residency"
	}
	return ""
}

// classErrors checks a team's list of allowed priority classes: each names
// a class, once.
func (s *Server) classErrors(names []string) []api.FieldError {
	var errs []api.FieldError
	for i, n := range names {
		field := fmt.Sprintf("priorityClasses[%d]", i)
		_, known := core.Class(s.opts.PriorityClasses, n)
		switch {
		case !known:
			errs = append(errs, api.FieldError{Field: field, Problem: fmt.Sprintf("unknown priority class %q (known: %s)", n, strings.Join(s.classNames(), ", "))})
		case slices.Index(names, n) < i:
			errs = append(errs, api.FieldError{Field: field, Problem: fmt.Sprintf("%q is named twice", n)})
		}
	}
	return errs
}

func (s *Server) createTeam(c *call) (reply, error) {
	var in api.Team
	if err := decode(c.r, &in); err != nil {
		return reply{}, err
	}
	if !core.ValidName(in.Name) {
		return reply{}, invalid("name", "must be lowercase letters, digits and '-', at most %d characters", core.MaxNameLen)
	}
	c.setObject(in.Name)
	c.audit.Team = in.Name
	if !in.CreatedAt.IsZero() || in.UsageMilliGPU != 0 || in.FairShareMilliGPU != 0 || in.PendingMilliGPU != 0 {
		return reply{}, invalid("createdAt", "createdAt, usageMilliGPU, fairShareMilliGPU and pendingMilliGPU are set by the server")
	}
	t := core.NewTeam(core.TeamName(in.Name), s.opts.Now().UTC())
	t.Guaranteed = in.GuaranteedMilliGPU
	if in.LimitMilliGPU != nil {
		t.Limit = *in.LimitMilliGPU
	}
	if in.Weight != 0 {
		t.Weight = in.Weight
	}
	if len(in.GuaranteedByModelMilliGPU) > 0 {
		t.GuaranteedByModel = in.GuaranteedByModelMilliGPU
	}
	if len(in.GuaranteedByPoolMilliGPU) > 0 {
		t.GuaranteedByPool = in.GuaranteedByPoolMilliGPU
	}
	errs := s.quotaErrors(t)
	errs = append(errs, spec.ResidencyErrors(in.Residency)...)
	t.Residency = in.Residency
	if len(in.PriorityClasses) > 0 {
		errs = append(errs, s.classErrors(in.PriorityClasses)...)
		t.PriorityClasses = in.PriorityClasses
	}
	if len(errs) > 0 {
		return reply{}, &fieldErrors{fields: errs}
	}
	if err := s.opts.Store.CreateTeam(c.r.Context(), t); err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusCreated, body: toAPITeam(t, core.TeamShare{})}, nil
}

// deleteTeam handles DELETE /teams/{name} (admins): the team, its finished
// workloads, its service accounts and its memberships go; a team with
// pending or running workloads is a 409 naming them.
func (s *Server) deleteTeam(c *call) (reply, error) {
	name := c.r.PathValue("name")
	c.setObject(name)
	if err := s.opts.Store.DeleteTeam(c.r.Context(), core.TeamName(name)); err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusNoContent}, nil
}
