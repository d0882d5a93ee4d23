package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Scrape serves m once and parses the answer.
func Scrape(t testing.TB, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// values lists a family's samples as "label=value,... = number".
func values(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		var ls []string
		for _, l := range m.GetLabel() {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		v := m.GetGauge().GetValue()
		if m.Counter != nil {
			v = m.GetCounter().GetValue()
		}
		out = append(out, fmt.Sprintf("%s = %g", strings.Join(ls, ","), v))
	}
	slices.Sort(out)
	return out
}

// norm sorts the labels of wanted samples written as "b=1,a=2 = 3", as
// the exposition format sorts them.
func norm(ws []string) []string {
	var out []string
	for _, w := range ws {
		ls, v, _ := strings.Cut(w, " = ")
		parts := strings.Split(ls, ",")
		slices.Sort(parts)
		out = append(out, strings.Join(parts, ",")+" = "+v)
	}
	slices.Sort(out)
	return out
}

func cluster() *core.Snapshot {
	t0 := time.Now().Add(-time.Minute)
	n1 := &core.Node{Name: "n1", Pool: "onprem", Cluster: "onprem", Region: "eu-west", GPUs: []core.GPU{{Index: 0, Model: "H100"}, {Index: 1, Model: "H100"}, {Index: 2, Model: "A10"}}}
	n2 := &core.Node{Name: "n2", Pool: "cloud", Cluster: "cloud", Region: "us-east", PoolKind: core.PoolBurst, GPUs: []core.GPU{{Index: 0, Model: "H100"}}}
	run := func(team core.TeamName, as ...core.Assignment) *core.Workload {
		w := &core.Workload{}
		w.Team, w.Status.Phase, w.Status.Placement = team, core.Running, as
		return w
	}
	snap := &core.Snapshot{
		Nodes: []*core.Node{n1, n2},
		Teams: []core.Team{{Name: "research", Guaranteed: 2000}, {Name: "inference"}, {Name: "empty"}},
		Running: []*core.Workload{
			run("research", core.Assignment{Node: "n1", GPUIndex: 0, MilliGPU: 250}),
			run("research", core.Assignment{Node: "n1", GPUIndex: 0, MilliGPU: 500}),
			run("inference", core.Assignment{Node: "n1", GPUIndex: 2, MilliGPU: 1000}, core.Assignment{Node: "n2", GPUIndex: 0, MilliGPU: 1000}),
		},
		Pending: []*core.Workload{{CreatedAt: t0}},
		Usage:   map[core.NodeName]*core.NodeUsage{},
	}
	snap.Pending[0].Team = "research"
	for _, w := range snap.Running {
		for _, n := range core.Nodes(w.Status.Placement) {
			if snap.Usage[n] == nil {
				snap.Usage[n] = &core.NodeUsage{}
			}
			snap.Usage[n].Add(n, w.Request, w.Status.Placement)
		}
	}
	return snap
}

func TestClusterGauges(t *testing.T) {
	m := New(Options{
		Snapshot: func(context.Context) (*core.Snapshot, error) { return cluster(), nil },
		Shares:   func() []core.TeamShare { return []core.TeamShare{{Team: "research", FairShare: 2500, Pending: 1000}} },
		GPUs: func() []core.GPUSample {
			return []core.GPUSample{{Node: "n1", Index: 0, Utilization: 0.5, MemoryUsedMiB: 1024}, {Node: "n1", Index: 1, Err: "[GPU requires reset]"}}
		},
	})
	fams := Scrape(t, m)
	want := map[string][]string{
		"gpufleet_gpus_total": {"node=n1,model=A10 = 1", "node=n1,model=H100 = 2", "node=n2,model=H100 = 1"},
		"gpufleet_gpus_allocated": {"team=empty,model=A10 = 0", "team=empty,model=H100 = 0", "team=inference,model=A10 = 1", "team=inference,model=H100 = 1",
			"team=research,model=A10 = 0", "team=research,model=H100 = 0.75"}, // a team holding nothing reads 0
		"gpufleet_idle_gpus": {" = 1"},
		"gpufleet_node_info": {"node=n1,pool=onprem,cluster=onprem,region=eu-west,kind=owned = 1", "node=n2,pool=cloud,cluster=cloud,region=us-east,kind=burst = 1"},
		"gpufleet_pool_gpus_allocated": {"pool=onprem,cluster=onprem,team=research = 0.75", "pool=onprem,cluster=onprem,team=inference = 1",
			"pool=cloud,cluster=cloud,team=inference = 1"},
		"gpufleet_workloads":             {"team=empty,phase=Pending = 0", "team=empty,phase=Running = 0", "team=inference,phase=Pending = 0", "team=inference,phase=Running = 1", "team=research,phase=Pending = 1", "team=research,phase=Running = 2"},
		"gpufleet_gpu_utilization_ratio": {"node=n1,gpu=0 = 0.5"},
		"gpufleet_gpu_memory_used_bytes": {"node=n1,gpu=0 = 1.073741824e+09"},
		"gpufleet_gpu_healthy":           {"node=n1,gpu=0 = 1", "node=n1,gpu=1 = 0"},
		"gpufleet_gpus_used":             {" = 0.5"},
		"gpufleet_team_guaranteed_gpus":  {"team=empty = 0", "team=inference = 0", "team=research = 2"},
		"gpufleet_team_fair_share_gpus":  {"team=research = 2.5"},
		"gpufleet_team_pending_gpus":     {"team=research = 1"},
	}
	for name, w := range want {
		f := fams[name]
		if f == nil {
			t.Errorf("%s is missing", name)
			continue
		}
		if diff := cmp.Diff(norm(w), values(f)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if v := fams["gpufleet_oldest_pending_seconds"].GetMetric()[0].GetGauge().GetValue(); v < 59 || v > 600 {
		t.Errorf("oldest pending = %g s, want about 60", v)
	}
}

func TestEventCounters(t *testing.T) {
	m := New(Options{})
	w := &core.Workload{}
	w.Team, w.Status.Attempts = "research", 1
	m.WorkloadStarted(w, 3*time.Second)
	w2 := *w
	w2.Status.Attempts = 2
	m.WorkloadStarted(&w2, time.Hour) // a requeued attempt: no queue wait
	m.WorkloadEnded(w, core.Preempted, "Reclaimed")
	m.WorkloadEnded(w, core.Failed, "Idle")
	m.WorkloadEnded(w, core.Failed, "Error")
	m.ObserveCycle(2 * time.Millisecond)
	fams := Scrape(t, m)
	for name, want := range map[string][]string{
		"gpufleet_preemptions_total":        {"team=research,reason=Reclaimed = 1"},
		"gpufleet_reclaims_total":           {"team=research,reason=Idle = 1"},
		"gpufleet_workloads_finished_total": {"team=research,phase=Failed = 2", "team=research,phase=Preempted = 1"},
		"gpufleet_workloads_started_total":  {"team=research = 2"},
	} {
		if diff := cmp.Diff(norm(want), values(fams[name])); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if h := fams["gpufleet_queue_wait_seconds"].GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 3 {
		t.Errorf("queue wait: %d observations summing %g, want 1 of 3 s", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := fams["gpufleet_scheduling_cycle_seconds"].GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 {
		t.Errorf("cycles: %d observations, want 1", h.GetSampleCount())
	}
}

func TestSnapshotFailureStillServesTheRest(t *testing.T) {
	m := New(Options{Snapshot: func(context.Context) (*core.Snapshot, error) { return nil, fmt.Errorf("store closed") }})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "gpufleet_scheduling_cycle_seconds") {
		t.Errorf("a failing snapshot hid the other metrics: %d %.300s", rec.Code, rec.Body)
	}
}

// TestGrafanaDashboard checks deploy/grafana/gpufleet.json: valid JSON, its
// datasource a variable, and every metric its queries name served here.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "gpufleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name, Type string
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title      string `json:"title"`
			Datasource any    `json:"datasource"`
			Targets    []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	hasVar := slices.ContainsFunc(dash.Templating.List, func(v struct{ Name, Type string }) bool {
		return v.Name == "datasource" && v.Type == "datasource"
	})
	if !hasVar {
		t.Error("no datasource variable ($datasource) in templating")
	}
	// Every series the server can serve, counters and histograms with
	// their suffixes.
	m := New(Options{Snapshot: func(context.Context) (*core.Snapshot, error) { return cluster(), nil },
		Shares: func() []core.TeamShare { return []core.TeamShare{{Team: "research"}} },
		GPUs:   func() []core.GPUSample { return []core.GPUSample{{Node: "n1"}} }})
	w := &core.Workload{}
	w.Status.Attempts = 1
	m.WorkloadStarted(w, 0)
	m.WorkloadEnded(w, core.Preempted, "Preempted")
	m.WorkloadEnded(w, core.Failed, "Idle")
	m.ObserveCycle(0)
	served := map[string]bool{}
	for name, f := range Scrape(t, m) {
		served[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				served[name+s] = true
			}
		}
	}
	names := regexp.MustCompile(`\bgpufleet_[a-z_]+`)
	exprs := 0
	for _, p := range dash.Panels {
		if p.Datasource != nil && !strings.Contains(fmt.Sprint(p.Datasource), "${datasource}") {
			t.Errorf("panel %q: datasource %v, want ${datasource}", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			exprs++
			found := names.FindAllString(tg.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: expr %q names no gpufleet metric", p.Title, tg.Expr)
			}
			for _, n := range found {
				if !served[n] {
					t.Errorf("panel %q: %s is not served at /metrics", p.Title, n)
				}
			}
		}
	}
	if exprs < 8 {
		t.Errorf("%d queries, want the dashboard to use the metrics (at least 8)", exprs)
	}
}

// BenchmarkScrape measures one scrape of a cluster of 1,000 nodes of 8 GPUs
// with 6,000 running workloads (half of them fractional) and 8,000 GPU
// samples; the snapshot is built once (reading it from the store is the
// store's cost).
func BenchmarkScrape(b *testing.B) {
	snap := &core.Snapshot{Usage: map[core.NodeName]*core.NodeUsage{}}
	var gpus []core.GPUSample
	for i := range 1000 {
		n := &core.Node{Name: core.NodeName(fmt.Sprintf("node-%04d", i))}
		for g := range 8 {
			n.GPUs = append(n.GPUs, core.GPU{Index: g, Model: "H100"})
			gpus = append(gpus, core.GPUSample{Node: n.Name, Index: g, Utilization: 0.5, MemoryUsedMiB: 1000})
		}
		snap.Nodes = append(snap.Nodes, n)
		snap.Usage[n.Name] = &core.NodeUsage{GPUs: map[int]core.GPUUse{}}
		for k := range 6 {
			w := &core.Workload{}
			w.Team = core.TeamName(fmt.Sprintf("team-%d", (i+k)%20))
			milli := int64(1000)
			if k%2 == 1 {
				milli = 500
			}
			w.Status.Placement = []core.Assignment{{Node: n.Name, GPUIndex: k, MilliGPU: milli}}
			snap.Usage[n.Name].Add(n.Name, w.Request, w.Status.Placement)
			snap.Running = append(snap.Running, w)
		}
	}
	for i := range 20 {
		snap.Teams = append(snap.Teams, core.Team{Name: core.TeamName(fmt.Sprintf("team-%d", i))})
	}
	m := New(Options{Snapshot: func(context.Context) (*core.Snapshot, error) { return snap, nil }, GPUs: func() []core.GPUSample { return gpus }})
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// Volumes are gauges of their size and last measured use; one not yet
// measured has no use sample.
func TestVolumeMetrics(t *testing.T) {
	m := New(Options{
		Snapshot: func(context.Context) (*core.Snapshot, error) { return &core.Snapshot{}, nil },
		Volumes: func(context.Context) ([]core.Volume, error) {
			return []core.Volume{{Team: "a", Name: "data", SizeBytes: 100 << 30, UsedBytes: 5 << 20}, {Team: "b", Name: "new", SizeBytes: 1 << 30, UsedBytes: -1}}, nil
		},
	})
	fams := Scrape(t, m)
	if diff := cmp.Diff(norm([]string{"team=a,volume=data = 1.073741824e+11", "team=b,volume=new = 1.073741824e+09"}), values(fams["gpufleet_volume_size_bytes"])); diff != "" {
		t.Errorf("size (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(norm([]string{"team=a,volume=data = 5.24288e+06"}), values(fams["gpufleet_volume_used_bytes"])); diff != "" {
		t.Errorf("used (-want +got):\n%s", diff)
	}
}

// The cost counter names its currency, budgets show spent and limit beside
// the ratio, and the GPU use of running work is shown per workload and per
// team: a team's utilisation is its workloads' weighted by the GPUs each
// holds; a workload sampled in an earlier attempt is not shown.
func TestCostBudgetsAndTeamUsage(t *testing.T) {
	run := func(id, team, name string, attempt int, as ...core.Assignment) *core.Workload {
		w := &core.Workload{ID: core.WorkloadID(id)}
		w.Team, w.Name, w.Status.Phase, w.Status.Placement, w.Status.Attempts = core.TeamName(team), name, core.Running, as, attempt
		return w
	}
	snap := &core.Snapshot{Running: []*core.Workload{
		run("w1", "research", "train", 1, core.Assignment{Node: "n1", GPUIndex: 0, MilliGPU: 1000}, core.Assignment{Node: "n1", GPUIndex: 1, MilliGPU: 1000}),
		run("w2", "research", "eval", 1, core.Assignment{Node: "n1", GPUIndex: 2, MilliGPU: 500}),
		run("w3", "inference", "chat", 2, core.Assignment{Node: "n2", GPUIndex: 0, MilliGPU: 1000}),
	}}
	m := New(Options{Currency: "EUR",
		Snapshot: func(context.Context) (*core.Snapshot, error) { return snap, nil },
		Workloads: func() []core.WorkloadSample {
			return []core.WorkloadSample{{ID: "w1", Attempt: 1, Utilization: 0.9, MemoryUsedMiB: 2048}, {ID: "w2", Attempt: 1, Utilization: 0.4, MemoryUsedMiB: 1024},
				{ID: "w3", Attempt: 1, Utilization: 1}} // w3's first attempt: stale
		},
		Cost: func(context.Context) (map[[2]string]float64, error) {
			return map[[2]string]float64{{"research", "onprem"}: 12.5, {"__idle__", "onprem"}: 2}, nil
		},
		Budgets: func(context.Context) (map[core.TeamName]Budget, error) {
			return map[core.TeamName]Budget{"research": {Spent: 450, Limit: 500, SpentRatio: 0.9}}, nil
		},
	})
	fams := Scrape(t, m)
	want := map[string][]string{
		"gpufleet_cost_total":                     {"currency=EUR,team=research,pool=onprem = 12.5", "currency=EUR,team=__idle__,pool=onprem = 2"},
		"gpufleet_budget_spent_ratio":             {"team=research = 0.9"},
		"gpufleet_budget_spent":                   {"currency=EUR,team=research = 450"},
		"gpufleet_budget_limit":                   {"currency=EUR,team=research = 500"},
		"gpufleet_workload_gpu_utilization_ratio": {"team=research,workload=w1,name=train = 0.9", "team=research,workload=w2,name=eval = 0.4"},
		"gpufleet_workload_gpu_memory_used_bytes": {"team=research,workload=w1,name=train = 2.147483648e+09", "team=research,workload=w2,name=eval = 1.073741824e+09"},
		// (0.9 × 2 + 0.4 × 0.5) / 2.5
		"gpufleet_team_gpu_utilization_ratio": {"team=research = 0.8"},
		"gpufleet_team_gpu_memory_used_bytes": {"team=research = 3.221225472e+09"},
	}
	for name, w := range want {
		f := fams[name]
		if f == nil {
			t.Errorf("%s is missing", name)
			continue
		}
		if diff := cmp.Diff(norm(w), values(f)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
