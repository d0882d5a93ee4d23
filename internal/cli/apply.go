package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// fleetFile is what `apply -f` reads. Quantities stay raw until they are
// checked, so that a bad one is reported with its path (teams[1].limit).
type fleetFile struct {
	Teams []fleetTeam `json:"teams"`
}

type fleetTeam struct {
	Name       string          `json:"name"`
	Guaranteed json.RawMessage `json:"guaranteed"` // GPUs
	Limit      json.RawMessage `json:"limit"`      // GPUs; absent, unlimited or -1 for none
	Weight     json.RawMessage `json:"weight"`
	// GuaranteedByModel guarantees GPUs of models, e.g. {H100: 4}.
	GuaranteedByModel map[string]json.RawMessage `json:"guaranteedByModel"`
	// GuaranteedByPool guarantees GPUs in pools, e.g. {onprem: 8}.
	GuaranteedByPool map[string]json.RawMessage `json:"guaranteedByPool"`
}

// teamSpec is one team of the file, checked, in the API's units. The file
// states a team's whole quota: a field it leaves out takes its default.
type teamSpec struct {
	name       string
	guaranteed int64
	limit      int64 // unlimited (-1) when the file gives none
	weight     int64
	byModel    map[string]int64 // milli-GPU; empty when the file gives none
	byPool     map[string]int64 // milli-GPU; empty when the file gives none
}

