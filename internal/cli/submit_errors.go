package cli

import (
	"errors"
	"strings"

	"github.com/gpufleet/gpufleet/api"
)

// fieldFlags maps a field of a submission to the submit flags that set it;
// a key ending in '.' or '[' is a prefix (labels.KEY, ports[0].port). The
// longest match wins.
// Fields spelt as their flag (team, name, kind, priority, image, replicas)
// need no translation.
var fieldFlags = map[string][]string{
	"resources.gpus": {"gpus"}, "resources.gpuMemoryMiB": {"gpu-memory", "gpus"}, "resources.gpuModels": {"gpu-model"},
	"resources.cpu": {"cpu"}, "resources.memoryMiB": {"memory"},
	"env.": {"env"}, "labels.": {"label"}, "workingDir": {"workdir"},
	"maxRuntimeSeconds": {"max-runtime"}, "gracePeriodSeconds": {"grace-period"},
	"nodeSelector":                         {"node-selector", "pool"},
	"nodeSelector.":                        {"node-selector"},
	"nodeSelector." + "gpufleet.io/pool":   {"pool"},
	"nodeSelector." + "gpufleet.io/region": {"region"},
	"residency":                            {"region"},
	"residency[":                           {"region"},
	"volumes[":                             {"volume"},
	"mounts[":                              {"mount"},
	"secretEnv[":                           {"secret-env"},
	"secretFiles[":                         {"secret-file"},
	"ports":                                {"port"},
	"readyPath":                            {"ready-path"},
	"ports[":                               {"port"},
	"array":                                {"array"},
	"array.":                               {"array"},
}

// withFlags adds to each field problem of a refused submission the flags
// given on the command line that set the field ("(flag --region)"), so that
// the message names what the user typed, not only the API field.
func withFlags(err error, given func(flag string) bool) error {
	var ae *api.Error
	if !errors.As(err, &ae) || len(ae.Fields) == 0 {
		return err
	}
	fields := make([]api.FieldError, len(ae.Fields))
	for i, f := range ae.Fields {
		var named []string
		for _, fl := range flagsOf(f.Field) {
			if given(fl) {
				named = append(named, "--"+fl)
			}
		}
		if len(named) > 0 {
			f.Problem += " (flag " + strings.Join(named, ", ") + ")"
		}
		fields[i] = f
	}
	ae.Fields = fields // ae is the error's own copy: the client made it for this call
	return err
}

// flagsOf is the flags that set a field: its own entry in fieldFlags, or
// that of its longest prefix entry.
func flagsOf(field string) []string {
	if fl, ok := fieldFlags[field]; ok {
		return fl
	}
	best := ""
	for k := range fieldFlags {
		if (strings.HasSuffix(k, ".") || strings.HasSuffix(k, "[")) && strings.HasPrefix(field, k) && len(k) > len(best) {
			best = k
		}
	}
	return fieldFlags[best]
}
