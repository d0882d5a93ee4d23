package apiserver

import (
	"bytes"
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
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/spec"
	"github.com/gpufleet/gpufleet/internal/store"
)

// submit handles POST /workloads.
//
//  1. read the body;
//  2. decode strictly; find the team and check the caller's role there;
//  3. validate every field (the same spec.CheckWorkload the CLI runs, and the fields
//     the server owns), then the checks that need the store: the priority
//     class is known, allowed to the team, and, for a class that may not
//     borrow, within the team's guarantee; and some registered node could
//     hold it, empty (core.Feasible: 400 naming the field and the biggest
//     that fits); "replicas": 0 is refused (absent means one);
//  4. store it, with the idempotency key and a hash of the request: the
//     answer is sent only once the workload is on disk.
func (s *Server) submit(c *call) (reply, error) {
	r := c.r
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
	if in.Array != nil {
		return reply{}, invalid("array", "a job array is submitted to POST /api/v1/arrays (gpufleet submit --array), not /workloads")
	}
	// "replicas": 0 asks for no replica at all; absent means one.
	var given struct {
		Replicas *int `json:"replicas"`
	}
	// (Decoded again only when it may be there: absent and 0 read alike.)
	if in.Replicas == 0 && mayHoldKey(body, "replica") && json.Unmarshal(body, &given) == nil && given.Replicas != nil && *given.Replicas == 0 {
		return reply{}, invalid("replicas", "must be from 1 to %d (omit it for one)", spec.MaxReplicas)
	}
	w, err := s.toCore(c, &in)
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
	rep := reply{status: http.StatusCreated, body: s.redactor(c).workload(s.toAPI(out)), header: http.Header{"Location": {"/api/v1/workloads/" + string(out.ID)}}}
	if !created {
		rep.status = http.StatusOK
		rep.header.Set("Idempotent-Replayed", "true")
	}
	// Accepted, but worth saying (as Kubernetes does: RFC 7234 warn-code 299).
	if cl, ok := core.Class(s.opts.PriorityClasses, out.Priority); ok {
		for _, msg := range core.SubmitWarnings(out.Kind, cl) {
			rep.header.Add("Warning", api.FormatWarning(msg))
		}
	}
	return rep, nil
}

// mayHoldKey is the cheap test before a second decode: whether body may
// hold a key that starts with prefix (ASCII letters with no special case
// folding, such as "replica") as encoding/json matches keys: in any case,
// or written with escapes (any backslash).
func mayHoldKey(body []byte, prefix string) bool {
	if bytes.IndexByte(body, '\\') >= 0 {
		return true
	}
	for i := 0; i+len(prefix) <= len(body); i++ {
		if bytes.EqualFold(body[i:i+len(prefix)], []byte(prefix)) {
			return true
		}
	}
	return false
}

// submitTeam is the team a submission goes to: the one it names, or, when
// it names none, the caller's only team, the one team where it may submit,
// or the default team.
func (s *Server) submitTeam(in *api.Workload, u *core.User) (core.TeamName, *api.FieldError) {
	if in.Team != "" {
		return core.TeamName(in.Team), nil
	}
	var submit []core.TeamName
	for _, m := range u.Memberships {
		if m.Role.Includes(core.RoleMember) {
			submit = append(submit, m.Team)
		}
	}
	switch {
	case len(u.Memberships) == 1:
		return u.Memberships[0].Team, nil
	case len(submit) == 1:
		return submit[0], nil
	case s.opts.DefaultTeam != "" && u.Can(s.opts.DefaultTeam, core.RoleMember):
		return s.opts.DefaultTeam, nil
	case len(u.Memberships) == 0 && !u.Admin:
		return "", &api.FieldError{Field: "team", Problem: "you belong to no team; ask an admin to add you to one"}
	}
	return "", &api.FieldError{Field: "team", Problem: "is required: you belong to several teams"}
}

