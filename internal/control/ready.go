package control

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// Endpoints says where a workload's attempt serves a declared port (the
// local executor's Endpoint).
type Endpoints interface {
	Endpoint(id core.WorkloadID, attempt, port int) (string, bool)
}

// Prober checks the readiness of running workloads that declare a
// readyPath: an HTTP GET of it on their first port, every Interval; a 2xx
// answer makes the workload Ready (the proxy sends it traffic only then),
// anything else, or no answer within Timeout, not Ready.
type Prober struct {
	Store     *store.Store
	Endpoints Endpoints
	Interval  time.Duration // default 2 s
	Timeout   time.Duration // default 2 s
	Logger    *slog.Logger
	client    *http.Client
}

// Run probes until ctx ends.
func (p *Prober) Run(ctx context.Context) {
	if p.Interval <= 0 {
		p.Interval = 2 * time.Second
	}
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		p.Step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Step probes each running workload with a readyPath once.
func (p *Prober) Step(ctx context.Context) {
	if p.Timeout <= 0 {
		p.Timeout = 2 * time.Second
	}
	if p.client == nil {
		// No redirects followed, no proxy, no keep-alive between probes
		// of untrusted servers.
		tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
		if d, ok := p.Endpoints.(interface {
			DialContext(context.Context, string, string) (net.Conn, error)
		}); ok {
			// The executor's way to its workloads' addresses (from inside
			// their network namespaces), as the proxy reaches them.
			tr.DialContext = d.DialContext
		}
		p.client = &http.Client{Timeout: p.Timeout, Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	snap, err := p.Store.Snapshot(ctx)
	if err != nil {
		return
	}
	for _, w := range snap.Running {
		if w.ReadyPath == "" || len(w.Ports) == 0 || w.Status.StopRequested != "" {
			continue
		}
		ready, msg := p.probe(ctx, w)
		if err := p.Store.SetReady(ctx, w.ID, w.Status.Attempts, ready, msg, time.Now()); err != nil && p.Logger != nil {
			p.Logger.Warn("record readiness", "workload", w.ID, "err", err)
		}
	}
}

func (p *Prober) probe(ctx context.Context, w *core.Workload) (bool, string) {
	port := w.Ports[0].Port
	addr, ok := p.Endpoints.Endpoint(w.ID, w.Status.Attempts, port)
	if !ok {
		return false, fmt.Sprintf("port %d is not served yet", port)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+w.ReadyPath, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false, fmt.Sprintf("GET %s on port %d: no answer", w.ReadyPath, port)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return false, fmt.Sprintf("GET %s on port %d answered %d", w.ReadyPath, port, resp.StatusCode)
	}
	return true, fmt.Sprintf("GET %s on port %d answered %d", w.ReadyPath, port, resp.StatusCode)
}
