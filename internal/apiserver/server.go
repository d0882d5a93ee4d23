package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/acceptrun"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/ledger"
	"github.com/gpufleet/gpufleet/internal/qualify"
	"github.com/gpufleet/gpufleet/internal/secrets"
	"github.com/gpufleet/gpufleet/internal/spec"
	"github.com/gpufleet/gpufleet/internal/store"
)

// LogSource opens a workload's log. The executor provides it; the API server
// knows nothing else of the executor.
type LogSource interface {
	Logs(id core.WorkloadID) (io.ReadCloser, error)
}

// LogSincer is a LogSource that knows when its output was written: for
// ?sinceSeconds= the API server starts the log at the offset it gives.
// Sources without it refuse sinceSeconds.
type LogSincer interface {
	LogOffsetSince(id core.WorkloadID, since time.Time) (int64, error)
}

// LogFollower is a LogSource whose log cannot be followed by reading it
// again as it grows (a pod's log): for ?follow=true the API server asks it
// for a stream that ends when the latest attempt's output ends. With
// currentOnly it leaves out the earlier attempts.
type LogFollower interface {
	FollowLogs(ctx context.Context, id core.WorkloadID, currentOnly bool) (io.ReadCloser, error)
}

// Options configures the API server.
type Options struct {
	Store *store.Store
	// ServerName is this server's name among those sharing the store
	// (GET /readyz, /servers).
	ServerName string
	Logs       LogSource
	Logger     *slog.Logger
	Now        func() time.Time
	// MaxBodyBytes bounds request bodies (413 beyond). Default 1 MiB.
	MaxBodyBytes int64
	// PriorityClasses are the classes a workload may name.
	PriorityClasses []core.PriorityClass
	// DefaultTeam receives the workloads of callers who name no team and
	// may submit to it (an admin may submit to every team).
	DefaultTeam core.TeamName
	// OpenAPI is the document served at /api/v1/openapi.json.
	OpenAPI []byte
	// RateLimit shapes each token's requests; the zero value sets no
	// limit.
	RateLimit RateLimit
	// Usage is the utilisation tracker (workloads' and GPUs' usage, GET
	// /usage); nil when nothing is sampled.
	Usage UsageSource
	// Metrics serves GET /metrics to admins; nil answers 503.
	Metrics http.Handler
	// CommandsOnly: no executor runs images (the local one without a
	// container runtime), so a workload that names an image is refused at
	// submit, naming image and saying how to enable containers, rather
	// than having its image ignored.
	CommandsOnly bool
	// Ledger answers the cost routes (prices, reports, exports, budgets);
	// nil answers 503.
	Ledger *ledger.Ledger
	// Lifecycle runs the node lifecycle routes (cordon, drain, uncordon,
	// validate, faults); nil answers 503.
	Lifecycle *qualify.Qualifier
	// Endpoints says where workloads serve their ports, for the proxy at
	// /w/{id}/{port}/ and /s/{team}/{name}/; nil answers 503 there.
	Endpoints EndpointSource
	// Secrets seals team secrets (POST /teams/{team}/secrets); nil
	// answers 503 there.
	Secrets *secrets.Store
	// Storage limits teams' volumes and names the datasets.
	Storage Storage
	// Fleet is the configured clusters and pools (GET /clusters, /pools).
	Fleet Fleet
	// Acceptance runs acceptance cards (/acceptance/runs); nil answers
	// 503 there.
	Acceptance *acceptrun.Runner
	// WorkloadHosts, when set (proxy.baseURL), also serves each workload
	// port at the root of a host of its own under its domain (hosts.go).
	WorkloadHosts *url.URL
}

// RateLimit is a token bucket per token: RequestsPerSecond sustained, Burst
// at once. Requests without a valid token share one bucket per client
// address; admins are not limited. RequestsPerSecond 0 turns it off.
type RateLimit struct {
	RequestsPerSecond float64
	Burst             int
}

// Server serves the REST API.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	log     *slog.Logger
	limiter *limiter // nil: no rate limit
	fleet   fleetCache
	// hostProxy serves workload hosts (hosts.go).
	hostProxy http.Handler
	// upstream is the proxy's transport to workloads: its connections
	// are dialEndpoint's (proxy.go).
	upstream *http.Transport
	// sessions watches the streaming requests (sessions.go).
	sessions *sessions
}

