package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// submit handles POST /workloads.
//
//  1. read the body;
//  2. decode strictly and validate every field (the same Validate the CLI
//     runs), then the server-side checks (team membership, priority class);
//  3. store it, with the idempotency key and a hash of the request: the
//     answer is sent only once the workload is on disk.
func (s *Server) submit(r *http.Request, u *core.User) (reply, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return reply{}, decodeError(err)
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 255 {
		return reply{}, invalid("Idempotency-Key", "at most 255 characters")
	}
	var in api.Workload
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err := decode(r, &in); err != nil {
		return reply{}, err
	}
	w, err := s.toCore(r.Context(), &in, u)
	if err != nil {
		return reply{}, err
	}
	var idem *store.Idempotency
	if key != "" {
		// Hash the decoded request, re-encoded, so that the same request
		// with its fields in another order or spacing is the same request.
		canon, err := json.Marshal(&in)
		if err != nil {
			return reply{}, err
		}
		h := sha256.Sum256(canon)
		idem = &store.Idempotency{Key: key, Hash: hex.EncodeToString(h[:])}
	}
	out, created, err := s.opts.Store.CreateWorkload(r.Context(), w, idem, s.opts.Now())
	if err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return reply{}, invalid("team", "team %q does not exist", w.Team)
		}
		return reply{}, err
	}
	rep := reply{status: http.StatusCreated, body: toAPI(out), header: http.Header{"Location": {"/api/v1/workloads/" + string(out.ID)}}}
	if !created {
		rep.status = http.StatusOK
		rep.header.Set("Idempotent-Replayed", "true")
	}
	return rep, nil
}

// toCore validates a submitted workload and turns it into the domain type.
func (s *Server) toCore(ctx context.Context, in *api.Workload, u *core.User) (*core.Workload, error) {
	errs := in.Validate()
	team := core.TeamName(in.Team)
	if team == "" {
		switch {
		case len(u.Memberships) == 1:
			team = u.Memberships[0].Team
		case s.opts.DefaultTeam != "" && u.InTeam(s.opts.DefaultTeam):
			team = s.opts.DefaultTeam
		case len(u.Memberships) == 0 && !u.Admin:
			errs = append(errs, api.FieldError{Field: "team", Problem: "you belong to no team; ask an admin to add you to one"})
		default:
			errs = append(errs, api.FieldError{Field: "team", Problem: "is required: you belong to several teams"})
		}
	} else if api.ValidName(in.Team) {
		if _, err := s.opts.Store.Team(ctx, team); err != nil || !u.InTeam(team) {
			if err != nil && !errors.Is(err, core.ErrNotFound) {
				return nil, err
			}
			errs = append(errs, api.FieldError{Field: "team", Problem: fmt.Sprintf("team %q does not exist or you are not a member", in.Team)})
		}
	}
	kind := core.Kind(in.Kind)
	if kind == "" {
		kind = core.KindJob
	}
	prio := in.Priority
	if prio == "" {
		prio = core.DefaultPriority(kind)
	}
	if !slices.ContainsFunc(s.opts.PriorityClasses, func(p core.PriorityClass) bool { return p.Name == prio }) && api.ValidName(prio) {
		names := make([]string, len(s.opts.PriorityClasses))
		for i, p := range s.opts.PriorityClasses {
			names[i] = p.Name
		}
		errs = append(errs, api.FieldError{Field: "priority", Problem: fmt.Sprintf("unknown priority class %q (known: %s)", prio, strings.Join(names, ", "))})
	}
	// A class that may not borrow runs only within the team's guarantee: a
	// request larger than the whole guarantee could never run.
	if cl, ok := core.Class(s.opts.PriorityClasses, prio); ok && !cl.MayBorrow && len(errs) == 0 && in.Resources.GPUs > 0 {
		ask := int64(in.Resources.GPUs) * int64(max(1, in.Replicas))
		t, err := s.opts.Store.Team(ctx, team)
		if err != nil {
			return nil, err
		}
		if ask > t.Guaranteed {
			errs = append(errs, api.FieldError{Field: "priority", Problem: fmt.Sprintf(
				"%s runs only within the team's guarantee, and team %s guarantees %s GPUs while this workload asks for %s; ask an admin to raise the guarantee or choose another class",
				prio, team, api.Milli(t.Guaranteed), api.Milli(ask))})
		}
	}
	if len(errs) > 0 {
		return nil, &fieldErrors{fields: errs}
	}
	name := in.Name
	if name == "" {
		name = in.Command[0]
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		name = sanitizeName(name)
	}
	return &core.Workload{Spec: core.Spec{
		Name:     name,
		Team:     team,
		Owner:    u.Name,
		Kind:     kind,
		Priority: prio,
		Request: core.Request{
			MilliGPU:     int64(in.Resources.GPUs),
			GPUMemoryMiB: in.Resources.GPUMemoryMiB,
			GPUModels:    in.Resources.GPUModels,
			MilliCPU:     int64(in.Resources.CPU),
			MemoryMiB:    in.Resources.MemoryMiB,
			NodeSelector: in.NodeSelector,
			Replicas:     in.Replicas,
		},
		Command:     in.Command,
		Env:         in.Env,
		WorkingDir:  in.WorkingDir,
		MaxRuntime:  time.Duration(in.MaxRuntimeSeconds) * time.Second,
		GracePeriod: time.Duration(in.GracePeriodSeconds) * time.Second,
		Labels:      in.Labels,
	}}, nil
}

