package portal_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// clusterSeen is what the Pools page shows of one cluster.
type clusterSeen struct {
	Name      string `json:"name"`
	Executor  string `json:"executor"`
	Reachable string `json:"reachable"`
	Nodes     string `json:"nodes"`
	Ready     string `json:"ready"`
	GPUs      string `json:"gpus"`
	Pools     string `json:"pools"`
}

const clustersJS = `[...document.querySelectorAll('#clusters tr[data-cluster]')].map(tr => {
	const t = (c) => { const e = tr.querySelector(c); return e ? e.textContent : ''; };
	return {name: tr.dataset.cluster, executor: t('.executor'), reachable: t('.reachable'), nodes: t('.nodes'), ready: t('.ready'), gpus: t('.gpus'), pools: t('.pools')};
})`

// poolSeen is what the Pools page shows of one pool.
type poolSeen struct {
	Name      string  `json:"name"`
	Cluster   string  `json:"cluster"`
	Kind      string  `json:"kind"`
	GPUs      string  `json:"gpus"`
	Allocated string  `json:"allocated"`
	Bar       float64 `json:"bar"`   // the drawn fill's width over the track's
	Label     string  `json:"label"` // the bar's aria-label
	Price     string  `json:"price"`
	Health    string  `json:"health"`
	Badge     string  `json:"badge"` // the health badge's classes
}

const poolsJS = `[...document.querySelectorAll('#pools tr[data-pool]')].map(tr => {
	const t = (c) => { const e = tr.querySelector(c); return e ? e.textContent : ''; };
	const svg = tr.querySelector('svg.pool-bar'), track = svg.querySelector('rect.track'), fill = svg.querySelector('rect.fill');
	const badge = tr.querySelector('.badge.health');
	return {name: tr.dataset.pool, cluster: t('.cluster'), kind: t('.kind'), gpus: t('.gpus'), allocated: t('.allocated'),
		bar: fill.getBoundingClientRect().width / track.getBoundingClientRect().width, label: svg.getAttribute('aria-label'),
		price: t('.price'), health: badge.textContent, badge: badge.className};
})`

// The Pools page against a real server (this machine: cluster "local",
// pool "local", four simulated H100s): opened from the menu with the
// keyboard, it shows the cluster (local executor, reachable, 1 node, 1 ready, 4 GPUs,
// pool local) and the pool (cluster local, 4 GPUs, nothing allocated, an
// empty bar, the price set through the API per GPU-hour in the server's
// currency, Healthy with the ok badge); a 0.5-GPU workload submitted
// through the API, once Running, shows as 0.5 allocated with the bar an
// eighth full, without a reload; cancelled, allocated goes back to 0.
func TestPoolsPageInBrowser(t *testing.T) {
	chrome := findChromium(t)
	s := startServer(t)
	b := startBrowser(t, chrome)
	ctx := context.Background()

	costCall(t, s, s.token, "POST", "/prices", map[string]any{"pool": "local", "kind": "on-demand", "rate": 2.5}, nil)
	var prices api.PriceList
	costCall(t, s, s.token, "GET", "/prices", nil, &prices)
	if prices.Currency == "" {
		t.Fatal("GET /prices names no currency")
	}
	var pools api.List[api.Pool]
	costCall(t, s, s.token, "GET", "/pools", nil, &pools)
	if len(pools.Items) != 1 || pools.Items[0].Name != "local" || pools.Items[0].GPUs != 4 {
		t.Fatalf("GET /pools = %+v, want the one pool local with 4 GPUs", pools.Items)
	}

	b.run(t, "sign in and open the Pools page from the menu with the keyboard",
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), s.token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")),
		tabTo(`#nav a[data-route="pools"]`),
		chromedp.KeyEvent(kb.Enter),
		waitJS(`location.hash === '#/pools'`),
		waitJS(`document.querySelector('#pools tr[data-pool="local"]') !== null && document.querySelector('#clusters tr[data-cluster="local"]') !== null`))
	if title := get(t, b, "the title", chromedp.Title()); title != "Pools · gpufleet" {
		t.Errorf("the Pools page's title is %q", title)
	}
	if cur := get(t, b, "the current menu entry", chromedp.Evaluate[string](`document.querySelector('#nav a[aria-current="page"]').dataset.route`)); cur != "pools" {
		t.Errorf("the menu marks %q as the current page, want pools", cur)
	}

	wantClusters := []clusterSeen{{Name: "local", Executor: "local", Reachable: "yes", Nodes: "1", Ready: "1", GPUs: "4", Pools: "local"}}
	if d := cmp.Diff(wantClusters, get(t, b, "the clusters", chromedp.Evaluate[[]clusterSeen](clustersJS))); d != "" {
		t.Errorf("the clusters on the page (-want +got):\n%s", d)
	}
	wantPrice := fmt.Sprintf("2.50 %s/GPU-hour on-demand", prices.Currency)
	pool := func(what string) poolSeen {
		t.Helper()
		ps := get(t, b, what, chromedp.Evaluate[[]poolSeen](poolsJS))
		if len(ps) != 1 {
			t.Fatalf("%s: the page shows %d pools, want local alone: %+v", what, len(ps), ps)
		}
		return ps[0]
	}
	check := func(what, allocated string, fill float64, p poolSeen) {
		t.Helper()
		if p.Name != "local" || p.Cluster != "local" || p.Kind != pools.Items[0].Kind || p.GPUs != "4" {
			t.Errorf("%s: the pool row is %+v, want local of cluster local, kind %s, 4 GPUs", what, p, pools.Items[0].Kind)
		}
		if p.Allocated != allocated {
			t.Errorf("%s: allocated shows %q, want %q", what, p.Allocated, allocated)
		}
		if p.Bar < fill-0.01 || p.Bar > fill+0.01 {
			t.Errorf("%s: the bar is %.3f full, want %.3f (%s of 4 GPUs)", what, p.Bar, fill, allocated)
		}
		if want := allocated + " of 4 GPUs allocated"; !strings.HasPrefix(p.Label, want) {
			t.Errorf("%s: the bar says %q, want %q…", what, p.Label, want)
		}
		if p.Price != wantPrice {
			t.Errorf("%s: the price shows %q, want %q", what, p.Price, wantPrice)
		}
		if p.Health != "Healthy" || !strings.Contains(p.Badge, "ok") {
			t.Errorf("%s: the health badge says %q (classes %q), want Healthy with the ok colour", what, p.Health, p.Badge)
		}
	}
	check("before any work", "0", 0, pool("the idle pool"))

	w, err := s.admin.SubmitWorkload(ctx, &api.Workload{Team: "research", Name: "pools-half",
		Command: []string{"sleep", "60"}, Resources: api.Resources{GPUs: 500}}, "")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, w.ID+" to run", func() (bool, string) {
		got, err := s.admin.GetWorkload(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p := got.Status.Phase; p != api.PhasePending && p != api.PhaseRunning {
			t.Fatalf("%s is %s %s: %s, want Running", w.ID, p, got.Status.Reason, got.Status.Message)
		}
		return got.Status.Phase == api.PhaseRunning, fmt.Sprintf("it is %s %s: %s", got.Status.Phase, got.Status.Reason, got.Status.Message)
	})
	// The page refreshes on its own (every 5 s): no reload.
	b.run(t, "see 0.5 allocated without a reload",
		jsDo(`window.__notReloaded = true`),
		waitJS(`(document.querySelector('#pools tr[data-pool="local"] .allocated') || {}).textContent === '0.5'`))
	if !get(t, b, "no reload", chromedp.Evaluate[bool](`window.__notReloaded === true`)) {
		t.Error("the page was reloaded to show the allocation")
	}
	check("with a 0.5-GPU workload running", "0.5", 0.125, pool("the pool with work"))
	b.checkColumns(t, "pools")
	b.shot(t, "pools")

	if _, err := s.admin.CancelWorkload(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	b.run(t, "see the allocation go",
		waitJS(`(document.querySelector('#pools tr[data-pool="local"] .allocated') || {}).textContent === '0'`))

	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("browser: %s", p)
	}
}

