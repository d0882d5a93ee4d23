package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// fakePageSize is the fake's page size, small so that lists span pages.
const fakePageSize = 2

// fakeServer is a small in-memory gpufleet API: it keeps workloads, teams
// with their quotas and users, pages lists, and runs a pretend executor that
// moves a workload one phase further each time it is read. Commands tell the
// executor what to do: ["exit", "N"] ends with exit code N, ["sleep"] runs
// for ever, anything else succeeds.
type fakeServer struct {
	URL string

	mu        sync.Mutex
	users     map[string]*api.User // by token
	teams     []api.Team
	workloads []*api.Workload
	events    map[string][]api.Event
	logs      map[string]string
	nodes     []api.Node
	idem      map[string]string // idempotency key → workload ID
	bodies    [][]byte          // raw bodies of POST /workloads
	lists     []string          // raw queries of GET /workloads
	teamCalls []string          // "POST body" or "PATCH name body" of team changes
	frozen    map[string]bool   // workloads whose status a test set; the executor leaves them alone
	lastToken string            // token of the last authenticated request

	people []*api.User      // every user, by creation; f.users points into it
	tokens []*fakeToken     // token records
	audit  []api.AuditEntry // the audit trail, oldest first
	calls  []string         // "METHOD URI BODY" of every request
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	f := &fakeServer{
		users: map[string]*api.User{},
		teams: []api.Team{{
			Name: "research", GuaranteedMilliGPU: 8000, LimitMilliGPU: ptr(int64(16000)), Weight: 2,
			UsageMilliGPU: 2500, FairShareMilliGPU: 10000, PendingMilliGPU: 250, CreatedAt: testNow.Add(-72 * time.Hour),
		}, {
			Name: "vision", LimitMilliGPU: ptr(int64(-1)), Weight: 1,
			FairShareMilliGPU: 4000, PendingMilliGPU: 8000, CreatedAt: testNow.Add(-90 * time.Minute),
		}},
		events: map[string][]api.Event{},
		logs:   map[string]string{},
		idem:   map[string]string{},
		frozen: map[string]bool{},
		nodes: []api.Node{{
			Name: "gpu1", Schedulable: true, Pool: "a",
			GPUs: []api.GPU{
				{Index: 0, UUID: "GPU-0", Model: "H100", MemoryMiB: 81920, AllocatedMilliGPU: 1000, AllocatedMemoryMiB: 81920,
					Utilization: ptr(0.9), MemoryUsedMiB: ptr(int64(30720)), Healthy: true,
					Allocations: []api.GPUAllocation{{WorkloadID: "wl-a", Team: "research", MilliGPU: 500, MemoryMiB: 40960}, {WorkloadID: "wl-b", Team: "research", MilliGPU: 500, MemoryMiB: 40960}}},
				{Index: 1, UUID: "GPU-1", Model: "H100", MemoryMiB: 81920, AllocatedMilliGPU: 750, AllocatedMemoryMiB: 61440,
					Utilization: ptr(0.3), MemoryUsedMiB: ptr(int64(1000)), Healthy: true},
				{Index: 2, UUID: "GPU-2", Model: "H100", MemoryMiB: 81920, AllocatedMilliGPU: 1000, AllocatedMemoryMiB: 81920},
				{Index: 3, UUID: "GPU-3", Model: "H100", MemoryMiB: 81920},
			},
		}, {
			Name: "gpu2", Schedulable: false,
			GPUs: []api.GPU{
				{Index: 0, UUID: "GPU-4", Model: "A10", MemoryMiB: 24576},
				{Index: 1, UUID: "GPU-5", Model: "L4", MemoryMiB: 24576},
			},
		}},
	}
	f.addUser(api.User{Name: "alice", Memberships: []api.Membership{{Team: "research", Role: api.RoleMember}}, CreatedAt: testNow.Add(-48 * time.Hour)},
		aliceToken, "laptop")
	f.addUser(api.User{Name: "admin", Admin: true, CreatedAt: testNow.Add(-72 * time.Hour)}, adminToken, "")
	mux := http.NewServeMux()
	f.tenancyRoutes(mux)
	mux.HandleFunc("GET /api/v1/whoami", f.whoami)
	mux.HandleFunc("POST /api/v1/workloads", f.submit)
	mux.HandleFunc("GET /api/v1/workloads", f.list)
	mux.HandleFunc("GET /api/v1/workloads/{id}", f.get)
	mux.HandleFunc("DELETE /api/v1/workloads/{id}", f.cancel)
	mux.HandleFunc("GET /api/v1/workloads/{id}/events", f.eventsOf)
	mux.HandleFunc("GET /api/v1/workloads/{id}/logs", f.logsOf)
	mux.HandleFunc("GET /api/v1/nodes", func(w http.ResponseWriter, r *http.Request) { reply(w, 200, api.List[api.Node]{Items: f.nodes}) })
	mux.HandleFunc("GET /api/v1/teams", func(w http.ResponseWriter, r *http.Request) { reply(w, 200, api.List[api.Team]{Items: f.teams}) })
	mux.HandleFunc("POST /api/v1/teams", f.createTeam)
	mux.HandleFunc("PATCH /api/v1/teams/{name}", f.setQuota)
	mux.HandleFunc("POST /api/v1/users", f.createUser)
	srv := httptest.NewServer(f.auth(mux))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func replyError(w http.ResponseWriter, status int, code, msg string, fields ...api.FieldError) {
	reply(w, status, api.ErrorBody{Error: api.Error{Code: code, Message: msg, Fields: fields}})
}

// auth takes the lock for the whole request and rejects unknown tokens.
func (f *fakeServer) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.calls = append(f.calls, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(bytes.TrimSpace(body))))
		token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if f.users[token] == nil {
			replyError(w, http.StatusUnauthorized, api.CodeUnauthenticated, "missing or unknown API token")
			return
		}
		f.lastToken = token
		next.ServeHTTP(w, r)
	})
}

