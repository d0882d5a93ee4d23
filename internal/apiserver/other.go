package apiserver

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// MaxLogBytes bounds one non-following log read; ?limitBytes= asks for less
// and the answer then holds the log's last bytes.
const MaxLogBytes = 16 << 20

// logs streams a workload's log. With follow=true it keeps sending what is
// appended until the workload has finished and the log is drained.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, u *core.User) {
	wl, err := s.visible(r, u)
	if err != nil {
		writeError(w, err)
		return
	}
	follow := r.URL.Query().Get("follow") == "true"
	limit := int64(MaxLogBytes)
	if v := r.URL.Query().Get("limitBytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxLogBytes {
			writeError(w, invalid("limitBytes", "must be a number from 1 to %d", MaxLogBytes))
			return
		}
		limit = n
	}
	f, err := s.opts.Logs.Logs(wl.ID)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if f != nil {
		defer f.Close()
		if !follow {
			if sk, ok := f.(io.Seeker); ok {
				if end, err := sk.Seek(0, io.SeekEnd); err == nil && end > limit {
					sk.Seek(end-limit, io.SeekStart)
				} else {
					sk.Seek(0, io.SeekStart)
				}
			}
			io.Copy(w, io.LimitReader(f, limit))
			return
		}
	}
	flusher, _ := w.(http.Flusher)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if f == nil {
			f, _ = s.opts.Logs.Logs(wl.ID)
			if f != nil {
				defer f.Close()
			}
		}
		if f != nil {
			if _, err := io.Copy(w, f); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		cur, err := s.opts.Store.Workload(r.Context(), wl.ID)
		if err != nil || cur.Status.Phase.Terminal() {
			if f != nil {
				io.Copy(w, f) // what was written before the end
			}
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Server) whoami(r *http.Request, u *core.User) (reply, error) {
	return reply{status: http.StatusOK, body: toAPIUser(u)}, nil
}

func toAPIUser(u *core.User) api.User {
	out := api.User{Name: u.Name, Admin: u.Admin, ServiceAccount: u.ServiceAccount, CreatedAt: u.CreatedAt}
	for _, m := range u.Memberships {
		out.Teams = append(out.Teams, string(m.Team))
		out.Memberships = append(out.Memberships, api.Membership{Team: string(m.Team), Role: string(m.Role)})
	}
	return out
}

func (s *Server) nodes(r *http.Request, u *core.User) (reply, error) {
	snap, err := s.opts.Store.Snapshot(r.Context())
	if err != nil {
		return reply{}, err
	}
	// Who holds what, per device, among the workloads the caller may see.
	type devKey struct {
		node  core.NodeName
		index int
	}
	holders := map[devKey][]api.GPUAllocation{}
	for _, w := range snap.Running {
		if !u.InTeam(w.Team) {
			continue
		}
		for _, a := range w.Status.Placement {
			k := devKey{a.Node, a.GPUIndex}
			holders[k] = append(holders[k], api.GPUAllocation{WorkloadID: string(w.ID), Team: string(w.Team), MilliGPU: a.MilliGPU, MemoryMiB: a.MemoryMiB})
		}
	}
	out := api.List[api.Node]{Items: []api.Node{}}
	for _, n := range snap.Nodes {
		an := api.Node{Name: string(n.Name), Pool: n.Pool, Region: n.Region, Labels: n.Labels, CPU: api.Milli(n.MilliCPU),
			MemoryMiB: n.MemoryMiB, Schedulable: n.Schedulable, GPUs: []api.GPU{}, UpdatedAt: n.UpdatedAt}
		usage := snap.Usage[n.Name]
		for _, g := range n.GPUs {
			var gu core.GPUUse
			if usage != nil {
				gu = usage.GPUs[g.Index]
			}
			an.GPUs = append(an.GPUs, api.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryMiB: g.MemoryMiB,
				Simulated: g.Simulated, Domain: g.Domain, AllocatedMilliGPU: gu.MilliGPU, AllocatedMemoryMiB: gu.MemoryMiB,
				Allocations: holders[devKey{n.Name, g.Index}]})
		}
		out.Items = append(out.Items, an)
	}
	return reply{status: http.StatusOK, body: out}, nil
}

func (s *Server) priorityClasses(r *http.Request, u *core.User) (reply, error) {
	cs := slices.Clone(s.opts.PriorityClasses)
	slices.SortFunc(cs, func(a, b core.PriorityClass) int { return b.Value - a.Value })
	out := api.List[api.PriorityClass]{Items: []api.PriorityClass{}}
	for _, c := range cs {
		out.Items = append(out.Items, api.PriorityClass{Name: c.Name, Value: c.Value, Preemptible: c.Preemptible, MayBorrow: c.MayBorrow, IdleOnly: c.IdleOnly})
	}
	return reply{status: http.StatusOK, body: out}, nil
}

func (s *Server) teams(r *http.Request, u *core.User) (reply, error) {
	ts, err := s.opts.Store.Teams(r.Context())
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
		UsageMilliGPU: sh.Usage, FairShareMilliGPU: sh.FairShare, PendingMilliGPU: sh.Pending, CreatedAt: t.CreatedAt}
}

