package spec

import (
	"strings"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// CheckOutputs checks one report of outputs posted through the API: counts
// from 0 to core.MaxOutputCount, and a unit, a word of at most
// core.MaxOutputsUnit characters.
func CheckOutputs(o api.Outputs) []api.FieldError {
	var errs problems
	if o.Accepted < 0 || o.Accepted > core.MaxOutputCount {
		errs.add("accepted", "must be from 0 to a thousand billion")
	}
	if o.Rejected < 0 || o.Rejected > core.MaxOutputCount {
		errs.add("rejected", "must be from 0 to a thousand billion")
	}
	switch {
	case o.Unit == "":
		errs.add("unit", "is required: what is counted (images, requests, tokens)")
	case len(o.Unit) > core.MaxOutputsUnit || strings.ContainsAny(o.Unit, " \t\n\"'=") || strings.ContainsAny(o.Unit[:1], "-+=@"):
		errs.add("unit", "must be a word of at most 32 characters, starting with a letter or digit")
	}
	return errs
}
