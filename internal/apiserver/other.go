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
// and the answer then holds the log's last bytes. A followed log starts at
// its last limitBytes bytes when ?limitBytes= is given, else at its start.
const MaxLogBytes = 16 << 20

// logs streams a workload's log. With follow=true it keeps sending what is
// appended until the workload has finished and the log is drained.
func (s *Server) logs(w http.ResponseWriter, c *call) error {
	r := c.r
	wl, err := s.workload(c)
	if err != nil {
		return err
	}
	follow := r.URL.Query().Get("follow") == "true"
	limit := int64(MaxLogBytes)
	if v := r.URL.Query().Get("limitBytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxLogBytes {
			return invalid("limitBytes", "must be a number from 1 to %d", MaxLogBytes)
		}
		limit = n
	}
	// A log is long (16 MiB) or followed for as long as the workload
	// runs: past the server's read and write timeouts.
	w = newStreamWriter(w, r)
	if lf, ok := s.opts.Logs.(LogFollower); ok && follow {
		return s.followStream(w, c, wl, lf)
	}
	f, err := s.opts.Logs.Logs(wl.ID)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if f == nil && !follow {
		return nil // no log yet: it is empty
	}
	if f != nil {
		defer f.Close()
		// Without follow, at most the last limit bytes; with follow, from
		// the last limitBytes bytes when the caller asks for them.
		if !follow || r.URL.Query().Has("limitBytes") {
			if sk, ok := f.(io.Seeker); ok {
				if end, err := sk.Seek(0, io.SeekEnd); err == nil && end > limit {
					sk.Seek(end-limit, io.SeekStart)
				} else {
					sk.Seek(0, io.SeekStart)
				}
			}
		}
		if !follow {
			io.Copy(w, io.LimitReader(f, limit))
			return nil
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
				return nil // the client is gone
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
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}

// followStream follows a log that its source streams (a pod's): attempt
// after attempt, until the workload has finished. Given ?limitBytes=, it
// starts at the latest attempt rather than at the first.
func (s *Server) followStream(w http.ResponseWriter, c *call, wl *core.Workload, lf LogFollower) error {
	r := c.r
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fw := flushWriter{w: w}
	fw.flusher, _ = w.(http.Flusher)
	fw.flush()
	currentOnly := r.URL.Query().Has("limitBytes")
	streamed := 0 // the attempt last streamed
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		cur, err := s.opts.Store.Workload(r.Context(), wl.ID)
		if err != nil {
			return nil
		}
		if cur.Status.Attempts > streamed {
			rc, err := lf.FollowLogs(r.Context(), wl.ID, currentOnly)
			if err == nil {
				streamed = cur.Status.Attempts
				_, err = io.Copy(fw, rc)
				rc.Close()
				if err != nil {
					return nil // the client is gone
				}
				currentOnly = true // what came before is sent
				continue
			}
		}
		if cur.Status.Phase.Terminal() {
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}

// flushWriter sends each write to the client at once.
type flushWriter struct {
	w       io.Writer
	flusher http.Flusher
}

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	f.flush()
	return n, err
}

func (f flushWriter) flush() {
	if f.flusher != nil {
		f.flusher.Flush()
	}
}

func (s *Server) whoami(c *call) (reply, error) {
	return reply{status: http.StatusOK, body: toAPIUser(c.u)}, nil
}

func toAPIUser(u *core.User) api.User {
	out := api.User{Name: u.Name, Admin: u.Admin, ServiceAccount: u.ServiceAccount, CreatedAt: u.CreatedAt}
	for _, m := range u.Memberships {
		out.Teams = append(out.Teams, string(m.Team))
		out.Memberships = append(out.Memberships, api.Membership{Team: string(m.Team), Role: string(m.Role)})
	}
	return out
}

func (s *Server) nodes(c *call) (reply, error) {
	u := c.u
	snap, err := s.opts.Store.Snapshot(c.r.Context())
	if err != nil {
		return reply{}, err
	}
	// Who holds what, per device, among the workloads the caller may see.
	type devKey struct {
		node  core.NodeName
		index int
	}
	holders := map[devKey][]api.GPUAllocation{}
	foreign := map[devKey]bool{} // devices holding a workload of a team the caller cannot see
	for _, w := range snap.Running {
		if !u.InTeam(w.Team) {
			if !u.Admin {
				for _, a := range w.Status.Placement {
					foreign[devKey{a.Node, a.GPUIndex}] = true
				}
			}
			continue
		}
		for _, a := range w.Status.Placement {
			k := devKey{a.Node, a.GPUIndex}
			holders[k] = append(holders[k], api.GPUAllocation{WorkloadID: string(w.ID), Team: string(w.Team), MilliGPU: a.MilliGPU, MemoryMiB: a.MemoryMiB})
		}
	}
	out := api.List[api.Node]{Items: []api.Node{}}
	for _, n := range snap.Nodes {
		an := api.Node{Name: string(n.Name), Pool: n.Pool, Region: n.Region, Labels: n.Labels, CPU: api.Milli(n.MilliCPU), Isolation: n.Isolation,
			MemoryMiB: n.MemoryMiB, Schedulable: n.Schedulable, GPUs: []api.GPU{}, UpdatedAt: n.UpdatedAt}
		usage := snap.Usage[n.Name]
		for _, g := range n.GPUs {
			var gu core.GPUUse
			if usage != nil {
				gu = usage.GPUs[g.Index]
			}
			ag := api.GPU{Index: g.Index, UUID: g.UUID, Model: g.Model, MemoryMiB: g.MemoryMiB,
				Simulated: g.Simulated, Domain: g.Domain, AllocatedMilliGPU: gu.MilliGPU, AllocatedMemoryMiB: gu.MemoryMiB,
				Allocations: holders[devKey{n.Name, g.Index}]}
			s.withGPUUsage(&ag, n, foreign[devKey{n.Name, g.Index}])
			an.GPUs = append(an.GPUs, ag)
		}
		out.Items = append(out.Items, an)
	}
	return reply{status: http.StatusOK, body: out}, nil
}

func (s *Server) priorityClasses(*call) (reply, error) {
	out := api.List[api.PriorityClass]{Items: []api.PriorityClass{}}
	for _, c := range s.sortedClasses() {
		out.Items = append(out.Items, api.PriorityClass{Name: c.Name, Value: c.Value, Preemptible: c.Preemptible, MayBorrow: c.MayBorrow, IdleOnly: c.IdleOnly})
	}
	return reply{status: http.StatusOK, body: out}, nil
}

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
		PriorityClasses: t.PriorityClasses, UsageMilliGPU: sh.Usage, FairShareMilliGPU: sh.FairShare, PendingMilliGPU: sh.Pending, CreatedAt: t.CreatedAt}
}

