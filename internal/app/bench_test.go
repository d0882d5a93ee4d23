package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/store/pgtest"
)

// BenchmarkSubmit measures acknowledged submits through the real HTTP API
// with 32 concurrent clients, into the embedded store (SQLite: WAL, group
// commit, each acknowledged after its fsync) and, in the same run, into
// PostgreSQL run as a deployment runs it (a server of the benchmark's own,
// pgtest.Durable: fsync and synchronous_commit on; skipped without the
// binaries). Each reports submits/s; the p50 and p99 latency; the CPU time
// of the benchmark's process per submit (cpu-us/submit: server and clients
// together, as one process), the server's share of it alone
// (server-cpu-us/submit) and the clients' (client-cpu-us/submit), split by
// a CPU profile (measureCPU); on PostgreSQL, the CPU its processes used per
// submit (pg-cpu-us/submit); and the share of the cores the process kept
// busy. With -count the two stores alternate, so that their ratios can be
// taken run by run (hack/bench-submit.sh).
//
// ("-bench Submit" would also run BenchmarkSubmitToRunning, which starts a
// process for each of its b.N submits.)
//
//	go test ./internal/app -run '^$' -bench '^BenchmarkSubmit$' -benchtime 5000x
func BenchmarkSubmit(b *testing.B) {
	b.Run("store=sqlite", func(b *testing.B) { benchSubmit(b, "", nil) })
	var pg *pgtest.Instance // one server for every run of the sub-benchmark
	b.Run("store=postgres", func(sb *testing.B) {
		if pg == nil {
			pg = pgtest.Durable(b)
		}
		benchSubmit(sb, pg.DB(sb), pg.CPU)
	})
}

func benchSubmit(b *testing.B, storeURL string, storeCPU func() (time.Duration, error)) {
	// However many submits b.N asks for stay pending: the per-team and
	// per-user bounds on pending work (10,000 by default) are raised.
	cfg := testConfig(b, b.TempDir())
	if storeURL != "" {
		cfg.Store = storeURL
		cfg.SecretsKeyFile = filepath.Join(cfg.DataDir, "secrets.key")
	}
	cfg.Limits.MaxPendingPerTeam, cfg.Limits.MaxPendingPerUser = max(b.N+1000, 10000), max(b.N+1000, 10000)
	s := startWith(b, cfg, io.Discard)
	ctx := context.Background()
	const clients = 32
	// Cap the team at no GPU, so the workloads stay pending (QuotaLimit)
	// and the measure is the submit path (API, validation, durable commit)
	// plus the control loop's cycles competing for the CPU. (A GPU model
	// no node has is refused at submit now.)
	zero := int64(0)
	if _, err := s.admin.SetQuota(ctx, "research", &api.TeamQuota{GuaranteedMilliGPU: &zero, LimitMilliGPU: &zero}); err != nil {
		b.Fatal(err)
	}
	w := &api.Workload{Team: "research", Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}}
	var store0 time.Duration
	if storeCPU != nil {
		var err error
		if store0, err = storeCPU(); err != nil {
			b.Fatal(err)
		}
	}
	n := concurrently(b, clients, "submit", s.addr, s.admin.Token, func(cl *api.Client) error {
		_, err := cl.SubmitWorkload(ctx, w, "")
		return err
	})
	if storeCPU != nil {
		store1, err := storeCPU()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64((store1-store0).Microseconds())/float64(max(n, 1)), "pg-cpu-us/submit")
	}
}

// BenchmarkRequestFloor measures, with the 32 clients of BenchmarkSubmit,
// what a request costs with no write: an authenticated read of one pending
// workload (HTTP, the token looked up, authorization, JSON out), the floor
// under a submit's rate on the same machine.
//
//	go test ./internal/app -run '^$' -bench RequestFloor -benchtime 20000x
func BenchmarkRequestFloor(b *testing.B) {
	s := start(b, b.TempDir())
	ctx := context.Background()
	zero := int64(0) // pending for good, as BenchmarkSubmit's
	if _, err := s.admin.SetQuota(ctx, "research", &api.TeamQuota{GuaranteedMilliGPU: &zero, LimitMilliGPU: &zero}); err != nil {
		b.Fatal(err)
	}
	w, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "research", Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}}, "")
	if err != nil {
		b.Fatal(err)
	}
	concurrently(b, 32, "request", s.addr, s.admin.Token, func(cl *api.Client) error {
		got, err := cl.GetWorkload(ctx, w.ID)
		if err == nil && got.ID != w.ID {
			err = fmt.Errorf("got workload %s, want %s", got.ID, w.ID)
		}
		return err
	})
}

