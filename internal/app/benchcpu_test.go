package app

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// cpuSplit is the CPU time a benchmark's process spent while it measured,
// split by whose work it was: the clients' (the goroutines a benchmark
// labels side=client, and those they start, such as their connections'
// read and write loops), the server's (every other goroutine: HTTP
// handlers, the store's writer, the control loop), and the runtime's own
// (samples with no goroutine's code on the stack: the collector's
// background workers, the scheduler), which is shared between the two in
// proportion to their samples. The shares come from a CPU profile taken at
// profileHz, the total from the operating system (getrusage).
type cpuSplit struct {
	total, client, server time.Duration
	samples               int64
	// parts splits total by what the samples ran (part), for the
	// breakdown in docs/PERFORMANCE.md.
	parts map[string]time.Duration
}

// profileHz is the sampling rate of the profile the split is taken from:
// ten times pprof's default, so that a run of a few seconds on two cores
// gives thousands of samples (the share is then known to about 1%); the
// samples cost about 1% of the CPU.
const profileHz = 1000

// profileDir, when set, keeps each profile measureCPU takes there, named
// for its benchmark (go tool pprof -tagignore side=client ... shows the
// server's share).
var profileDir = flag.String("submitprofile", "", "a directory where the CPU-split benchmarks keep their profiles")

// breakdown adds to the CPU-split benchmarks' figures the CPU of each part
// of the work per call (see parts): what docs/PERFORMANCE.md's breakdown
// is made of.
var breakdown = flag.Bool("submitbreakdown", false, "report the CPU of each part of the work per call")

// clientSide labels the goroutines of a benchmark's clients (withClient).
var clientSide = pprof.Labels("side", "client")

// withClient runs fn as client work: in a goroutine labelled side=client,
// whose goroutines inherit the label.
func withClient(fn func()) {
	pprof.Do(context.Background(), clientSide, func(context.Context) { fn() })
}

// measureCPU runs fn under a CPU profile and returns the CPU the process
// used meanwhile, split as cpuSplit says.
func measureCPU(b *testing.B, fn func()) cpuSplit {
	var buf bytes.Buffer
	// StartCPUProfile sets pprof's rate (100 Hz) unless one is set: a
	// higher one set first stays, and the runtime says on stderr that it
	// kept it.
	runtime.SetCPUProfileRate(profileHz)
	if err := pprof.StartCPUProfile(&buf); err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime(b)
	fn()
	total := cpuTime(b) - cpu0
	pprof.StopCPUProfile()
	if *profileDir != "" {
		name := filepath.Join(*profileDir, strings.NewReplacer("/", "_", "=", "-").Replace(b.Name())+".pprof")
		if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		b.Fatal(err)
	}
	var client, server, rt int64
	parts := map[string]int64{}
	for _, s := range p.Sample {
		n := s.Value[0]
		side := "server-"
		switch {
		case len(s.Label["side"]) > 0:
			client += n
			side = "client-"
		case runtimeOnly(s):
			rt += n
			parts["gc"] += n
			continue
		default:
			server += n
		}
		parts[side+part(s)] += n
	}
	out := cpuSplit{total: total, samples: client + server + rt, parts: map[string]time.Duration{}}
	if own := client + server; own > 0 {
		out.client = time.Duration(float64(total) * float64(client) / float64(own))
		out.server = total - out.client
	}
	for name, n := range parts {
		out.parts[name] = time.Duration(float64(total) * float64(n) / float64(out.samples))
	}
	return out
}

// parts name what a sample ran by the innermost of its functions that
// one names (the first prefix or substring, in this order, that matches):
// the store (SQLite, PostgreSQL, the writer), JSON, the token's check and
// the caller's rights (authz), the request's validation, the control
// loop's cycles, and HTTP (the net/http server or client, the API
// server's and client's own code). A sample that none names is "other".
var parts = []struct{ part, match string }{
	{"authz", "apiserver.(*Server).authenticate"},
	{"authz", "apiserver.(*call).authorize"},
	{"authz", "store.(*Store).UserByTokenHash"},
	{"json", "encoding/json."},
	{"validate", "api.(*Workload).Validate"},
	{"validate", "api.Valid"},
	{"validate", "core.Feasible"},
	{"validate", "apiserver.(*Server).toCore"},
	{"store", "gpufleet/internal/store."},
	{"store", "modernc.org/"},
	{"store", "database/sql."},
	{"store", "github.com/jackc/"},
	{"store", "unix.Fdatasync"},
	{"loop", "gpufleet/internal/control."},
	{"loop", "gpufleet/internal/sched."},
	{"loop", "gpufleet/internal/app."},
	{"http", "net/http."},
	{"http", "net."},
	{"http", "bufio."},
	{"http", "internal/poll."},
	{"http", "gpufleet/internal/apiserver."},
	{"http", "gpufleet/internal/portal."},
	{"http", "gpufleet/api."},
}

// part is the part (see parts) sample s ran.
func part(s *profile.Sample) string {
	for _, loc := range s.Location { // innermost first
		for _, l := range loc.Line {
			if l.Function == nil {
				continue
			}
			for _, p := range parts {
				if strings.Contains(l.Function.Name, p.match) {
					return p.part
				}
			}
		}
	}
	return "other"
}

// runtimeOnly reports whether sample s ran no goroutine's code: every frame
// is the runtime's (the collector's workers, the scheduler looking for work).
func runtimeOnly(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil && !strings.HasPrefix(l.Function.Name, "runtime.") {
				return false
			}
		}
	}
	return true
}