// MaxPageSize bounds one page of a list.
const MaxPageSize = 1000

// New builds the server and its routes.
func New(opts Options) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.PriorityClasses == nil {
		opts.PriorityClasses = core.DefaultPriorityClasses()
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), log: opts.Logger}
	s.upstream = http.DefaultTransport.(*http.Transport).Clone()
	s.upstream.DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) { return s.dialEndpoint(ctx, addr) }
	s.sessions = &sessions{st: opts.Store, now: opts.Now, log: opts.Logger}
	if rl := opts.RateLimit; rl.RequestsPerSecond > 0 {
		s.opts.RateLimit.Burst = max(1, rl.Burst)
		s.limiter = newLimiter(rl.RequestsPerSecond, s.opts.RateLimit.Burst)
	}
	s.routes()
	return s
}

// publicPatterns are the routes that answer without a token.
var publicPatterns = []string{
	"GET /healthz",
	"GET /readyz",
	"GET /api/v1/healthz",
	"GET /api/v1/readyz",
	"GET /api/v1/openapi.json",
}

// Routes lists every API route as "METHOD /path"; the OpenAPI test checks
// that the document describes each.
var Routes = func() []string {
	out := slices.Clone(publicPatterns)
	for _, rt := range table {
		out = append(out, rt.pattern)
	}
	return out
}()

func (s *Server) routes() {
	healthz := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
	// Ready means the store can be read and written: a server whose disk
	// is full answers 503 here (and 507 to writes) until space returns.
	// Anyone may ask (no token): the answer says what is wrong in words of
	// its own; the database's error, which may name its host and user,
	// goes to the server's log.
	readyz := func(w http.ResponseWriter, r *http.Request) {
		notReady := func(what string, err error) {
			s.log.Warn("not ready", "what", what, "err", err)
			writeError(w, fmt.Errorf("not ready: %s: %w", what, core.ErrUnavailable))
		}
		if err := s.opts.Store.Readable(r.Context()); err != nil {
			notReady("the store cannot be read", err)
			return
		}
		if err := s.opts.Store.Writable(r.Context()); err != nil {
			if errors.Is(err, core.ErrNoSpace) {
				notReady(core.ErrNoSpace.Error()+"; free space in the data directory", err)
			} else {
				notReady("the store cannot write", err)
			}
			return
		}
		rd, err := s.readiness(r.Context())
		if err != nil {
			notReady("the store cannot be read", err)
			return
		}
		writeJSON(w, http.StatusOK, rd)
	}
	// Served at the root, as probes expect, and under /api/v1 with the rest.
	s.mux.HandleFunc("GET /healthz", healthz)
	s.mux.HandleFunc("GET /readyz", readyz)
	s.mux.HandleFunc("GET /api/v1/healthz", healthz)
	s.mux.HandleFunc("GET /api/v1/readyz", readyz)
	s.mux.HandleFunc("GET /api/v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(s.opts.OpenAPI)
	})
	for i := range table {
		s.mux.Handle(table[i].pattern, s.serve(&table[i]))
	}
	s.proxyHandlers()
	// A path that exists with other methods answers 405 with Allow (so a
	// PUT or PATCH on a workload is 405: nothing changes a workload's spec
	// or team after submission); anything else under /api/ is a JSON 404.
	// Both need a token, like every route that is not public.
	probe := http.NewServeMux()
	for _, route := range Routes {
		probe.HandleFunc(route, func(http.ResponseWriter, *http.Request) {})
	}
	s.mux.Handle("/api/", s.serve(&route{access: anyCaller, action: "unsupported request", serve: func(_ *Server, c *call) (reply, error) {
		r := c.r
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			r2 := r.Clone(r.Context())
			r2.Method = m
			if _, pattern := probe.Handler(r2); pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			return reply{header: http.Header{"Allow": {strings.Join(allow, ", ")}}},
				fmt.Errorf("%s is not allowed on %s (allowed: %s): %w", r.Method, r.URL.Path, strings.Join(allow, ", "), errMethod)
		}
		return reply{}, fmt.Errorf("no such endpoint %s %s: %w", r.Method, r.URL.Path, core.ErrNotFound)
	}}))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.bodyLimit(r))
	if id, port, ok := s.workloadHost(r); ok {
		s.serveWorkloadHost(w, r, id, port)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// MaxProxiedBodyBytes bounds what a request to a workload's port may
// carry (a file uploaded to a notebook): more than an API call, still
// bounded.
const MaxProxiedBodyBytes = 256 << 20

// bodyLimit bounds a request's body: MaxBodyBytes, but for a workload's
// port (MaxProxiedBodyBytes), and for a new secret,
// whose values may take spec.MaxSecretBytes (encoded as JSON, up to twice as
// much), so that one over its bound is a 400 naming data rather than a 413.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if strings.HasPrefix(r.URL.Path, "/w/") || strings.HasPrefix(r.URL.Path, "/s/") {
		return MaxProxiedBodyBytes
	}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v1/teams/") && strings.HasSuffix(r.URL.Path, "/secrets") {
		return max(s.opts.MaxBodyBytes, 4*spec.MaxSecretBytes)
	}
	return s.opts.MaxBodyBytes
}

