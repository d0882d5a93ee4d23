package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/cost"
	"github.com/gpufleet/gpufleet/internal/store"
)

// BenchmarkReportAtScale measures the cost report (by team) and the FOCUS
// export (hourly) of one month, store scan included, over a SQLite store
// holding 100,000 allocation rows and one holding 1,000,000, alternating
// the two in each iteration. Both hold 100,000 rows a month (ten intervals
// of up to six hours for each of 10,000 workloads): one month of history,
// and ten. The month reported is the sixth of the ten (window=middle: rows
// before and after it) or the last (window=last: the month a report
// usually asks for, every other row before it); on the smaller store, its
// one month. It reports each one's milliseconds (the median over the
// iterations) and their ratio, 1M over 100k (the median of the
// iterations' ratios).
//
//	go test ./internal/ledger -run '^$' -bench ReportAtScale -benchtime 5x
func BenchmarkReportAtScale(b *testing.B) {
	small, large := scaleStore(b, 100_000), scaleStore(b, 1_000_000)
	ctx := context.Background()
	all := cost.Visibility{All: true}
	// A report's clock is its window's end.
	type measure struct {
		name string
		run  func(l *Ledger, from, to time.Time) error
	}
	measures := []measure{
		{"report", func(l *Ledger, from, to time.Time) error {
			_, err := l.Report(ctx, api.CostByTeam, from, to, to, all)
			return err
		}},
		{"focus", func(l *Ledger, from, to time.Time) error {
			return l.ExportFOCUS(ctx, io.Discard, time.Hour, from, to, to, all, "bench")
		}},
	}
	for _, window := range []string{"middle", "last"} {
		b.Run("window="+window, func(b *testing.B) {
			from := large.from
			if window == "last" {
				from = large.last
			}
			times := map[string][]float64{}
			for b.Loop() {
				for _, m := range measures {
					var ms [2]float64
					for i, st := range []*scaled{small, large} {
						f := st.from
						if st == large {
							f = from
						}
						t := time.Now()
						if err := m.run(st.l, f, f.AddDate(0, 1, 0)); err != nil {
							b.Fatal(err)
						}
						ms[i] = float64(time.Since(t).Microseconds()) / 1000
					}
					times[m.name+"-100k-ms"] = append(times[m.name+"-100k-ms"], ms[0])
					times[m.name+"-1M-ms"] = append(times[m.name+"-1M-ms"], ms[1])
					times[m.name+"-ratio"] = append(times[m.name+"-ratio"], ms[1]/ms[0])
				}
			}
			for name, xs := range times {
				slices.Sort(xs)
				b.ReportMetric(xs[len(xs)/2], name)
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// scaled is a store of many allocation rows, the start of the month in
// the middle of its history (on a store of one month, that month) and of
// its last month.
type scaled struct {
	l          *Ledger
	from, last time.Time
}

var (
	scaledMu     sync.Mutex
	scaledStores = map[int]*scaled{}
	scaledDir    string
)

// scaleStore is a SQLite store with rows allocation rows, 10,000 a month,
// made once for the test binary (writing a million rows takes a while), in
// a directory removed when the benchmarks end.
func scaleStore(b *testing.B, rows int) *scaled {
	scaledMu.Lock()
	defer scaledMu.Unlock()
	if s := scaledStores[rows]; s != nil {
		return s
	}
	if scaledDir == "" {
		dir, err := os.MkdirTemp("", "gpufleet-ledger-bench-")
		if err != nil {
			b.Fatal(err)
		}
		scaledDir = dir
	}
	ctx := context.Background()
	path := filepath.Join(scaledDir, fmt.Sprintf("rows-%d.db", rows))
	st, err := store.OpenWith(ctx, path, store.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	const teams = 20
	for i := range teams {
		if err := st.CreateTeam(ctx, core.NewTeam(core.TeamName(fmt.Sprintf("team%02d", i)), time.Time{})); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	months := rows / 100_000
	begin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := fillAllocations(path, rows, begin, begin.AddDate(0, months, 0)); err != nil {
		b.Fatal(err)
	}
	if st, err = store.OpenWith(ctx, path, store.Options{NoSync: true}); err != nil {
		b.Fatal(err)
	}
	from := begin.AddDate(0, months/2, 0)
	s := &scaled{l: &Ledger{Store: st, Currency: "USD", DefaultPool: "od", Since: begin,
		FilePrices: []api.Price{{Pool: "od", Kind: api.PriceOnDemand, Rate: 2_490_000, BillingIncrement: "1m", CPUCoreHour: 40_000, MemoryGiBHour: 5_000}}},
		from: from, last: begin.AddDate(0, months-1, 0)}
	scaledStores[rows] = s
	return s
}

// fillAllocations writes rows allocation rows into the store's file, ten
// for each of rows/10 finished workloads started at random in [begin,
// end), straight into its tables, in one transaction.
func fillAllocations(path string, rows int, begin, end time.Time) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	insW, err := tx.Prepare(`INSERT INTO workloads (id, team, owner, phase, created_at, spec, status) VALUES (?, ?, 'u', 'Succeeded', ?, ?, ?)`)
	if err != nil {
		return err
	}
	insA, err := tx.Prepare(`INSERT INTO allocations (workload_id, team, attempt, replica, node, gpu_index, gpu_uuid, milli_gpu, memory_mib, start, "end", pool)
		VALUES (?, ?, 1, 0, 'n', ?, 'u', ?, 0, ?, ?, 'od')`)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 2))
	span := int64(end.Sub(begin))
	for w := range rows / 10 {
		id := fmt.Sprintf("wl-bench%08d", w)
		team := fmt.Sprintf("team%02d", w%20)
		start := begin.UnixNano() + r.Int64N(span)
		finished := time.Unix(0, start+int64(7*time.Hour)).UTC()
		spec, _ := json.Marshal(core.Spec{Name: "w", Team: core.TeamName(team), Owner: "u", Kind: core.KindJob, Command: []string{"x"},
			Request: core.Request{MilliGPU: 1000, MilliCPU: 8000, MemoryMiB: 65536}})
		status, _ := json.Marshal(core.Status{Phase: core.Succeeded, Attempts: 1, FinishedAt: &finished})
		if _, err := insW.Exec(id, team, start, spec, status); err != nil {
			return err
		}
		for k := range 10 {
			s := start + int64(k)*int64(time.Minute)
			e := s + r.Int64N(int64(6*time.Hour))
			if _, err := insA.Exec(id, team, k%8, []int64{250, 500, 1000}[k%3], s, e); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

func TestMain(m *testing.M) {
	code := m.Run()
	scaledMu.Lock()
	for _, s := range scaledStores {
		s.l.Store.Close()
	}
	if scaledDir != "" {
		os.RemoveAll(scaledDir)
	}
	scaledMu.Unlock()
	os.Exit(code)
}
