package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// startObs starts a server on four simulated H100s with the demo teams,
// with edit applied to its configuration.
func startObs(t testing.TB, dir string, edit func(*config.Config)) *server {
	t.Helper()
	cfg := testConfig(t, dir)
	edit(&cfg)
	return startWith(t, cfg, io.Discard)
}

func submitNB(t *testing.T, s *server, kind, gpus string, script string) *api.Workload {
	t.Helper()
	g, err := quantity.ParseMilli(gpus)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.admin.SubmitWorkload(context.Background(), &api.Workload{Team: "research", Kind: kind, Command: []string{"sh", "-c", script},
		Resources: api.Resources{GPUs: g}, GracePeriodSeconds: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func fastUsage(c *config.Config) {
	c.Usage.SampleInterval = config.Duration{Duration: 250 * time.Millisecond}
	c.Usage.Idle = []config.IdleRule{{Kind: "notebook", Threshold: 0.05, Timeout: config.Duration{Duration: 2 * time.Second}, Warning: config.Duration{Duration: time.Second}}}
}

// TestIdleNotebookIsReclaimed: a simulated notebook that reports nothing is
// idle; it is warned, then stopped after its timeout, Failed/Idle. A busy
// notebook, which writes its usage file, and an idle job are left running,
// and the API shows what was sampled.
func TestIdleNotebookIsReclaimed(t *testing.T) {
	s := startObs(t, t.TempDir(), fastUsage)
	ctx := context.Background()
	idle := submitNB(t, s, api.KindNotebook, "1", "sleep 120")
	busy := submitNB(t, s, api.KindNotebook, "0.5", `echo "utilization=0.9 memoryMiB=1000" > "$GPUFLEET_SIM_USAGE_FILE"; sleep 120`)
	job := submitNB(t, s, api.KindJob, "1", "sleep 120")
	start := time.Now()

	got := waitFor(t, s.admin, idle.ID, "ended", func(w *api.Workload) bool {
		return w.Status.Phase == api.PhaseFailed || w.Status.Phase == api.PhaseSucceeded
	})
	took := time.Since(start)
	if got.Status.Reason != "Idle" || !strings.Contains(got.Status.Message, "stayed below 5.0%") {
		t.Errorf("idle notebook: %s/%s %q, want Failed/Idle with the figures", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	if took < 2*time.Second {
		t.Errorf("reclaimed %s after submission, before its 2s timeout", took)
	}
	evs, err := s.admin.Events(ctx, idle.ID)
	if err != nil {
		t.Fatal(err)
	}
	warned, stopped := -1, -1
	for i, e := range evs {
		if e.Reason == "IdleWarning" && e.Type == "Warning" {
			warned = i
		}
		if e.To == api.PhaseFailed && e.Reason == "Idle" {
			stopped = i
		}
	}
	if warned < 0 || stopped < 0 || warned > stopped {
		t.Errorf("events: want a Warning IdleWarning before the Failed/Idle one; got %+v", evs)
	}

	b := waitFor(t, s.admin, busy.ID, "sampled busy", func(w *api.Workload) bool { return w.Status.Usage != nil && w.Status.Usage.GPUUtilization > 0 })
	if u := b.Status.Usage; u.GPUUtilization != 0.9 || u.GPUMemoryUsedMiB != 1000 || u.IdleSince != nil || u.SampledAt.IsZero() {
		t.Errorf("busy notebook usage %+v, want 0.9, 1000 MiB, not idle", u)
	}
	j := waitFor(t, s.admin, job.ID, "sampled", func(w *api.Workload) bool { return w.Status.Usage != nil })
	if j.Status.Phase != api.PhaseRunning || j.Status.Usage.GPUUtilization != 0 {
		t.Errorf("idle job: %s, usage %+v; want it running (no rule for jobs) at 0", j.Status.Phase, j.Status.Usage)
	}
	nodes, err := s.admin.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	busyGPU := b.Status.Placement[0].GPUIndex
	for _, g := range nodes[0].GPUs {
		if !g.Healthy || g.Utilization == nil || g.MemoryUsedMiB == nil {
			t.Errorf("GPU %d: healthy %v, utilization %v, memory %v; want healthy and sampled", g.Index, g.Healthy, g.Utilization, g.MemoryUsedMiB)
			continue
		}
		if g.Index == busyGPU && (*g.Utilization != 0.9 || *g.MemoryUsedMiB != 1000) {
			t.Errorf("GPU %d of the busy notebook: %v, %v MiB; want 0.9, 1000", g.Index, *g.Utilization, *g.MemoryUsedMiB)
		}
	}
	// The points after the reclaim: two running.
	var h *api.UsageHistory
	testwait.Until(t, 10*time.Second, "a usage point with two running", func() (bool, string) {
		if h, err = s.admin.Usage(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		n := len(h.Points)
		return n > 0 && h.Points[n-1].Running == 2, fmt.Sprintf("%d points", n)
	})
	if len(h.Points) < 4 || h.IntervalSeconds != 0.25 {
		t.Fatalf("usage: %d points every %gs, want several every 0.25s", len(h.Points), h.IntervalSeconds)
	}
	last := h.Points[len(h.Points)-1]
	if last.GPUs != 4 || last.UsedGPUs < 0.89 || last.UsedGPUs > 0.91 || last.Running != 2 || last.AllocatedGPUs != 1.5 || last.IdleGPUs != 2 {
		t.Errorf("last point %+v, want 4 GPUs, 0.9 used, 2 running, 1.5 allocated, 2 idle", last)
	}
	for _, id := range []string{busy.ID, job.ID} {
		s.admin.CancelWorkload(ctx, id)
	}
}

// TestFractionalMemoryLimit: a quarter of an 80 GB GPU holds 20480 MiB; a
// workload that reports more is warned and stopped, Failed with
// GPUMemoryLimitExceeded.
func TestFractionalMemoryLimit(t *testing.T) {
	s := startObs(t, t.TempDir(), fastUsage)
	ctx := context.Background()
	within := submitNB(t, s, api.KindJob, "0.25", `echo "utilization=0.5 memoryMiB=20480" > "$GPUFLEET_SIM_USAGE_FILE"; sleep 120`)
	over := submitNB(t, s, api.KindJob, "0.25", `echo "utilization=0.5 memoryMiB=1000" > "$GPUFLEET_SIM_USAGE_FILE"; sleep 1; echo "utilization=0.5 memoryMiB=30000" > "$GPUFLEET_SIM_USAGE_FILE"; sleep 120`)
	got := waitFor(t, s.admin, over.ID, "ended", func(w *api.Workload) bool {
		return w.Status.Phase == api.PhaseFailed || w.Status.Phase == api.PhaseSucceeded
	})
	if got.Status.Reason != "GPUMemoryLimitExceeded" || !strings.Contains(got.Status.Message, "uses 30000 MiB") || !strings.Contains(got.Status.Message, "share of 20480 MiB") {
		t.Errorf("%s/%s %q, want Failed/GPUMemoryLimitExceeded with the figures", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	evs, err := s.admin.Events(ctx, over.ID)
	if err != nil {
		t.Fatal(err)
	}
	var warned bool
	for _, e := range evs {
		warned = warned || (e.Type == "Warning" && e.Reason == "GPUMemoryLimitWarning")
	}
	if !warned {
		t.Errorf("no Warning GPUMemoryLimitWarning among %+v", evs)
	}
	// Sampled after it wrote its file (a sample before reads nothing: 0).
	w := waitFor(t, s.admin, within.ID, "sampled at its share", func(w *api.Workload) bool {
		return w.Status.Phase != api.PhaseRunning || (w.Status.Usage != nil && w.Status.Usage.GPUMemoryUsedMiB > 0)
	})
	if w.Status.Phase != api.PhaseRunning || w.Status.Usage.GPUMemoryUsedMiB != 20480 {
		t.Errorf("the workload at its share: %s, usage %+v; want it running with 20480 MiB", w.Status.Phase, w.Status.Usage)
	}
	s.admin.CancelWorkload(ctx, within.ID)
}

// scrape GETs /metrics with a token and returns the status and body.
func scrape(t *testing.T, addr, token string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// series parses the text format into "name{a="1",b="2"}" → value, labels
// as the server sorts them.
func series(t *testing.T, body string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

// TestMetricsMatchTheAPI scrapes /metrics as an admin and checks its series
// against what the API reports; others are refused.
func TestMetricsMatchTheAPI(t *testing.T) {
	s := startObs(t, t.TempDir(), fastUsage)
	ctx := context.Background()
	var ids []string
	for _, sub := range []struct{ team, gpus string }{{"research", "1"}, {"research", "0.5"}, {"inference", "0.25"}, {"research", "4"}} {
		g, _ := quantity.ParseMilli(sub.gpus)
		w, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: sub.team, Command: []string{"sleep", "120"}, Resources: api.Resources{GPUs: g}, GracePeriodSeconds: 1}, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	for _, id := range ids[:3] {
		waitFor(t, s.admin, id, "running", func(w *api.Workload) bool { return w.Status.Phase == api.PhaseRunning })
	}
	defer func() {
		for _, id := range ids {
			s.admin.CancelWorkload(ctx, id)
		}
	}()
	// Wait for a sample, so that the utilisation series exist.
	testwait.Until(t, 10*time.Second, "a usage sample", func() (bool, string) {
		h, err := s.admin.Usage(ctx, time.Minute)
		if err != nil {
			return false, err.Error()
		}
		return len(h.Points) > 0, "no point"
	})

	// The starts are counted just after they are committed: wait for the
	// three.
	var status int
	var hdr http.Header
	var body string
	testwait.Until(t, 10*time.Second, "three starts counted", func() (bool, string) {
		status, hdr, body = scrape(t, s.addr, s.admin.Token)
		n := series(t, body)["gpufleet_queue_wait_seconds_count"]
		return n >= 3, fmt.Sprintf("gpufleet_queue_wait_seconds_count %v", n)
	})
	if testing.Verbose() {
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "gpufleet_") {
				t.Log(l)
			}
		}
	}
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("admin scrape: %d %s", status, hdr.Get("Content-Type"))
	}
	got := series(t, body)

	// What the API says.
	nodes, err := s.admin.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wls, err := s.admin.AllWorkloads(ctx, api.ListOptions{Phase: "Pending,Running"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	model := map[int]string{}
	idle := 0
	for _, n := range nodes {
		for _, g := range n.GPUs {
			want[fmt.Sprintf(`gpufleet_gpus_total{model=%q,node=%q}`, g.Model, n.Name)]++
			model[g.Index] = g.Model
			if g.AllocatedMilliGPU == 0 {
				idle++
			}
			want[fmt.Sprintf(`gpufleet_gpu_utilization_ratio{gpu="%d",node=%q}`, g.Index, n.Name)] = *g.Utilization
		}
	}
	want["gpufleet_idle_gpus"] = float64(idle)
	for _, team := range []string{"default", "research", "inference"} {
		for _, ph := range []string{"Pending", "Running"} {
			want[fmt.Sprintf(`gpufleet_workloads{phase=%q,team=%q}`, ph, team)] = 0
		}
	}
	for _, w := range wls {
		want[fmt.Sprintf(`gpufleet_workloads{phase=%q,team=%q}`, w.Status.Phase, w.Team)]++
		for _, p := range w.Status.Placement {
			want[fmt.Sprintf(`gpufleet_gpus_allocated{model=%q,team=%q}`, model[p.GPUIndex], w.Team)] += float64(p.MilliGPU) / 1000
		}
	}
	// The API's view, spelled out, so that the test fails if both are
	// wrong the same way.
	if want[`gpufleet_workloads{phase="Running",team="research"}`] != 2 || want[`gpufleet_workloads{phase="Pending",team="research"}`] != 1 ||
		want[`gpufleet_gpus_allocated{model="H100",team="research"}`] != 1.5 || want[`gpufleet_gpus_allocated{model="H100",team="inference"}`] != 0.25 {
		t.Fatalf("the API reports %v; want research running 2 (1.5 GPUs) and pending 1, inference 0.25 GPU", want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (served %v), want %v as the API says", k, g, ok, v)
		}
	}
	for _, name := range []string{"gpufleet_queue_wait_seconds_count", "gpufleet_scheduling_cycle_seconds_count", "gpufleet_gpus_used"} {
		if got[name] <= 0 && name != "gpufleet_gpus_used" {
			t.Errorf("%s = %v, want observations", name, got[name])
		}
		if _, ok := got[name]; !ok {
			t.Errorf("%s is not served", name)
		}
	}
	if got["gpufleet_queue_wait_seconds_count"] != 3 {
		t.Errorf("queue wait observed %v times, want 3 (one per start)", got["gpufleet_queue_wait_seconds_count"])
	}

	t.Run("a non-admin gets 403 JSON, no token 401 JSON", func(t *testing.T) {
		u, err := s.admin.CreateUser(ctx, &api.User{Name: "watcher", Memberships: []api.Membership{{Team: "research", Role: api.RoleTeamAdmin}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			token string
			want  int
		}{{u.Token, 403}, {"", 401}, {"not-a-token", 401}} {
			status, hdr, body := scrape(t, s.addr, c.token)
			var eb api.ErrorBody
			if status != c.want || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(body), &eb) != nil || eb.Error.Message == "" {
				t.Errorf("token %q: %d %s %.200s; want %d with a JSON error", c.token, status, hdr.Get("Content-Type"), body, c.want)
			}
			if bytes.Contains([]byte(body), []byte("gpufleet_")) {
				t.Errorf("token %q: the answer holds metrics", c.token)
			}
		}
		// The usage history is for everyone: it names no team.
		h, err := api.NewClient(s.addr, u.Token).Usage(ctx, 0)
		if err != nil || len(h.Points) == 0 {
			t.Errorf("usage as a team-admin: %v, %v", h, err)
		}
	})
}
