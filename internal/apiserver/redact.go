package apiserver

import (
	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// redactor shows a caller other teams' workloads only as
// core.ForeignWorkload, wherever a workload's answer names one: its status
// message and reason, preemptedBy, and its events. Messages name other
// workloads through core.Mention; core.Redact finds every workload ID
// whatever wrote it, and the redactor looks each up once per request (a
// missing one is redacted too, so that the answer does not tell the two
// apart). An admin sees everything.
type redactor struct {
	s    *Server
	c    *call
	seen map[core.WorkloadID]bool
}

func (s *Server) redactor(c *call) *redactor { return &redactor{s: s, c: c} }

// visible reports whether the caller may see workload id.
func (r *redactor) visible(id core.WorkloadID) bool {
	if r.c.u.Admin {
		return true
	}
	if v, ok := r.seen[id]; ok {
		return v
	}
	w, err := r.s.opts.Store.Workload(r.c.r.Context(), id)
	v := err == nil && r.c.u.InTeam(w.Team)
	if r.seen == nil {
		r.seen = map[core.WorkloadID]bool{}
	}
	r.seen[id] = v
	return v
}

func (r *redactor) text(msg string) string {
	if r.c.u.Admin {
		return msg
	}
	return core.Redact(msg, r.visible)
}

// workload redacts a workload's answer in place and returns it.
func (r *redactor) workload(out *api.Workload) *api.Workload {
	st := &out.Status
	st.Reason, st.Message = r.text(st.Reason), r.text(st.Message)
	if st.PreemptedBy != "" && !r.visible(core.WorkloadID(st.PreemptedBy)) {
		st.PreemptedBy = "" // the message says "a workload of another team"
	}
	return out
}

// event redacts an event's answer in place and returns it.
func (r *redactor) event(e api.Event) api.Event {
	e.Reason, e.Message = r.text(e.Reason), r.text(e.Message)
	return e
}
