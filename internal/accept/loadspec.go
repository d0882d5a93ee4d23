package accept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

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

// LoadSteps is the concurrency of each step of l: Concurrency, or [1].
func LoadSteps(l *api.LoadSpec) []int {
	if len(l.Concurrency) == 0 {
		return []int{1}
	}
	return l.Concurrency
}

// LoadPath is the path l requests: Path, or the protocol's default.
func LoadPath(l *api.LoadSpec) string {
	switch {
	case l.Path != "":
		return l.Path
	case l.Protocol == api.ProtocolOpenAI:
		return "/v1/completions"
	}
	return "/"
}

// LoadStepDuration is each step's measured time (0 with Count) and
// LoadWarmup its warm-up; both as CheckCard accepts them (0 when they do
// not parse).
func LoadStepDuration(l *api.LoadSpec) time.Duration {
	if l.Count > 0 {
		return 0
	}
	if l.Duration == "" {
		return DefaultLoadDuration
	}
	d, _ := time.ParseDuration(l.Duration)
	return d
}

// LoadWarmup is each step's warm-up.
func LoadWarmup(l *api.LoadSpec) time.Duration {
	d, _ := time.ParseDuration(l.Warmup)
	return d
}

// SplitRequestsFile splits a requestsFile into its volume and the path in
// it; ok is false when it is not VOLUME/PATH with a clean relative path.
func SplitRequestsFile(f string) (volume, file string, ok bool) {
	volume, file, found := strings.Cut(f, "/")
	if !found || !core.ValidName(volume) || file == "" || len(f) > 1024 || strings.IndexByte(f, 0) >= 0 ||
		path.Clean(file) != file || file == "." || strings.HasPrefix(file, "/") || file == ".." || strings.HasPrefix(file, "../") {
		return "", "", false
	}
	return volume, file, true
}

// DeclaredPort finds the port of w that ref names (by name or number).
func DeclaredPort(w *api.Workload, ref api.PortRef) (api.Port, bool) {
	for _, p := range w.Ports {
		if (p.Name != "" && p.Name == string(ref)) || strconv.Itoa(p.Port) == string(ref) {
			return p, true
		}
	}
	if w.Kind == api.KindNotebook && len(w.Ports) == 0 && string(ref) == strconv.Itoa(core.NotebookPort) {
		return api.Port{Port: core.NotebookPort}, true
	}
	return api.Port{}, false
}

// checkLoad checks a load spec l of a stage whose workload is w (nil when
// the stage has none), each problem under at ("stages[2].load").
func checkLoad(at string, l *api.LoadSpec, w *api.Workload) []api.FieldError {
	var errs api.FieldErrors
	add := func(field, format string, args ...any) { errs.Add(at+"."+field, format, args...) }
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
		add("protocol", "is required: one of %s", strings.Join(api.LoadProtocols, ", "))
	case !slices.Contains(api.LoadProtocols, l.Protocol):
		add("protocol", "unknown protocol %q: want one of %s", l.Protocol, strings.Join(api.LoadProtocols, ", "))
	}
	if p := l.Path; p != "" && (!strings.HasPrefix(p, "/") || len(p) > 1024 || strings.ContainsAny(p, " \t\r\n#")) {
		add("path", "%q: want an HTTP path such as /v1/completions, at most 1024 characters", p)
	}
	switch {
	case len(l.Requests) > 0 && l.RequestsFile != "":
		add("requestsFile", "give requests or requestsFile, not both")
	case len(l.Requests) == 0 && l.RequestsFile == "" && l.Protocol == api.ProtocolOpenAI:
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
	if t := bytes.TrimSpace(r); protocol == api.ProtocolOpenAI && (len(t) == 0 || t[0] != '{') {
		return "an openai request is a JSON object such as {\"prompt\": \"...\", \"max_tokens\": 128}"
	}
	return ""
}

// declaredPorts lists a workload's ports for messages: "http 8000, 9000"
// or "no port".
func declaredPorts(w *api.Workload) string {
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