// quotaErrors checks a quota and names each bad field.
func quotaErrors(t core.Team) []api.FieldError {
	var errs []api.FieldError
	if t.Guaranteed < 0 {
		errs = append(errs, api.FieldError{Field: "guaranteedMilliGPU", Problem: "must not be negative"})
	}
	if t.Limit < core.Unlimited {
		errs = append(errs, api.FieldError{Field: "limitMilliGPU", Problem: "must be -1 (unlimited) or at least 0"})
	} else if t.Limit >= 0 && t.Limit < t.Guaranteed {
		errs = append(errs, api.FieldError{Field: "limitMilliGPU", Problem: fmt.Sprintf("%d is below the guarantee (%d)", t.Limit, t.Guaranteed)})
	}
	if t.Weight < 1 || t.Weight > 1000 {
		errs = append(errs, api.FieldError{Field: "weight", Problem: "must be from 1 to 1000"})
	}
	var sum int64
	for model, g := range t.GuaranteedByModel {
		if strings.TrimSpace(model) == "" || len(model) > 64 {
			errs = append(errs, api.FieldError{Field: "guaranteedByModelMilliGPU", Problem: fmt.Sprintf("model name %q must be 1 to 64 characters", model)})
		}
		if g < 0 {
			errs = append(errs, api.FieldError{Field: "guaranteedByModelMilliGPU." + model, Problem: "must not be negative"})
		}
		sum += g
	}
	if sum > t.Guaranteed {
		errs = append(errs, api.FieldError{Field: "guaranteedByModelMilliGPU", Problem: fmt.Sprintf("the model guarantees add up to %d, more than the team's guarantee (%d); raise guaranteedMilliGPU too", sum, t.Guaranteed)})
	}
	return errs
}

func (s *Server) setQuota(r *http.Request, u *core.User) (reply, error) {
	if err := requireAdmin(u); err != nil {
		return reply{}, err
	}
	var in api.TeamQuota
	if err := decode(r, &in); err != nil {
		return reply{}, err
	}
	t, err := s.opts.Store.UpdateTeam(r.Context(), core.TeamName(r.PathValue("name")), func(t *core.Team) error {
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
		if errs := quotaErrors(*t); len(errs) > 0 {
			return &fieldErrors{fields: errs}
		}
		return nil
	})
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

func requireAdmin(u *core.User) error {
	if !u.Admin {
		return fmt.Errorf("only an admin may do this: %w", core.ErrForbidden)
	}
	return nil
}

func (s *Server) createTeam(r *http.Request, u *core.User) (reply, error) {
	if err := requireAdmin(u); err != nil {
		return reply{}, err
	}
	var in api.Team
	if err := decode(r, &in); err != nil {
		return reply{}, err
	}
	if !api.ValidName(in.Name) {
		return reply{}, invalid("name", "must be lowercase letters, digits and '-', at most %d characters", api.MaxNameLen)
	}
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
	if errs := quotaErrors(t); len(errs) > 0 {
		return reply{}, &fieldErrors{fields: errs}
	}
	if err := s.opts.Store.CreateTeam(r.Context(), t); err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusCreated, body: toAPITeam(t, core.TeamShare{})}, nil
}

func (s *Server) createUser(r *http.Request, u *core.User) (reply, error) {
	if err := requireAdmin(u); err != nil {
		return reply{}, err
	}
	var in api.User
	if err := decode(r, &in); err != nil {
		return reply{}, err
	}
	if !api.ValidName(in.Name) {
		return reply{}, invalid("name", "must be lowercase letters, digits and '-', at most %d characters", api.MaxNameLen)
	}
	if in.Token != "" {
		return reply{}, invalid("token", "is generated by the server")
	}
	nu := core.User{Name: in.Name, Admin: in.Admin, ServiceAccount: in.ServiceAccount, CreatedAt: s.opts.Now().UTC()}
	for i, t := range in.Teams {
		if !api.ValidName(t) {
			return reply{}, invalid(fmt.Sprintf("teams[%d]", i), "is not a valid team name")
		}
		nu.SetRole(core.TeamName(t), core.RoleMember)
	}
	for i, m := range in.Memberships {
		if !api.ValidName(m.Team) {
			return reply{}, invalid(fmt.Sprintf("memberships[%d].team", i), "is not a valid team name")
		}
		role, err := core.ParseRole(m.Role)
		if err != nil {
			return reply{}, invalid(fmt.Sprintf("memberships[%d].role", i), "%q: want viewer, member or team-admin", m.Role)
		}
		nu.SetRole(core.TeamName(m.Team), role)
	}
	tok := NewToken()
	if err := s.opts.Store.CreateUser(r.Context(), nu, core.Token{Name: "first", CreatedAt: nu.CreatedAt}, HashToken(tok)); err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return reply{}, &fieldErrors{status: http.StatusUnprocessableEntity, fields: []api.FieldError{{Field: "teams", Problem: err.Error()}}}
		}
		return reply{}, err
	}
	out := toAPIUser(&nu)
	out.Token = tok
	return reply{status: http.StatusCreated, body: out}, nil
}

// NewToken returns a fresh API token: "gpf_" and 256 random bits.
func NewToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return "gpf_" + base64.RawURLEncoding.EncodeToString(b[:])
}
