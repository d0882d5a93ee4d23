package apiserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/spec"
	"github.com/gpufleet/gpufleet/internal/store"
)

// submitArray handles POST /arrays: a workload with array set, validated
// as POST /workloads validates one (and its range: 400 naming array,
// array.start, array.end or array.maxRunning), stored as one task per
// index in one write (store.CreateArray): all or none, the whole array
// counted against the pending bounds (429, as for one workload).
func (s *Server) submitArray(c *call) (reply, error) {
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
	if in.Array == nil {
		return reply{}, invalid("array", "is required: the range of the array's indices, such as {\"start\": 0, \"end\": 999, \"maxRunning\": 50}")
	}
	var given struct {
		Replicas *int `json:"replicas"`
	}
	if json.Unmarshal(body, &given) == nil && given.Replicas != nil && *given.Replicas == 0 {
		return reply{}, invalid("replicas", "must be from 1 to %d (omit it for one)", spec.MaxReplicas)
	}
	for _, k := range []string{store.EnvArrayIndex, store.EnvArrayID} {
		if _, ok := in.Env[k]; ok {
			return reply{}, invalid("env", "%s is set by the server on each task of an array", k)
		}
	}
	w, err := s.toCore(c, &in)
	if err != nil {
		return reply{}, err
	}
	var idem *store.Idempotency
	if key != "" {
		canon, err := json.Marshal(&in)
		if err != nil {
			return reply{}, err
		}
		h := sha256.Sum256(canon)
		idem = &store.Idempotency{Key: key, Hash: hex.EncodeToString(h[:])}
	}
	rng := store.ArrayRange{Start: in.Array.Start, End: in.Array.End, MaxRunning: in.Array.MaxRunning}
	a, created, err := s.opts.Store.CreateArray(r.Context(), w, rng, idem, s.opts.Now())
	if err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return reply{}, invalid("team", "team %q does not exist", w.Team)
		}
		return reply{}, err
	}
	out := arrayOf(a.ID, a.First, map[core.Phase]int{core.Pending: a.Range.Len()})
	if !created {
		phases, first, err := s.opts.Store.ArrayPhases(r.Context(), a.ID)
		if err != nil {
			return reply{}, err
		}
		if first != nil {
			out = arrayOf(a.ID, first, phases)
		}
	}
	rep := reply{status: http.StatusCreated, body: out, header: http.Header{"Location": {"/api/v1/arrays/" + string(a.ID)}}}
	if !created {
		rep.status = http.StatusOK
		rep.header.Set("Idempotent-Replayed", "true")
	}
	if cl, ok := core.Class(s.opts.PriorityClasses, w.Priority); ok {
		for _, msg := range core.SubmitWarnings(w.Kind, cl) {
			rep.header.Add("Warning", api.FormatWarning(msg))
		}
	}
	return rep, nil
}

// arrayOf describes the array id whose first task is first.
func arrayOf(id core.WorkloadID, first *core.Workload, phases map[core.Phase]int) *api.Array {
	a := first.Array
	out := &api.Array{ID: string(id), Name: first.Name, Team: string(first.Team), Owner: first.Owner,
		Start: a.Start, End: a.End, MaxRunning: a.MaxRunning, Tasks: a.End - a.Start + 1, Phases: map[string]int{}, TaskIDs: []string{}}
	for p, n := range phases {
		out.Phases[string(p)] = n
	}
	for i := a.Start; i <= a.End && len(out.TaskIDs) < api.ArrayTaskIDs; i++ {
		out.TaskIDs = append(out.TaskIDs, string(core.ArrayTaskID(id, i)))
	}
	return out
}

// array reads the array of the request's path and checks the caller's
// role in its team: another team's array is "not found", as a missing one.
func (s *Server) array(c *call) (*api.Array, error) {
	id := c.r.PathValue("id")
	c.setObject(id)
	phases, first, err := s.opts.Store.ArrayPhases(c.r.Context(), core.WorkloadID(id))
	if err != nil {
		return nil, err
	}
	if first == nil {
		return nil, notFound("array", id)
	}
	if err := c.authorize(first.Team, "array", id); err != nil {
		return nil, err
	}
	return arrayOf(core.WorkloadID(id), first, phases), nil
}

// getArray handles GET /arrays/{id}: the array with its tasks counted by
// phase.
func (s *Server) getArray(c *call) (reply, error) {
	a, err := s.array(c)
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: a}, nil
}

// cancelArray handles DELETE /arrays/{id}: every task not finished is
// cancelled (a running one asked to stop), in one write.
func (s *Server) cancelArray(c *call) (reply, error) {
	a, err := s.array(c)
	if err != nil {
		return reply{}, err
	}
	ctx := c.r.Context()
	if _, err := s.opts.Store.CancelArray(ctx, core.WorkloadID(a.ID), "Cancelled", "cancelled by "+c.u.Name, s.opts.Now()); err != nil {
		return reply{}, err
	}
	if a, err = s.array(c); err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: a}, nil
}
