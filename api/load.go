package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Protocols of a load stage's generator.
const (
	// ProtocolOpenAI sends OpenAI-style completions or chat completions
	// and reads their answers as streamed server-sent events (time to
	// first token, inter-token latency) or as one JSON answer.
	ProtocolOpenAI = "openai"
	// ProtocolHTTP sends each request body as a POST (a GET when there
	// are none) and measures the whole answer.
	ProtocolHTTP = "http"
)

// LoadProtocols lists the protocols, for messages.
var LoadProtocols = []string{ProtocolOpenAI, ProtocolHTTP}

// Bounds on a load stage's generator.
const (
	MaxLoadConcurrency  = 1000      // requests in flight at once
	MaxLoadSteps        = 16        // concurrency steps
	MaxLoadRequests     = 10_000    // request bodies, inline or lines of a requestsFile
	MaxLoadRequestBytes = 64 << 10  // one request body
	MaxLoadAnswerBytes  = 1 << 20   // what is read of one answer
	MaxLoadFileBytes    = 16 << 20  // a requestsFile
	MaxLoadCount        = 1_000_000 // measured requests of one step
	MaxLoadStepDuration = time.Hour // duration or warmup of one step
	DefaultLoadDuration = time.Minute
)

// LoadSpec is a load stage's built-in load generator: once the stage's
// workload serves, gpufleet sends it requests itself, through the path
// the proxy takes, step by step at each concurrency, and measures them.
type LoadSpec struct {
	// Port names a declared port of the stage's workload, by name or
	// number.
	Port PortRef `json:"port"`
	// Protocol is one of LoadProtocols.
	Protocol string `json:"protocol"`
	// Path is the HTTP path requested: /v1/completions by default for
	// openai, / for http.
	Path string `json:"path,omitempty"`
	// Requests are the request bodies (JSON), sent in turn; RequestsFile
	// names a JSON-lines file of them in a team volume instead
	// ("VOLUME/PATH/IN/IT.jsonl"). Not both. openai needs one of them.
	Requests     []json.RawMessage `json:"requests,omitempty"`
	RequestsFile string            `json:"requestsFile,omitempty"`
	// Concurrency is the requests kept in flight: one number, or a list
	// of steps, run in order and reported each on its own. Default 1.
	Concurrency Concurrency `json:"concurrency,omitempty"`
	// Duration ("60s") or Count (requests) bounds each step's measured
	// part; not both. Default DefaultLoadDuration.
	Duration string `json:"duration,omitempty"`
	Count    int    `json:"count,omitempty"`
	// Warmup ("5s") is sent before each step's measured part and not
	// counted.
	Warmup string `json:"warmup,omitempty"`
}

// PortRef names a port by its name ("http") or its number ("8000"); a
// JSON number is read as its decimal.
type PortRef string

// UnmarshalJSON reads a string or a whole number.
func (p *PortRef) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		if _, err := strconv.Atoi(n.String()); err != nil {
			return fmt.Errorf("%s is not a port number", n)
		}
		*p = PortRef(n.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a port is a name or a number")
	}
	*p = PortRef(s)
	return nil
}

// Concurrency is one concurrency or a list of steps: read from a number
// or a list, written as a list.
type Concurrency []int

// UnmarshalJSON reads a whole number or a list of them.
func (c *Concurrency) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var l []int
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("concurrency is a whole number or a list of them")
		}
		*c = l
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("concurrency is a whole number or a list of them")
	}
	*c = Concurrency{n}
	return nil
}

// Steps is the concurrency of each step: Concurrency, or [1].
func (l *LoadSpec) Steps() []int {
	if len(l.Concurrency) == 0 {
		return []int{1}
	}
	return l.Concurrency
}

// RequestPath is the path requested: Path, or the protocol's default.
func (l *LoadSpec) RequestPath() string {
	switch {
	case l.Path != "":
		return l.Path
	case l.Protocol == ProtocolOpenAI:
		return "/v1/completions"
	}
	return "/"
}

// StepDuration is each step's measured time (0 with Count) and Warmup is
// its warm-up; both as Validate accepts them (0 when they do not parse).
func (l *LoadSpec) StepDuration() time.Duration {
	if l.Count > 0 {
		return 0
	}
	if l.Duration == "" {
		return DefaultLoadDuration
	}
	d, _ := time.ParseDuration(l.Duration)
	return d
}

// WarmupDuration is each step's warm-up.
func (l *LoadSpec) WarmupDuration() time.Duration {
	d, _ := time.ParseDuration(l.Warmup)
	return d
}

// SplitRequestsFile splits a requestsFile into its volume and the path in
// it; ok is false when it is not VOLUME/PATH with a clean relative path.
func SplitRequestsFile(f string) (volume, file string, ok bool) {
	volume, file, found := strings.Cut(f, "/")
	if !found || !ValidName(volume) || file == "" || len(f) > 1024 || strings.IndexByte(f, 0) >= 0 ||
		path.Clean(file) != file || file == "." || strings.HasPrefix(file, "/") || file == ".." || strings.HasPrefix(file, "../") {
		return "", "", false
	}
	return volume, file, true
}

// DeclaredPort finds the port of w that ref names (by name or number).
func DeclaredPort(w *Workload, ref PortRef) (Port, bool) {
	for _, p := range w.Ports {
		if (p.Name != "" && p.Name == string(ref)) || strconv.Itoa(p.Port) == string(ref) {
			return p, true
		}
	}
	if w.Kind == KindNotebook && len(w.Ports) == 0 && string(ref) == strconv.Itoa(NotebookPort) {
		return Port{Port: NotebookPort}, true
	}
	return Port{}, false
}