// toCore authorizes and validates a submitted workload and turns it into
// the domain type.
func (s *Server) toCore(c *call, in *api.Workload) (*core.Workload, error) {
	ctx, u := c.r.Context(), c.u
	team, ferr := s.submitTeam(in, u)
	if ferr != nil {
		return nil, &fieldErrors{fields: append(spec.CheckWorkload(in), *ferr)}
	}
	// A team the caller cannot see is refused as one that does not exist
	// (the same answer, 400 naming the field); in its own team, a role too
	// weak is a 403.
	var t *core.Team
	if core.ValidName(string(team)) && u.InTeam(team) {
		var err error
		if t, err = s.opts.Store.Team(ctx, team); err != nil && !errors.Is(err, core.ErrNotFound) {
			return nil, err
		}
	}
	if t == nil {
		errs := spec.CheckWorkload(in)
		if core.ValidName(string(team)) {
			errs = append(errs, api.FieldError{Field: "team", Problem: fmt.Sprintf("team %q does not exist or you are not a member", team)})
		}
		return nil, &fieldErrors{fields: errs}
	}
	if err := c.authorize(team, "team", string(team)); err != nil {
		return nil, err
	}
	errs := append(spec.CheckWorkload(in), serverOwned(in)...)
	if s.opts.CommandsOnly && in.Image != "" {
		// Never ignored: a workload that names an image expects to run in it.
		errs = append(errs, api.FieldError{Field: "image", Problem: "this server runs workloads as processes on its own machine (the local executor) and has no container runtime: give a command without an image, or start the server with --container-runtime podman (or docker), or with --executor kubernetes"})
	}
	if len(errs) > 0 {
		return nil, &fieldErrors{fields: errs}
	}
	w := workloadIn(in, team, u.Name)
	if err := s.storageRefs(ctx, team, in, w); err != nil {
		return nil, err
	}
	adm := core.Admission{Team: t, Classes: s.opts.PriorityClasses, Nodes: s.admissionNodes(ctx)}
	if err := adm.Admit(w); err != nil {
		return nil, admissionError(err)
	}
	return w, nil
}

// workloadIn is a submitted workload as the domain holds it, before its
// admission gives it its defaults.
func workloadIn(in *api.Workload, team core.TeamName, owner string) *core.Workload {
	w := &core.Workload{Spec: core.Spec{
		Name:     in.Name,
		Team:     team,
		Owner:    owner,
		Kind:     core.Kind(in.Kind),
		Priority: in.Priority,
		Request: core.Request{
			MilliGPU:     int64(in.Resources.GPUs),
			GPUMemoryMiB: in.Resources.GPUMemoryMiB,
			GPUModels:    in.Resources.GPUModels,
			MilliCPU:     int64(in.Resources.CPU),
			MemoryMiB:    in.Resources.MemoryMiB,
			NodeSelector: in.NodeSelector,
			Regions:      in.Residency,
			Replicas:     in.Replicas,
		},
		Image:       in.Image,
		Command:     in.Command,
		Env:         in.Env,
		WorkingDir:  in.WorkingDir,
		MaxRuntime:  time.Duration(in.MaxRuntimeSeconds) * time.Second,
		GracePeriod: time.Duration(in.GracePeriodSeconds) * time.Second,
		Labels:      in.Labels,
	}}
	for _, p := range in.Ports {
		w.Ports = append(w.Ports, core.Port{Name: p.Name, Port: p.Port})
	}
	w.ReadyPath = in.ReadyPath
	if in.Network != nil {
		w.Network = core.Network{Egress: in.Network.Egress, Allow: in.Network.Allow}
	}
	return w
}

// admissionError is an admission's refusal as the API answers it: a 400
// naming each field, or the 403 of a class the team may not use.
func admissionError(err error) error {
	var d *core.Disallowed
	if errors.As(err, &d) {
		return forbidden("%s", d.Msg)
	}
	var r *core.Refused
	if errors.As(err, &r) {
		fe := &fieldErrors{}
		for _, p := range r.Problems {
			fe.fields = append(fe.fields, api.FieldError{Field: p.Field, Problem: p.Problem})
		}
		return fe
	}
	return err
}

// serverOwned names the fields a submission may not set that spec.CheckWorkload
// does not already: the server sets them.
func serverOwned(in *api.Workload) []api.FieldError {
	var errs []api.FieldError
	if !in.CreatedAt.IsZero() {
		errs = append(errs, api.FieldError{Field: "createdAt", Problem: "is set by the server"})
	}
	if in.Native != nil {
		errs = append(errs, api.FieldError{Field: "native", Problem: "is set by the server, for pods made on a cluster with schedulerName gpufleet"})
	}
	st := in.Status
	validated := st.Phase != "" || st.Attempts != 0 || len(st.Placement) != 0 // spec.CheckWorkload names these
	if !validated && (st.Reason != "" || st.Message != "" || st.ExitCode != nil || st.Preemptions != 0 || st.Placement != nil ||
		st.StartedAt != nil || st.FinishedAt != nil || st.StopRequested != "" || st.PreemptedBy != "" || st.NominatedNode != "") {
		errs = append(errs, api.FieldError{Field: "status", Problem: "is set by the server"})
	}
	return errs
}