// Front serves the requests that come to workload hosts (hosts.go) and
// passes every other to next (the portal over this server): nothing but
// the workload is served on its host.
func (s *Server) Front(next http.Handler) http.Handler {
	if s.opts.WorkloadHosts == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, port, ok := s.workloadHost(r); ok {
			r.Body = http.MaxBytesReader(w, r.Body, MaxProxiedBodyBytes)
			s.serveWorkloadHost(w, r, id, port)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// reply is what a handler returns: a status and a body to encode as JSON.
// Its header goes with errors too (Allow on a 405).
type reply struct {
	status int
	body   any
	header http.Header
	// streamed: the handler wrote the answer itself.
	streamed bool
}

// serve runs one route for one request. It is the one place where callers
// are authenticated, rate limited and authorized (by the route's row of the
// table), answers encoded, errors mapped to status codes, and mutating
// requests audited:
//
//  1. authenticate the bearer token (401 without a valid one);
//  2. take a request from the caller's bucket (429 beyond the rate);
//  3. refuse non-admins on admin routes, and metrics readers on any route
//     but those marked scrape (403);
//  4. run the handler, which finds the object's team or owner and calls
//     c.authorize or c.authorizeUser (404 for what the caller may not
//     see, 403 for a role too weak in its own team);
//  5. answer, and record a mutating request's audit entry: the store wrote
//     it in the transaction of the change (store.WithAudit), or it is
//     appended now with the status answered.
func (s *Server) serve(rt *route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{r: r, rt: rt}
		if mutating(r.Method) {
			c.audit = &core.AuditEntry{Time: s.opts.Now().UTC(), Action: rt.action, Method: r.Method, Path: r.URL.Path}
		}
		rep, err := s.run(w, c)
		for k, v := range rep.header {
			w.Header()[k] = v
		}
		status, msg := rep.status, ""
		switch {
		case err != nil:
			status, msg = s.fail(w, r, err)
		case !rep.streamed:
			writeJSON(w, rep.status, rep.body)
		}
		if c.audit != nil {
			s.finishAudit(c, status, msg)
		}
	})
}

