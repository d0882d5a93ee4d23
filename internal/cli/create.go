package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

func newCreateCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create team|user|secret|volume NAME",
		Short: "Create a team (admin only), a user, a team secret or a team volume",
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("create %q: want team, user, secret or volume", args[0])
			}
			return usagef("create what? want team, user, secret or volume")
		},
	}
	cmd.AddCommand(newCreateTeamCmd(e), newCreateUserCmd(e), newCreateSecretCmd(e), newCreateVolumeCmd(e))
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
			team.GuaranteedByPoolMilliGPU = q.GuaranteedByPoolMilliGPU
			team.Residency = q.Residency
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
			_, err = fmt.Fprintf(e.stdout, "team/%s created\n", t.Name)
			return err
		},
	}
	qf.add(cmd, true)
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}
