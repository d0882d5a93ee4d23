package cost

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// specColumn is one column of the FOCUS specification's Cost and Usage
// dataset, as testdata/focus-1.3-cost-and-usage.tsv gives it.
type specColumn struct {
	id, columnType, featureLevel string
	allowsNulls                  bool
	dataType                     string
}

func readFOCUSSpec(t *testing.T) map[string]specColumn {
	t.Helper()
	f, err := os.Open("testdata/focus-1.3-cost-and-usage.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]specColumn{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 || (f[3] != "True" && f[3] != "False") {
			t.Fatalf("testdata line %q: want 5 tab-separated fields", line)
		}
		out[f[0]] = specColumn{id: f[0], columnType: f[1], featureLevel: f[2], allowsNulls: f[3] == "True", dataType: f[4]}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) != 65 {
		t.Fatalf("the specification's table has %d columns, want 65", len(out))
	}
	return out
}

var (
	focusDecimal = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?$`)
	focusNumber  = func(v any) bool { _, ok := v.(json.Number); return ok }
)

// The export follows FOCUS 1.3 as its testdata gives it: every mandatory
// column, deprecated ones included; every other column either one of the
// specification's or gpufleet's own (x_), after them; each value of its
// data type (a plain decimal, a UTC date-time, a JSON object); no null
// where the column allows none. The rows of a GPU shared by share are
// allocated charges (their allocation columns filled in, the ratio the
// workload's share), the others have none; ResourceName is the
// workload's name.
func TestFOCUSExportFollowsTheSpecification(t *testing.T) {
	spec := readFOCUSSpec(t)
	reserved := api.Price{Pool: "r", Kind: api.PriceReserved, Rate: units(3600), GPUs: 2, Term: "8760h", EffectiveFrom: t0.Add(-time.Hour)}
	half1, half2, whole := job("h1", "vision", core.Succeeded, 3600), job("h2", "vision", core.Succeeded, 1800), job("w", "nlp", core.Succeeded, 600)
	half1.Name, half2.Name, whole.Name = "render-a", "render-b", "train"
	half1.Labels = map[string]string{"project": "cats"}
	in := Input{From: t0, To: t0.Add(2 * time.Hour), Now: t0.Add(2 * time.Hour), Currency: "EUR",
		Prices: []api.Price{perSecond("p"), reserved, {Pool: "p", Kind: api.PriceOnDemand, Rate: units(3600), StorageGiBMonth: units(1), EffectiveFrom: t0.Add(90 * time.Minute)}},
		Pools:  []PoolGPUs{{"p", 2}, {"r", 2}},
		Intervals: []Interval{
			iv("h1", "p", 0, 500, 0, 3600), // half of GPU 0 for an hour
			iv("h2", "p", 0, 500, 0, 1800), // the other half for 30 min
			iv("w", "r", 0, 1000, 0, 600),  // a whole reserved GPU
		},
		Volumes:   []Volume{{Team: "vision", Name: "data", Pool: "p", SizeBytes: 1 << 30, Created: t0}},
		Workloads: workloads(half1, half2, whole)}
	col, recs := exportRecords(t, in, time.Hour, admin)
	var head []string
	for name, i := range col {
		for len(head) <= i {
			head = append(head, "")
		}
		head[i] = name
	}

	t.Run("the header", func(t *testing.T) {
		for id, c := range spec {
			if _, ok := col[id]; c.featureLevel == "Mandatory" && !ok {
				t.Errorf("mandatory column %s is missing", id)
			}
		}
		for _, id := range []string{"ServiceProviderName", "HostProviderName", "ProviderName", "PublisherName", "AllocatedMethodId",
			"AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags", "ResourceName"} {
			if _, ok := col[id]; !ok {
				t.Errorf("column %s is missing", id)
			}
		}
		custom := false
		for _, h := range head {
			switch _, known := spec[h]; {
			case strings.HasPrefix(h, "x_"):
				custom = true
			case !known:
				t.Errorf("column %s is neither FOCUS 1.3's nor prefixed x_", h)
			case custom:
				t.Errorf("FOCUS column %s comes after gpufleet's own columns", h)
			}
		}
	})
	t.Run("types and nulls", func(t *testing.T) {
		for i, r := range recs {
			for j, v := range r {
				c, ok := spec[head[j]]
				if !ok {
					continue
				}
				if v == "" {
					if !c.allowsNulls {
						t.Errorf("row %d: %s is null; FOCUS 1.3 allows no null there", i, c.id)
					}
					continue
				}
				switch c.dataType {
				case "Decimal":
					if !focusDecimal.MatchString(v) {
						t.Errorf("row %d: %s %q is not a plain decimal", i, c.id, v)
					}
				case "Date/Time":
					if _, err := time.Parse(FOCUSTime, v); err != nil {
						t.Errorf("row %d: %s %q is not a UTC date-time", i, c.id, v)
					}
				case "JSON":
					var obj map[string]any
					if err := json.Unmarshal([]byte(v), &obj); err != nil {
						t.Errorf("row %d: %s %q is not a JSON object", i, c.id, v)
					}
				}
			}
		}
	})
	t.Run("allocated charges of a shared GPU", func(t *testing.T) {
		seen := map[string]bool{}
		for _, r := range recs {
			id := r[col["ResourceId"]]
			if r[col["ChargeCategory"]] != "Usage" || r[col["ResourceType"]] != "Workload" {
				if r[col["AllocatedMethodId"]] != "" {
					t.Errorf("a %s row of %s is an allocated charge", r[col["ResourceType"]], id)
				}
				continue
			}
			seen[id] = true
			want := map[string]string{"h1": "render-a", "h2": "render-b", "w": "train"}[id]
			if r[col["ResourceName"]] != want {
				t.Errorf("%s: ResourceName %q, want its name %q", id, r[col["ResourceName"]], want)
			}
			if id == "w" {
				for _, c := range []string{"AllocatedMethodId", "AllocatedMethodDetails", "AllocatedResourceId", "AllocatedResourceName", "AllocatedTags"} {
					if r[col[c]] != "" {
						t.Errorf("the whole GPU's row has %s %q, want null", c, r[col[c]])
					}
				}
				continue
			}
			if r[col["AllocatedMethodId"]] != FOCUSAllocatedMethod || r[col["AllocatedResourceId"]] != id || r[col["AllocatedResourceName"]] != want ||
				r[col["AllocatedTags"]] != r[col["Tags"]] {
				t.Errorf("%s's row of a shared GPU: method %q resource %q %q tags %q", id, r[col["AllocatedMethodId"]], r[col["AllocatedResourceId"]],
					r[col["AllocatedResourceName"]], r[col["AllocatedTags"]])
			}
			var d struct {
				Elements []map[string]any
			}
			dec := json.NewDecoder(strings.NewReader(r[col["AllocatedMethodDetails"]]))
			dec.UseNumber()
			if err := dec.Decode(&d); err != nil || len(d.Elements) != 1 {
				t.Fatalf("%s: AllocatedMethodDetails %q: %v", id, r[col["AllocatedMethodDetails"]], err)
			}
			el := d.Elements[0]
			if el["AllocatedRatio"] != json.Number("0.5") || el["UsageUnit"] != "GPU-Hours" || !focusNumber(el["UsageQuantity"]) ||
				el["UsageQuantity"] != json.Number(r[col["ConsumedQuantity"]]) {
				t.Errorf("%s: AllocatedMethodDetails %v, want a ratio of 0.5 over its GPU-hours %s", id, el, r[col["ConsumedQuantity"]])
			}
		}
		if !seen["h1"] || !seen["h2"] || !seen["w"] || !slices.Contains(head, "HostProviderName") {
			t.Errorf("workload rows %v", seen)
		}
	})
}