// run authenticates, limits and authorizes a request and calls the
// route's handler.
func (s *Server) run(w http.ResponseWriter, c *call) (reply, error) {
	u, hash, authErr := s.authenticate(c.r)
	// The caller's rate-limit bucket: its token's hash when the token is
	// valid, else its address.
	key := "addr " + clientAddr(c.r)
	if u != nil {
		key = "token " + hash
		c.u = u
		if c.audit != nil {
			c.audit.User = u.Name
			if u.Admin {
				c.audit.Role = "admin"
			}
		}
	}
	if s.limiter != nil && (u == nil || !u.Admin) {
		if wait, ok := s.limiter.allow(key, s.opts.Now()); !ok {
			return reply{}, &rateLimited{wait: wait, rate: s.opts.RateLimit, perAddress: u == nil}
		}
	}
	if authErr != nil {
		return reply{}, authErr
	}
	if u.MetricsReader && !c.rt.scrape {
		return reply{}, forbidden("%s is a metrics reader: it may read GET /metrics and nothing else", u.Name)
	}
	if c.rt.access == adminOnly && !u.Admin && !(u.MetricsReader && c.rt.scrape) {
		return reply{}, forbidden("%s needs the admin role", c.rt.doing)
	}
	ctx := c.r.Context()
	if c.audit != nil {
		c.audit.Status = c.rt.ok
		ctx = store.WithAudit(ctx, c.audit)
	}
	if u.Admin {
		// Per-caller bounds are for tenants; the team bound applies to
		// admins too.
		ctx = store.WithoutUserBound(ctx)
	}
	if c.rt.stream != nil {
		// It may last: its rights are checked again while it does.
		var end func()
		ctx, end = s.sessions.begin(ctx, c, hash)
		defer end()
	}
	c.r = c.r.WithContext(ctx)
	var rep reply
	var err error
	if c.rt.stream != nil {
		rep = reply{status: http.StatusOK, streamed: true}
		err = c.rt.stream(s, w, c)
	} else {
		rep, err = c.rt.serve(s, c)
	}
	if err == nil && (c.rt.access == teamRole || c.rt.access == userScope) && !c.authorized && !u.Admin {
		// The table says this route acts on a team's or a user's object,
		// and its handler answered without checking the caller's right to
		// it: a bug, answered as one rather than as a leak.
		return reply{}, fmt.Errorf("%s answered without an authorization check", c.rt.pattern)
	}
	return rep, err
}

// authenticate resolves the bearer token to a user, and returns the
// token's hash with it.
func (s *Server) authenticate(r *http.Request) (u *core.User, hash string, err error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		return nil, "", errUnauthenticated
	}
	hash = HashToken(tok)
	u, err = s.opts.Store.UserByTokenHash(r.Context(), hash, s.opts.Now())
	if err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return nil, "", errInvalidToken
		}
		return nil, "", err
	}
	return u, hash, nil
}

// clientAddr is the request's remote IP address; no proxy header is
// trusted.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// fail answers an error and returns the status and message it sent.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) (int, string) {
	if status, _ := classify(err); status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	e := writeError(w, err)
	return e.status, e.Message
}

func mutating(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

var (
	errUnauthenticated = errors.New("unauthenticated")
	// errInvalidToken: a token that authenticates nobody (unknown, revoked
	// or expired).
	errInvalidToken = fmt.Errorf("invalid token: %w", errUnauthenticated)
	errMethod       = errors.New("method not allowed")
)

// rateLimited is a request beyond its bucket's rate.
type rateLimited struct {
	wait time.Duration
	rate RateLimit
	// perAddress: the caller had no valid token, so its address was
	// limited.
	perAddress bool
}

func (e *rateLimited) Error() string {
	who := "one token"
	if e.perAddress {
		who = "one address without a valid token"
	}
	return fmt.Sprintf("too many requests: at most %g per second for %s, in bursts of at most %d; retry in %d s",
		e.rate.RequestsPerSecond, who, e.rate.Burst, retrySeconds(e.wait))
}

// retrySeconds rounds a wait up to whole seconds, at least one, as
// Retry-After has it.
func retrySeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// limitRetryAfter is the Retry-After, in seconds, of a submission refused
// for too many pending workloads: they drain as the scheduler starts them.
const limitRetryAfter = 10

// HashToken is how tokens are stored: the hex SHA-256 of the token. Tokens
// are 256-bit random values, so a fast hash suffices (no password stretching
// is needed against guessing).
func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(body)
}

// fieldErrors is a validation failure naming each bad field.
type fieldErrors struct {
	status int // 400 by default; 422 for semantically wrong values
	fields []api.FieldError
}

func (e *fieldErrors) Error() string {
	var b strings.Builder
	b.WriteString("invalid request")
	for i, f := range e.fields {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(f.Field + ": " + f.Problem)
	}
	return b.String()
}

func (e *fieldErrors) Unwrap() error { return core.ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &fieldErrors{fields: []api.FieldError{{Field: field, Problem: fmt.Sprintf(format, args...)}}}
}