// concurrently times b.N calls of do over clients clients, each with its
// own API client on addr with token, and reports their rate (op+"s/s"),
// their p50 and p99 latency, and the CPU the process spent per call
// (cpu-us/op), split into the server's and the clients' shares
// (measureCPU); it returns how many calls it made.
func concurrently(b *testing.B, clients int, op, addr, token string, do func(*api.Client) error) int {
	b.ResetTimer()
	lat := make([][]time.Duration, clients)
	var next sync.Mutex
	n := 0
	// The clients' own connections, dialled by them (so that their read
	// and write loops carry the client label), none left from the setup.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = clients
	defer tr.CloseIdleConnections()
	var elapsed time.Duration
	cpu := measureCPU(b, func() {
		begin := time.Now()
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				withClient(func() {
					cl := api.NewClient(addr, token)
					cl.HTTP = &http.Client{Transport: tr}
					for {
						next.Lock()
						if n >= b.N {
							next.Unlock()
							return
						}
						n++
						next.Unlock()
						t := time.Now()
						if err := do(cl); err != nil {
							b.Error(err)
							return
						}
						lat[c] = append(lat[c], time.Since(t))
					}
				})
			})
		}
		wg.Wait()
		elapsed = time.Since(begin)
	})
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	calls := float64(max(len(all), 1))
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), op+"s/s")
	b.ReportMetric(float64(pct(all, 50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(all, 99).Microseconds())/1000, "p99-ms")
	// What a call costs the whole process (server and clients), apart
	// from how busy the machine's cores were kept: CPU time (user and
	// system) per call, and the share of the cores used.
	b.ReportMetric(float64(cpu.total.Microseconds())/calls, "cpu-us/"+op)
	b.ReportMetric(float64(cpu.server.Microseconds())/calls, "server-cpu-us/"+op)
	b.ReportMetric(float64(cpu.client.Microseconds())/calls, "client-cpu-us/"+op)
	b.ReportMetric(100*cpu.total.Seconds()/elapsed.Seconds()/float64(runtime.GOMAXPROCS(0)), "cpu-%")
	if *breakdown {
		for name, d := range cpu.parts {
			b.ReportMetric(float64(d.Microseconds())/calls, name+"-us/"+op)
		}
	}
	return len(all)
}

// cpuTime is the CPU time, user and system, the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, len(d)*p/100)]
}

// BenchmarkSubmitToRunning measures the time from sending a submit to the
// workload's process running on an idle simulated GPU: the process prints
// the wall clock as its first act, and the log is read afterwards. With one
// client, one submit at a time; with 32, each submitting its next once its
// last has finished, on 32 quarter GPUs (8 simulated devices), so that no
// submit waits for a device: the spread of the 32 is the platform's (its
// writes, cycles and process starts sharing the cores), not a queue's. It
// reports the p50 and p99 and their ratio (p99/p50).
//
//	go test ./internal/app -run '^$' -bench SubmitToRunning -benchtime 320x
func BenchmarkSubmitToRunning(b *testing.B) {
	for _, clients := range []int{1, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchSubmitToRunning(b, clients) })
	}
}

func benchSubmitToRunning(b *testing.B, clients int) {
	cfg := testConfig(b, b.TempDir())
	cfg.FakeGPUs = "8xH100-80GB"
	s := startWith(b, cfg, io.Discard)
	lat := make([][]time.Duration, clients)
	var next sync.Mutex
	n := 0
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for {
				next.Lock()
				if n >= b.N {
					next.Unlock()
					return
				}
				n++
				next.Unlock()
				d, err := submitToRunning(s.admin)
				if err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], d)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	p50, p99 := pct(all, 50), pct(all, 99)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(p99)/float64(max(p50, 1)), "p99/p50")
	b.ReportMetric(0, "ns/op")
}

// submitToRunning submits a quarter-GPU workload that prints the wall
// clock, waits for it to end, and returns the time from the submit to the
// clock it printed.
func submitToRunning(cl *api.Client) (time.Duration, error) {
	ctx := context.Background()
	t := time.Now()
	w, err := cl.SubmitWorkload(ctx, &api.Workload{Command: []string{"date", "+%s.%N"}, Resources: api.Resources{GPUs: 250}}, "")
	if err != nil {
		return 0, err
	}
	// The followed log ends when the workload does.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rc, err := cl.Logs(ctx, w.ID, true)
	if err != nil {
		return 0, err
	}
	out, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return 0, fmt.Errorf("log of %s: %w", w.ID, err)
	}
	if got, err := cl.GetWorkload(ctx, w.ID); err != nil || got.Status.Phase != api.PhaseSucceeded {
		return 0, fmt.Errorf("%s: %v %v", w.ID, got, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	sec, err := strconv.ParseFloat(lines[len(lines)-1], 64)
	if err != nil {
		return 0, fmt.Errorf("log %q: %v", out, err)
	}
	return time.Unix(0, int64(sec*1e9)).Sub(t), nil
}

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