func (f *fakeServer) caller(r *http.Request) *api.User {
	return f.users[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
}

func (f *fakeServer) whoami(w http.ResponseWriter, r *http.Request) {
	reply(w, 200, f.caller(r))
}

func (f *fakeServer) submit(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.bodies = append(f.bodies, body)
	key := r.Header.Get("Idempotency-Key")
	if id, ok := f.idem[key]; ok && key != "" {
		reply(w, 200, f.find(id))
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var wl api.Workload
	if err := dec.Decode(&wl); err != nil {
		replyError(w, 400, api.CodeInvalid, "bad JSON: "+err.Error())
		return
	}
	if errs := wl.Validate(); len(errs) > 0 {
		replyError(w, 422, api.CodeInvalid, "invalid workload", errs...)
		return
	}
	u := f.caller(r)
	if wl.Team == "" && len(u.Teams) == 1 {
		wl.Team = u.Teams[0]
	}
	if !f.teamExists(wl.Team) {
		replyError(w, 422, api.CodeInvalid, "invalid workload", api.FieldError{Field: "team", Problem: fmt.Sprintf("team %q does not exist", wl.Team)})
		return
	}
	added := f.add(wl, u.Name)
	if key != "" {
		f.idem[key] = added.ID
	}
	reply(w, 201, added)
}

func (f *fakeServer) teamExists(name string) bool {
	for _, t := range f.teams {
		if t.Name == name {
			return true
		}
	}
	return false
}

// add stores a new workload. The caller holds the lock.
func (f *fakeServer) add(wl api.Workload, owner string) *api.Workload {
	wl.ID = fmt.Sprintf("wl-%d", len(f.workloads)+1)
	wl.Owner = owner
	wl.CreatedAt = testNow.Add(-time.Duration(10-len(f.workloads)) * time.Minute)
	wl.Status = api.WorkloadStatus{Phase: api.PhasePending, Reason: "Queued", Placement: []api.Placement{}}
	p := &wl
	f.workloads = append(f.workloads, p)
	f.event(p, "Normal", "Submitted", "", api.PhasePending, "submitted by "+owner)
	return p
}

// addWorkloads stores workloads directly, as if they had been submitted.
func (f *fakeServer) addWorkloads(ws ...api.Workload) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range ws {
		f.add(w, "alice")
	}
}

func (f *fakeServer) event(wl *api.Workload, typ, reason, from, to, msg string) {
	f.events[wl.ID] = append(f.events[wl.ID], api.Event{
		ID: int64(len(f.events[wl.ID]) + 1), WorkloadID: wl.ID, Time: testNow, Type: typ, Reason: reason, From: from, To: to, Message: msg,
	})
}

func (f *fakeServer) find(id string) *api.Workload {
	for _, wl := range f.workloads {
		if wl.ID == id {
			return wl
		}
	}
	return nil
}

func (f *fakeServer) list(w http.ResponseWriter, r *http.Request) {
	f.lists = append(f.lists, r.URL.RawQuery)
	q := r.URL.Query()
	limit := fakePageSize
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			replyError(w, 400, api.CodeInvalid, "bad limit", api.FieldError{Field: "limit", Problem: "must be a positive number"})
			return
		}
		limit = min(n, fakePageSize)
	}
	start := 0
	if s := q.Get("pageToken"); s != "" {
		start, _ = strconv.Atoi(strings.TrimPrefix(s, "after-"))
	}
	var match []api.Workload
	for _, wl := range f.workloads {
		if (q.Get("team") == "" || wl.Team == q.Get("team")) && (q.Get("phase") == "" || wl.Status.Phase == q.Get("phase")) {
			match = append(match, *wl)
		}
	}
	out := api.List[api.Workload]{Items: []api.Workload{}}
	if start < len(match) {
		end := min(start+limit, len(match))
		out.Items = match[start:end]
		if end < len(match) {
			out.NextPageToken = "after-" + strconv.Itoa(end)
		}
	}
	reply(w, 200, out)
}

