package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/accept"
)

// server is an OpenAI-style server for the tests: it streams tokens
// chunks after first (then gap apart) to a request that asks to stream,
// answers the whole at once otherwise, and keeps how many requests it
// held at once at most and what it was sent.
type server struct {
	first, gap time.Duration
	tokens     int
	inFlight   atomic.Int64
	most       atomic.Int64
	mu         sync.Mutex
	bodies     []map[string]any
	// reached is closed once the server has been sent reachAt requests
	// (0: never).
	reachAt int
	reached chan struct{}
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	if len(s.bodies) == s.reachAt {
		close(s.reached)
	}
	s.mu.Unlock()
	switch body["prompt"] {
	case "fail":
		http.Error(w, "model not loaded\nmore", http.StatusServiceUnavailable)
		return
	case "huge":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"text":"` + strings.Repeat("x", accept.MaxLoadAnswerBytes) + `"}]}`))
		return
	}
	if body["stream"] != true {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"choices":[{"text":"%s"}],"usage":{"completion_tokens":%d}}`, strings.Repeat("t", s.tokens), s.tokens)
		return
	}
	if body["prompt"] != "bare" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	time.Sleep(s.first) // the bubble's clock: the model's time to first token
	for i := range s.tokens {
		if i > 0 {
			time.Sleep(s.gap) // and between tokens
		}
		fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
		w.(http.Flusher).Flush()
	}
	fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", s.tokens*2)
}

// pipes is a net.Listener whose connections are made in memory by dial
// (net.Pipe), so that a test that serves on it can run in a synctest
// bubble: its connections block on channels of the bubble.
type pipes struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipes() *pipes { return &pipes{conns: make(chan net.Conn), done: make(chan struct{})} }

func (p *pipes) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipes) Close() error { p.once.Do(func() { close(p.done) }); return nil }

func (p *pipes) Addr() net.Addr { return &net.UnixAddr{Name: "pipes", Net: "pipe"} }

func (p *pipes) dial(ctx context.Context) (net.Conn, error) {
	a, b := net.Pipe()
	select {
	case p.conns <- b:
		return a, nil
	case <-p.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start serves s in memory and returns a Config that dials it (counting
// the dials). The tests that use it run in a synctest bubble: the
// server's first token and gaps (time.Sleep) are on the bubble's clock,
// and so is what the generator measures of them.
func start(t *testing.T, s *server, reqs ...string) (Config, *atomic.Int64) {
	t.Helper()
	ln := newPipes()
	srv := &http.Server{Handler: s}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(ln) }()
	// Shutdown waits for the handlers, which may still sleep for a request
	// that its client gave up.
	t.Cleanup(func() { srv.Shutdown(context.Background()); <-served })
	dials := &atomic.Int64{}
	c := Config{Protocol: api.ProtocolOpenAI, Path: "/v1/chat/completions", Host: "localhost:8000",
		Dial: func(ctx context.Context) (net.Conn, error) {
			dials.Add(1)
			return ln.dial(ctx)
		}}
	for _, r := range reqs {
		c.Requests = append(c.Requests, []byte(r))
	}
	return c, dials
}

// A streamed answer gives each request its time to first token, the gaps
// between its tokens and its output tokens (usage's, over the chunks
// counted); the requests are streamed without being asked, kept at the
// step's concurrency, and reach the server through Dial.
func TestStreamedAnswersAreMeasured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &server{first: 30 * time.Millisecond, gap: 5 * time.Millisecond, tokens: 5}
		c, dials := start(t, s, `{"prompt":"a","max_tokens":5}`, `{"messages":[{"role":"user","content":"b"}]}`)
		c.Steps, c.Count = []int{3}, 12
		steps, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if len(steps) != 1 || len(steps[0].Requests) != 12 || steps[0].Concurrency != 3 {
			t.Fatalf("steps %+v, want one of 12 requests at concurrency 3", steps)
		}
		for _, r := range steps[0].Requests {
			if r.Err != "" {
				t.Fatalf("request failed: %s", r.Err)
			}
			// On the bubble's clock the figures are the server's own:
			// the first token after 30 ms, four gaps of 5 ms.
			if r.TTFTMs != 30 || r.LatencyMs != 50 || !slices.Equal(r.ITLMs, []float64{5, 5, 5, 5}) || r.OutputTokens != 10 {
				t.Errorf("request %+v: want TTFT 30 ms, 4 gaps of 5 ms, latency 50 ms, 10 output tokens (usage)", r)
			}
		}
		if m := s.most.Load(); m != 3 {
			t.Errorf("the server held at most %d requests at once, want 3", m)
		}
		if d := dials.Load(); d < 1 || d > 12 {
			t.Errorf("%d dials, want between 1 and 12 (connections reused)", d)
		}
		for _, b := range s.bodies {
			if b["stream"] != true {
				t.Errorf("a request went without stream: true: %v", b)
			}
		}
		if !steps[0].End.After(steps[0].Start) {
			t.Errorf("window %s to %s", steps[0].Start, steps[0].End)
		}
	})
}

// An answer that streams server-sent events without saying so in its
// Content-Type is still read as a stream.
func TestStreamWithoutItsHeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &server{first: 5 * time.Millisecond, gap: time.Millisecond, tokens: 3}
		c, _ := start(t, s, `{"prompt":"bare"}`)
		c.Steps, c.Count = []int{1}, 2
		steps, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range steps[0].Requests {
			if r.Err != "" || math.IsNaN(r.TTFTMs) || len(r.ITLMs) != 2 || r.OutputTokens != 6 {
				t.Errorf("a stream without its header measured as %+v", r)
			}
		}
	})
}

