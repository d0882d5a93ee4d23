package apiserver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// fleetTTL is how long the nodes read for the feasibility check at
// submission are reused: nodes change rarely, and a submission should not
// cost a read of every node.
const fleetTTL = 2 * time.Second

// fleetCache keeps the registered nodes for the feasibility check.
type fleetCache struct {
	mu    sync.Mutex
	at    time.Time // wall clock of the read
	nodes []*core.Node
}

// infeasible refuses, as a 400 naming the field, a request that no
// registered node could ever hold, even empty (core.Feasible). It fails
// open: without nodes, or when they cannot be read, the request is
// accepted and the scheduler explains.
func (s *Server) infeasible(ctx context.Context, req core.Request) *api.FieldError {
	f := &s.fleet
	f.mu.Lock()
	nodes := f.nodes
	if time.Since(f.at) > fleetTTL {
		f.mu.Unlock()
		ns, err := s.opts.Store.Nodes(ctx)
		if err != nil {
			return nil
		}
		nodes = make([]*core.Node, len(ns))
		for i := range ns {
			nodes[i] = &ns[i]
		}
		f.mu.Lock()
		f.nodes, f.at = nodes, time.Now()
	}
	f.mu.Unlock()
	var e *core.Infeasible
	if err := core.Feasible(nodes, req); errors.As(err, &e) {
		return &api.FieldError{Field: e.Field, Problem: "can never run as asked: " + e.Problem}
	}
	return nil
}