func (f *fakeServer) get(w http.ResponseWriter, r *http.Request) {
	wl := f.find(r.PathValue("id"))
	if wl == nil {
		replyError(w, 404, api.CodeNotFound, fmt.Sprintf("workload %q not found", r.PathValue("id")))
		return
	}
	f.step(wl)
	reply(w, 200, wl)
}

// setStatus gives a workload a status, which the pretend executor then
// leaves as it is.
func (f *fakeServer) setStatus(id string, s api.WorkloadStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.Placement == nil {
		s.Placement = []api.Placement{}
	}
	f.find(id).Status = s
	f.frozen[id] = true
}

// step is the pretend executor: Pending → Running → finished.
func (f *fakeServer) step(wl *api.Workload) {
	if f.frozen[wl.ID] {
		return
	}
	s := &wl.Status
	switch s.Phase {
	case api.PhasePending:
		started := testNow
		s.Phase, s.Reason, s.Attempts, s.StartedAt = api.PhaseRunning, "", s.Attempts+1, &started
		s.Placement = []api.Placement{{Node: "gpu1", GPUIndex: 3, GPUUUID: "GPU-3", MilliGPU: int64(wl.Resources.GPUs), MemoryMiB: wl.Resources.GPUMemoryMiB}}
		s.Usage = &api.WorkloadUsage{GPUUtilization: 0.4, GPUMemoryUsedMiB: 2048, SampledAt: started}
		f.logs[wl.ID] = "hello from " + strings.Join(wl.Command, " ") + "\n"
		f.event(wl, "Normal", "Started", api.PhasePending, api.PhaseRunning, "on gpu1")
	case api.PhaseRunning:
		if wl.Command[0] == "sleep" {
			return
		}
		code := 0
		if wl.Command[0] == "exit" && len(wl.Command) > 1 {
			code, _ = strconv.Atoi(wl.Command[1])
		}
		finished := testNow
		s.ExitCode, s.FinishedAt, s.Placement = &code, &finished, []api.Placement{}
		s.Phase, s.Reason, s.Message = api.PhaseSucceeded, "Completed", ""
		typ := "Normal"
		if code != 0 {
			s.Phase, s.Reason, s.Message, typ = api.PhaseFailed, "Error", fmt.Sprintf("exited with code %d", code), "Warning"
		}
		f.event(wl, typ, s.Reason, api.PhaseRunning, s.Phase, s.Message)
	}
}

