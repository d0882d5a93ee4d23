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
	for _, s := range p.Sample {
		n := s.Value[0]
		switch {
		case len(s.Label["side"]) > 0:
			client += n
		case runtimeOnly(s):
			rt += n
		default:
			server += n
		}
	}
	out := cpuSplit{total: total, samples: client + server + rt}
	if own := client + server; own > 0 {
		out.client = time.Duration(float64(total) * float64(client) / float64(own))
		out.server = total - out.client
	}
	return out
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
