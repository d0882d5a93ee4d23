package api

import (
	"context"
	"net/http"
)

// Plan asks for the advice on a workload brief: the memory it needs and
// the fleet's candidates, least exclusive first.
func (c *Client) Plan(ctx context.Context, b *WorkloadBrief) (*Plan, error) {
	var out Plan
	return &out, c.do(ctx, http.MethodPost, "/plan", nil, b, &out)
}
