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
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// LogSource opens a workload's log. The executor provides it; the API server
// knows nothing else of the executor.
type LogSource interface {
	Logs(id core.WorkloadID) (io.ReadCloser, error)
}

// Options configures the API server.
type Options struct {
	Store  *store.Store
	Logs   LogSource
	Logger *slog.Logger
	Now    func() time.Time
	// MaxBodyBytes bounds request bodies (413 beyond). Default 1 MiB.
	MaxBodyBytes int64
	// PriorityClasses are the classes a workload may name.
	PriorityClasses []core.PriorityClass
	// DefaultTeam receives the workloads of callers who name no team and
	// belong to it (admins belong to every team).
	DefaultTeam core.TeamName
	// OpenAPI is the document served at /api/v1/openapi.json.
	OpenAPI []byte
}

// Server serves the REST API.
type Server struct {
	opts Options
	mux  *http.ServeMux
	log  *slog.Logger
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
	s.routes()
	return s
}

// Routes lists every API route as "METHOD /path"; the OpenAPI test checks
// that the document describes each.
var Routes = []string{
	"GET /healthz",
	"GET /readyz",
	"GET /api/v1/healthz",
	"GET /api/v1/readyz",
	"GET /api/v1/openapi.json",
	"GET /api/v1/whoami",
	"POST /api/v1/workloads",
	"GET /api/v1/workloads",
	"GET /api/v1/workloads/{id}",
	"DELETE /api/v1/workloads/{id}",
	"GET /api/v1/workloads/{id}/logs",
	"GET /api/v1/workloads/{id}/events",
	"GET /api/v1/nodes",
	"GET /api/v1/priorityclasses",
	"GET /api/v1/teams",
	"POST /api/v1/teams",
	"PATCH /api/v1/teams/{name}",
	"POST /api/v1/users",
}

func (s *Server) routes() {
	healthz := func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
	readyz := func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.opts.Store.Teams(r.Context()); err != nil {
			writeError(w, fmt.Errorf("store: %v: %w", err, core.ErrUnavailable))
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
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
	s.handle("GET /api/v1/whoami", s.whoami)
	s.handle("POST /api/v1/workloads", s.submit)
	s.handle("GET /api/v1/workloads", s.listWorkloads)
	s.handle("GET /api/v1/workloads/{id}", s.getWorkload)
	s.handle("DELETE /api/v1/workloads/{id}", s.cancelWorkload)
	s.handle("GET /api/v1/workloads/{id}/events", s.events)
	s.mux.Handle("GET /api/v1/workloads/{id}/logs", s.authenticated(s.logs))
	s.handle("GET /api/v1/nodes", s.nodes)
	s.handle("GET /api/v1/priorityclasses", s.priorityClasses)
	s.handle("GET /api/v1/teams", s.teams)
	s.handle("POST /api/v1/teams", s.createTeam)
	s.handle("PATCH /api/v1/teams/{name}", s.setQuota)
	s.handle("POST /api/v1/users", s.createUser)
	// A path that exists with other methods answers 405 with Allow;
	// anything else under /api/ is a JSON 404.
	probe := http.NewServeMux()
	for _, route := range Routes {
		probe.HandleFunc(route, func(http.ResponseWriter, *http.Request) {})
	}
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			r2 := r.Clone(r.Context())
			r2.Method = m
			if _, pattern := probe.Handler(r2); pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, fmt.Errorf("%s is not allowed on %s (allowed: %s): %w", r.Method, r.URL.Path, strings.Join(allow, ", "), errMethod))
			return
		}
		writeError(w, fmt.Errorf("no such endpoint %s %s: %w", r.Method, r.URL.Path, core.ErrNotFound))
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	s.mux.ServeHTTP(w, r)
}

// reply is what a handler returns: a status and a body to encode as JSON.
type reply struct {
	status int
	body   any
	header http.Header
}

type handlerFunc func(r *http.Request, u *core.User) (reply, error)

type userKey struct{}

// handle registers an authenticated JSON handler: the one place where
// results are encoded and errors mapped to status codes.
func (s *Server) handle(pattern string, h handlerFunc) {
	s.mux.Handle(pattern, s.authenticated(func(w http.ResponseWriter, r *http.Request, u *core.User) {
		rep, err := h(r, u)
		if err != nil {
			if status, _ := classify(err); status >= 500 {
				s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeError(w, err)
			return
		}
		for k, v := range rep.header {
			w.Header()[k] = v
		}
		writeJSON(w, rep.status, rep.body)
	}))
}

// authenticated resolves the bearer token to a user, or answers 401.
func (s *Server) authenticated(h func(http.ResponseWriter, *http.Request, *core.User)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		tok = strings.TrimSpace(tok)
		if !ok || tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gpufleet"`)
			writeError(w, errUnauthenticated)
			return
		}
		u, err := s.opts.Store.UserByTokenHash(r.Context(), HashToken(tok), s.opts.Now())
		if err != nil {
			if errors.Is(err, core.ErrNotFound) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="gpufleet", error="invalid_token"`)
				writeError(w, errUnauthenticated)
				return
			}
			writeError(w, err)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)), u)
	})
}

var (
	errUnauthenticated = errors.New("unauthenticated")
	errMethod          = errors.New("method not allowed")
)

// HashToken is how tokens are stored: the hex SHA-256 of the token. Tokens
// are 256-bit random values, so a fast hash suffices (no password stretching
// is needed against guessing).
func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func writeJSON(w http.ResponseWriter, status int, body any) {
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

// classify maps an error to its HTTP status and wire code. It is the only
// place that does.
func classify(err error) (int, string) {
	var fe *fieldErrors
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, api.CodeTooLarge
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
	case errors.Is(err, core.ErrUnavailable):
		return http.StatusServiceUnavailable, api.CodeUnavailable
	}
	return http.StatusInternalServerError, api.CodeInternal
}

func writeError(w http.ResponseWriter, err error) {
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
	case http.StatusRequestEntityTooLarge:
		e.Message = "request body too large"
	}
	writeJSON(w, status, api.ErrorBody{Error: e})
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

func decodeError(err error) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var fe api.FieldErrors
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.As(err, &fe):
		return &fieldErrors{fields: fe}
	case errors.Is(err, io.EOF):
		return invalid("body", "is empty: a JSON object is expected")
	case errors.As(err, &se):
		return invalid("body", "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return invalid(field, "must be %s, not a JSON %s", jsonType(te.Type), te.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return invalid(strings.Trim(f, `"`), "unknown field")
	}
	return invalid("body", "%s", strings.TrimPrefix(msg, "json: "))
}

// jsonType names the JSON type a Go type decodes from.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonType(t.Elem())
	}
	return "a " + t.String()
}
