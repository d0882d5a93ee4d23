package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client is a small HTTP client for the gpufleet API.
type Client struct {
	// Addr is the server's base address, e.g. http://127.0.0.1:8080.
	Addr  string
	Token string
	HTTP  *http.Client
	// OnWarning, when set, is told each warning an answer carries (its
	// Warning headers): the request was accepted, but something about it
	// is worth saying.
	OnWarning func(msg string)
}

// NewClient returns a client for addr ("127.0.0.1:8080" or a full URL).
func NewClient(addr, token string) *Client {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return &Client{Addr: strings.TrimRight(addr, "/"), Token: token, HTTP: &http.Client{Transport: transport}}
}

// transport is the clients' shared connection pool: the default one's, but
// keeping up to 64 idle connections to a server rather than 2, so that
// concurrent callers in one process (a script submitting a sweep, the
// benchmarks) reuse their connections instead of dialling anew for most
// requests.
var transport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}()

// ListOptions selects and pages a list.
type ListOptions struct {
	Team  string
	Phase string
	// Name keeps the workloads with this name (names are not unique).
	Name      string
	Limit     int
	PageToken string
}

func (o ListOptions) query() string {
	q := url.Values{}
	if o.Team != "" {
		q.Set("team", o.Team)
	}
	if o.Phase != "" {
		q.Set("phase", o.Phase)
	}
	if o.Name != "" {
		q.Set("name", o.Name)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.PageToken != "" {
		q.Set("pageToken", o.PageToken)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func (c *Client) do(ctx context.Context, method, path string, hdr http.Header, in, out any) error {
	resp, err := c.send(ctx, method, path, hdr, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// send performs a request and turns a non-2xx answer into *Error.
func (c *Client) send(ctx context.Context, method, path string, hdr http.Header, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Addr+"/api/v1"+path, body)
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err == nil && c.OnWarning != nil {
		for _, v := range resp.Header.Values("Warning") {
			c.OnWarning(ParseWarning(v))
		}
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, AnswerError(resp.StatusCode, b)
	}
	return resp, nil
}

// AnswerError is the error of an answer with a status other than 2xx: its
// JSON error body, or else its text.
func AnswerError(status int, body []byte) *StatusError {
	var eb ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Message != "" {
		return &StatusError{Status: status, Err: eb.Error}
	}
	return &StatusError{Status: status, Err: Error{Code: CodeInternal, Message: strings.TrimSpace(string(body))}}
}

// StatusError is an error answer from the server.
type StatusError struct {
	Status int
	Err    Error
}

func (e *StatusError) Error() string { return e.Err.Error() }

// Unwrap lets errors.As find the *Error.
func (e *StatusError) Unwrap() error { return &e.Err }

// SubmitWorkload submits w. A non-empty idempotencyKey makes a retry with the
// same key and body return the same workload instead of a second one.
func (c *Client) SubmitWorkload(ctx context.Context, w *Workload, idempotencyKey string) (*Workload, error) {
	var hdr http.Header
	if idempotencyKey != "" {
		hdr = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var out Workload
	return &out, c.do(ctx, http.MethodPost, "/workloads", hdr, w, &out)
}

// GetWorkload reads one workload.
func (c *Client) GetWorkload(ctx context.Context, id string) (*Workload, error) {
	var out Workload
	return &out, c.do(ctx, http.MethodGet, "/workloads/"+url.PathEscape(id), nil, nil, &out)
}

// CancelWorkload cancels a workload and returns it as it then stands.
func (c *Client) CancelWorkload(ctx context.Context, id string) (*Workload, error) {
	var out Workload
	return &out, c.do(ctx, http.MethodDelete, "/workloads/"+url.PathEscape(id), nil, nil, &out)
}

// ListWorkloads reads one page of workloads.
func (c *Client) ListWorkloads(ctx context.Context, o ListOptions) (*List[Workload], error) {
	var out List[Workload]
	return &out, c.do(ctx, http.MethodGet, "/workloads"+o.query(), nil, nil, &out)
}

// AllWorkloads follows the pages and returns every matching workload, or at
// most o.Limit when it is set.
func (c *Client) AllWorkloads(ctx context.Context, o ListOptions) ([]Workload, error) {
	want := o.Limit
	var all []Workload
	for {
		if want > 0 {
			o.Limit = want - len(all)
		}
		page, err := c.ListWorkloads(ctx, o)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.NextPageToken == "" || (want > 0 && len(all) >= want) {
			return all, nil
		}
		o.PageToken = page.NextPageToken
	}
}

// Events reads a workload's events, oldest first.
func (c *Client) Events(ctx context.Context, id string) ([]Event, error) {
	var out List[Event]
	return out.Items, c.do(ctx, http.MethodGet, "/workloads/"+url.PathEscape(id)+"/events", nil, nil, &out)
}

// Attempts lists a workload's attempts that ended, with what each used of
// its host, and their totals.
func (c *Client) Attempts(ctx context.Context, id string) (*AttemptList, error) {
	var out AttemptList
	if err := c.do(ctx, http.MethodGet, "/workloads/"+url.PathEscape(id)+"/attempts", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Logs opens a workload's log. With follow, the stream stays open until the
// workload finishes or ctx ends.
func (c *Client) Logs(ctx context.Context, id string, follow bool) (io.ReadCloser, error) {
	p := "/workloads/" + url.PathEscape(id) + "/logs"
	if follow {
		p += "?follow=true"
	}
	resp, err := c.send(ctx, http.MethodGet, p, nil, nil)
	if err != nil {
		return nil, err
	}
	return followedBody{resp}, nil
}

// LogOptions chooses what part of a log to read.
type LogOptions struct {
	// Follow keeps the stream open until the workload has finished.
	Follow bool
	// TailLines, when positive, keeps only the last lines (at most
	// 100000), and starts a followed log there.
	TailLines int
	// SinceSeconds, when positive, starts at the output written that many
	// seconds ago or later (at most a year; executors that keep no times
	// refuse it).
	SinceSeconds int64
}

// LogsWith streams a workload's log as o says.
func (c *Client) LogsWith(ctx context.Context, id string, o LogOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if o.Follow {
		q.Set("follow", "true")
	}
	if o.TailLines > 0 {
		q.Set("tailLines", strconv.Itoa(o.TailLines))
	}
	if o.SinceSeconds > 0 {
		q.Set("sinceSeconds", strconv.FormatInt(o.SinceSeconds, 10))
	}
	p := "/workloads/" + url.PathEscape(id) + "/logs"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	resp, err := c.send(ctx, http.MethodGet, p, nil, nil)
	if err != nil {
		return nil, err
	}
	return followedBody{resp}, nil
}

// StreamClosedTrailer is the trailer of a followed log that the server
// ended because the caller's rights to it were lost (its token revoked or
// expired, its user deleted, its role in the workload's team lost): it
// says why, as the log's last line ("--- gpufleet: stream closed: the
// token was revoked ---") does.
const StreamClosedTrailer = "Gpufleet-Stream-Closed"

// StreamClosedError ends the read of a log that the server ended because
// the caller's rights to it were lost; Reason says which.
type StreamClosedError struct{ Reason string }

func (e *StreamClosedError) Error() string { return "the server closed the stream: " + e.Reason }

// followedBody is a log's body: its end fails with StreamClosedError when
// the server says it ended it.
type followedBody struct{ resp *http.Response }

func (b followedBody) Read(p []byte) (int, error) {
	n, err := b.resp.Body.Read(p)
	if err == io.EOF {
		if why := b.resp.Trailer.Get(StreamClosedTrailer); why != "" {
			err = &StreamClosedError{Reason: why}
		}
	}
	return n, err
}

func (b followedBody) Close() error { return b.resp.Body.Close() }

// DeleteTeam deletes a team (admins): refused (409) while it has pending
// or running workloads; its finished workloads, service accounts and
// memberships go with it.
func (c *Client) DeleteTeam(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/teams/"+url.PathEscape(name), nil, nil, nil)
}

// DeleteUser deletes a user and its tokens (admins).
func (c *Client) DeleteUser(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/users/"+url.PathEscape(name), nil, nil, nil)
}

// Nodes lists the nodes with their GPUs and allocations.
func (c *Client) Nodes(ctx context.Context) ([]Node, error) {
	var out List[Node]
	return out.Items, c.do(ctx, http.MethodGet, "/nodes", nil, nil, &out)
}

// Usage returns the cluster's use over the last window, one point per
// sample interval, oldest first; window 0 asks for the server's default
// (1h).
func (c *Client) Usage(ctx context.Context, window time.Duration) (*UsageHistory, error) {
	path := "/usage"
	if window > 0 {
		path += "?window=" + url.QueryEscape(window.String())
	}
	var out UsageHistory
	return &out, c.do(ctx, http.MethodGet, path, nil, nil, &out)
}

// WorkloadUsage returns a workload's use of its GPUs over the last window,
// one point per sample interval while it ran, oldest first; window 0 asks
// for the server's default (1h).
func (c *Client) WorkloadUsage(ctx context.Context, id string, window time.Duration) (*WorkloadUsageHistory, error) {
	path := "/workloads/" + url.PathEscape(id) + "/usage"
	if window > 0 {
		path += "?window=" + url.QueryEscape(window.String())
	}
	var out WorkloadUsageHistory
	return &out, c.do(ctx, http.MethodGet, path, nil, nil, &out)
}

// Teams lists the teams.
func (c *Client) Teams(ctx context.Context) ([]Team, error) {
	var out List[Team]
	return out.Items, c.do(ctx, http.MethodGet, "/teams", nil, nil, &out)
}

// PriorityClasses lists the priority classes, most important first.
func (c *Client) PriorityClasses(ctx context.Context) ([]PriorityClass, error) {
	var out List[PriorityClass]
	return out.Items, c.do(ctx, http.MethodGet, "/priorityclasses", nil, nil, &out)
}

// CreateTeam creates a team (admin only).
func (c *Client) CreateTeam(ctx context.Context, t *Team) (*Team, error) {
	var out Team
	return &out, c.do(ctx, http.MethodPost, "/teams", nil, t, &out)
}

// SetQuota changes a team's quota (admin only).
func (c *Client) SetQuota(ctx context.Context, team string, q *TeamQuota) (*Team, error) {
	var out Team
	return &out, c.do(ctx, http.MethodPatch, "/teams/"+url.PathEscape(team), nil, q, &out)
}

// CreateUser creates a user (admin only); the answer carries the token once.
func (c *Client) CreateUser(ctx context.Context, u *User) (*User, error) {
	var out User
	return &out, c.do(ctx, http.MethodPost, "/users", nil, u, &out)
}

// WhoAmI returns the caller.
func (c *Client) WhoAmI(ctx context.Context) (*User, error) {
	var out User
	return &out, c.do(ctx, http.MethodGet, "/whoami", nil, nil, &out)
}

// listAll reads every page of the list at path, with the query q, and
// returns its items; at most limit of them when limit > 0.
func listAll[T any](ctx context.Context, c *Client, path string, q url.Values, limit int) ([]T, error) {
	if q == nil {
		q = url.Values{}
	}
	var all []T
	for {
		if limit > 0 {
			q.Set("limit", strconv.Itoa(limit-len(all)))
		}
		p := path
		if len(q) > 0 {
			p += "?" + q.Encode()
		}
		var page List[T]
		if err := c.do(ctx, http.MethodGet, p, nil, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if limit > 0 && len(all) >= limit {
			return all[:limit], nil
		}
		if page.NextPageToken == "" || len(page.Items) == 0 {
			return all, nil
		}
		q.Set("pageToken", page.NextPageToken)
	}
}

// Users lists every user (admin only), with their memberships.
func (c *Client) Users(ctx context.Context) ([]User, error) {
	return listAll[User](ctx, c, "/users", nil, 0)
}

// User reads one user: the caller itself, or anyone for an admin.
func (c *Client) User(ctx context.Context, name string) (*User, error) {
	var out User
	return &out, c.do(ctx, http.MethodGet, "/users/"+url.PathEscape(name), nil, nil, &out)
}

// Members lists a team's members, each with only its membership in that
// team.
func (c *Client) Members(ctx context.Context, team string) ([]User, error) {
	return listAll[User](ctx, c, "/teams/"+url.PathEscape(team)+"/members", nil, 0)
}

// SetMember adds user to team with role, or changes its role there (a
// team-admin of the team, or an admin), and returns the member.
func (c *Client) SetMember(ctx context.Context, team, user, role string) (*User, error) {
	var out User
	in := struct {
		Role string `json:"role"`
	}{role}
	return &out, c.do(ctx, http.MethodPut, "/teams/"+url.PathEscape(team)+"/members/"+url.PathEscape(user), nil, in, &out)
}

// RemoveMember takes user out of team (a team-admin of the team, or an
// admin).
func (c *Client) RemoveMember(ctx context.Context, team, user string) error {
	return c.do(ctx, http.MethodDelete, "/teams/"+url.PathEscape(team)+"/members/"+url.PathEscape(user), nil, nil, nil)
}

// SetPriorityClasses replaces the priority classes a team may use (a
// team-admin of the team, or an admin) and returns the team. An empty list
// (sent as []) means the default: every preemptible class.
func (c *Client) SetPriorityClasses(ctx context.Context, team string, classes []string) (*Team, error) {
	if classes == nil {
		classes = []string{}
	}
	var out Team
	return &out, c.do(ctx, http.MethodPatch, "/teams/"+url.PathEscape(team), nil, &TeamQuota{PriorityClasses: classes}, &out)
}

// CreateToken makes a new token, for the caller when t.User is empty; the
// answer carries the token once.
func (c *Client) CreateToken(ctx context.Context, t *Token) (*Token, error) {
	var out Token
	return &out, c.do(ctx, http.MethodPost, "/tokens", nil, t, &out)
}

// Tokens lists token records (never the tokens): the caller's own, or, for
// an admin, every user's or those of user when it is not empty.
func (c *Client) Tokens(ctx context.Context, user string) ([]Token, error) {
	q := url.Values{}
	if user != "" {
		q.Set("user", user)
	}
	return listAll[Token](ctx, c, "/tokens", q, 0)
}

// RevokeToken revokes the token with this ID.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/tokens/"+url.PathEscape(id), nil, nil, nil)
}

// AuditOptions selects and pages the audit trail.
type AuditOptions struct {
	// Since keeps entries at or after this time (zero: from the start).
	Since time.Time
	// User keeps the entries of one user.
	User string
	// Limit is the most entries to return; 0 means all of them for Audit
	// and the server's page size for AuditPage.
	Limit     int
	PageToken string
}

func (o AuditOptions) query() url.Values {
	q := url.Values{}
	if !o.Since.IsZero() {
		q.Set("since", o.Since.UTC().Format(time.RFC3339))
	}
	if o.User != "" {
		q.Set("user", o.User)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.PageToken != "" {
		q.Set("pageToken", o.PageToken)
	}
	return q
}

// AuditPage reads one page of the audit trail (admin only), oldest first.
func (c *Client) AuditPage(ctx context.Context, o AuditOptions) (*List[AuditEntry], error) {
	var out List[AuditEntry]
	p := "/audit"
	if q := o.query(); len(q) > 0 {
		p += "?" + q.Encode()
	}
	return &out, c.do(ctx, http.MethodGet, p, nil, nil, &out)
}

// Audit follows the pages of the audit trail (admin only) and returns every
// matching entry, oldest first, or the first o.Limit when it is set.
func (c *Client) Audit(ctx context.Context, o AuditOptions) ([]AuditEntry, error) {
	limit := o.Limit
	o.Limit = 0
	q := o.query()
	return listAll[AuditEntry](ctx, c, "/audit", q, limit)
}

// FormatWarning renders msg as a Warning header, as Kubernetes does:
// warn-code 299, no agent, the text quoted.
func FormatWarning(msg string) string {
	return "299 - " + strconv.Quote(msg)
}

// ParseWarning returns the text of a Warning header that FormatWarning
// wrote, or the header as it is.
func ParseWarning(v string) string {
	if rest, ok := strings.CutPrefix(v, "299 - "); ok {
		if msg, err := strconv.Unquote(rest); err == nil {
			return msg
		}
	}
	return v
}
