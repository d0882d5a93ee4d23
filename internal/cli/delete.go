package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newDeleteCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete team|user|member|budget|secret|volume ...",
		Short: "Delete a team, a user or a team's budget (admin only), or remove a user from a team",
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("delete %q: want team, user, member, budget, secret or volume", args[0])
			}
			return usagef("delete what? want team, user, member, budget, secret or volume")
		},
	}
	cmd.AddCommand(newDeleteTeamCmd(e), newDeleteUserCmd(e), newDeleteMemberCmd(e), newDeleteBudgetCmd(e), newDeleteSecretCmd(e), newDeleteVolumeCmd(e))
	return cmd
}

func newDeleteTeamCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "team NAME",
		Short: "Delete a team (admin only)",
		Long: `Delete a team (admin only). A team with pending or running workloads is
refused, naming them: cancel them first ('gpufleet cancel'). The team's
finished workloads, their logs' records and events, its service accounts
(with their tokens) and every person's membership in it go with it; the
people keep their accounts and other teams.`,
		Example: `  gpufleet delete team vision`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if err := c.DeleteTeam(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "team/%s deleted\n", args[0])
			return err
		},
	}
}

func newDeleteUserCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "user NAME",
		Short: "Delete a user and its tokens (admin only)",
		Long: `Delete a user or service account and every token it has (admin only): its
tokens authenticate nobody from then on. Its workloads stay, with its name
as their owner. An admin cannot delete itself.`,
		Example: `  gpufleet delete user bob`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if err := c.DeleteUser(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "user/%s deleted\n", args[0])
			return err
		},
	}
}

func newDeleteBudgetCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "budget TEAM",
		Short:   "Remove a team's monthly budget (admin only)",
		Long:    `Remove a team's monthly budget (admin only): what a hard budget held back may start at once.`,
		Example: `  gpufleet delete budget vision`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if err := c.DeleteBudget(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "budget/%s deleted\n", args[0])
			return err
		},
	}
}
