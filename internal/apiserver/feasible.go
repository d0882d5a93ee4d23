package apiserver

import (
	"context"
	"sync"
	"time"

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

// admissionNodes are the registered nodes a submission must fit one of
// (core.Admission.Nodes), read at most every fleetTTL. It fails open:
// without nodes, or when they cannot be read, nil, and the request is
// accepted and the scheduler explains.
func (s *Server) admissionNodes(ctx context.Context) []*core.Node {
	f := &s.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.at) <= fleetTTL {
		return f.nodes
	}
	ns, err := s.opts.Store.Nodes(ctx)
	if err != nil {
		return nil
	}
	nodes := make([]*core.Node, len(ns))
	for i := range ns {
		nodes[i] = &ns[i]
	}
	f.nodes, f.at = nodes, time.Now()
	return nodes
}
