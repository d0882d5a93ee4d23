package sched

import (
	"github.com/gpufleet/gpufleet/internal/core"
)

// Packer places requests one at a time on a fixed set of nodes, with no
// departures, no queue and no quotas: the packing experiment of the FGD
// paper, which gpufleet sim packing runs. It chooses with the same code as
// the scheduler's cycle (feasibility, device choice, the policy's score),
// and keeps its node states from one request to the next instead of
// rebuilding them from a snapshot, which is what makes a run of ten
// thousand requests take seconds.
type Packer struct {
	nodes   []*nodeState
	mix     *Mix
	sc      scorer
	reserve bool // fractions take whole devices
}

// NewPacker returns a packer over empty nodes with the named policy (see
// Policies); seed drives the random policy.
func NewPacker(nodes []core.Node, policy string, seed uint64) (*Packer, error) {
	p := &Packer{mix: NewMix(policy != PackFGD), reserve: policy == PackReservation}
	p.mix.SetHosts(nodes)
	sc, err := newScorer(policy, p.mix, seed)
	if err != nil {
		return nil, err
	}
	p.sc = sc
	for i := range nodes {
		ns := newNodeState(&nodes[i], nil)
		ns.pos = i
		p.nodes = append(p.nodes, ns)
	}
	setNodes(sc, p.nodes)
	return p, nil
}

// Observe counts a request in the mix the policy weighs placements
// against: the simulator shows the policy each request as it arrives, as
// the scheduler sees each submitted workload.
func (p *Packer) Observe(req core.Request) { p.mix.Add(p.ask(req), 1) }

// ask is the request as placed: under the reservation baseline a fraction
// takes a whole device.
func (p *Packer) ask(req core.Request) core.Request {
	if p.reserve && req.Fractional() {
		req.MilliGPU, req.GPUMemoryMiB = 1000, 0
	}
	return req
}

// Place puts req where the policy likes best and returns the node's index
// and the devices taken; ok is false when it fits nowhere. Gangs are not
// supported (Replicas is ignored).
func (p *Packer) Place(req core.Request) (node int, as []core.Assignment, ok bool) {
	req = p.ask(req)
	req.Replicas = 0
	var best choice
	if pr, ok := p.sc.(preparer); ok {
		pr.prepare()
	}
	for _, ns := range p.nodes {
		ch, why := onNodeWith(ns, req, p.sc)
		if why == "" && (best.ns == nil || ch.score < best.score) {
			best = ch
		}
	}
	if best.ns == nil {
		return -1, nil, false
	}
	as = assignments(best, req)
	if len(as) > 0 {
		best.ns.add(req, as, +1)
	} else { // host resources only
		best.ns.cpu += req.MilliCPU
		best.ns.mem += req.MemoryMiB
		best.ns.version++
	}
	return best.ns.pos, as, true
}

// NodeView is what is allocated on one node of a Packer.
type NodeView struct {
	Node *core.Node
	// Used is what is allocated on each device, by position in Node.GPUs.
	Used      []core.GPUUse
	MilliCPU  int64
	MemoryMiB int64
}

// Node returns what is allocated on node i; the view shares the packer's
// memory and is valid until the next Place.
func (p *Packer) Node(i int) NodeView {
	ns := p.nodes[i]
	return NodeView{Node: ns.node, Used: ns.used, MilliCPU: ns.cpu, MemoryMiB: ns.mem}
}

// Len is the number of nodes.
func (p *Packer) Len() int { return len(p.nodes) }