func (f *fakeServer) cancel(w http.ResponseWriter, r *http.Request) {
	wl := f.find(r.PathValue("id"))
	if wl == nil {
		replyError(w, 404, api.CodeNotFound, fmt.Sprintf("workload %q not found", r.PathValue("id")))
		return
	}
	if !terminal(wl.Status.Phase) {
		from := wl.Status.Phase
		wl.Status.Phase, wl.Status.Reason, wl.Status.Message = api.PhaseCancelled, "CancelledByUser", "cancelled by "+f.caller(r).Name
		wl.Status.Placement = []api.Placement{}
		f.event(wl, "Normal", "Cancelled", from, api.PhaseCancelled, wl.Status.Message)
	}
	reply(w, 200, wl)
}

func (f *fakeServer) eventsOf(w http.ResponseWriter, r *http.Request) {
	if f.find(r.PathValue("id")) == nil {
		replyError(w, 404, api.CodeNotFound, "not found")
		return
	}
	reply(w, 200, api.List[api.Event]{Items: f.events[r.PathValue("id")]})
}

func (f *fakeServer) logsOf(w http.ResponseWriter, r *http.Request) {
	if f.find(r.PathValue("id")) == nil {
		replyError(w, 404, api.CodeNotFound, "not found")
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, f.logs[r.PathValue("id")])
}

// decodeStrict reads a JSON body as the server does, unknown fields
// refused, and answers 400 when it cannot.
func decodeStrict(w http.ResponseWriter, body []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		replyError(w, 400, api.CodeInvalid, "bad JSON: "+err.Error())
		return false
	}
	return true
}

// fakeQuotaErrors checks a team's quota with the server's rules.
func fakeQuotaErrors(t api.Team) []api.FieldError {
	var errs []api.FieldError
	if t.GuaranteedMilliGPU < 0 {
		errs = append(errs, api.FieldError{Field: "guaranteedMilliGPU", Problem: "must not be negative"})
	}
	if l := *t.LimitMilliGPU; l < -1 {
		errs = append(errs, api.FieldError{Field: "limitMilliGPU", Problem: "must be -1 (unlimited) or at least 0"})
	} else if l >= 0 && l < t.GuaranteedMilliGPU {
		errs = append(errs, api.FieldError{Field: "limitMilliGPU", Problem: fmt.Sprintf("%d is below the guarantee (%d)", l, t.GuaranteedMilliGPU)})
	}
	if t.Weight < 1 || t.Weight > 1000 {
		errs = append(errs, api.FieldError{Field: "weight", Problem: "must be from 1 to 1000"})
	}
	return errs
}

