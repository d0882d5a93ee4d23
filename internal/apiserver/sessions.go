package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Sessions. A request that lasts (a followed log, a port-forward tunnel, a
// proxied exchange with a workload: a WebSocket, a streamed answer) is
// authorized when it begins, as every request is, and again for as long
// as it lasts: run registers each streaming route's request as a session
// (by which token, needing which role in which team: c.authorize records
// it), and a watcher reads the sessions' tokens and users from the store
// again every SessionRecheck, and at once when this server changes a
// token, a user or a team (store.AccessChanged). It reads past the store's
// cache of token lookups, so that a token revoked on another server
// sharing a PostgreSQL store is seen at the next recheck. A session whose
// token was revoked or has expired, whose user was deleted, or whose user
// lost the role it needs, has its context ended with a sessionEnded
// cause; its handler says why where its protocol can (closeLine, a
// WebSocket close frame) and closes.

// SessionRecheck is how often open sessions are authorized again.
const SessionRecheck = 2 * time.Second

// closeGrace bounds the last writes of an ended session (the line or frame
// that says why) to a client that does not read.
const closeGrace = time.Second

// sessionEnded is the cause of an ended session's context: why it may not
// go on.
type sessionEnded struct{ reason string }

func (e *sessionEnded) Error() string { return "stream closed: " + e.reason }

// endedWhy returns why ctx's session was ended, or "" when it was not (it
// goes on, or its client left).
func endedWhy(ctx context.Context) string {
	var e *sessionEnded
	if errors.As(context.Cause(ctx), &e) {
		return e.reason
	}
	return ""
}

// closeLine is the last line of a text stream (a followed log) whose
// session ended, saying why.
func closeLine(reason string) string {
	return "--- gpufleet: stream closed: " + reason + " ---\n"
}

// teamNeed is a role a session needs in a team.
type teamNeed struct {
	team core.TeamName
	need core.Role
}

// session is one open streaming request.
type session struct {
	hash string // its token's
	user string
	what string // its method and path, for the log
	// admin: the route is for admins (or, with scrape, metrics readers).
	admin, scrape bool
	cancel        context.CancelCauseFunc

	mu    sync.Mutex
	needs []teamNeed // what c.authorize checked
}

// need records a role the session's handler authorized.
func (s *session) need(team core.TeamName, role core.Role) {
	s.mu.Lock()
	s.needs = append(s.needs, teamNeed{team, role})
	s.mu.Unlock()
}

// denied says why the session may not go on, given its token and user as
// the store has them now (found false: the token is gone, deleted with its
// user), or "" while it may.
func (s *session) denied(h store.TokenHolder, found bool, now time.Time) string {
	switch {
	case !found:
		return fmt.Sprintf("the user %s was deleted", s.user)
	case h.Token.RevokedAt != nil:
		return "the token was revoked"
	case h.Token.ExpiresAt != nil && !h.Token.ExpiresAt.After(now):
		return "the token expired"
	}
	u := h.User
	if s.admin && !u.Admin && !(s.scrape && u.MetricsReader) {
		return fmt.Sprintf("%s is no longer an admin", u.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tn := range s.needs {
		if u.Can(tn.team, tn.need) {
			continue
		}
		if r, in := u.Role(tn.team); in {
			return fmt.Sprintf("%s is now a %s of team %s; this needs the %s role", u.Name, r, tn.team, tn.need)
		}
		return fmt.Sprintf("%s is no longer in team %s", u.Name, tn.team)
	}
	return ""
}

// sessions is the watcher of open sessions. Its goroutine runs while any
// is open.
type sessions struct {
	st  *store.Store
	now func() time.Time
	log *slog.Logger

	mu       sync.Mutex
	open     map[*session]struct{}
	watching bool
}

// begin registers c's request, by the token of hash, as a session, and
// returns the context its handler runs under (ended, with a sessionEnded
// cause, when its rights are lost) and the function that ends it.
func (ss *sessions) begin(ctx context.Context, c *call, hash string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &session{hash: hash, user: c.u.Name, what: c.r.Method + " " + c.r.URL.Path,
		admin: c.rt.access == adminOnly, scrape: c.rt.scrape, cancel: cancel}
	c.session = s
	ss.mu.Lock()
	if ss.open == nil {
		ss.open = map[*session]struct{}{}
	}
	ss.open[s] = struct{}{}
	if !ss.watching {
		ss.watching = true
		go ss.watch()
	}
	ss.mu.Unlock()
	return ctx, func() {
		ss.mu.Lock()
		delete(ss.open, s)
		ss.mu.Unlock()
		cancel(nil)
	}
}

// watch rechecks the open sessions every SessionRecheck and after each of
// this store's changes of access, until none is open.
func (ss *sessions) watch() {
	tick := time.NewTicker(SessionRecheck)
	defer tick.Stop()
	for {
		changed := ss.st.AccessChanged()
		ss.recheck()
		ss.mu.Lock()
		if len(ss.open) == 0 {
			ss.watching = false
			ss.mu.Unlock()
			return
		}
		ss.mu.Unlock()
		select {
		case <-tick.C:
		case <-changed:
		}
	}
}

// recheck authorizes every open session again and ends those that may not
// go on. While the store cannot be read, sessions go on (as a request
// authenticated from the cache would) and are rechecked at the next tick.
func (ss *sessions) recheck() {
	ss.mu.Lock()
	byHash := map[string][]*session{}
	for s := range ss.open {
		byHash[s.hash] = append(byHash[s.hash], s)
	}
	ss.mu.Unlock()
	if len(byHash) == 0 {
		return
	}
	hashes := make([]string, 0, len(byHash))
	for h := range byHash {
		hashes = append(hashes, h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), SessionRecheck)
	defer cancel()
	holders, err := ss.st.TokenHolders(ctx, hashes)
	if err != nil {
		ss.log.Warn("open sessions cannot be authorized again now", "sessions", len(byHash), "err", err)
		return
	}
	now := ss.now()
	for h, list := range byHash {
		holder, found := holders[h]
		for _, s := range list {
			if why := s.denied(holder, found, now); why != "" {
				ss.log.Info("stream closed: its rights were lost", "user", s.user, "request", s.what, "reason", why)
				s.cancel(&sessionEnded{reason: why})
			}
		}
	}
}
