package spec

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// ParseArray reads an array range as --array takes it, Slurm's form:
// "0-999", "0-999%50" (at most 50 running at once) or "7" (one task).
func ParseArray(s string) (*api.ArraySpec, error) {
	rng, capText, capped := strings.Cut(s, "%")
	lo, hi, isRange := strings.Cut(rng, "-")
	if !isRange {
		hi = lo
	}
	start, err1 := strconv.Atoi(lo)
	end, err2 := strconv.Atoi(hi)
	if err1 != nil || err2 != nil || lo == "" || hi == "" {
		return nil, fmt.Errorf("%q is not an array range: want START-END[%%MAX], such as 0-999 or 0-999%%50", s)
	}
	a := &api.ArraySpec{Start: start, End: end}
	if capped {
		if a.MaxRunning, err1 = strconv.Atoi(capText); err1 != nil || a.MaxRunning < 1 {
			return nil, fmt.Errorf("%q: the cap after %% must be a whole number of tasks, at least 1", s)
		}
	}
	if errs := CheckArray(a); len(errs) > 0 {
		return nil, fmt.Errorf("%q: %s", s, errs[0].Problem)
	}
	return a, nil
}

// CheckArray checks a submitted array's range.
func CheckArray(a *api.ArraySpec) []api.FieldError {
	var errs problems
	switch {
	case a.Start < 0:
		errs.add("array.start", "must not be negative")
	case a.End < a.Start:
		errs.add("array.end", "%d is before start %d: the range is start to end, inclusive", a.End, a.Start)
	case a.Len() > core.MaxArrayTasks:
		errs.add("array", "%d tasks, more than the %d one array may have: split the sweep", a.Len(), core.MaxArrayTasks)
	}
	if a.MaxRunning < 0 {
		errs.add("array.maxRunning", "must not be negative (0 or absent: no cap)")
	}
	if a.ID != "" {
		errs.add("array.id", "is set by the server")
	}
	if a.Index != nil {
		errs.add("array.index", "is set by the server")
	}
	return errs
}
