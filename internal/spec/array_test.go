package spec

import (
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

func TestParseArray(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want api.ArraySpec
	}{
		{"0-999", api.ArraySpec{Start: 0, End: 999}},
		{"0-999%50", api.ArraySpec{Start: 0, End: 999, MaxRunning: 50}},
		{"7", api.ArraySpec{Start: 7, End: 7}},
		{"3-3%1", api.ArraySpec{Start: 3, End: 3, MaxRunning: 1}},
	} {
		got, err := ParseArray(tt.in)
		if err != nil || got.Start != tt.want.Start || got.End != tt.want.End || got.MaxRunning != tt.want.MaxRunning {
			t.Errorf("ParseArray(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			continue
		}
		if got.String() != tt.in && tt.in != "7" {
			t.Errorf("%q prints as %q", tt.in, got.String())
		}
	}
	for _, tt := range []struct{ in, problem string }{
		{"", "not an array range"},
		{"a-b", "not an array range"},
		{"5-3", "before start"},
		{"-1-3", "not an array range"},
		{"0-9%0", "at least 1"},
		{"0-9%x", "at least 1"},
		{"0-100000", "more than the 100000"},
		{"0-", "not an array range"},
	} {
		if _, err := ParseArray(tt.in); err == nil || !strings.Contains(err.Error(), tt.problem) {
			t.Errorf("ParseArray(%q): %v, want an error saying %q", tt.in, err, tt.problem)
		}
	}
}

func TestCheckArray(t *testing.T) {
	i := 3
	for _, tt := range []struct {
		a     api.ArraySpec
		field string
	}{
		{api.ArraySpec{Start: -1, End: 2}, "array.start"},
		{api.ArraySpec{Start: 4, End: 2}, "array.end"},
		{api.ArraySpec{Start: 0, End: core.MaxArrayTasks}, "array"},
		{api.ArraySpec{End: 2, MaxRunning: -1}, "array.maxRunning"},
		{api.ArraySpec{End: 2, ID: "wl-x"}, "array.id"},
		{api.ArraySpec{End: 2, Index: &i}, "array.index"},
	} {
		w := api.Workload{Command: []string{"true"}, Array: &tt.a}
		errs := CheckWorkload(&w)
		found := false
		for _, e := range errs {
			found = found || e.Field == tt.field
		}
		if !found {
			t.Errorf("%+v: errors %v, want one naming %s", tt.a, errs, tt.field)
		}
	}
	w := api.Workload{Command: []string{"true"}, Resources: api.Resources{GPUs: 1000}, Array: &api.ArraySpec{Start: 0, End: core.MaxArrayTasks - 1, MaxRunning: 50}}
	if errs := CheckWorkload(&w); len(errs) != 0 {
		t.Errorf("the largest array refused: %v", errs)
	}
}