// sanitizeName turns a program name into a valid workload name.
func sanitizeName(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			b[i] = '-'
		}
	}
	n := strings.Trim(string(b), "-")
	if len(n) > api.MaxNameLen {
		n = strings.Trim(n[:api.MaxNameLen], "-")
	}
	if n == "" {
		n = "workload"
	}
	return n
}

// visible reads a workload the user may see; another team's workload is
// "not found", so that IDs do not leak.
func (s *Server) visible(r *http.Request, u *core.User) (*core.Workload, error) {
	id := core.WorkloadID(r.PathValue("id"))
	w, err := s.opts.Store.Workload(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if !u.InTeam(w.Team) {
		return nil, fmt.Errorf("workload %s: %w", id, core.ErrNotFound)
	}
	return w, nil
}

func (s *Server) getWorkload(r *http.Request, u *core.User) (reply, error) {
	w, err := s.visible(r, u)
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: toAPI(w)}, nil
}

func (s *Server) cancelWorkload(r *http.Request, u *core.User) (reply, error) {
	w, err := s.visible(r, u)
	if err != nil {
		return reply{}, err
	}
	out, err := s.opts.Store.RequestStop(r.Context(), w.ID, "Cancelled", "cancelled by "+u.Name, s.opts.Now())
	if err != nil {
		return reply{}, err
	}
	// Read it back: a running workload now shows its stop request.
	if now, err := s.opts.Store.Workload(r.Context(), out.ID); err == nil {
		out = now
	}
	return reply{status: http.StatusOK, body: toAPI(out)}, nil
}

