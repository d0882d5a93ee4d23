package api

import (
	"context"
	"net/http"
	"net/url"
)

// CreateVolume creates a team volume (members), within the team's storage
// limit.
func (c *Client) CreateVolume(ctx context.Context, team string, v *Volume) (*Volume, error) {
	var out Volume
	return &out, c.do(ctx, http.MethodPost, "/teams/"+url.PathEscape(team)+"/volumes", nil, v, &out)
}

// Volumes lists a team's volumes.
func (c *Client) Volumes(ctx context.Context, team string) ([]Volume, error) {
	var out List[Volume]
	return out.Items, c.do(ctx, http.MethodGet, "/teams/"+url.PathEscape(team)+"/volumes", nil, nil, &out)
}

// DeleteVolume deletes a team volume and its data (team-admins).
func (c *Client) DeleteVolume(ctx context.Context, team, name string) error {
	return c.do(ctx, http.MethodDelete, "/teams/"+url.PathEscape(team)+"/volumes/"+url.PathEscape(name), nil, nil, nil)
}

// Storage returns a team's storage against its limit.
func (c *Client) Storage(ctx context.Context, team string) (*StorageUsage, error) {
	var out StorageUsage
	return &out, c.do(ctx, http.MethodGet, "/teams/"+url.PathEscape(team)+"/storage", nil, nil, &out)
}