func (f *fakeServer) createTeam(w http.ResponseWriter, r *http.Request) {
	if !f.caller(r).Admin {
		replyError(w, 403, api.CodeForbidden, "only an admin can create teams")
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.teamCalls = append(f.teamCalls, "POST "+string(bytes.TrimSpace(body)))
	var t api.Team
	if !decodeStrict(w, body, &t) {
		return
	}
	if f.teamExists(t.Name) {
		replyError(w, 409, api.CodeConflict, fmt.Sprintf("team %q exists", t.Name))
		return
	}
	if t.LimitMilliGPU == nil {
		t.LimitMilliGPU = ptr(int64(-1))
	}
	if t.Weight == 0 {
		t.Weight = 1
	}
	if errs := fakeQuotaErrors(t); len(errs) > 0 {
		replyError(w, 400, api.CodeInvalid, "invalid team", errs...)
		return
	}
	t.CreatedAt = testNow
	f.teams = append(f.teams, t)
	reply(w, 201, t)
}

func (f *fakeServer) setQuota(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var q struct {
		api.TeamQuota
		PriorityClasses *[]string `json:"priorityClasses"`
	}
	u := f.caller(r)
	quota := bytes.Contains(body, []byte("MilliGPU")) || bytes.Contains(body, []byte(`"weight"`))
	if !u.Admin && (quota || fakeRole(u, r.PathValue("name")) != api.RoleTeamAdmin) {
		replyError(w, 403, api.CodeForbidden, "only an admin may do this")
		return
	}
	f.teamCalls = append(f.teamCalls, "PATCH "+r.PathValue("name")+" "+string(bytes.TrimSpace(body)))
	if !decodeStrict(w, body, &q) {
		return
	}
	if q.PriorityClasses != nil {
		for i, c := range *q.PriorityClasses {
			if !slices.Contains([]string{"production", "training", "development", "batch"}, c) {
				replyError(w, 400, api.CodeInvalid, "invalid team", api.FieldError{Field: fmt.Sprintf("priorityClasses[%d]", i), Problem: fmt.Sprintf("no priority class %q", c)})
				return
			}
		}
	}
	for i := range f.teams {
		t := f.teams[i] // changed on a copy, kept only when valid
		if t.Name != r.PathValue("name") {
			continue
		}
		if q.GuaranteedMilliGPU != nil {
			t.GuaranteedMilliGPU = *q.GuaranteedMilliGPU
		}
		if q.LimitMilliGPU != nil {
			t.LimitMilliGPU = ptr(*q.LimitMilliGPU)
		}
		if q.Weight != nil {
			t.Weight = *q.Weight
		}
		if q.PriorityClasses != nil {
			t.PriorityClasses = nil
			if len(*q.PriorityClasses) > 0 {
				t.PriorityClasses = *q.PriorityClasses
			}
		}
		if errs := fakeQuotaErrors(t); len(errs) > 0 {
			replyError(w, 400, api.CodeInvalid, "invalid quota", errs...)
			return
		}
		f.teams[i] = t
		reply(w, 200, t)
		return
	}
	replyError(w, 404, api.CodeNotFound, fmt.Sprintf("team %q not found", r.PathValue("name")))
}

// team returns a copy of a stored team, or nil.
func (f *fakeServer) team(name string) *api.Team {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.teams {
		if t.Name == name {
			return &t
		}
	}
	return nil
}

// teamChanges returns the team requests so far.
func (f *fakeServer) teamChanges() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.teamCalls...)
}

func (f *fakeServer) createUser(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var u api.User
	if !decodeStrict(w, body, &u) {
		return
	}
	for _, t := range u.Teams {
		u.Memberships = append(u.Memberships, api.Membership{Team: t, Role: api.RoleMember})
	}
	caller := f.caller(r)
	allowed := caller.Admin || u.ServiceAccount && !u.Admin && len(u.Memberships) > 0
	for i, m := range u.Memberships {
		if !slices.Contains([]string{api.RoleViewer, api.RoleMember, api.RoleTeamAdmin}, m.Role) {
			replyError(w, 400, api.CodeInvalid, "invalid user", api.FieldError{Field: fmt.Sprintf("memberships[%d].role", i), Problem: "want viewer, member or team-admin"})
			return
		}
		allowed = allowed && (caller.Admin || fakeRole(caller, m.Team) == api.RoleTeamAdmin)
	}
	if !allowed {
		replyError(w, 403, api.CodeForbidden, "only an admin can create users")
		return
	}
	if f.person(u.Name) != nil {
		replyError(w, 409, api.CodeConflict, fmt.Sprintf("user %q exists", u.Name))
		return
	}
	u.Token = u.Name + "-token"
	u.CreatedAt = testNow
	out := *f.addUser(u, u.Token, "")
	out.Token = u.Token
	reply(w, 201, out)
}

// submitted returns the raw bodies of the submissions so far.
func (f *fakeServer) submitted() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...)
}

// run runs the CLI against the fake as alice, with an empty config
// directory.
func (f *fakeServer) run(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, invocation{args: args, vars: f.vars(t, aliceToken)})
}

func (f *fakeServer) vars(t *testing.T, token string) map[string]string {
	dir := t.TempDir()
	return map[string]string{
		"GPUFLEET_ADDR":   f.URL,
		"GPUFLEET_TOKEN":  token,
		"XDG_CONFIG_HOME": dir,
		"HOME":            dir,
	}
}
