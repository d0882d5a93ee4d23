package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/internal/burst"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/control"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/qualify"
	"github.com/gpufleet/gpufleet/internal/store"
)

// runLeader runs the control loop and, beside it, what writes with it (the
// monitor, the local node's heartbeat, the node lifecycle, readiness
// probes, volumes, elastic pools, the release of idle burst nodes,
// checkpoint sweeps, the kernel log's Xid errors, the admission of each
// Kubernetes cluster's native pods) until ctx ends or the
// loop fails; it returns once they have all stopped, so that a deposed
// leader's term is over when it returns.
func runLeader(ctx context.Context, loop *control.Loop, p *platform) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	cfg, st, log, reported := p.cfg, p.st, p.log, p.xs.reported
	if p.obs.monitor != nil {
		wg.Go(func() { p.obs.monitor.Run(ctx) })
	}
	if reported != nil {
		wg.Go(func() { heartbeat(ctx, st, *reported, heartbeatInterval(cfg), log.With("component", "nodes")) })
	}
	wg.Go(func() { p.lifecycle.Run(ctx) })
	if eps := endpoints(cfg, p.ex); eps != nil {
		prober := &control.Prober{Store: st, Endpoints: eps, Logger: log.With("component", "readiness")}
		wg.Go(func() { prober.Run(ctx) })
	}
	if p.vr != nil {
		wg.Go(func() { p.vr.Run(ctx) })
	}
	if el := p.xs.elastic(cfg, st, log); el != nil {
		wg.Go(func() { el.Run(ctx) })
	}
	if slices.ContainsFunc(cfg.Pools(), func(pl config.Pool) bool { return pl.Kind == core.PoolBurst }) || releasedBefore(ctx, st) {
		rel := burst.NewReleaser(st, burst.ReleaseOptions{After: cfg.Burst.IdleRelease.Duration, Policy: burstPolicy(cfg),
			User: SystemUser, Logger: log.With("component", "release")})
		wg.Go(func() { rel.Run(ctx) })
	}
	if sw := p.xs.sweeper(); sw != nil && cfg.Local.Retention() > 0 {
		wg.Go(func() {
			sweepCheckpoints(ctx, st, sw, cfg.Local.Retention(), min(time.Hour, cfg.Local.Retention()), log.With("component", "checkpoints"))
		})
	}
	if reported != nil && len(reported.GPUs) > 0 && !reported.GPUs[0].Simulated {
		// Xid errors of this machine's GPUs, from the kernel log.
		if kmsg, err := qualify.OpenKernelLog(); err != nil {
			log.Warn("cannot read the kernel log: Xid errors of this node's GPUs go unseen", "path", qualify.KernelLog, "err", err)
		} else {
			context.AfterFunc(ctx, func() { kmsg.Close() })
			wg.Go(func() { p.lifecycle.WatchKernelLog(ctx, kmsg, reported.Name, reported.GPUs) })
		}
	}
	if p.runs != nil && st.Postgres() {
		// The acceptance runs of a server that died (and did not come
		// back, whose start would end them) end as Error.
		wg.Go(func() {
			for sleepCtx(ctx, time.Minute) {
				if err := p.runs.Sweep(ctx, false); err != nil && ctx.Err() == nil {
					log.Warn("sweep the acceptance runs of stopped servers", "err", err)
				}
			}
		})
	}
	for i, kex := range p.xs.kubes {
		if cfg.Kubernetes.Native.Scheduler() == "" {
			break
		}
		na := &control.NativeAdmission{Store: st, Source: kex, Cluster: p.xs.kubeNames[i], Classes: p.classes,
			Logger: log.With("component", "native", "cluster", p.xs.kubeNames[i])}
		wg.Go(func() { na.Run(ctx) })
	}
	return loop.Run(ctx)
}

// aliveServers are the servers sharing st seen within three leases.
func aliveServers(ctx context.Context, st *store.Store, ttl time.Duration) (map[string]bool, error) {
	list, err := st.Servers(ctx)
	if err != nil {
		return nil, err
	}
	l, err := st.LeaseNow(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, sv := range list {
		if l.Now.Sub(sv.LastSeen) < 3*ttl {
			out[sv.Name] = true
		}
	}
	return out, nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// serverName is this server's default name among those sharing a store:
// the host's name and the port it listens on (several servers may run on
// one host).
func serverName(addr net.Addr) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gpufleet"
	}
	if ta, ok := addr.(*net.TCPAddr); ok {
		return net.JoinHostPort(host, strconv.Itoa(ta.Port))
	}
	return host
}

// loopbackOnly refuses an address to listen on that is not a loopback
// one (127.0.0.1:6060, [::1]:6060, localhost:6060): ":6060" or a public
// address would serve what needs no token to the whole network.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address: Go's profiles need no token, so they are served on 127.0.0.1, [::1] or localhost only", addr)
}

// servePprof serves Go's profiles (net/http/pprof) on addr, from
// $GPUFLEET_PPROF_ADDR: off unless set, and on a loopback address only
// (loopbackOnly: the profiles need no token). For measuring, as the
// throughput benchmark does.
func servePprof(ctx context.Context, addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	context.AfterFunc(ctx, func() { hs.Close() })
	log.Warn("serving Go profiles without authentication", "addr", addr)
	if err := hs.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("pprof", "err", err)
	}
}

// releasedBefore reports whether the store holds nodes the Releaser
// released: with no burst pool configured any more, it still runs, to take
// them back (their pool is no longer a burst pool). Only the Releaser
// releases, so a term that starts without such nodes and without burst
// pools never needs it.
func releasedBefore(ctx context.Context, st *store.Store) bool {
	statuses, err := st.NodeStatuses(ctx)
	if err != nil {
		return true // let the Releaser read them again, and say what fails
	}
	for _, s := range statuses {
		if s.Reason == burst.ReasonIdleReleased {
			return true
		}
	}
	return false
}
