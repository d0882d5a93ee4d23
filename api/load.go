package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
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
	// part; not both. Default one minute.
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
