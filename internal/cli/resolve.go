package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
)

// workloadArg is how every verb that takes a workload documents its
// argument.
const workloadArg = `A workload is named by its ID (wl-…) or by its name: names are not unique, so a
name must match exactly one workload in your teams (--team narrows the
search to one team); when several match, the error lists them. An ID wins
over a name.`

// addTeamFlag adds the --team flag that narrows name lookups to one team.
func addTeamFlag(cmd *cobra.Command, team *string) {
	cmd.Flags().StringVar(team, "team", "", "look the workload's name up in this team only")
}

// resolveWorkload finds the one workload that arg names, as a verb that
// takes a workload does (see workloadArg): the workload with that ID (when
// team is given, only in that team), or else the one workload called arg
// in the caller's teams (in team, when given). None matching is a "not
// found" error, or "team T not found" when the caller sees no team T;
// several matching is an error listing them (ID, team, phase, age), so the
// caller can pick by ID or --team.
func resolveWorkload(ctx context.Context, c *api.Client, now time.Time, arg, team string) (*api.Workload, error) {
	w, err := c.GetWorkload(ctx, arg)
	var se *api.StatusError
	switch {
	case err == nil && (team == "" || w.Team == team):
		return w, nil
	case err != nil && !(errors.As(err, &se) && se.Status == http.StatusNotFound):
		return nil, err
	}
	notFound := err // the server's 404 for the ID; nil when it is in another team than team
	var matches []api.Workload
	if core.ValidName(arg) {
		all, err := c.AllWorkloads(ctx, api.ListOptions{Name: arg, Team: team})
		if err != nil {
			return nil, err
		}
		for _, m := range all { // a server older than ?name= sends them all
			if m.Name == arg && (team == "" || m.Team == team) {
				matches = append(matches, m)
			}
		}
	}
	switch {
	case len(matches) == 1:
		return &matches[0], nil
	case len(matches) > 1:
		return nil, ambiguous(now, arg, team, matches)
	case team != "":
		if err := checkTeam(ctx, c, team); err != nil {
			return nil, err
		}
		if notFound == nil {
			return nil, fmt.Errorf("workload %s is in team %s, not %s", arg, w.Team, team)
		}
		return nil, fmt.Errorf("%w (nor a workload of this name in team %s)", notFound, team)
	}
	return nil, notFound
}

// maxAmbiguousListed bounds the matches an ambiguous name's error lists.
const maxAmbiguousListed = 10

// ambiguous is the error for a name that several workloads have: it lists
// them, one a line, with what tells them apart (the newest
// maxAmbiguousListed of them).
func ambiguous(now time.Time, arg, team string, matches []api.Workload) error {
	var b strings.Builder
	where := "in your teams"
	if team != "" {
		where = "in team " + team
	}
	fmt.Fprintf(&b, "%d workloads are named %q %s; give an ID, or --team if they are in different teams:\n", len(matches), arg, where)
	shown := matches
	if len(shown) > maxAmbiguousListed { // the newest: the list is in submission order
		shown = shown[len(shown)-maxAmbiguousListed:]
	}
	t := newTable(&b, "  ID", "TEAM", "PHASE", "AGE")
	for _, m := range shown {
		t.row("  "+m.ID, m.Team, m.Status.Phase, formatAge(now, m.CreatedAt))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if n := len(matches) - len(shown); n > 0 {
		fmt.Fprintf(&b, "  and %d older (gpufleet get workloads lists them all)\n", n)
	}
	return errors.New(strings.TrimRight(b.String(), "\n"))
}

// checkTeam answers "team T not found" unless the caller sees team T
// (the server lists another team's workloads as an empty list, so that the
// teams one cannot see stay hidden; the CLI tells the caller it mistyped).
func checkTeam(ctx context.Context, c *api.Client, team string) error {
	ts, err := c.Teams(ctx)
	if err != nil {
		return err
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	if slices.Contains(names, team) {
		return nil
	}
	if len(names) == 0 {
		return fmt.Errorf("team %s not found (you are in no team)", team)
	}
	return fmt.Errorf("team %s not found (your teams: %s)", team, strings.Join(names, ", "))
}

// parsePhases checks a comma-separated --phase value, in any case, and
// returns it as the API spells it; an unknown phase is a usage error that
// lists the phases.
func parsePhases(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	parts := strings.Split(v, ",")
	for i, p := range parts {
		ph, err := api.ParsePhase(p)
		if err != nil {
			return "", usagef("--phase: %v", err)
		}
		parts[i] = ph
	}
	return strings.Join(parts, ","), nil
}
