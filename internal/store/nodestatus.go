package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// NodeStatus returns the platform's status of a node; ok is false for a
// node without one (Ready, see core.Node.Apply).
func (s *Store) NodeStatus(ctx context.Context, name core.NodeName) (st core.NodeStatus, ok bool, err error) {
	var b []byte
	err = s.read.QueryRowContext(ctx, "SELECT status FROM node_status WHERE name = ?", string(name)).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return core.NodeStatus{State: core.NodeReady}, false, nil
	}
	if err != nil {
		return st, false, err
	}
	return st, true, json.Unmarshal(b, &st)
}

// NodeStatuses returns every status kept, by node.
func (s *Store) NodeStatuses(ctx context.Context) (map[core.NodeName]core.NodeStatus, error) {
	rows, err := s.read.QueryContext(ctx, "SELECT name, status FROM node_status")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[core.NodeName]core.NodeStatus{}
	for rows.Next() {
		var name string
		var b []byte
		if err := rows.Scan(&name, &b); err != nil {
			return nil, err
		}
		var st core.NodeStatus
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, err
		}
		out[core.NodeName(name)] = st
	}
	return out, rows.Err()
}

// UpdateNodeStatus changes a node's status in one transaction: fn gets the
// node as its executor reported it and its status (Ready when it has none),
// changes the status in place and returns the events that record the
// change, which are stored with it. An error from fn changes nothing. A
// node that does not exist is core.ErrNotFound.
func (s *Store) UpdateNodeStatus(ctx context.Context, name core.NodeName, now time.Time, fn func(n *core.Node, st *core.NodeStatus) ([]core.NodeEvent, error)) (core.NodeStatus, error) {
	var out core.NodeStatus
	err := s.do(ctx, func(tx *wtx) error {
		n, err := getNode(tx, name)
		if err != nil {
			return err
		}
		st := core.NodeStatus{State: core.NodeReady, Since: now.UTC()}
		var b []byte
		switch err := tx.QueryRow("SELECT status FROM node_status WHERE name = ?", string(name)).Scan(&b); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(b, &st); err != nil {
				return err
			}
		}
		evs, err := fn(n, &st)
		if err != nil {
			return err
		}
		setAuditObject(ctx, string(name), "")
		if err := putNodeStatus(tx, name, &st); err != nil {
			return err
		}
		for _, e := range evs {
			e.Node = name
			if e.Time.IsZero() {
				e.Time = now.UTC()
			}
			if err := addNodeEvent(tx, e); err != nil {
				return err
			}
		}
		out = st
		return nil
	})
	if err == nil {
		s.forgetNodes()
	}
	return out, err
}

// RegisterNode writes a node's description and, when the node has no
// status yet, gives it initial (Registering, for a node that must pass
// qualification before it takes work), with an event.
// A node registered before whose devices changed (count, models, UUIDs)
// is qualified again: its status gets a validation request and an event.
func (s *Store) RegisterNode(ctx context.Context, n core.Node, initial core.NodeStatus) error {
	var before []core.GPU
	if ns, err := s.Nodes(ctx); err == nil {
		for _, o := range ns {
			if o.Name == n.Name {
				before = o.GPUs
			}
		}
	}
	if err := s.PutNode(ctx, n); err != nil {
		return err
	}
	err := s.do(ctx, func(tx *wtx) error {
		var b []byte
		switch err := tx.QueryRow("SELECT status FROM node_status WHERE name = ?", string(n.Name)).Scan(&b); {
		case err == nil:
			if sameDevices(before, n.GPUs) {
				return nil
			}
			var st core.NodeStatus
			if err := json.Unmarshal(b, &st); err != nil {
				return err
			}
			if st.Validate == nil && st.State != core.NodeRegistering && st.State != core.NodeValidating {
				st.Validate = &core.ValidateRequest{Level: 1, Reason: "its GPUs changed since it was registered", At: initial.Since}
			}
			if err := putNodeStatus(tx, n.Name, &st); err != nil {
				return err
			}
			return addNodeEvent(tx, core.NodeEvent{Node: n.Name, Time: initial.Since, Type: core.EventWarning, Reason: "GPUsChanged",
				Message: fmt.Sprintf("it had %d GPUs, it reports %d (or other models or UUIDs): qualified again", len(before), len(n.GPUs)), GPU: -1})
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if err := putNodeStatus(tx, n.Name, &initial); err != nil {
			return err
		}
		return addNodeEvent(tx, core.NodeEvent{Node: n.Name, Time: initial.Since, Type: core.EventNormal, Reason: "Registered",
			Message: initial.Message, GPU: -1, To: initial.State})
	})
	s.forgetNodes()
	return err
}

func sameDevices(a, b []core.GPU) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Index != b[i].Index || a[i].UUID != b[i].UUID || a[i].Model != b[i].Model {
			return false
		}
	}
	return true
}