// refusal is an error whose message is told to the caller as it is, of a
// kind (core.ErrForbidden, core.ErrNotFound) that classify maps.
type refusal struct {
	msg  string
	kind error
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.kind }

// forbidden is a 403 whose message says what the caller lacks.
func forbidden(format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), kind: core.ErrForbidden}
}

// notFound is the 404 of an object that does not exist or that the caller
// may not see. The two are the same answer, so that IDs do not leak; the
// message is the store's ("workload wl-1: not found").
func notFound(kind, id string) error {
	return &refusal{msg: kind + " " + id + ": " + core.ErrNotFound.Error(), kind: core.ErrNotFound}
}

// classify maps an error to its HTTP status and wire code. It is the only
// place that does.
func classify(err error) (int, string) {
	// A database that cannot be reached, or a disk that fails, under a
	// read as under a write: 503 (or 507), not 500.
	err = store.Classify(err)
	var fe *fieldErrors
	var mbe *http.MaxBytesError
	var rl *rateLimited
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, api.CodeTooLarge
	case errors.As(err, &rl):
		return http.StatusTooManyRequests, api.CodeRateLimited
	case errors.As(err, &fe) && fe.status != 0:
		return fe.status, api.CodeUnprocessable
	case errors.Is(err, errUnauthenticated):
		return http.StatusUnauthorized, api.CodeUnauthenticated
	case errors.Is(err, errMethod):
		return http.StatusMethodNotAllowed, api.CodeMethodNotAllowed
	case errors.Is(err, core.ErrInvalid):
		return http.StatusBadRequest, api.CodeInvalid
	case errors.Is(err, core.ErrIdempotency):
		return http.StatusUnprocessableEntity, api.CodeIdempotency
	case errors.Is(err, core.ErrNotFound):
		return http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, core.ErrForbidden):
		return http.StatusForbidden, api.CodeForbidden
	case errors.Is(err, core.ErrConflict):
		return http.StatusConflict, api.CodeConflict
	case errors.Is(err, core.ErrLimit):
		return http.StatusTooManyRequests, api.CodeLimitReached
	case errors.Is(err, core.ErrNoSpace):
		return http.StatusInsufficientStorage, api.CodeNoSpace
	case errors.Is(err, core.ErrUnavailable):
		return http.StatusServiceUnavailable, api.CodeUnavailable
	}
	return http.StatusInternalServerError, api.CodeInternal
}

// sentError is what writeError answered.
type sentError struct {
	api.Error
	status int
}

// writeError answers err with its status and code, and the headers that go
// with them (WWW-Authenticate, Retry-After).
func writeError(w http.ResponseWriter, err error) sentError {
	status, code := classify(err)
	e := api.Error{Code: code, Message: err.Error()}
	var fe *fieldErrors
	if errors.As(err, &fe) {
		e.Fields = fe.fields
	}
	switch status {
	case http.StatusInternalServerError:
		e.Message = "internal error" // details go to the server log, not the client
	case http.StatusUnauthorized:
		e.Message = "a valid token is required: send Authorization: Bearer TOKEN"
		if errors.Is(err, errInvalidToken) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gpufleet", error="invalid_token"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gpufleet"`)
		}
	case http.StatusRequestEntityTooLarge:
		e.Message = "request body too large"
	case http.StatusTooManyRequests:
		retry := limitRetryAfter
		var rl *rateLimited
		if errors.As(err, &rl) {
			retry = retrySeconds(rl.wait)
		}
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	writeJSON(w, status, api.ErrorBody{Error: e})
	return sentError{Error: e, status: status}
}

// decode reads a JSON body strictly: unknown fields, trailing data and
// oversized bodies are errors.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return invalid("body", "holds more than one JSON value")
	}
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return decodeError(err)
	}
	return nil
}

// decodeError turns a decoding failure into a 400 naming the field, in the
// API's words (api.DecodeProblem), or passes an oversized body on (413).
func decodeError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return err
	}
	var fe api.FieldErrors
	if errors.As(api.DecodeProblem(err), &fe) {
		return &fieldErrors{fields: fe}
	}
	return invalid("body", "%v", err)
}
