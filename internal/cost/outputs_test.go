package cost

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// byUnit is a row's outputs keyed by unit.
func byUnit(r api.CostRow) map[string]api.UnitOutputs {
	m := map[string]api.UnitOutputs{}
	for _, u := range r.OutputsByUnit {
		m[u.Unit] = u
	}
	return m
}

// A running service's outputs count from the moment they are recorded,
// against what it cost in the window so far, even when the report's clock
// is past the window's end; outputs recorded before the window do not.
func TestARunningServicesOutputsCountWhileItRuns(t *testing.T) {
	svc := job("svc", "inference", core.Running, -1)
	svc.Kind, svc.Name = api.KindService, "chat"
	svc.Reported = true
	svc.Outputs = []Output{
		{At: at(-600), Unit: "requests", Accepted: 1000}, // before the window
		{At: at(100), Unit: "requests", Accepted: 20, Rejected: 2},
		{At: at(1700), Unit: "requests", Accepted: 10},
	}
	in := Input{From: t0, To: at(1800), Now: at(1800).Add(time.Millisecond), Currency: "USD",
		Prices: []api.Price{perSecond("local")}, Intervals: []Interval{iv("svc", "local", 0, 1000, -3600, -1)},
		Workloads: workloads(svc)}
	r := mustReport(t, in, api.CostByWorkload, admin).Items[0]
	// 1800 GPU-seconds in the window at one unit each, over 30 requests.
	want := api.CostRow{Name: "svc", WorkloadName: "chat", GPUHours: 0.5, AcceleratorCost: units(1800), TotalCost: units(1800),
		AcceptedOutputs: 30, RejectedOutputs: 2, Unit: "requests", CostPerAcceptedOutput: money(units(60)),
		OutputsByUnit: []api.UnitOutputs{{Unit: "requests", Accepted: 30, Rejected: 2, CostPerAccepted: money(units(60))}}}
	if d := cmp.Diff(want, r); d != "" {
		t.Errorf("the running service's row (-want +got):\n%s", d)
	}
}

// A job that reported 10 accepted outputs and then failed keeps them as
// unaccepted: shown, never in a cost per accepted output; its cost is the
// team's, shared by the team's units.
func TestAFailedJobsOutputsAreNotAccepted(t *testing.T) {
	failed := job("f", "vision", core.Failed, 100)
	failed.Reported, failed.Outputs = true, []Output{{At: at(50), Unit: "images", Accepted: 10, Rejected: 1}}
	ok := job("ok", "vision", core.Succeeded, 100)
	ok.Reported, ok.Outputs = true, []Output{{At: at(100), Unit: "images", Accepted: 20}}
	in := Input{From: t0, To: at(3600), Now: at(3600), Currency: "USD", Prices: []api.Price{perSecond("local")},
		Intervals: []Interval{iv("f", "local", 0, 1000, 0, 100), iv("ok", "local", 1, 1000, 0, 100)}, Workloads: workloads(failed, ok)}
	rows := rowsByName(mustReport(t, in, api.CostByWorkload, admin))
	if f := rows["f"]; f.AcceptedOutputs != 0 || f.UnacceptedOutputs != 10 || f.RejectedOutputs != 1 || f.CostPerAcceptedOutput != nil ||
		byUnit(f)["images"].Unaccepted != 10 || byUnit(f)["images"].CostPerAccepted != nil {
		t.Errorf("the failed job's row: %+v", f)
	}
	team := mustReport(t, in, api.CostByTeam, admin).Items[0]
	// Both jobs' 200 GPU-seconds over the 20 images accepted.
	if team.AcceptedOutputs != 20 || team.UnacceptedOutputs != 10 || *team.CostPerAcceptedOutput != units(10) || *byUnit(team)["images"].CostPerAccepted != units(10) {
		t.Errorf("the team's row: %+v", team)
	}
}

