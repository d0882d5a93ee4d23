package api

import (
	"context"
	"net/http"
	"net/url"
)

func nodePath(name string) string { return "/nodes/" + url.PathEscape(name) }

// Node reads one node, with its state and each GPU's health.
func (c *Client) Node(ctx context.Context, name string) (*Node, error) {
	var out Node
	return &out, c.do(ctx, http.MethodGet, nodePath(name), nil, nil, &out)
}

// NodeEvents reads a node's events (its state changes and its devices'
// health), oldest first.
func (c *Client) NodeEvents(ctx context.Context, name string) ([]NodeEvent, error) {
	var out List[NodeEvent]
	return out.Items, c.do(ctx, http.MethodGet, nodePath(name)+"/events", nil, nil, &out)
}

// NodeEvidence reads a node's qualification evidence, raw outputs included.
func (c *Client) NodeEvidence(ctx context.Context, name string) (*List[Evidence], error) {
	var out List[Evidence]
	return &out, c.do(ctx, http.MethodGet, nodePath(name)+"/evidence", nil, nil, &out)
}

// CordonNode stops new work from landing on a node (admins); what runs
// there stays. It returns the node as it then stands.
func (c *Client) CordonNode(ctx context.Context, name string) (*Node, error) {
	var out Node
	return &out, c.do(ctx, http.MethodPost, nodePath(name)+"/cordon", nil, nil, &out)
}

// UncordonNode returns a cordoned or draining node to service (admins).
func (c *Client) UncordonNode(ctx context.Context, name string) (*Node, error) {
	var out Node
	return &out, c.do(ctx, http.MethodPost, nodePath(name)+"/uncordon", nil, nil, &out)
}

// DrainNode cordons a node and stops its running work, which is requeued
// (admins). The node is Draining until that work has stopped, then
// Cordoned.
func (c *Client) DrainNode(ctx context.Context, name string, d *Drain) (*Node, error) {
	if d == nil {
		d = &Drain{}
	}
	var out Node
	return &out, c.do(ctx, http.MethodPost, nodePath(name)+"/drain", nil, d, &out)
}

// ValidateNode asks for a qualification of a node (admins); it runs once
// the devices under test are free.
func (c *Client) ValidateNode(ctx context.Context, name string, v *Validate) (*Node, error) {
	var out Node
	return &out, c.do(ctx, http.MethodPost, nodePath(name)+"/validate", nil, v, &out)
}

// InjectFault injects a fault on a simulated node (admins); a real node is
// refused (403).
func (c *Client) InjectFault(ctx context.Context, name string, f *Fault) (*Node, error) {
	var out Node
	return &out, c.do(ctx, http.MethodPost, nodePath(name)+"/faults", nil, f, &out)
}
