package api

import (
	"context"
	"net/http"
	"net/url"
)

// CreateSecret creates a team secret (team-admins); the answer has its
// keys, never its values.
func (c *Client) CreateSecret(ctx context.Context, team string, s *Secret) (*Secret, error) {
	var out Secret
	return &out, c.do(ctx, http.MethodPost, "/teams/"+url.PathEscape(team)+"/secrets", nil, s, &out)
}

// Secrets lists a team's secrets: names and keys.
func (c *Client) Secrets(ctx context.Context, team string) ([]Secret, error) {
	var out List[Secret]
	return out.Items, c.do(ctx, http.MethodGet, "/teams/"+url.PathEscape(team)+"/secrets", nil, nil, &out)
}

// DeleteSecret deletes a team secret (team-admins).
func (c *Client) DeleteSecret(ctx context.Context, team, name string) error {
	return c.do(ctx, http.MethodDelete, "/teams/"+url.PathEscape(team)+"/secrets/"+url.PathEscape(name), nil, nil, nil)
}