func (s *Server) classNames() []string {
	names := make([]string, len(s.opts.PriorityClasses))
	for i, p := range s.opts.PriorityClasses {
		names[i] = p.Name
	}
	return names
}

// sortedClasses are the priority classes, most important first.
func (s *Server) sortedClasses() []core.PriorityClass {
	cs := slices.Clone(s.opts.PriorityClasses)
	slices.SortStableFunc(cs, func(a, b core.PriorityClass) int { return b.Value - a.Value })
	return cs
}

// workload reads the workload of the request's path and checks the
// caller's role in its team for the route: another team's workload is "not
// found", exactly as a missing one, so that IDs do not leak.
func (s *Server) workload(c *call) (*core.Workload, error) {
	id := c.r.PathValue("id")
	c.setObject(id)
	w, err := s.opts.Store.Workload(c.r.Context(), core.WorkloadID(id))
	if errors.Is(err, core.ErrNotFound) {
		return nil, notFound("workload", id)
	}
	if err != nil {
		return nil, err
	}
	if err := c.authorize(w.Team, "workload", id); err != nil {
		return nil, err
	}
	return w, nil
}

func (s *Server) getWorkload(c *call) (reply, error) {
	w, err := s.workload(c)
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: s.redactor(c).workload(s.withLive(s.toAPI(w), w))}, nil
}

func (s *Server) cancelWorkload(c *call) (reply, error) {
	w, err := s.workload(c)
	if err != nil {
		return reply{}, err
	}
	ctx := c.r.Context()
	out, err := s.opts.Store.RequestStop(ctx, w.ID, "Cancelled", "cancelled by "+c.u.Name, s.opts.Now())
	if err != nil {
		return reply{}, err
	}
	// Read it back: a running workload now shows its stop request.
	if now, err := s.opts.Store.Workload(ctx, out.ID); err == nil {
		out = now
	}
	return reply{status: http.StatusOK, body: s.redactor(c).workload(s.toAPI(out))}, nil
}

