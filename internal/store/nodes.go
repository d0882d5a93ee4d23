package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gpufleet/gpufleet/internal/core"
)

// PutNode registers a node or replaces its description.
func (s *Store) PutNode(ctx context.Context, n core.Node) error {
	b, err := json.Marshal(&n)
	if err != nil {
		return err
	}
	err = s.do(ctx, func(tx *wtx) error {
		_, err := tx.Exec("INSERT INTO nodes (name, spec) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET spec = excluded.spec", string(n.Name), b)
		return err
	})
	s.nodeMu.Lock()
	s.nodeCache = nil
	s.nodeGen++
	s.nodeMu.Unlock()
	return err
}

// snapshotNodes reads the nodes, from the cache when Options.CacheNodes is
// set and no node was written since it was filled. The caller gets its own
// copies.
func (s *Store) snapshotNodes(ctx context.Context) ([]core.Node, error) {
	if !s.cacheNodes {
		return queryNodes(ctx, s.read)
	}
	s.nodeMu.Lock()
	cached, gen := s.nodeCache, s.nodeGen
	s.nodeMu.Unlock()
	if cached == nil {
		nodes, err := queryNodes(ctx, s.read)
		if err != nil {
			return nil, err
		}
		s.nodeMu.Lock()
		if s.nodeGen == gen {
			s.nodeCache = nodes
		}
		s.nodeMu.Unlock()
		cached = nodes
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
	rows, err := q.QueryContext(ctx, "SELECT spec FROM nodes ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.Node
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		var n core.Node
		if err := json.Unmarshal(b, &n); err != nil {
			return nil, fmt.Errorf("decode node: %w", err)
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

func getNode(tx *wtx, name core.NodeName) (*core.Node, error) {
	var b []byte
	if err := tx.QueryRow("SELECT spec FROM nodes WHERE name = ?", string(name)).Scan(&b); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("node %s: %w", name, core.ErrNotFound)
		}
		return nil, err
	}
	var n core.Node
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("decode node %s: %w", name, err)
	}
	return &n, nil
}