func (s *Server) listWorkloads(r *http.Request, u *core.User) (reply, error) {
	q := r.URL.Query()
	f := store.WorkloadFilter{Limit: 500}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return reply{}, invalid("limit", "must be a number from 1 to %d", MaxPageSize)
		}
		f.Limit = n
	}
	if v := q.Get("pageToken"); v != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(v, "s"), 10, 64)
		if err != nil || !strings.HasPrefix(v, "s") || n < 0 {
			return reply{}, invalid("pageToken", "is not a token this server issued")
		}
		f.AfterSeq = n
	}
	if v := q.Get("phase"); v != "" {
		for _, p := range strings.Split(v, ",") {
			ph := core.Phase(p)
			if !slices.Contains([]core.Phase{core.Pending, core.Running, core.Succeeded, core.Failed, core.Cancelled}, ph) {
				return reply{}, invalid("phase", "unknown phase %q", p)
			}
			f.Phases = append(f.Phases, ph)
		}
	}
	if v := q.Get("owner"); v != "" {
		f.Owner = v
	}
	if v := q.Get("team"); v != "" {
		if !u.InTeam(core.TeamName(v)) {
			f.Teams = []core.TeamName{} // nothing: another team's list is empty, not forbidden
		} else {
			f.Teams = []core.TeamName{core.TeamName(v)}
		}
	} else if !u.Admin {
		f.Teams = u.Teams()
		if f.Teams == nil {
			f.Teams = []core.TeamName{}
		}
	}
	ws, err := s.opts.Store.Workloads(r.Context(), f)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.Workload]{Items: make([]api.Workload, 0, len(ws))}
	for _, w := range ws {
		out.Items = append(out.Items, *toAPI(w))
	}
	if len(ws) == f.Limit {
		out.NextPageToken = fmt.Sprintf("s%d", ws[len(ws)-1].Seq)
	}
	return reply{status: http.StatusOK, body: out}, nil
}

func (s *Server) events(r *http.Request, u *core.User) (reply, error) {
	w, err := s.visible(r, u)
	if err != nil {
		return reply{}, err
	}
	evs, err := s.opts.Store.Events(r.Context(), w.ID)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.Event]{Items: make([]api.Event, 0, len(evs))}
	for _, e := range evs {
		out.Items = append(out.Items, api.Event{ID: e.ID, WorkloadID: string(e.WorkloadID), Time: e.Time, Type: e.Type,
			Reason: e.Reason, Message: e.Message, From: string(e.From), To: string(e.To)})
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// toAPI converts a stored workload to its wire form.
func toAPI(w *core.Workload) *api.Workload {
	out := &api.Workload{
		ID:       string(w.ID),
		Name:     w.Name,
		Team:     string(w.Team),
		Owner:    w.Owner,
		Kind:     string(w.Kind),
		Priority: w.Priority,
		Resources: api.Resources{
			GPUs:         api.Milli(w.Request.MilliGPU),
			GPUMemoryMiB: w.Request.GPUMemoryMiB,
			GPUModels:    w.Request.GPUModels,
			CPU:          api.Milli(w.Request.MilliCPU),
			MemoryMiB:    w.Request.MemoryMiB,
		},
		Replicas:           w.Request.Replicas,
		Command:            w.Command,
		Env:                w.Env,
		WorkingDir:         w.WorkingDir,
		MaxRuntimeSeconds:  int64(w.MaxRuntime / time.Second),
		GracePeriodSeconds: int64(w.GracePeriod / time.Second),
		Labels:             w.Labels,
		NodeSelector:       w.Request.NodeSelector,
		CreatedAt:          w.CreatedAt,
		Status: api.WorkloadStatus{
			Phase:         string(w.Status.Phase),
			Reason:        w.Status.Reason,
			Message:       w.Status.Message,
			ExitCode:      w.Status.ExitCode,
			Attempts:      w.Status.Attempts,
			Preemptions:   w.Status.Preemptions,
			Placement:     []api.Placement{},
			StartedAt:     w.Status.StartedAt,
			FinishedAt:    w.Status.FinishedAt,
			StopRequested: w.Status.StopRequested,
			PreemptedBy:   string(w.Status.PreemptedBy),
			NominatedNode: string(w.Status.Nominated),
		},
	}
	for _, a := range w.Status.Placement {
		out.Status.Placement = append(out.Status.Placement, api.Placement{Replica: a.Replica, Node: string(a.Node), GPUIndex: a.GPUIndex,
			GPUUUID: a.GPUUUID, MilliGPU: a.MilliGPU, MemoryMiB: a.MemoryMiB})
	}
	return out
}
