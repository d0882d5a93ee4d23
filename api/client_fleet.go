package api

import (
	"context"
	"net/http"
)

// Clusters lists the clusters work runs on.
func (c *Client) Clusters(ctx context.Context) ([]Cluster, error) {
	var out List[Cluster]
	return out.Items, c.do(ctx, http.MethodGet, "/clusters", nil, nil, &out)
}

// Pools lists the pools with their capacity, use, health and price.
func (c *Client) Pools(ctx context.Context) ([]Pool, error) {
	var out List[Pool]
	return out.Items, c.do(ctx, http.MethodGet, "/pools", nil, nil, &out)
}

// Servers lists the servers sharing the store and which one leads (admins).
func (c *Client) Servers(ctx context.Context) ([]Server, error) {
	var out List[Server]
	return out.Items, c.do(ctx, http.MethodGet, "/servers", nil, nil, &out)
}
