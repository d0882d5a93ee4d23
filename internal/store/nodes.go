package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// PutNode registers a node or replaces its description: what its executor
// reports. The platform's status of the node (state, device health) is
// kept apart (node_status) and merged back when the node is read, so a
// heartbeat never undoes a cordon or a failed device.
func (s *Store) PutNode(ctx context.Context, n core.Node) error {
	n.State, n.DrainGrace = "", 0
	n.GPUs = slices.Clone(n.GPUs)
	for i := range n.GPUs {
		n.GPUs[i].Health = ""
	}
	b, err := json.Marshal(&n)
	if err != nil {
		return err
	}
	err = s.do(ctx, func(tx *wtx) error {
		tx.nodes = true
		_, err := tx.Exec("INSERT INTO nodes (name, spec) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET spec = excluded.spec", string(n.Name), b)
		return err
	})
	return err
}

// snapshotNodes reads the nodes, from the cache when Options.Cache is set
// and no node was written since it was filled. The caller gets its own
// copies.
func (s *Store) snapshotNodes(ctx context.Context) ([]core.Node, error) {
	if !s.nodes.on {
		return queryNodes(ctx, s.read)
	}
	cached, err := s.nodes.get(func() ([]core.Node, error) { return queryNodes(ctx, s.read) })
	if err != nil {
		return nil, err
	}
	out := make([]core.Node, len(cached))
	for i := range cached {
		out[i] = *cached[i].Clone()
	}
	return out, nil
}

// Nodes lists the nodes by name.
func (s *Store) Nodes(ctx context.Context) ([]core.Node, error) {
	return queryNodes(ctx, s.read)
}

// Usage sums what running workloads hold, per node.
func (s *Store) Usage(ctx context.Context) (map[core.NodeName]*core.NodeUsage, error) {
	snap, err := s.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return snap.Usage, nil
}

func queryNodes(ctx context.Context, q querier) ([]core.Node, error) {
	rows, err := q.QueryContext(ctx, "SELECT n.spec, st.status FROM nodes n LEFT JOIN node_status st ON st.name = n.name ORDER BY n.name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Node
	for rows.Next() {
		var b, sb []byte
		if err := rows.Scan(&b, &sb); err != nil {
			return nil, err
		}
		n, err := decodeNode(b, sb)
		if err != nil {
			return nil, err
		}
		out = append(out, *n)
	}
	return out, rows.Err()
}

// decodeNode reads a node's description and merges its status (nil: none).
func decodeNode(spec, status []byte) (*core.Node, error) {
	var n core.Node
	if err := json.Unmarshal(spec, &n); err != nil {
		return nil, fmt.Errorf("decode node: %w", err)
	}
	if status != nil {
		var st core.NodeStatus
		if err := json.Unmarshal(status, &st); err != nil {
			return nil, fmt.Errorf("decode the status of node %s: %w", n.Name, err)
		}
		n.Apply(&st)
	}
	return &n, nil
}

// owned reports whether one server owns the store, and with it the truth
// of what the store holds: a SQLite file opened with Options.Cache (as a
// server opens it). On PostgreSQL other servers write too.
func (s *Store) owned() bool { return s.pg == nil && s.nodes.on }

// node returns the node name as tx sees it: on a store one server owns,
// from the rows it keeps while tx has written no node; else read in tx. It
// may be shared: callers do not change it.
func (tx *wtx) node(name core.NodeName) (*core.Node, error) {
	if tx.nodes || !tx.s.owned() || !tx.s.nodes.keeps() {
		return getNode(tx, name)
	}
	rows, err := tx.s.nodes.get(func() ([]core.Node, error) { return queryNodes(context.Background(), tx.s.read) })
	if err != nil {
		return nil, err
	}
	i, ok := slices.BinarySearchFunc(rows, name, func(n core.Node, name core.NodeName) int { return strings.Compare(string(n.Name), string(name)) })
	if !ok {
		return nil, fmt.Errorf("node %s: %w", name, core.ErrNotFound)
	}
	return &rows[i], nil
}

func getNode(tx *wtx, name core.NodeName) (*core.Node, error) {
	var b, sb []byte
	if err := tx.QueryRow("SELECT n.spec, st.status FROM nodes n LEFT JOIN node_status st ON st.name = n.name WHERE n.name = ?", string(name)).Scan(&b, &sb); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("node %s: %w", name, core.ErrNotFound)
		}
		return nil, err
	}
	return decodeNode(b, sb)
}
