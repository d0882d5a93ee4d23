package api

import (
	"context"
	"io"
	"net/http"
	"net/url"
)

// CostQuery selects a cost report's rows and window: By (team by default),
// From and To (RFC 3339) or Since (24h, 7d), Step for a series.
type CostQuery struct {
	By, From, To, Since, Step string
	// Format and Granularity are for an export.
	Format, Granularity string
}

func (q CostQuery) encode() string {
	v := url.Values{}
	for k, s := range map[string]string{"by": q.By, "from": q.From, "to": q.To, "since": q.Since, "step": q.Step,
		"format": q.Format, "granularity": q.Granularity} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// Prices lists every price version.
func (c *Client) Prices(ctx context.Context) (*PriceList, error) {
	var out PriceList
	return &out, c.do(ctx, http.MethodGet, "/prices", nil, nil, &out)
}

// AddPrice adds a version of a pool's price (admins).
func (c *Client) AddPrice(ctx context.Context, p *Price) (*Price, error) {
	var out Price
	return &out, c.do(ctx, http.MethodPost, "/prices", nil, p, &out)
}

// Cost reads a cost report.
func (c *Client) Cost(ctx context.Context, q CostQuery) (*CostReport, error) {
	var out CostReport
	return &out, c.do(ctx, http.MethodGet, "/cost"+q.encode(), nil, nil, &out)
}

// CostSeries reads a cost report per step.
func (c *Client) CostSeries(ctx context.Context, q CostQuery) (*CostSeries, error) {
	var out CostSeries
	return &out, c.do(ctx, http.MethodGet, "/cost/series"+q.encode(), nil, nil, &out)
}

// CostExport copies the FOCUS CSV export of a window to w.
func (c *Client) CostExport(ctx context.Context, q CostQuery, w io.Writer) error {
	resp, err := c.send(ctx, http.MethodGet, "/cost/export"+q.encode(), nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// Estimate prices GPUs for a time at a pool's price or a kind and rate.
func (c *Client) Estimate(ctx context.Context, req *EstimateRequest) (*CostEstimate, error) {
	var out CostEstimate
	return &out, c.do(ctx, http.MethodPost, "/cost/estimate", nil, req, &out)
}

// Budgets lists the budgets the caller may see, with what each month spent.
func (c *Client) Budgets(ctx context.Context) (*BudgetList, error) {
	var out BudgetList
	return &out, c.do(ctx, http.MethodGet, "/budgets", nil, nil, &out)
}

// SetBudget sets a team's monthly budget (admins).
func (c *Client) SetBudget(ctx context.Context, team string, b *Budget) (*Budget, error) {
	var out Budget
	return &out, c.do(ctx, http.MethodPut, "/teams/"+url.PathEscape(team)+"/budget", nil, b, &out)
}

// DeleteBudget removes a team's budget (admins).
func (c *Client) DeleteBudget(ctx context.Context, team string) error {
	return c.do(ctx, http.MethodDelete, "/teams/"+url.PathEscape(team)+"/budget", nil, nil, nil)
}

// ReportOutputs adds completed work to a workload's outputs.
func (c *Client) ReportOutputs(ctx context.Context, id string, o *Outputs) (*Workload, error) {
	var out Workload
	return &out, c.do(ctx, http.MethodPost, "/workloads/"+url.PathEscape(id)+"/outputs", nil, o, &out)
}