// A request that says not to stream is answered whole: no TTFT, its
// output tokens from usage; an http load measures the answer alone.
func TestWholeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &server{tokens: 7}
		c, _ := start(t, s, `{"prompt":"a","stream":false}`)
		c.Steps, c.Count = []int{1}, 2
		steps, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range steps[0].Requests {
			if r.Err != "" || !math.IsNaN(r.TTFTMs) || r.OutputTokens != 7 || len(r.ITLMs) != 0 {
				t.Errorf("whole answer measured as %+v", r)
			}
		}
		c.Protocol = api.ProtocolHTTP
		steps, err = Run(context.Background(), c)
		if err != nil || len(steps[0].Requests) != 2 || steps[0].Requests[0].Err != "" || steps[0].Requests[0].OutputTokens != 0 {
			t.Errorf("http load: %+v, %v", steps, err)
		}
	})
}

// A refusal, an answer longer than the bound and a workload that cannot
// be reached are failures, each saying why.
func TestFailuresSayWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &server{tokens: 1}
		for _, tc := range []struct{ body, want string }{
			{`{"prompt":"fail"}`, "HTTP 503: model not loaded"},
			{`{"prompt":"huge","stream":false}`, fmt.Sprintf("longer than %d bytes", accept.MaxLoadAnswerBytes)},
		} {
			c, _ := start(t, s, tc.body)
			c.Steps, c.Count = []int{1}, 1
			steps, err := Run(context.Background(), c)
			if err != nil || len(steps[0].Requests) != 1 || !strings.Contains(steps[0].Requests[0].Err, tc.want) {
				t.Errorf("%s: %+v, %v; want a failure saying %q", tc.body, steps, err, tc.want)
			}
		}
		// A workload whose port never accepts a connection gets no load; one
		// that goes away after accepting the first fails every request.
		c, _ := start(t, s, `{"prompt":"a"}`)
		gone := func(context.Context) (net.Conn, error) {
			return nil, fmt.Errorf("workload wl-x is Pending, not running")
		}
		c.Dial = gone
		c.Steps, c.Count = []int{2}, 4
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if steps, err := Run(ctx, c); err == nil || !strings.Contains(err.Error(), "never accepted a connection: workload wl-x is Pending, not running") {
			t.Errorf("never reachable: %+v, %v", steps, err)
		}
		var dials atomic.Int64
		c.Dial = func(ctx context.Context) (net.Conn, error) {
			if dials.Add(1) == 1 {
				a, b := net.Pipe()
				b.Close()
				return a, nil
			}
			return gone(ctx)
		}
		steps, err := Run(context.Background(), c)
		if err != nil || len(steps[0].Requests) != 4 || !strings.Contains(steps[0].Requests[3].Err, "Pending, not running") {
			t.Errorf("gone: %+v, %v", steps, err)
		}
		ms, _, _ := accept.LoadResults(steps)
		if v, ok := value(ms, accept.MetricErrorRate); !ok || v != 1 {
			t.Errorf("error_rate %v, want 1", v)
		}
	})
}

// Requests started during the warm-up are not counted; the measured part
// lasts the duration; the steps run in order; a step cut short by ctx
// says so.
func TestWarmupDurationAndSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &server{first: 10 * time.Millisecond, gap: time.Millisecond, tokens: 2}
		c, _ := start(t, s, `{"prompt":"a"}`)
		c.Steps, c.Warmup, c.Duration = []int{1, 2}, 150*time.Millisecond, 300*time.Millisecond
		begin := time.Now()
		steps, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if len(steps) != 2 || steps[0].Concurrency != 1 || steps[1].Concurrency != 2 {
			t.Fatalf("steps %+v", steps)
		}
		for _, st := range steps {
			if len(st.Requests) == 0 {
				t.Errorf("step at %d measured nothing", st.Concurrency)
			}
			for _, r := range st.Requests {
				if r.Start.Before(st.Start) {
					t.Errorf("a request of the warm-up (%s before the measured part) was counted", st.Start.Sub(r.Start))
				}
			}
		}
		if !steps[0].Start.After(begin.Add(140*time.Millisecond)) || !steps[1].Start.After(steps[0].End) {
			t.Errorf("measured parts %s and %s after the start: want the warm-up first, the steps in order", steps[0].Start.Sub(begin), steps[1].Start.Sub(begin))
		}
		if served := len(s.bodies); served <= len(steps[0].Requests)+len(steps[1].Requests) {
			t.Errorf("the server answered %d requests, no more than the measured ones: no warm-up was sent", served)
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.Steps, c.Warmup, c.Duration = []int{1, 2}, 0, time.Hour
		s.mu.Lock()
		s.reachAt, s.reached = len(s.bodies)+3, make(chan struct{})
		s.mu.Unlock()
		go func() {
			<-s.reached
			cancel()
		}()
		steps, err = Run(ctx, c)
		if err == nil || len(steps) != 1 || !strings.Contains(steps[0].Note, "cut short") {
			t.Errorf("cut short: %+v, %v", steps, err)
		}
	})
}

func value(ms []api.Metric, name string) (float64, bool) {
	for _, m := range ms {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// A body that is not an object cannot be an openai request.
func TestPrepareRefusesNonObjects(t *testing.T) {
	c := Config{Protocol: api.ProtocolOpenAI, Requests: [][]byte{[]byte(`[1]`)}, Steps: []int{1}, Count: 1}
	if _, err := Run(context.Background(), c); err == nil || !strings.Contains(err.Error(), "JSON object") {
		t.Errorf("got %v", err)
	}
}