// validate checks a load spec of a stage whose workload is w (nil when
// the stage has none), each problem under at ("stages[2].load").
func (l *LoadSpec) validate(at string, w *Workload) []FieldError {
	var errs []FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: at + "." + field, Problem: fmt.Sprintf(format, args...)})
	}
	switch {
	case l.Port == "":
		add("port", "is required: a declared port of the stage's workload, by name or number")
	case w != nil:
		if _, ok := DeclaredPort(w, l.Port); !ok {
			add("port", "%q is not a port the stage's workload declares (it declares %s)", string(l.Port), declaredPorts(w))
		}
	}
	switch {
	case l.Protocol == "":
		add("protocol", "is required: one of %s", strings.Join(LoadProtocols, ", "))
	case !slices.Contains(LoadProtocols, l.Protocol):
		add("protocol", "unknown protocol %q: want one of %s", l.Protocol, strings.Join(LoadProtocols, ", "))
	}
	if p := l.Path; p != "" && (!strings.HasPrefix(p, "/") || len(p) > 1024 || strings.ContainsAny(p, " \t\r\n#")) {
		add("path", "%q: want an HTTP path such as /v1/completions, at most 1024 characters", p)
	}
	switch {
	case len(l.Requests) > 0 && l.RequestsFile != "":
		add("requestsFile", "give requests or requestsFile, not both")
	case len(l.Requests) == 0 && l.RequestsFile == "" && l.Protocol == ProtocolOpenAI:
		add("requests", "an openai load needs requests (such as {\"prompt\": \"...\", \"max_tokens\": 128}) or a requestsFile")
	case len(l.Requests) > MaxLoadRequests:
		add("requests", "at most %d requests (a requestsFile holds as many)", MaxLoadRequests)
	}
	for i, r := range l.Requests {
		if problem := LoadRequestProblem(l.Protocol, r); problem != "" {
			add(fmt.Sprintf("requests[%d]", i), "%s", problem)
		}
	}
	if l.RequestsFile != "" {
		if _, _, ok := SplitRequestsFile(l.RequestsFile); !ok {
			add("requestsFile", "%q: want VOLUME/PATH, a file in one of the team's volumes (a clean relative path in it, no '..')", l.RequestsFile)
		}
	}
	if len(l.Concurrency) > MaxLoadSteps {
		add("concurrency", "at most %d steps", MaxLoadSteps)
	}
	for i, c := range l.Concurrency {
		switch {
		case c < 1 || c > MaxLoadConcurrency:
			add("concurrency", "%d: want from 1 to %d requests in flight", c, MaxLoadConcurrency)
		case slices.Contains(l.Concurrency[:i], c):
			add("concurrency", "%d is a step twice", c)
		}
	}
	duration := func(field, v string) {
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxLoadStepDuration || (field == "duration" && d == 0) {
			add(field, "%q: want a duration such as 30s, at most %s", v, MaxLoadStepDuration)
		}
	}
	duration("duration", l.Duration)
	duration("warmup", l.Warmup)
	switch {
	case l.Count < 0 || l.Count > MaxLoadCount:
		add("count", "must be from 1 to %d requests a step", MaxLoadCount)
	case l.Count > 0 && l.Duration != "":
		add("count", "give duration or count, not both")
	}
	return errs
}

// LoadRequestProblem says what is wrong with one request body of a
// protocol ("" when nothing): too long, not JSON, or, for openai, not an
// object.
func LoadRequestProblem(protocol string, r json.RawMessage) string {
	if len(r) > MaxLoadRequestBytes {
		return fmt.Sprintf("is %d bytes; a request is at most %d", len(r), MaxLoadRequestBytes)
	}
	if !json.Valid(r) {
		return "is not JSON"
	}
	if t := bytes.TrimSpace(r); protocol == ProtocolOpenAI && (len(t) == 0 || t[0] != '{') {
		return "an openai request is a JSON object such as {\"prompt\": \"...\", \"max_tokens\": 128}"
	}
	return ""
}

// declaredPorts lists a workload's ports for messages: "http 8000, 9000"
// or "no port".
func declaredPorts(w *Workload) string {
	if len(w.Ports) == 0 {
		return "no port"
	}
	s := make([]string, len(w.Ports))
	for i, p := range w.Ports {
		s[i] = strconv.Itoa(p.Port)
		if p.Name != "" {
			s[i] = p.Name + " " + s[i]
		}
	}
	return strings.Join(s, ", ")
}

// LoadStep is what one concurrency step of a load stage measured: its
// concurrency, its measured window and its metrics (requests_total,
// error_rate, requests_per_second, output_tokens_per_second, and p50_,
// p95_, p99_, mean_ and count_ of latency_ms, ttft_ms, itl_ms and
// tpot_ms).
type LoadStep struct {
	Concurrency int       `json:"concurrency"`
	StartedAt   time.Time `json:"startedAt"`
	FinishedAt  time.Time `json:"finishedAt"`
	Metrics     []Metric  `json:"metrics"`
}

// Disruption is what a failure stage did to one of its workloads: when
// gpufleet disrupted it and when it ran (or served) again.
type Disruption struct {
	Workload    string     `json:"workload"`
	At          time.Time  `json:"at"`
	RecoveredAt *time.Time `json:"recoveredAt,omitempty"`
}
