package ledger

import (
	"bytes"
	"context"
	"encoding/csv"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/core/quantity"
	"github.com/gpufleet/gpufleet/internal/cost"
)

// TestVolumesAreBilled: the store's volume history becomes the input's
// volumes, in the default pool, and a team with volumes and no workloads
// has a row billing them.
func TestVolumesAreBilled(t *testing.T) {
	ctx := context.Background()
	st, l := setup(t)
	const gib = 1 << 30
	month := quantity.HoursPerMonth * time.Hour
	// 0.10 per GiB-month in the default pool, "local".
	l.FilePrices = []api.Price{{Pool: "local", Kind: api.PriceOnDemand, Rate: quantity.MoneyUnit, StorageGiBMonth: quantity.MoneyUnit / 10}}
	for _, v := range []core.Volume{
		{Team: "a", Name: "data", SizeBytes: 100 * gib, CreatedAt: t0},
		{Team: "a", Name: "tmp", SizeBytes: 10 * gib, CreatedAt: t0},
		{Team: "a", Name: "later", SizeBytes: gib, CreatedAt: t0.Add(month + time.Hour)},
	} {
		if err := st.CreateVolume(ctx, v, -1); err != nil {
			t.Fatal(err)
		}
	}
	// tmp lives a tenth of the month.
	if err := st.DeleteVolume(ctx, "a", "tmp", t0.Add(73*time.Hour)); err != nil {
		t.Fatal(err)
	}
	from, to := t0, t0.Add(month)
	in, err := l.Input(ctx, from, to, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Volumes) != 2 {
		t.Fatalf("volumes %+v: want data and tmp (later is after the window)", in.Volumes)
	}
	for _, v := range in.Volumes {
		if v.Pool != "local" || v.Team != "a" || !v.Created.Equal(t0) {
			t.Errorf("volume %+v: want team a's, in the default pool", v)
		}
		if v.Name == "tmp" && !v.Deleted.Equal(t0.Add(73*time.Hour)) {
			t.Errorf("tmp %+v: want its deletion", v)
		}
	}
	rep, err := l.Report(ctx, api.CostByTeam, from, to, to, cost.Visibility{All: true})
	if err != nil {
		t.Fatal(err)
	}
	// 100 × 0.10 + 10 × 0.10 × 73/730.
	if len(rep.Items) != 1 || rep.Items[0].Name != "a" || rep.Items[0].StorageCost != 10*quantity.MoneyUnit+quantity.MoneyUnit/10 {
		t.Fatalf("rows %+v: want team a's storage 10.10", rep.Items)
	}
	var buf bytes.Buffer
	if err := l.ExportFOCUS(ctx, &buf, 24*time.Hour, from, to, to, cost.Visibility{All: true}, "acme"); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, c := range recs[0] {
		col[c] = i
	}
	var billed quantity.Money
	ids := map[string]bool{}
	for _, r := range recs[1:] {
		if r[col["ServiceCategory"]] != "Storage" {
			t.Errorf("row %v: want storage only", r)
		}
		ids[r[col["ResourceId"]]] = true
		m, _ := quantity.ParseMoney(r[col["BilledCost"]])
		billed += m
	}
	if !ids["a/data"] || !ids["a/tmp"] || len(ids) != 2 || billed != rep.Total.TotalCost {
		t.Errorf("export of %v billing %s, want a/data and a/tmp billing %s", ids, billed, rep.Total.TotalCost)
	}
}
