package apiserver

import (
	"context"
	"net/http"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// leadership says who leads: the lease's holder and its expiry. A SQLite
// store has one server, which leads from its start, with no lease.
func (s *Server) leadership(ctx context.Context) (holder string, expires *time.Time, token int64, err error) {
	if !s.opts.Store.Postgres() {
		return s.opts.ServerName, nil, 0, nil
	}
	l, err := s.opts.Store.LeaseNow(ctx)
	if err != nil || !l.Held() {
		return "", nil, 0, err
	}
	t := l.ExpiresAt
	return l.Holder, &t, l.Token, nil
}

// servers lists the servers sharing the store and which one leads: for
// admins (addresses and process IDs are the operators' business).
func (s *Server) servers(c *call) (reply, error) {
	ctx := c.r.Context()
	list, err := s.opts.Store.Servers(ctx)
	if err != nil {
		return reply{}, err
	}
	holder, expires, token, err := s.leadership(ctx)
	if err != nil {
		return reply{}, err
	}
	out := make([]api.Server, 0, len(list))
	for _, sv := range list {
		a := api.Server{Name: sv.Name, Addr: sv.Addr, PID: sv.PID, StartedAt: sv.StartedAt, LastSeen: sv.LastSeen, Leader: sv.Name == holder}
		if a.Leader {
			a.LeaseExpiresAt, a.LeaseToken = expires, token
		}
		out = append(out, a)
	}
	return reply{status: http.StatusOK, body: api.List[api.Server]{Items: out}}, nil
}

// readiness is what GET /readyz answers once the store reads and writes.
func (s *Server) readiness(ctx context.Context) (api.Readiness, error) {
	holder, expires, token, err := s.leadership(ctx)
	if err != nil {
		return api.Readiness{}, err
	}
	return api.Readiness{Status: "ready", Server: s.opts.ServerName, Leader: holder != "" && holder == s.opts.ServerName,
		LeaderName: holder, LeaseExpiresAt: expires, LeaseToken: token}, nil
}
