package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
)

// DefaultDrain is how long requests in flight at a step's end may take.
const DefaultDrain = 30 * time.Second

// Config is one run of the generator.
type Config struct {
	// Protocol is api.ProtocolOpenAI or api.ProtocolHTTP; Path is the
	// path requested and Host the Host header sent.
	Protocol string
	Path     string
	Host     string
	// Requests are the request bodies, sent in turn; none sends GET
	// (http only).
	Requests [][]byte
	// Steps are the concurrencies, in order.
	Steps []int
	// Duration (or Count, when Duration is 0) bounds each step's
	// measured part; Warmup comes before it; Drain (default
	// DefaultDrain) is what requests in flight at its end may take.
	Duration time.Duration
	Count    int
	Warmup   time.Duration
	Drain    time.Duration
	// Dial opens a connection to the workload's port.
	Dial func(ctx context.Context) (net.Conn, error)
}

// Run drives the steps in order and returns what each measured. It
// returns early, with ctx's error, when ctx ends; the step it cut short is
// among those returned, its Note saying so.
func Run(ctx context.Context, c Config) ([]accept.LoadStepRecord, error) {
	if c.Drain <= 0 {
		c.Drain = DefaultDrain
	}
	bodies, err := prepare(c.Protocol, c.Requests)
	if err != nil {
		return nil, err
	}
	most := 1
	for _, n := range c.Steps {
		most = max(most, n)
	}
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return c.Dial(ctx) },
		MaxIdleConnsPerHost: most,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
	}
	defer tr.CloseIdleConnections()
	if err := reachable(ctx, c.Dial); err != nil {
		return nil, err
	}
	g := &generator{c: c, bodies: bodies, client: &http.Client{Transport: tr}}
	var out []accept.LoadStepRecord
	for _, n := range c.Steps {
		rec := g.step(ctx, n)
		out = append(out, rec)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// reachable waits until the workload's port accepts a connection (a
// workload without a readiness check may run a moment before it
// listens), trying again every reachPause, until ctx ends.
func reachable(ctx context.Context, dial func(context.Context) (net.Conn, error)) error {
	for {
		conn, err := dial(ctx)
		if err == nil {
			conn.Close()
			return nil
		}
		pause(ctx, reachPause)
		if ctx.Err() != nil {
			return fmt.Errorf("the workload's port never accepted a connection: %v", err)
		}
	}
}

// reachPause is how often reachable tries the port.
const reachPause = 100 * time.Millisecond

// prepare makes the bodies to send: an openai request that does not say
// whether to stream is streamed ("stream": true), so that its time to
// first token is measured.
func prepare(protocol string, reqs [][]byte) ([][]byte, error) {
	if protocol != api.ProtocolOpenAI {
		return reqs, nil
	}
	out := make([][]byte, len(reqs))
	for i, r := range reqs {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r, &m); err != nil {
			return nil, fmt.Errorf("request %d: an openai request is a JSON object: %w", i+1, err)
		}
		if _, ok := m["stream"]; ok {
			out[i] = r
			continue
		}
		m["stream"] = json.RawMessage("true")
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

type generator struct {
	c      Config
	bodies [][]byte
	client *http.Client
	next   atomic.Int64
}

// step runs one step at concurrency n.
func (g *generator) step(ctx context.Context, n int) accept.LoadStepRecord {
	start := time.Now()
	from := start.Add(g.c.Warmup)
	rec := accept.LoadStepRecord{Concurrency: n, Start: from}
	// Requests may outlive the step's end by Drain, no more.
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stopAt time.Time
	if g.c.Duration > 0 {
		stopAt = from.Add(g.c.Duration)
		reqCtx, cancel = context.WithDeadline(reqCtx, stopAt.Add(g.c.Drain))
		defer cancel()
	}
	limit := int64(g.c.Count)
	if g.c.Duration > 0 {
		limit = accept.MaxLoadCount
	}
	var mu sync.Mutex
	var started atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				now := time.Now()
				if !stopAt.IsZero() && !now.Before(stopAt) {
					return
				}
				measured := !now.Before(from)
				if measured && started.Add(1) > limit {
					return
				}
				r := g.send(reqCtx)
				if r.Err != "" {
					// A workload that refuses at once is not asked again
					// in a tight loop.
					pause(ctx, failurePause)
				}
				if !measured {
					continue
				}
				if r.Err != "" && reqCtx.Err() != nil && ctx.Err() == nil {
					r.Err = fmt.Sprintf("cut off: still unanswered %s after the step's end", g.c.Drain)
				}
				mu.Lock()
				rec.Requests = append(rec.Requests, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rec.End = from
	for _, r := range rec.Requests {
		if end := r.Start.Add(time.Duration(r.LatencyMs * float64(time.Millisecond))); end.After(rec.End) {
			rec.End = end
		}
	}
	if ctx.Err() != nil {
		rec.Note = "cut short: the stage ended (its deadline, or the server stopping)"
	}
	return rec
}

// failurePause is how long a worker waits after a failed request before
// its next.
const failurePause = 20 * time.Millisecond

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// send sends the next request and measures it.
func (g *generator) send(ctx context.Context) accept.LoadRequest {
	method, body := http.MethodGet, []byte(nil)
	if len(g.bodies) > 0 {
		method, body = http.MethodPost, g.bodies[int(g.next.Add(1)-1)%len(g.bodies)]
	}
	r := accept.LoadRequest{TTFTMs: math.NaN()}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+g.c.Host+g.c.Path, bytes.NewReader(body))
	if err != nil {
		r.Err = err.Error()
		return r
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.c.Protocol == api.ProtocolOpenAI {
		req.Header.Set("Accept", "text/event-stream, application/json")
	}
	r.Start = time.Now()
	resp, err := g.client.Do(req)
	if err != nil {
		r.LatencyMs, r.Err = ms(time.Since(r.Start)), cause(err)
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		r.LatencyMs = ms(time.Since(r.Start))
		r.Err = strings.TrimSpace(fmt.Sprintf("HTTP %d: %s", resp.StatusCode, firstLine(b)))
		return r
	}
	answer := bufio.NewReader(&limited{r: resp.Body, left: accept.MaxLoadAnswerBytes})
	switch {
	case g.c.Protocol == api.ProtocolOpenAI && streamed(resp, answer):
		err = readStream(answer, &r)
	case g.c.Protocol == api.ProtocolOpenAI:
		err = readAnswer(answer, &r)
	default:
		_, err = io.Copy(io.Discard, answer)
	}
	r.LatencyMs = ms(time.Since(r.Start))
	if err != nil {
		r.Err = cause(err)
	}
	return r
}

// streamed reports whether an answer is server-sent events: it says so
// (text/event-stream), or, whatever it says, it begins with "data:" (a
// server that streams without the header).
func streamed(resp *http.Response, answer *bufio.Reader) bool {
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return true
	}
	for n := 8; n <= 64; n *= 2 {
		b, err := answer.Peek(n)
		if t := bytes.TrimLeft(b, " \t\r\n"); len(t) >= 5 || err != nil {
			return bytes.HasPrefix(t, []byte("data:"))
		}
	}
	return false
}

// chunk is what the generator reads of an OpenAI answer or streamed
// chunk: completions' text, chat's delta, the usage, an error.
type chunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
		} `json:"delta"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// carries reports whether the chunk carries output.
func (c *chunk) carries() bool {
	for _, ch := range c.Choices {
		if ch.Text != "" || ch.Delta.Content != "" || ch.Delta.ReasoningContent != "" || ch.Message.Content != "" {
			return true
		}
	}
	return false
}

// errNoToken fails a streamed answer that carried no output.
var errNoToken = errors.New("the answer streamed no token")

// readStream reads server-sent events: each "data:" line a chunk, until
// "data: [DONE]" or the end. The first chunk that carries output is the
// first token; each later one is a gap of the inter-token latency.
func readStream(body io.Reader, r *accept.LoadRequest) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), accept.MaxLoadAnswerBytes)
	var last time.Time
	chunks, usage := 0, -1
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		line = strings.TrimSpace(line)
		if line == "[DONE]" {
			break
		}
		var c chunk
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return fmt.Errorf("a streamed chunk is not JSON: %.80s", line)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return fmt.Errorf("the stream reported an error: %.200s", c.Error)
		}
		if c.Usage != nil {
			usage = c.Usage.CompletionTokens
		}
		if !c.carries() {
			continue
		}
		now := time.Now()
		if chunks == 0 {
			r.TTFTMs = ms(now.Sub(r.Start))
		} else {
			r.ITLMs = append(r.ITLMs, ms(now.Sub(last)))
		}
		last = now
		chunks++
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if chunks == 0 {
		return errNoToken
	}
	r.OutputTokens = chunks
	if usage >= 0 {
		r.OutputTokens = usage
	}
	return nil
}

// readAnswer reads a whole (not streamed) OpenAI answer: its output
// tokens are usage.completion_tokens.
func readAnswer(body io.Reader, r *accept.LoadRequest) error {
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	var c chunk
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("the answer is not JSON: %.80s", firstLine(b))
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return fmt.Errorf("the answer is an error: %.200s", c.Error)
	}
	if c.Usage != nil {
		r.OutputTokens = c.Usage.CompletionTokens
	}
	return nil
}

// errTooLong fails an answer longer than accept.MaxLoadAnswerBytes.
var errTooLong = fmt.Errorf("the answer is longer than %d bytes", accept.MaxLoadAnswerBytes)

// limited reads at most left bytes, then fails with errTooLong.
type limited struct {
	r    io.Reader
	left int
}

func (l *limited) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, errTooLong
		}
		return 0, err
	}
	p = p[:min(len(p), l.left)]
	n, err := l.r.Read(p)
	l.left -= n
	return n, err
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cause is an error's message without the method and URL the client
// adds.
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
