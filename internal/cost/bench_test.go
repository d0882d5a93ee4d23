package cost

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// benchInput is a month of n intervals over n/10 workloads of 20 teams in
// four pools, one of each price kind (so that three need the idle sweep).
func benchInput(n int) Input {
	r := rand.New(rand.NewPCG(1, 2))
	month := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	in := Input{From: month, To: month.AddDate(0, 1, 0), Now: month.AddDate(0, 1, 0), Currency: "USD",
		Prices: []api.Price{
			{Pool: "od", Kind: api.PriceOnDemand, Rate: 2_490_000, BillingIncrement: "1m", CPUCoreHour: 40_000, MemoryGiBHour: 5_000},
			{Pool: "res", Kind: api.PriceReserved, Rate: 1_870_000, GPUs: 400, Term: "1y", EffectiveFrom: month.AddDate(0, -1, 0)},
			{Pool: "own", Kind: api.PriceOwned, Purchase: 30_000_000_000, Depreciation: "36mo", PerGPUHour: 310_000},
			{Pool: "mon", Kind: api.PriceMonthly, Rate: 1_300_000_000, LicenceGPUHour: 100_000},
		},
		Pools:     []PoolGPUs{{"od", 1000}, {"res", 500}, {"own", 500}, {"mon", 500}},
		Workloads: map[core.WorkloadID]*Workload{},
	}
	pools := []string{"od", "res", "own", "mon"}
	span := int64(in.To.Sub(in.From))
	for w := range n / 10 {
		id := core.WorkloadID(fmt.Sprintf("w%07d", w))
		in.Workloads[id] = &Workload{ID: id, Team: core.TeamName(fmt.Sprintf("team%02d", w%20)), Owner: "u", Kind: api.KindJob,
			Attempts: 1, Phase: core.Succeeded, FinishedAt: in.To.Add(-time.Hour)}
		pool := pools[w%4]
		start := r.Int64N(span)
		for k := range 10 {
			s := in.From.Add(time.Duration(start + int64(k)*int64(time.Minute)))
			x := Interval{Workload: id, Attempt: 1, Pool: pool, Node: "n", GPU: k % 8, Milli: []int64{250, 500, 1000}[k%3],
				Start: s, End: s.Add(time.Duration(r.Int64N(int64(6 * time.Hour))))}
			if k == 0 {
				x.HostMilliCPU, x.HostMemoryMiB = 8000, 65536
			}
			in.Intervals = append(in.Intervals, x)
		}
	}
	return in
}

func BenchmarkReport1M(b *testing.B) {
	in := benchInput(1_000_000)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Report(in, api.CostByTeam, admin); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(in.Intervals))*float64(b.N)/b.Elapsed().Seconds(), "intervals/s")
}

func BenchmarkExportFOCUS(b *testing.B) {
	in := benchInput(100_000)
	b.ResetTimer()
	rows := 0
	for b.Loop() {
		n, err := ExportFOCUS(io.Discard, in, time.Hour, admin, "bench")
		if err != nil {
			b.Fatal(err)
		}
		rows += n
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}
