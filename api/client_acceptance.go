package api

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// AcceptanceRunRequest starts a run of a card (POST /acceptance/runs).
type AcceptanceRunRequest struct {
	Card AcceptanceCard `json:"card"`
	// Continue runs every stage even after one fails.
	Continue bool `json:"continue,omitempty"`
	// Pool, when set, replaces the card's target pool.
	Pool string `json:"pool,omitempty"`
}

// StartAcceptance starts a run of a card; its stages run on the server.
func (c *Client) StartAcceptance(ctx context.Context, req *AcceptanceRunRequest) (*AcceptanceRun, error) {
	var out AcceptanceRun
	return &out, c.do(ctx, http.MethodPost, "/acceptance/runs", nil, req, &out)
}

// AcceptanceRuns lists the runs of the caller's teams (team narrows).
func (c *Client) AcceptanceRuns(ctx context.Context, team string) ([]AcceptanceRun, error) {
	p := "/acceptance/runs"
	if team != "" {
		p += "?" + url.Values{"team": {team}}.Encode()
	}
	var out List[AcceptanceRun]
	return out.Items, c.do(ctx, http.MethodGet, p, nil, nil, &out)
}

// AcceptanceRun returns one run.
func (c *Client) AcceptanceRun(ctx context.Context, id string) (*AcceptanceRun, error) {
	var out AcceptanceRun
	return &out, c.do(ctx, http.MethodGet, "/acceptance/runs/"+url.PathEscape(id), nil, nil, &out)
}

// DecideAcceptance records the review's decision on an ended run
// (team-admins).
func (c *Client) DecideAcceptance(ctx context.Context, id string, d *Decision) (*AcceptanceRun, error) {
	var out AcceptanceRun
	return &out, c.do(ctx, http.MethodPost, "/acceptance/runs/"+url.PathEscape(id)+"/decision", nil, d, &out)
}

// AcceptanceReport opens a run's HTML report.
func (c *Client) AcceptanceReport(ctx context.Context, id string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, http.MethodGet, "/acceptance/runs/"+url.PathEscape(id)+"/report", nil, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
