package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// TestLiveCostOfCompletedWork drives the whole server on simulated GPUs and
// the real clock, at one currency unit per GPU-second (3600 per GPU-hour):
// each row's accelerator cost is its held GPU-seconds, two halves of a GPU
// cost half each, a failed job is billed once and shown as failed, outputs
// come from the outputs file, the FOCUS export sums to the report, a hard
// budget already spent holds the team's next workload, and another team's
// member sees none of it.
func TestLiveCostOfCompletedWork(t *testing.T) {
	s := startLiveServer(t)
	if got := s.must(t, "set", "price", "local", "--on-demand", "3600"); !strings.HasPrefix(got, "price/local configured: on-demand 3600") {
		t.Fatalf("set price: %q", got)
	}
	var prices api.PriceList
	mustJSON(t, s.must(t, "get", "prices", "-o", "json"), &prices)
	if len(prices.Items) != 1 || prices.Items[0].Rate != 3600*quantity.MoneyUnit || prices.Currency != "USD" {
		t.Fatalf("get prices: %+v", prices)
	}
	time.Sleep(1100 * time.Millisecond) // the price applies from its second on

	whole := strings.TrimSpace(s.must(t, "submit", "--gpus", "1", "--", "sleep", "2"))
	half := func() string {
		return strings.TrimSpace(s.must(t, "submit", "--gpus", "0.5", "--", "sh", "-c",
			`echo "accepted=10 rejected=1 unit=images" >> "$GPUFLEET_OUTPUTS_FILE"; sleep 2`))
	}
	h1, h2 := half(), half()
	failed := strings.TrimSpace(s.must(t, "submit", "--gpus", "1", "--", "sh", "-c", "sleep 1; exit 1"))
	for _, id := range []string{whole, h1, h2, failed} {
		s.run(t, s.admin, "wait", id)
	}
	held := map[string]float64{} // GPU-seconds, from the workload's start and end
	for _, id := range []string{whole, h1, h2, failed} {
		var w api.Workload
		mustJSON(t, s.must(t, "get", "workload", id, "-o", "json"), &w)
		if w.Status.StartedAt == nil || w.Status.FinishedAt == nil {
			t.Fatalf("%s: not started and finished: %+v", id, w.Status)
		}
		held[id] = w.Status.FinishedAt.Sub(*w.Status.StartedAt).Seconds() * float64(w.Resources.GPUs) / 1000
	}

	var rep api.CostReport
	mustJSON(t, s.must(t, "cost", "report", "--by", "workload", "--since", "1h", "-o", "json"), &rep)
	rows := map[string]api.CostRow{}
	for _, r := range rep.Items {
		rows[r.Name] = r
	}
	units := func(m quantity.Money) float64 { return float64(m) / float64(quantity.MoneyUnit) }
	for id, sec := range held {
		r, ok := rows[id]
		if !ok {
			t.Fatalf("no row for %s in %+v", id, rep.Items)
		}
		// The interval is opened and closed by the store within a few
		// milliseconds of the status times.
		if got := units(r.AcceleratorCost); math.Abs(got-sec) > 0.05 {
			t.Errorf("%s: accelerator cost %v, want its held GPU-seconds %.3f × 1", id, got, sec)
		}
		if math.Abs(r.GPUHours*3600-sec) > 0.05 {
			t.Errorf("%s: %v GPU-hours, want %.3f GPU-seconds", id, r.GPUHours, sec)
		}
	}
	if got, want := units(rows[h1].AcceleratorCost)+units(rows[h2].AcceleratorCost), held[h1]+held[h2]; math.Abs(got-want) > 0.1 {
		t.Errorf("two halves cost %v together, want what one GPU did for that time, %.3f", got, want)
	}
	for _, id := range []string{h1, h2} {
		r := rows[id]
		if r.AcceptedOutputs != 10 || r.RejectedOutputs != 1 || r.Unit != "images" || r.CostPerAcceptedOutput == nil {
			t.Fatalf("%s: outputs %d/%d %q per %v, want 10 accepted, 1 rejected images", id, r.AcceptedOutputs, r.RejectedOutputs, r.Unit, r.CostPerAcceptedOutput)
		}
		if got, want := *r.CostPerAcceptedOutput, (r.TotalCost+5)/10; got < want-1 || got > want+1 {
			t.Errorf("%s: cost per accepted output %s, want total %s / 10", id, got, r.TotalCost)
		}
	}
	if r := rows[whole]; r.AcceptedOutputs != 1 || r.Unit != "job" {
		t.Errorf("a job that succeeded without a report: %d %q, want one accepted job", r.AcceptedOutputs, r.Unit)
	}
	if r := rows[failed]; r.AcceptedOutputs != 0 || r.CostPerAcceptedOutput != nil || math.Abs(r.FailedGPUHours*3600-held[failed]) > 0.05 || r.AcceleratorCost == 0 {
		t.Errorf("the failed job: %+v, want its cost once, in failed GPU-hours too, and no output", r)
	}
	var sum quantity.Money
	for _, r := range rep.Items {
		sum += r.TotalCost
	}
	if sum != rep.Total.TotalCost {
		t.Errorf("rows sum to %s, total says %s", sum, rep.Total.TotalCost)
	}

	// The FOCUS export of the same window sums to the report's total.
	from, to := rep.From.Format(time.RFC3339), rep.To.Add(time.Second).Format(time.RFC3339)
	mustJSON(t, s.must(t, "cost", "report", "--by", "team", "--from", from, "--to", to, "-o", "json"), &rep)
	out := s.must(t, "cost", "export", "--format", "focus", "--granularity", "hour", "--from", from, "--to", to)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("export: %v, %d records:\n%s", err, len(recs), out)
	}
	head := recs[0]
	for _, col := range []string{"BilledCost", "EffectiveCost", "ListCost", "ContractedCost", "BillingAccountId", "BillingAccountName",
		"BillingCurrency", "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "ChargeClass",
		"ChargeDescription", "PricingQuantity", "PricingUnit", "InvoiceIssuerName", "ProviderName", "PublisherName", "ServiceCategory", "ServiceName",
		"ServiceProviderName", "HostProviderName", "AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags"} {
		if !slices.Contains(head, col) {
			t.Errorf("FOCUS export has no column %s", col)
		}
	}
	// The halves' rows are allocated charges of a shared GPU; the whole
	// GPU's is not.
	resID, method, allocID, details := slices.Index(head, "ResourceId"), slices.Index(head, "AllocatedMethodId"), slices.Index(head, "AllocatedResourceId"), slices.Index(head, "AllocatedMethodDetails")
	for _, r := range recs[1:] {
		switch r[resID] {
		case h1, h2:
			if r[method] == "" || r[allocID] != r[resID] || !strings.Contains(r[details], `"AllocatedRatio":0.5`) {
				t.Errorf("the row of %s, half a GPU: allocated by %q to %q, %s", r[resID], r[method], r[allocID], r[details])
			}
		case whole:
			if r[method] != "" || r[allocID] != "" {
				t.Errorf("the row of %s, a whole GPU, is an allocated charge (%q)", whole, r[method])
			}
		}
	}
	billed, start := slices.Index(head, "BilledCost"), slices.Index(head, "ChargePeriodStart")
	var focus quantity.Money
	for _, r := range recs[1:] {
		m, err := quantity.ParseMoney(r[billed])
		if err != nil {
			t.Fatalf("BilledCost %q: %v", r[billed], err)
		}
		focus += m
		if _, err := time.Parse("2006-01-02T15:04:05Z", r[start]); err != nil {
			t.Errorf("ChargePeriodStart %q: %v", r[start], err)
		}
	}
	if focus != rep.Total.TotalCost {
		t.Errorf("Σ BilledCost %s, the report's total %s", focus, rep.Total.TotalCost)
	}

	// A member of another team sees none of these rows.
	s.must(t, "create", "team", "thrifty")
	created := strings.TrimSpace(s.must(t, "create", "user", "tina", "--team", "thrifty"))
	tina := created[strings.LastIndex(created, "\n")+1:]
	var theirs api.CostReport
	r := s.run(t, tina, "cost", "report", "--by", "workload", "--since", "1h", "-o", "json")
	mustJSON(t, r.stdout, &theirs)
	if len(theirs.Items) != 0 || theirs.Total.TotalCost != 0 {
		t.Errorf("another team's member sees %+v", theirs)
	}

	// A hard budget smaller than what the team spent holds its next
	// workload.
	first := strings.TrimSpace(s.run(t, tina, "submit", "--team", "thrifty", "--gpus", "1", "--", "sleep", "1").stdout)
	s.run(t, tina, "wait", first)
	if got := s.must(t, "set", "budget", "thrifty", "--monthly", "0.5", "--hard"); !strings.HasPrefix(got, "budget/thrifty configured") {
		t.Fatalf("set budget: %q", got)
	}
	next := strings.TrimSpace(s.run(t, tina, "submit", "--team", "thrifty", "--gpus", "0.25", "--", "sleep", "1").stdout)
	var w api.Workload
	testwait.Within(10*time.Second, func() (bool, string) {
		mustJSON(t, s.run(t, tina, "get", "workload", next, "-o", "json").stdout, &w)
		return w.Status.Reason == "BudgetExceeded", ""
	})
	if w.Status.Phase != "Pending" || w.Status.Reason != "BudgetExceeded" || !strings.Contains(w.Status.Message, "of 0.50 USD") || !strings.Contains(w.Status.Message, "resets at") {
		t.Errorf("next workload of a team over its hard budget: %s/%s %q", w.Status.Phase, w.Status.Reason, w.Status.Message)
	}
	if why := s.run(t, tina, "why", next).stdout; !strings.Contains(why, "BudgetExceeded") || !strings.Contains(why, "resets at") {
		t.Errorf("why: %q, want the spent budget and when the month resets", why)
	}
	var bs api.BudgetList
	mustJSON(t, s.run(t, tina, "get", "budgets", "-o", "json").stdout, &bs)
	if len(bs.Items) != 1 || !bs.Items[0].Exceeded || bs.Items[0].Spent < bs.Items[0].Monthly || bs.Items[0].ExhaustedAt != nil ||
		bs.Items[0].ExhaustedSince == nil || bs.Items[0].ExhaustedSince.After(time.Now()) {
		t.Errorf("budgets: %+v, want it spent, since a time past, with no run-out time", bs)
	}
	if table := s.run(t, tina, "get", "budgets").stdout; !strings.Contains(table, "reached "+bs.Items[0].ExhaustedSince.UTC().Format(time.RFC3339)) {
		t.Errorf("get budgets does not say since when the budget is spent:\n%s", table)
	}
	// Without the budget, it starts.
	if got := s.must(t, "delete", "budget", "thrifty"); got != "budget/thrifty deleted\n" {
		t.Errorf("delete budget: %q", got)
	}
	testwait.Within(10*time.Second, func() (bool, string) {
		mustJSON(t, s.run(t, tina, "get", "workload", next, "-o", "json").stdout, &w)
		return w.Status.Phase != "Pending", ""
	})
	if w.Status.Phase == "Pending" {
		t.Errorf("after the budget is removed: %s/%s %q, want it started", w.Status.Phase, w.Status.Reason, w.Status.Message)
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

// Outputs count as they happen, as a new user would check: a running
// service's posted outputs count in the report by workload while it runs,
// against what it cost so far; a job that wrote accepted outputs and then
// failed has none accepted (they are unaccepted); rows by workload carry the
// workload's name; the team's row keeps images and jobs apart, each with
// its cost per accepted output.
func TestLiveOutputsCountAsTheyHappen(t *testing.T) {
	s := startLiveServerWith(t, func(c *config.Config) {
		c.Cost.Prices = []api.Price{{Pool: "local", Kind: api.PriceOnDemand, Rate: 3600 * quantity.MoneyUnit}}
	})
	c := api.NewClient("http://"+s.addr, s.admin)
	ctx := context.Background()
	svc := strings.TrimSpace(s.must(t, "submit", "--kind", "service", "--name", "chat", "--gpus", "0.5", "--", "sleep", "120"))
	images := strings.TrimSpace(s.must(t, "submit", "--name", "render", "--gpus", "0.25", "--", "sh", "-c", `echo "accepted=40 rejected=2 unit=images" >> "$GPUFLEET_OUTPUTS_FILE"`))
	plain := strings.TrimSpace(s.must(t, "submit", "--name", "etl", "--gpus", "0.25", "--", "true"))
	failed := strings.TrimSpace(s.must(t, "submit", "--name", "flaky", "--gpus", "0.25", "--", "sh", "-c", `echo "accepted=10 unit=images" >> "$GPUFLEET_OUTPUTS_FILE"; exit 1`))
	for _, id := range []string{images, plain, failed} {
		s.run(t, s.admin, "wait", id)
	}
	testwait.Until(t, 20*time.Second, "the service to run", func() (bool, string) {
		w, err := c.GetWorkload(ctx, svc)
		if err != nil {
			t.Fatal(err)
		}
		return w.Status.Phase == api.PhaseRunning, fmt.Sprintf("it is %s: %s", w.Status.Phase, w.Status.Message)
	})
	if _, err := c.ReportOutputs(ctx, svc, &api.Outputs{Accepted: 30, Unit: "requests"}); err != nil {
		t.Fatal(err)
	}

	var rep api.CostReport
	mustJSON(t, s.must(t, "cost", "report", "--by", "workload", "--since", "1h", "-o", "json"), &rep)
	rows := map[string]api.CostRow{}
	for _, r := range rep.Items {
		rows[r.Name] = r
	}
	if r := rows[svc]; r.AcceptedOutputs != 30 || r.Unit != "requests" || r.CostPerAcceptedOutput == nil || *r.CostPerAcceptedOutput <= 0 || r.WorkloadName != "chat" {
		t.Errorf("the running service's row: %+v, want its 30 requests at a cost each, named chat", r)
	}
	if r := rows[failed]; r.AcceptedOutputs != 0 || r.UnacceptedOutputs != 10 || r.CostPerAcceptedOutput != nil || r.WorkloadName != "flaky" {
		t.Errorf("the failed job's row: %+v, want its 10 images unaccepted", r)
	}
	table := s.must(t, "cost", "report", "--by", "workload", "--since", "1h")
	for _, want := range []string{"chat", "render", "REJECTED", "UNACCEPTED"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table by workload has no %s:\n%s", want, table)
		}
	}

	mustJSON(t, s.must(t, "cost", "report", "--by", "team", "--since", "1h", "-o", "json"), &rep)
	if len(rep.Items) != 1 {
		t.Fatalf("rows by team: %+v", rep.Items)
	}
	team := rep.Items[0]
	per := map[string]api.UnitOutputs{}
	for _, u := range team.OutputsByUnit {
		per[u.Unit] = u
	}
	for unit, accepted := range map[string]int64{"images": 40, "job": 1, "requests": 30} {
		if u := per[unit]; u.Accepted != accepted || u.CostPerAccepted == nil || *u.CostPerAccepted <= 0 {
			t.Errorf("the team's %s: %+v, want %d accepted with a cost each", unit, u, accepted)
		}
	}
	if team.Unit != "mixed" || team.UnacceptedOutputs != 10 {
		t.Errorf("the team's row: unit %q, %d unaccepted", team.Unit, team.UnacceptedOutputs)
	}
	table = s.must(t, "cost", "report", "--by", "team", "--since", "1h")
	if strings.Contains(table, "mixed") || !strings.Contains(table, "images") || !strings.Contains(table, "requests") {
		t.Errorf("the table by team does not keep the units apart:\n%s", table)
	}
	// The cost counter says its currency.
	req, _ := http.NewRequest("GET", "http://"+s.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `gpufleet_cost_total{currency="USD",pool="local",team="default"}`) {
		t.Errorf("/metrics has no cost counter naming its currency:\n%.2000s", body)
	}
	// The FOCUS export names each workload, as the CSV report does.
	recs, err := csv.NewReader(strings.NewReader(s.must(t, "cost", "export", "--since", "1h"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	resID, resName := slices.Index(recs[0], "ResourceId"), slices.Index(recs[0], "ResourceName")
	named := map[string]string{}
	for _, r := range recs[1:] {
		named[r[resID]] = r[resName]
	}
	csvRecs, err := csv.NewReader(strings.NewReader(s.must(t, "cost", "report", "--by", "workload", "--since", "1h", "-o", "csv"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	csvNamed := map[string]string{}
	for _, r := range csvRecs[1:] {
		csvNamed[r[slices.Index(csvRecs[0], "name")]] = r[slices.Index(csvRecs[0], "workloadName")]
	}
	for id, name := range map[string]string{svc: "chat", images: "render", plain: "etl", failed: "flaky"} {
		if named[id] != name || csvNamed[id] != name {
			t.Errorf("%s: the FOCUS export names it %q, the CSV %q; want %q", id, named[id], csvNamed[id], name)
		}
	}
}
