package apiserver

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/store"
)

// finishAudit records a mutating request's entry once it is answered. A
// request whose write succeeded has its entry already, written by the store
// in the same transaction (status preset to the route's success); any other
// (refused, failed, or that wrote nothing) is appended now with the status
// and message answered. The entry never holds a token or a body: the
// message is the error told to the caller, and token routes name the
// token's ID only.
func (s *Server) finishAudit(c *call, status int, msg string) {
	if store.AuditWritten(c.r.Context()) {
		return
	}
	c.audit.Status = status
	c.audit.Message = msg
	if s.opts.Store == nil {
		return
	}
	if err := s.opts.Store.AppendAudit(c.r.Context(), *c.audit); err != nil {
		s.log.Error("audit entry not recorded", "method", c.audit.Method, "path", c.audit.Path, "status", status, "err", err)
	}
}

// auditTrail answers GET /audit: entries oldest first, filtered by
// ?since= (RFC 3339) and ?user=, paged by ?limit= and ?pageToken= (the last
// entry's ID).
func (s *Server) auditTrail(c *call) (reply, error) {
	q := c.r.URL.Query()
	f := store.AuditFilter{Limit: 500, User: q.Get("user")}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return reply{}, invalid("since", "must be an RFC 3339 time such as 2025-06-01T12:00:00Z")
		}
		f.Since = t
	}
	limit, err := pageLimit(q.Get("limit"), f.Limit)
	if err != nil {
		return reply{}, err
	}
	f.Limit = limit
	if v := q.Get("pageToken"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return reply{}, invalid("pageToken", "is not a token this server issued")
		}
		f.AfterID = n
	}
	es, err := s.opts.Store.Audit(c.r.Context(), f)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.AuditEntry]{Items: make([]api.AuditEntry, 0, len(es))}
	for _, e := range es {
		out.Items = append(out.Items, api.AuditEntry{ID: e.ID, Time: e.Time, User: e.User, Role: e.Role, Action: e.Action,
			Method: e.Method, Path: e.Path, Object: e.Object, Team: e.Team, Status: e.Status, Message: e.Message})
	}
	if len(es) == f.Limit {
		out.NextPageToken = strconv.FormatInt(es[len(es)-1].ID, 10)
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// pageLimit reads ?limit=: from 1 to MaxPageSize, def when absent.
func pageLimit(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxPageSize {
		return 0, invalid("limit", "must be a number from 1 to %d", MaxPageSize)
	}
	return n, nil
}

// page cuts one page from a list the store returns whole (users, members,
// tokens: short lists), by ?limit= and ?pageToken= (an offset).
func page[T any](c *call, items []T) (api.List[T], error) {
	q := c.r.URL.Query()
	limit, err := pageLimit(q.Get("limit"), 500)
	if err != nil {
		return api.List[T]{}, err
	}
	from := 0
	if v := q.Get("pageToken"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return api.List[T]{}, invalid("pageToken", "is not a token this server issued")
		}
		from = min(n, len(items))
	}
	to := min(from+limit, len(items))
	out := api.List[T]{Items: append(make([]T, 0, to-from), items[from:to]...)}
	if to < len(items) {
		out.NextPageToken = strconv.Itoa(to)
	}
	return out, nil
}
