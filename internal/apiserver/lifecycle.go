package apiserver

import (
	"errors"
	"net/http"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/qualify"
)

// lifecycleOff is the answer of the node lifecycle routes on a server
// without one.
var lifecycleOff = &refusal{msg: "this server runs no node lifecycle", kind: core.ErrUnavailable}

// nodeAction runs an operator's transition of a node and answers the node.
func (s *Server) nodeAction(c *call, act func(name core.NodeName, by string) error) (reply, error) {
	if s.opts.Lifecycle == nil {
		return reply{}, lifecycleOff
	}
	name := c.r.PathValue("name")
	c.setObject(name)
	err := act(core.NodeName(name), c.u.Name)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return reply{}, notFound("node", name)
	case err != nil:
		return reply{}, err
	}
	return s.nodes(c)
}

func (s *Server) cordonNode(c *call) (reply, error) {
	return s.nodeAction(c, func(name core.NodeName, by string) error {
		_, err := s.opts.Lifecycle.Cordon(c.r.Context(), name, by)
		return err
	})
}

func (s *Server) uncordonNode(c *call) (reply, error) {
	return s.nodeAction(c, func(name core.NodeName, by string) error {
		_, err := s.opts.Lifecycle.Uncordon(c.r.Context(), name, by)
		return err
	})
}

func (s *Server) drainNode(c *call) (reply, error) {
	var in api.Drain
	if c.r.ContentLength != 0 {
		if err := decode(c.r, &in); err != nil {
			return reply{}, err
		}
	}
	var grace time.Duration
	if in.Grace != "" {
		d, err := time.ParseDuration(in.Grace)
		if err != nil || d < 0 || d > 24*time.Hour {
			return reply{}, invalid("grace", "%q: want a duration from 0s to 24h, such as 5m", in.Grace)
		}
		grace = d
	}
	return s.nodeAction(c, func(name core.NodeName, by string) error {
		_, err := s.opts.Lifecycle.Drain(c.r.Context(), name, grace, by)
		return err
	})
}

func (s *Server) validateNode(c *call) (reply, error) {
	in := api.Validate{Level: 1}
	if c.r.ContentLength != 0 {
		if err := decode(c.r, &in); err != nil {
			return reply{}, err
		}
	}
	if in.Level < 1 || in.Level > 3 {
		return reply{}, invalid("level", "%d: want 1 (seconds), 2 (about 2 minutes) or 3 (about 15 minutes)", in.Level)
	}
	if len(in.GPUs) > 64 {
		return reply{}, invalid("gpus", "at most 64 devices")
	}
	return s.nodeAction(c, func(name core.NodeName, by string) error {
		_, err := s.opts.Lifecycle.Validate(c.r.Context(), name, in.Level, in.GPUs, in.Drain, by, "asked by "+by)
		return err
	})
}

func (s *Server) injectFault(c *call) (reply, error) {
	var in api.Fault
	if err := decode(c.r, &in); err != nil {
		return reply{}, err
	}
	f := qualify.Fault{GPU: in.GPU, Diag: in.Diag, Xid: in.Xid}
	switch in.Heartbeat {
	case "":
	case "lost":
		f.HeartbeatLost = true
	default:
		return reply{}, invalid("heartbeat", "%q: the one heartbeat fault is \"lost\"", in.Heartbeat)
	}
	n := 0
	for _, set := range []bool{in.Diag != "", in.Xid != 0, f.HeartbeatLost} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		return reply{}, invalid("diag", "give one fault: diag (a test name), xid or heartbeat")
	case in.Xid < 0 || in.Xid > 1000:
		return reply{}, invalid("xid", "%d: want an Xid code from 1 to 1000", in.Xid)
	case len(in.Diag) > 64:
		return reply{}, invalid("diag", "a test name of at most 64 characters")
	case !f.HeartbeatLost && in.GPU == nil:
		return reply{}, invalid("gpu", "a diagnostic or Xid fault names a GPU")
	}
	return s.nodeAction(c, func(name core.NodeName, by string) error {
		return s.opts.Lifecycle.InjectFault(c.r.Context(), name, f, by)
	})
}

// nodeEvents answers a node's events, for every caller (they name no
// workload).
func (s *Server) nodeEvents(c *call) (reply, error) {
	name := core.NodeName(c.r.PathValue("name"))
	if err := s.nodeExists(c, name); err != nil {
		return reply{}, err
	}
	evs, err := s.opts.Store.NodeEvents(c.r.Context(), name)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.NodeEvent]{Items: []api.NodeEvent{}}
	for _, e := range evs {
		ae := api.NodeEvent{Time: e.Time.UTC(), Type: e.Type, Reason: e.Reason, Message: e.Message, From: string(e.From), To: string(e.To), By: e.By}
		if e.GPU >= 0 {
			g := e.GPU
			ae.GPU = &g
		}
		out.Items = append(out.Items, ae)
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// nodeEvidence answers a node's qualification evidence, raw outputs
// included.
func (s *Server) nodeEvidence(c *call) (reply, error) {
	name := core.NodeName(c.r.PathValue("name"))
	if err := s.nodeExists(c, name); err != nil {
		return reply{}, err
	}
	evs, err := s.opts.Store.Evidence(c.r.Context(), name)
	if err != nil {
		return reply{}, err
	}
	out := api.List[api.Evidence]{Items: []api.Evidence{}}
	for _, e := range evs {
		out.Items = append(out.Items, evidenceOut(e))
	}
	return reply{status: http.StatusOK, body: out}, nil
}

// evidenceOut is a node's stored qualification evidence on the wire.
func evidenceOut(e core.Evidence) api.Evidence {
	return api.Evidence{Node: string(e.Node), Run: e.Run, Check: e.Check, GPUs: e.GPUs, Command: e.Argv, ExitCode: e.Exit,
		Stdout: e.Stdout, Stderr: e.Stderr, Error: e.Err, StartedAt: e.StartedAt.UTC(), DurationMs: e.DurationMs, Result: e.Result,
		Message: e.Message, Simulated: e.Simulated, DriverVersion: e.DriverVersion, DCGMVersion: e.DCGMVersion}
}

func (s *Server) nodeExists(c *call, name core.NodeName) error {
	nodes, err := s.opts.Store.Nodes(c.r.Context())
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.Name == name {
			return nil
		}
	}
	return notFound("node", string(name))
}