// quotaErrors checks a quota and names each bad field.
func quotaErrors(t core.Team) []api.FieldError {
	var errs []api.FieldError
	// Every number is bounded (api.MaxQuotaMilliGPU, MaxTeamWeight,
	// MaxModelGuarantees), so that the sums here and in the scheduler
	// cannot overflow.
	if t.Guaranteed < 0 {
		errs = append(errs, api.FieldError{Field: "guaranteedMilliGPU", Problem: "must not be negative"})
	} else if t.Guaranteed > api.MaxQuotaMilliGPU {
		errs = append(errs, api.FieldError{Field: "guaranteedMilliGPU", Problem: fmt.Sprintf("must be at most %d (a million GPUs)", api.MaxQuotaMilliGPU)})
	}
	switch {
	case t.Limit < core.Unlimited:
		errs = append(errs, api.FieldError{Field: "limitMilliGPU", Problem: "must be -1 (unlimited) or at least 0"})
	case t.Limit > api.MaxQuotaMilliGPU:
		errs = append(errs, api.FieldError{Field: "limitMilliGPU", Problem: fmt.Sprintf("must be -1 (unlimited) or at most %d (a million GPUs)", api.MaxQuotaMilliGPU)})
	case t.Limit >= 0 && t.Limit < t.Guaranteed:
		errs = append(errs, api.FieldError{Field: "limitMilliGPU", Problem: fmt.Sprintf("%d is below the guarantee (%d)", t.Limit, t.Guaranteed)})
	}
	if t.Weight < 1 || t.Weight > api.MaxTeamWeight {
		errs = append(errs, api.FieldError{Field: "weight", Problem: fmt.Sprintf("must be from 1 to %d", api.MaxTeamWeight)})
	}
	if len(t.GuaranteedByModel) > api.MaxModelGuarantees {
		errs = append(errs, api.FieldError{Field: "guaranteedByModelMilliGPU", Problem: fmt.Sprintf("at most %d models", api.MaxModelGuarantees)})
	}
	var sum int64
	for model, g := range t.GuaranteedByModel {
		if strings.TrimSpace(model) == "" || len(model) > 64 {
			errs = append(errs, api.FieldError{Field: "guaranteedByModelMilliGPU", Problem: fmt.Sprintf("model name %q must be 1 to 64 characters", model)})
		}
		if g < 0 || g > api.MaxQuotaMilliGPU {
			errs = append(errs, api.FieldError{Field: "guaranteedByModelMilliGPU." + model, Problem: fmt.Sprintf("must be from 0 to %d", api.MaxQuotaMilliGPU)})
			continue
		}
		sum += g
	}
	if sum > t.Guaranteed {
		errs = append(errs, api.FieldError{Field: "guaranteedByModelMilliGPU", Problem: fmt.Sprintf("the model guarantees add up to %d, more than the team's guarantee (%d); raise guaranteedMilliGPU too", sum, t.Guaranteed)})
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
		if in.PriorityClasses != nil {
			t.PriorityClasses = slices.Clip(in.PriorityClasses)
			if len(t.PriorityClasses) == 0 {
				t.PriorityClasses = nil // the default: every preemptible class
			}
		}
		if errs := quotaErrors(*t); len(errs) > 0 {
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
	if !api.ValidName(in.Name) {
		return reply{}, invalid("name", "must be lowercase letters, digits and '-', at most %d characters", api.MaxNameLen)
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
	errs := quotaErrors(t)
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

// NewToken returns a fresh API token: "gpf_" and 256 random bits.
func NewToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return "gpf_" + base64.RawURLEncoding.EncodeToString(b[:])
}