// Kept per node: older node events and evidence are deleted as new ones
// come, so that neither grows without bound.
const (
	keepNodeEvents = 2000
	keepEvidence   = 400
)

func (s *Store) forgetNodes() {
	s.nodes.forget()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func putNodeStatus(tx *wtx, name core.NodeName, st *core.NodeStatus) error {
	tx.nodes = true
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	_, err = tx.Exec("INSERT INTO node_status (name, status) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET status = excluded.status", string(name), b)
	return err
}

func addNodeEvent(tx *wtx, e core.NodeEvent) error {
	if e.Type == "" {
		e.Type = core.EventNormal
	}
	b, err := json.Marshal(&e)
	if err != nil {
		return err
	}
	if _, err = tx.Exec("INSERT INTO node_events (node, time, spec) VALUES (?, ?, ?)", string(e.Node), unixNano(e.Time), b); err != nil {
		return err
	}
	return pruneNode(tx, "node_events", e.Node, keepNodeEvents)
}

// MaxNodeEvents bounds what NodeEvents returns.
const MaxNodeEvents = 500

// NodeEvents lists a node's latest events, oldest first.
func (s *Store) NodeEvents(ctx context.Context, name core.NodeName) ([]core.NodeEvent, error) {
	return latestOfNode(ctx, s, "node_events", name, MaxNodeEvents, func(e *core.NodeEvent, id int64) { e.ID = id })
}

// AddEvidence stores the records of a qualification run.
func (s *Store) AddEvidence(ctx context.Context, evs []core.Evidence) error {
	return s.do(ctx, func(tx *wtx) error {
		for _, e := range evs {
			b, err := json.Marshal(&e)
			if err != nil {
				return err
			}
			if _, err := tx.Exec("INSERT INTO evidence (node, run, time, spec) VALUES (?, ?, ?, ?)", string(e.Node), e.Run, unixNano(e.StartedAt), b); err != nil {
				return err
			}
		}
		if len(evs) == 0 {
			return nil
		}
		return pruneNode(tx, "evidence", evs[0].Node, keepEvidence)
	})
}

// MaxEvidence bounds what Evidence returns.
const MaxEvidence = 200

// Evidence lists a node's latest evidence records, oldest first.
func (s *Store) Evidence(ctx context.Context, name core.NodeName) ([]core.Evidence, error) {
	return latestOfNode(ctx, s, "evidence", name, MaxEvidence, func(e *core.Evidence, id int64) { e.ID = id })
}

// latestOfNode reads the last n rows of a node's table of JSON records
// (node_events, evidence), oldest first, each given its row's ID.
func latestOfNode[T any](ctx context.Context, s *Store, table string, name core.NodeName, n int, setID func(*T, int64)) ([]T, error) {
	rows, err := s.read.QueryContext(ctx, "SELECT id, spec FROM (SELECT id, spec FROM "+table+" WHERE node = ? ORDER BY id DESC LIMIT ?) AS newest ORDER BY id", string(name), n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var id int64
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			return nil, err
		}
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		setID(&v, id)
		out = append(out, v)
	}
	return out, rows.Err()
}

// pruneNode keeps the newest keep rows of a node's table.
func pruneNode(tx *wtx, table string, node core.NodeName, keep int) error {
	_, err := tx.Exec("DELETE FROM "+table+" WHERE node = ? AND id <= (SELECT id FROM "+table+" WHERE node = ? ORDER BY id DESC LIMIT 1 OFFSET ?)",
		string(node), string(node), keep)
	return err
}
