package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/api"
)

var updateWire = flag.Bool("update-wire", false, "rewrite testdata/wire.golden.json from the wire types as they are")

// wireValues are the answers and requests of the API, each with every
// field set by fill, and a few amounts and quantities written by hand
// where their decimals matter.
func wireValues() map[string]any {
	values := map[string]any{}
	for _, v := range []any{
		&api.Workload{}, &api.Node{}, &api.Team{}, &api.TeamQuota{}, &api.PriorityClass{}, &api.User{}, &api.Token{},
		&api.AuditEntry{}, &api.List[api.Event]{}, &api.ErrorBody{}, &api.NodeEvent{}, &api.Evidence{}, &api.Drain{},
		&api.Validate{}, &api.Fault{}, &api.Secret{}, &api.Volume{}, &api.StorageUsage{}, &api.AttemptList{},
		&api.UsageHistory{}, &api.WorkloadUsageHistory{}, &api.Array{}, &api.PriceList{}, &api.BudgetList{},
		&api.Outputs{}, &api.CostReport{}, &api.CostSeries{}, &api.EstimateRequest{}, &api.CostEstimate{},
		&api.WorkloadBrief{}, &api.Plan{}, &api.AcceptanceCard{}, &api.AcceptanceRun{}, &api.Decision{},
		&api.Cluster{}, &api.Pool{}, &api.Server{}, &api.Readiness{},
	} {
		fill(reflect.ValueOf(v).Elem(), new(int), 0)
		values[reflect.TypeOf(v).Elem().String()] = v
	}
	perOutput := api.Money(-278)
	values["amounts"] = &[]api.Money{0, 1, 278, -278, 1_000_000, 576_000_000_000, 8_250_000, 1_000_000_000_000_000}
	values["quantities"] = &[]api.Milli{0, 1, 250, 500, 1000, 1500, 8000, -250}
	values["costRow"] = &api.CostRow{Name: "ml", TotalCost: 12_500_000, CostPerAcceptedOutput: &perOutput}
	return values
}

// fill sets every field of v to a value of its type that is not zero, each
// from a counter so that no two fields look alike.
func fill(v reflect.Value, n *int, depth int) {
	*n++
	k := *n
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2025, 3, 1, 12, 0, k, 0, time.UTC)))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(`{"prompt":"p` + strconv.Itoa(k) + `","max_tokens":128}`))
		return
	case reflect.TypeFor[api.Money]():
		v.SetInt(int64(k)*1_000_000 + 278)
		return
	case reflect.TypeFor[api.Milli]():
		v.SetInt(int64(k)*1000 + 250)
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + strconv.Itoa(k))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(k))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(k))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(k) + 0.5)
	case reflect.Pointer:
		if depth < 6 {
			p := reflect.New(v.Type().Elem())
			fill(p.Elem(), n, depth+1)
			v.Set(p)
		}
	case reflect.Slice:
		if depth < 6 {
			s := reflect.MakeSlice(v.Type(), 1, 1)
			fill(s.Index(0), n, depth+1)
			v.Set(s)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		key, val := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(key, n, depth+1)
		fill(val, n, depth+1)
		m.SetMapIndex(key, val)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n, depth+1)
			}
		}
	}
}

// TestWireJSONMatchesGolden checks that the JSON of the wire types, with
// every field set, is byte for byte what testdata/wire.golden.json holds,
// and that each value decodes back from it and writes the same bytes: the
// wire does not change when the code behind it moves.
func TestWireJSONMatchesGolden(t *testing.T) {
	values := wireValues()
	got, err := json.MarshalIndent(values, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "wire.golden.json")
	if *updateWire {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the wire JSON changed (-golden +now):\n%s", cmp.Diff(string(want), string(got)))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(want, &raw); err != nil {
		t.Fatal(err)
	}
	for name, v := range values {
		back := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := json.Unmarshal(raw[name], back); err != nil {
			t.Errorf("%s does not decode from its golden JSON: %v", name, err)
			continue
		}
		again, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw[name]); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(compact.String(), string(again)); diff != "" {
			t.Errorf("%s written again after decoding differs (-golden +again):\n%s", name, diff)
		}
	}
}