// The Pools page shows each price kind per GPU-hour as the server bills it
// (the pool's gpuHourRate: the page converts nothing), then the price as
// set with what it is per: four versions of pool local's price, each 8 per
// GPU-hour, shown in turn as each comes into effect.
func TestPoolsPageShowsEveryPriceKindPerGPUHour(t *testing.T) {
	chrome := findChromium(t)
	s := startServer(t)
	b := startBrowser(t, chrome)
	now := time.Now().UTC().Truncate(time.Second)
	kinds := []struct {
		price map[string]any
		want  string
	}{
		{map[string]any{"kind": "on-demand", "rate": 8}, "8.00 USD/GPU-hour on-demand"},
		{map[string]any{"kind": "reserved", "rate": 8, "gpus": 100, "term": "8760h"}, "8.00 USD/GPU-hour reserved, 100 GPUs for 8760h"},
		{map[string]any{"kind": "monthly", "rate": 5840}, "8.00 USD/GPU-hour monthly, 5840.00 USD/GPU-month"},
		{map[string]any{"kind": "owned", "purchase": 210240, "depreciation": "36mo"}, "8.00 USD/GPU-hour owned, 210240.00 USD/GPU over 36mo"},
	}
	for i, k := range kinds {
		k.price["pool"] = "local"
		k.price["effectiveFrom"] = now.Add(time.Duration(2*i+2) * time.Second).Format(time.RFC3339)
		costCall(t, s, s.token, "POST", "/prices", k.price, nil)
	}
	b.run(t, "sign in", chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), s.token+kb.Enter), chromedp.WaitVisible(chromedp.CSS("#dashboard")))
	for _, k := range kinds {
		// Wait for the version to be in effect, then open the page anew.
		testwait.Until(t, 20*time.Second, fmt.Sprintf("the %s price to be in effect", k.price["kind"]), func() (bool, string) {
			var pools api.List[api.Pool]
			costCall(t, s, s.token, "GET", "/pools", nil, &pools)
			return len(pools.Items) == 1 && pools.Items[0].Price != nil && pools.Items[0].Price.Kind == k.price["kind"], fmt.Sprintf("%+v", pools.Items)
		})
		b.run(t, "open the Pools page for "+k.want,
			chromedp.Navigate(s.url+"/#/"), chromedp.WaitVisible(chromedp.CSS("#dashboard")),
			chromedp.Navigate(s.url+"/#/pools"),
			waitJS(`document.querySelector('#pools tr[data-pool="local"] .price') !== null`))
		got := get(t, b, "the price", chromedp.Evaluate[string](`document.querySelector('#pools tr[data-pool="local"] .price').textContent`))
		if got != k.want {
			t.Errorf("the %s price shows %q, want %q", k.price["kind"], got, k.want)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("browser: %s", p)
	}
}