func (s *Server) listWorkloads(c *call) (reply, error) {
	r, u := c.r, c.u
	q := r.URL.Query()
	limit, err := pageLimit(q.Get("limit"), 500)
	if err != nil {
		return reply{}, err
	}
	f := store.WorkloadFilter{Limit: limit}
	if v := q.Get("pageToken"); v != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(v, "s"), 10, 64)
		if err != nil || !strings.HasPrefix(v, "s") || n < 0 {
			return reply{}, invalid("pageToken", "is not a token this server issued")
		}
		f.AfterSeq = n
	}
	if v := q.Get("phase"); v != "" {
		for _, p := range strings.Split(v, ",") {
			ph, err := api.ParsePhase(p) // in any case; an unknown one lists the phases
			if err != nil {
				return reply{}, invalid("phase", "%v", err)
			}
			f.Phases = append(f.Phases, core.Phase(ph))
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
	name := q.Get("name")
	if name != "" && !core.ValidName(name) {
		return reply{}, invalid("name", "%q is not a workload name (lowercase letters, digits and '-', at most %d characters)", name, core.MaxNameLen)
	}
	ws, err := s.workloadsNamed(c, f, name)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.Workload]{Items: make([]api.Workload, 0, len(ws))}
	rd := s.redactor(c)
	for _, w := range ws {
		out.Items = append(out.Items, *rd.workload(s.withLive(s.toAPI(w), w)))
	}
	if len(ws) == f.Limit {
		out.NextPageToken = fmt.Sprintf("s%d", ws[len(ws)-1].Seq)
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// workloadsNamed reads a page of the workloads f selects, only those called
// name when it is not empty: names are not unique, and the store does not
// index them, so it reads on through the store's pages until it has
// f.Limit of them or none is left. A full page ends with the last one read,
// so the next page token resumes after it.
func (s *Server) workloadsNamed(c *call, f store.WorkloadFilter, name string) ([]*core.Workload, error) {
	if name == "" {
		return s.opts.Store.Workloads(c.r.Context(), f)
	}
	var out []*core.Workload
	for {
		page, err := s.opts.Store.Workloads(c.r.Context(), f)
		if err != nil {
			return nil, err
		}
		for _, w := range page {
			if w.Name == name {
				out = append(out, w)
				if len(out) == f.Limit {
					return out, nil
				}
			}
		}
		if len(page) < f.Limit {
			return out, nil
		}
		f.AfterSeq = page[len(page)-1].Seq
	}
}

func (s *Server) events(c *call) (reply, error) {
	w, err := s.workload(c)
	if err != nil {
		return reply{}, err
	}
	evs, err := s.opts.Store.Events(c.r.Context(), w.ID)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.Event]{Items: make([]api.Event, 0, len(evs))}
	rd := s.redactor(c)
	for _, e := range evs {
		out.Items = append(out.Items, rd.event(api.Event{ID: e.ID, WorkloadID: string(e.WorkloadID), Time: e.Time, Type: e.Type,
			Reason: e.Reason, Message: e.Message, From: string(e.From), To: string(e.To)}))
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// attempts lists a workload's attempts that ended, with what each used of
// its host against its request (cost.Attempts).
func (s *Server) attempts(c *call) (reply, error) {
	w, err := s.workload(c)
	if err != nil {
		return reply{}, err
	}
	as, err := s.opts.Store.Attempts(c.r.Context(), w.ID)
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: cost.Attempts(as)}, nil
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
			GPUs:         quantity.Milli(w.Request.MilliGPU),
			GPUMemoryMiB: w.Request.GPUMemoryMiB,
			GPUModels:    w.Request.GPUModels,
			CPU:          quantity.Milli(w.Request.MilliCPU),
			MemoryMiB:    w.Request.MemoryMiB,
		},
		Replicas:           w.Request.Replicas,
		Image:              w.Image,
		Command:            w.Command,
		Env:                w.Env,
		WorkingDir:         w.WorkingDir,
		MaxRuntimeSeconds:  int64(w.MaxRuntime / time.Second),
		GracePeriodSeconds: int64(w.GracePeriod / time.Second),
		Labels:             w.Labels,
		NodeSelector:       w.Request.NodeSelector,
		Residency:          w.Request.Regions,
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
	if n := w.Native; n != nil {
		out.Native = &api.Native{Cluster: n.Cluster, Namespace: n.Namespace, Name: n.Name, Group: n.Group, Pods: []string{}}
		for _, p := range n.Pods {
			out.Native.Pods = append(out.Native.Pods, p.Name)
		}
		if o := n.Owner; o != nil {
			out.Native.Owner = &api.NativeOwner{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name}
		}
	}
	for _, a := range w.Status.Placement {
		out.Status.Placement = append(out.Status.Placement, api.Placement{Replica: a.Replica, Node: string(a.Node), GPUIndex: a.GPUIndex,
			GPUUUID: a.GPUUUID, MilliGPU: a.MilliGPU, MemoryMiB: a.MemoryMiB})
	}
	if o := w.Status.Outputs; o != nil {
		out.Status.Outputs = &api.Outputs{Accepted: o.Accepted, Rejected: o.Rejected, Unit: o.Unit}
	}
	for _, m := range w.Status.Metrics {
		out.Status.Metrics = append(out.Status.Metrics, api.Metric{Name: m.Name, Value: m.Value, Unit: m.Unit, Source: api.SourceWorkload})
	}
	for _, p := range w.Ports {
		out.Ports = append(out.Ports, api.Port{Name: p.Name, Port: p.Port})
	}
	if a := w.Array; a != nil {
		i := a.Index
		out.Array = &api.ArraySpec{ID: string(a.ID), Index: &i, Start: a.Start, End: a.End, MaxRunning: a.MaxRunning}
	}
	out.ReadyPath, out.Status.Ready, out.SecretEnv, out.SecretFiles = w.ReadyPath, w.Status.Ready, w.SecretEnv, w.SecretFiles
	for _, v := range w.Volumes {
		out.Volumes = append(out.Volumes, api.VolumeMount{Name: v.Name, Path: v.Path, ReadOnly: v.ReadOnly})
	}
	for _, d := range w.Datasets {
		out.Mounts = append(out.Mounts, api.Mount{Dataset: d.Name, Path: d.Path})
	}
	if n := w.Network; n.Egress != "" || len(n.Allow) > 0 {
		out.Network = &api.Network{Egress: n.Egress, Allow: n.Allow}
	}
	return out
}
