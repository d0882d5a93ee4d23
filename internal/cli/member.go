package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newSetMemberCmd(e *env) *cobra.Command {
	var out *outputFlag
	var role string
	cmd := &cobra.Command{
		Use:   "member TEAM USER --role viewer|member|team-admin",
		Short: "Add a user to a team, or change its role there",
		Long: `Add a user to a team with a role, or change the role it has there (a
team-admin of the team, or an admin). Roles, weakest first: viewer, member,
team-admin.

A team-admin may add a person in no team (an admin creates people that way
to make them eligible), or one it shares another team with; any other user,
and another team's service account above all, answers as a missing user. A
service account belongs to one team for good: only its role there changes.`,
		Example: `  gpufleet set member research bob --role team-admin`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if !cmd.Flags().Changed("role") {
				return usagef("--role is required: viewer, member or team-admin")
			}
			if err := checkRole("role", role); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			team, user := args[0], args[1]
			u, err := c.SetMember(cmd.Context(), team, user, role)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, u); ok {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "%s is a %s of team %s\n", or(u.Name, user), or(roleIn(*u, team), role), team)
			return err
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "the user's role in the team: viewer, member or team-admin")
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

func newDeleteMemberCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "member TEAM USER",
		Short: "Remove a user from a team (a team-admin of the team, or an admin)",
		Long: `Remove a user from a team (a team-admin of the team, or an admin). The user
keeps its other teams. A service account cannot leave its team: revoke its
tokens ('gpufleet token revoke') to disable it.`,
		Example: `  gpufleet delete member research bob`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			if err := c.RemoveMember(cmd.Context(), args[0], args[1]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "%s removed from team %s\n", args[1], args[0])
			return err
		},
	}
}
