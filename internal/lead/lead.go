package lead

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/store"
)

// DefaultTTL is the lease's length: a follower takes over within it.
const DefaultTTL = 10 * time.Second

// Options configure an Elector.
type Options struct {
	Store *store.Store
	// Name is this server's (the lease's holder, unique among those
	// sharing the store); Addr and PID are what the servers list shows.
	Name string
	Addr string
	PID  int
	TTL  time.Duration // DefaultTTL when 0
	// OnChange, when set, hears of each change of leadership of this
	// server (metrics).
	OnChange func(leader bool, token int64)
	Logger   *slog.Logger
}

// Elector campaigns for the lease and runs the leader's work while it holds
// it. Token implements store.Fence.
type Elector struct {
	opts    Options
	started time.Time

	mu         sync.Mutex
	token      int64     // of the lease held, 0 when none
	validUntil time.Time // by this process's monotonic clock
}

// New makes an elector; Run starts it.
func New(opts Options) *Elector {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{opts: opts, started: time.Now()}
}

// Token is the fencing token of the lease this server holds, or 0 when it
// holds none or its own clock says the lease may have run out.
func (e *Elector) Token() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token == 0 || !time.Now().Before(e.validUntil) {
		return 0
	}
	return e.token
}

// Leader reports whether this server leads now.
func (e *Elector) Leader() bool { return e.Token() > 0 }

// grant is what each acquisition or renewal writes into the lease row: two
// thirds of TTL, renewed every quarter of it. A leader that dies leaves a
// lease that runs out at most two thirds of TTL later, and a follower,
// which campaigns again right when it runs out, leads within TTL of the
// death; a live leader survives one failed renewal.
func (e *Elector) grant() time.Duration { return e.opts.TTL * 2 / 3 }

func (e *Elector) set(token int64, asked time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.token = token
	e.validUntil = asked.Add(e.grant() - e.grant()/10)
}

func (e *Elector) clear() {
	e.mu.Lock()
	e.token = 0
	e.mu.Unlock()
}

// Run campaigns until ctx ends, running lead(ctx) for each term this server
// wins; lead must return once its ctx is cancelled. The work's ctx carries
// the term's token as the store's fence (termFence). At the end a lease
// still held is resigned, so that another server takes over at once.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) {
	go e.heartbeat(ctx)
	log := e.opts.Logger
	for ctx.Err() == nil {
		asked := time.Now()
		l, won, err := e.opts.Store.Campaign(ctx, e.opts.Name, e.grant())
		if err != nil || !won {
			wait := e.opts.TTL / 5
			if err != nil {
				if ctx.Err() == nil {
					log.Warn("campaign for the leader lease", "err", err)
				}
			} else if left := l.ExpiresAt.Sub(l.Now) + 20*time.Millisecond; left < wait {
				// Campaign again just after the lease runs out, by
				// the database's clock: a dead leader is replaced
				// within the lease's length.
				wait = max(left, 20*time.Millisecond)
			}
			sleep(ctx, wait)
			continue
		}
		e.set(l.Token, asked)
		log.Info("leading", "token", l.Token, "lease_expires", l.ExpiresAt)
		if e.opts.OnChange != nil {
			e.opts.OnChange(true, l.Token)
		}
		e.term(ctx, l.Token, lead)
		e.clear()
		if e.opts.OnChange != nil {
			e.opts.OnChange(false, l.Token)
		}
		if ctx.Err() != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := e.opts.Store.Resign(rctx, e.opts.Name, l.Token); err != nil {
				log.Warn("resign the leader lease", "err", err)
			}
			cancel()
			return
		}
		log.Warn("no longer leading", "token", l.Token)
	}
}

// term runs one term: the work, and the renewals until one fails.
func (e *Elector) term(ctx context.Context, token int64, lead func(context.Context)) {
	wctx, cancel := context.WithCancel(store.WithFence(ctx, termFence{e, token}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(wctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	tick := time.NewTicker(e.opts.TTL / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			// The work ended by itself (it failed): give the lease
			// up for another server rather than lead doing nothing.
			e.opts.Logger.Error("the leader's work stopped; stepping down")
			e.clear()
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			e.opts.Store.Resign(rctx, e.opts.Name, token)
			rcancel()
			sleep(ctx, e.opts.TTL)
			return
		case <-tick.C:
		}
		if e.Token() != token {
			// Woken past the lease (paused, starved): step down
			// without a word to the database.
			e.opts.Logger.Warn("the leader lease ran out by this server's clock", "token", token)
			return
		}
		asked := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, e.opts.TTL/4)
		_, err := e.opts.Store.Renew(rctx, e.opts.Name, token, e.grant())
		rcancel()
		switch {
		case err == nil:
			e.set(token, asked)
		case errors.Is(err, store.ErrFenced):
			e.opts.Logger.Warn("the leader lease was lost", "err", err)
			e.clear()
			return
		default:
			// The database did not answer: keep the lease by this
			// clock until it runs out, trying again.
			e.opts.Logger.Warn("renew the leader lease", "err", err)
		}
	}
}

// termFence is one term's fence: its token while the elector still holds
// it, else 0. A write made with the context of an ended term (work that
// outlived it) is refused even when this server leads again, under a newer
// token.
type termFence struct {
	e     *Elector
	token int64
}

func (f termFence) Token() int64 {
	if f.e.Token() != f.token {
		return 0
	}
	return f.token
}

// heartbeat says every TTL/5 that this server is there (the servers list).
func (e *Elector) heartbeat(ctx context.Context) {
	Heartbeat(ctx, e.opts.Store, store.Server{Name: e.opts.Name, Addr: e.opts.Addr, PID: e.opts.PID, StartedAt: e.started}, e.opts.TTL/5, e.opts.Logger)
}

// Heartbeat records sv in the store's servers every interval until ctx
// ends: the list GET /servers shows. A server with no elector (a SQLite
// store, which one server owns) calls it itself.
func Heartbeat(ctx context.Context, st *store.Store, sv store.Server, every time.Duration, log *slog.Logger) {
	for {
		if err := st.PutServer(ctx, sv); err != nil && ctx.Err() == nil && log != nil {
			log.Debug("heartbeat", "err", err)
		}
		if !sleep(ctx, every) {
			return
		}
	}
}

// SetOnChange sets Options.OnChange; call it before Run.
func (e *Elector) SetOnChange(f func(leader bool, token int64)) { e.opts.OnChange = f }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
