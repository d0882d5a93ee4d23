package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

func newCreateCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create team|user NAME",
		Short: "Create a team or a user (admin only)",
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("create %q: want team or user", args[0])
			}
			return usagef("create what? want team or user")
		},
	}
	cmd.AddCommand(newCreateTeamCmd(e), newCreateUserCmd(e))
	return cmd
}

func newCreateTeamCmd(e *env) *cobra.Command {
	var qf quotaFlags
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "team NAME [--guaranteed GPUS] [--limit GPUS|unlimited] [--weight W]",
		Short: "Create a team (admin only)",
		Long: `Create a team (admin only), with a quota in GPUs (fractions allowed: 2.5,
0.25). Without flags the team has no guarantee, no limit and weight 1.`,
		Example: `  gpufleet create team vision --guaranteed 8 --limit 16 --weight 2`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			q, err := qf.parse(cmd)
			if err != nil {
				return err
			}
			team := &api.Team{Name: args[0], LimitMilliGPU: q.LimitMilliGPU}
			if q.GuaranteedMilliGPU != nil {
				team.GuaranteedMilliGPU = *q.GuaranteedMilliGPU
			}
			if q.Weight != nil {
				team.Weight = *q.Weight
			}
			team.GuaranteedByModelMilliGPU = q.GuaranteedByModelMilliGPU
			c, err := e.client()
			if err != nil {
				return err
			}
			t, err := c.CreateTeam(cmd.Context(), team)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, t); ok {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "team %s created\n", t.Name)
			return err
		},
	}
	qf.add(cmd, true)
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

func newCreateUserCmd(e *env) *cobra.Command {
	var out *outputFlag
	var teams []string
	var admin bool
	cmd := &cobra.Command{
		Use:   "user NAME [--team TEAM ...] [--admin]",
		Short: "Create a user (admin only) and print its token",
		Long: `Create a user (admin only). The new user's API token is printed alone on
the last line of standard output; it is shown only this once.`,
		Example: `  token=$(gpufleet create user alice --team research | tail -n 1)`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			u, err := c.CreateUser(cmd.Context(), &api.User{Name: args[0], Teams: teams, Admin: admin})
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, u); ok {
				return err
			}
			desc := "user " + u.Name + " created"
			if len(u.Teams) > 0 {
				desc += " in " + strings.Join(u.Teams, ", ")
			}
			if u.Admin {
				desc += " (admin)"
			}
			_, err = fmt.Fprintf(e.stdout, "%s; its token, shown only once:\n%s\n", desc, u.Token)
			return err
		},
	}
	cmd.Flags().StringArrayVar(&teams, "team", nil, "team the user belongs to (repeatable)")
	cmd.Flags().BoolVar(&admin, "admin", false, "make the user an administrator")
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}