// A team whose jobs report images beside jobs that report nothing (one
// "job" each) keeps the units apart, each with its cost per accepted
// output; an acceptance card's stage is marked, and its outputs are the
// card's, not the team's.
func TestUnitsStayApartAndAcceptanceStagesAreNotTheTeams(t *testing.T) {
	img := job("img", "vision", core.Succeeded, 300)
	img.Reported, img.Outputs = true, []Output{{At: at(300), Unit: "images", Accepted: 100, Rejected: 4}}
	var ws []*Workload
	var ivs []Interval
	ws, ivs = append(ws, img), append(ivs, iv("img", "local", 0, 1000, 0, 300))
	for i, id := range []string{"j1", "j2", "j3"} {
		ws = append(ws, job(id, "vision", core.Succeeded, 100))
		ivs = append(ivs, iv(id, "local", 1+i, 1000, 0, 100))
	}
	stage := job("stage", "vision", core.Succeeded, 200)
	stage.Name = "card-throughput"
	stage.Labels = map[string]string{core.LabelAcceptanceRun: "run-1", core.LabelAcceptanceStage: "throughput"}
	stage.Reported, stage.Outputs = true, []Output{{At: at(200), Unit: "images", Accepted: 500}}
	ws, ivs = append(ws, stage), append(ivs, iv("stage", "local", 4, 1000, 0, 200))
	in := Input{From: t0, To: at(3600), Now: at(3600), Currency: "USD", Prices: []api.Price{perSecond("local")},
		Pools: []PoolGPUs{{"local", 5}}, Intervals: ivs, Workloads: workloads(ws...)}
	in.Prices[0].Kind = api.PriceOnDemand

	team := mustReport(t, in, api.CostByTeam, admin).Items[0]
	// 300 (images) + 300 (three jobs) + 200 (the stage, shared in
	// proportion: 100 each): 400 / 100 images, 400 / 3 jobs.
	want := []api.UnitOutputs{
		{Unit: "images", Accepted: 100, Rejected: 4, Acceptance: 500, CostPerAccepted: money(units(4))},
		{Unit: "job", Accepted: 3, CostPerAccepted: money(133_333_333)},
	}
	if d := cmp.Diff(want, team.OutputsByUnit); d != "" {
		t.Errorf("the team's outputs by unit (-want +got):\n%s", d)
	}
	if team.Unit != "mixed" || team.CostPerAcceptedOutput != nil || team.AcceptedOutputs != 103 || team.AcceptanceOutputs != 500 {
		t.Errorf("the team's row: unit %q per output %v, %d accepted, %d of acceptance", team.Unit, team.CostPerAcceptedOutput, team.AcceptedOutputs, team.AcceptanceOutputs)
	}
	st := rowsByName(mustReport(t, in, api.CostByWorkload, admin))["stage"]
	if st.AcceptanceStage != "run-1/throughput" || st.WorkloadName != "card-throughput" || st.AcceptedOutputs != 0 || st.AcceptanceOutputs != 500 {
		t.Errorf("the stage's row: %+v", st)
	}
}

// Outputs posted in a window where the workload held nothing count there,
// in its row.
func TestOutputsWithoutIntervalsInTheWindowCount(t *testing.T) {
	w := job("w", "vision", core.Succeeded, 100)
	w.Reported, w.Outputs = true, []Output{{At: at(7200), Unit: "images", Accepted: 5}}
	in := Input{From: at(3600), To: at(10800), Now: at(10800), Currency: "USD", Prices: []api.Price{perSecond("local")},
		Workloads: workloads(w)}
	r := mustReport(t, in, api.CostByTeam, admin)
	if len(r.Items) != 1 || r.Items[0].AcceptedOutputs != 5 || r.Items[0].TotalCost != 0 || r.Items[0].CostPerAcceptedOutput == nil || *r.Items[0].CostPerAcceptedOutput != 0 {
		t.Errorf("rows %+v: want vision's 5 images at no cost in this window", r.Items)
	}
}