func newApplyCmd(e *env) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update the teams a YAML file declares (admin only)",
		Long: `Create or update the teams a YAML (or JSON) file declares, '-' for standard
input (admin only).

The file lists teams with their quota in GPUs (fractions allowed):

  teams:
    - name: vision
      guaranteed: 8      # GPUs (default 0)
      limit: 16          # GPUs; omit (or unlimited, -1) for no limit
      weight: 2          # default 1
      guaranteedByModel: # GPUs of one model, within guaranteed (default none)
        H100: 4
      guaranteedByPool:  # GPUs in one pool, within guaranteed (default none)
        onprem: 8

A team that does not exist is created; one that does gets the file's quota,
and a field the file leaves out returns to its default. The whole file is
checked before anything is sent, and a field it does not know is an error.
One line per team says "team/NAME created" or "team/NAME configured".`,
		Example: `  gpufleet apply -f fleet.yaml
  cat fleet.yaml | gpufleet apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usagef("apply needs -f FILE ('-' for standard input)")
			}
			specs, err := readFleetFile(e, file)
			if err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			existing, err := c.Teams(ctx)
			if err != nil {
				return err
			}
			have := map[string]bool{}
			for _, t := range existing {
				have[t.Name] = true
			}
			failed := 0
			for _, sp := range specs {
				verb := "configured"
				var err error
				if have[sp.name] {
					err = setTeamQuota(cmd, c, sp)
				} else {
					verb = "created"
					err = createTeam(cmd, c, sp)
					var se *api.StatusError
					if errors.As(err, &se) && se.Err.Code == api.CodeConflict {
						// Created since the list was read (or hidden from it).
						verb, err = "configured", setTeamQuota(cmd, c, sp)
					}
				}
				if err != nil {
					fmt.Fprintf(e.stderr, "error: team/%s: %v\n", sp.name, err)
					failed++
					continue
				}
				fmt.Fprintf(e.stdout, "team/%s %s\n", sp.name, verb)
			}
			if failed > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the YAML or JSON file to apply ('-' for standard input)")
	return cmd
}

func createTeam(cmd *cobra.Command, c *api.Client, sp teamSpec) error {
	t := &api.Team{Name: sp.name, GuaranteedMilliGPU: sp.guaranteed, Weight: sp.weight, GuaranteedByModelMilliGPU: sp.byModel,
		GuaranteedByPoolMilliGPU: sp.byPool}
	if sp.limit != unlimited {
		t.LimitMilliGPU = &sp.limit
	}
	_, err := c.CreateTeam(cmd.Context(), t)
	return err
}

// setTeamQuota sends every field, so that the team ends up with exactly
// the file's quota.
func setTeamQuota(cmd *cobra.Command, c *api.Client, sp teamSpec) error {
	_, err := c.SetQuota(cmd.Context(), sp.name, &api.TeamQuota{
		GuaranteedMilliGPU: &sp.guaranteed, LimitMilliGPU: &sp.limit, Weight: &sp.weight,
		GuaranteedByModelMilliGPU: sp.byModel, GuaranteedByPoolMilliGPU: sp.byPool,
	})
	return err
}

// readFleetFile reads and checks a fleet file. A problem with the file as a
// whole is an error naming the file; problems with its values are listed
// together, each with its path.
func readFleetFile(e *env, name string) ([]teamSpec, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(e.stdin, 4<<20))
		name = "standard input"
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, err
	}
	var f fleetFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		// The innermost error names the field (`unknown field "wieght"`).
		for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(err) {
			err = u
		}
		return nil, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(f.Teams) == 0 {
		return nil, fmt.Errorf("%s: declares no teams (want a list under teams:)", name)
	}
	var errs []api.FieldError
	specs := make([]teamSpec, 0, len(f.Teams))
	seen := map[string]int{}
	for i, ft := range f.Teams {
		path := fmt.Sprintf("teams[%d].", i)
		bad := func(field, problem string) {
			errs = append(errs, api.FieldError{Field: path + field, Problem: problem})
		}
		sp := teamSpec{name: ft.Name, limit: unlimited, weight: 1}
		switch j, dup := seen[ft.Name]; {
		case ft.Name == "":
			bad("name", "is missing")
		case !core.ValidName(ft.Name):
			bad("name", fmt.Sprintf("%q: must be lowercase letters, digits and '-', at most %d characters", ft.Name, core.MaxNameLen))
		case dup:
			bad("name", fmt.Sprintf("%q is declared already, in teams[%d]", ft.Name, j))
		default:
			seen[ft.Name] = i
		}
		var q api.TeamQuota
		if s, ok := scalar(ft.Guaranteed); ok {
			if v, err := parseGPUs(s); err != nil {
				bad("guaranteed", err.Error())
			} else {
				q.GuaranteedMilliGPU, sp.guaranteed = &v, v
			}
		}
		if s, ok := scalar(ft.Limit); ok {
			if v, err := parseLimit(s); err != nil {
				bad("limit", err.Error())
			} else {
				q.LimitMilliGPU, sp.limit = &v, v
			}
		}
		if s, ok := scalar(ft.Weight); ok {
			if v, err := parseWeight(s); err != nil {
				bad("weight", err.Error())
			} else {
				q.Weight, sp.weight = &v, v
			}
		}
		// Guarantees by model or pool: GPUs each (bounds, names and sum:
		// quotaProblems).
		byName := func(field, noun string, raws map[string]json.RawMessage) map[string]int64 {
			out := map[string]int64{}
			for name, raw := range raws {
				s, ok := scalar(raw)
				v, err := parseGPUs(s)
				if !ok || err != nil {
					bad(field+"."+name, "must be a number of GPUs for a named "+noun)
					continue
				}
				out[name] = v
			}
			return out
		}
		sp.byModel = byName("guaranteedByModel", "model", ft.GuaranteedByModel)
		q.GuaranteedByModelMilliGPU = sp.byModel
		sp.byPool = byName("guaranteedByPool", "pool", ft.GuaranteedByPool)
		q.GuaranteedByPoolMilliGPU = sp.byPool
		if q.GuaranteedMilliGPU == nil {
			q.GuaranteedMilliGPU = &sp.guaranteed // 0, so that a limit is checked against it
		}
		for _, p := range quotaProblems(q) {
			bad(p.Field, p.Problem)
		}
		specs = append(specs, sp)
	}
	if len(errs) > 0 {
		return nil, &api.Error{Code: api.CodeInvalid, Message: name + ": invalid, nothing was applied", Fields: errs}
	}
	return specs, nil
}

// scalar returns the text of a JSON number or string, unquoted; ok is false
// when the value is absent or null.
func scalar(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(raw), true
}
