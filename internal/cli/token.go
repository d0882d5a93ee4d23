package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

func newTokenCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token create|list|revoke",
		Short: "Create, list and revoke API tokens",
		Long: `Create, list and revoke API tokens. Everyone manages their own tokens; a
team-admin also those of its teams' service accounts, and an admin
everyone's. A token is shown once, when it is made; the server keeps only its
hash, and lists show the token's ID, never the token.`,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("token %q: want create, list or revoke", args[0])
			}
			return usagef("token what? want create, list or revoke")
		},
	}
	cmd.AddCommand(newTokenCreateCmd(e), newTokenListCmd(e), newTokenRevokeCmd(e))
	return cmd
}

func newTokenCreateCmd(e *env) *cobra.Command {
	var out *outputFlag
	var name, user, expiresIn string
	cmd := &cobra.Command{
		Use:   "create [--name NAME] [--user USER] [--expires-in DURATION]",
		Short: "Make a new token and print it",
		Long: `Make a new API token, for yourself or, with --user, for another user (an
admin) or a service account of your team (a team-admin of that team; never an
admin account). The token is printed alone on the last line of standard
output; it is shown only this once.`,
		Example: `  token=$(gpufleet token create --name laptop --expires-in 720h | tail -n 1)
  gpufleet token create --user research.ci --name github-actions --expires-in 90d`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			in := &api.Token{Name: name, User: user}
			if cmd.Flags().Changed("expires-in") {
				d, err := parseDuration(expiresIn)
				if err != nil || d <= 0 {
					return usagef("--expires-in %q: want a positive duration such as 720h or 30d", expiresIn)
				}
				in.ExpiresIn = strings.TrimSpace(expiresIn)
				if _, err := time.ParseDuration(in.ExpiresIn); err != nil {
					in.ExpiresIn = strconv.FormatInt(int64(d/time.Hour), 10) + "h" // days, as hours
				}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), in)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, t); ok {
				return err
			}
			if t.Token == "" {
				return fmt.Errorf("token %s created, but the answer carries no token", t.ID)
			}
			desc := "token " + t.ID
			if t.Name != "" {
				desc += " (" + t.Name + ")"
			}
			if t.User != "" {
				desc += " for " + t.User
			}
			desc += " created"
			if t.ExpiresAt != nil {
				desc += ", expires " + formatTime(t.ExpiresAt)
			} else {
				desc += ", does not expire"
			}
			return printSecret(e.stdout, desc, "the token", t.Token)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "a name to tell the token apart in lists")
	cmd.Flags().StringVar(&user, "user", "", "the user or service account the token is for (default you)")
	cmd.Flags().StringVar(&expiresIn, "expires-in", "", "the token stops working this long from now, e.g. 720h or 30d (default never)")
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

func newTokenListCmd(e *env) *cobra.Command {
	var out *outputFlag
	var user string
	cmd := &cobra.Command{
		Use:   "list [--user USER]",
		Short: "List tokens (their IDs, never the tokens)",
		Long: `List token records: your own, or, for an admin, everyone's (--user keeps one
user's; a team-admin may name its team's service accounts). The token itself
is never shown; revoke by ID.`,
		Aliases: []string{"ls", "get"},
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			ts, err := c.Tokens(cmd.Context(), user)
			if err != nil {
				return err
			}
			for i := range ts {
				ts[i].Token = "" // never printed from a list, whatever a server sends
			}
			if ok, err := out.structured(e.stdout, list(ts)); ok {
				return err
			}
			t := newTable(e.stdout, "ID", "NAME", "USER", "CREATED", "EXPIRES", "REVOKED")
			for _, tk := range ts {
				t.row(tk.ID, tk.Name, tk.User, formatTime(&tk.CreatedAt), formatTime(tk.ExpiresAt), formatTime(tk.RevokedAt))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&user, "user", "", "only this user's tokens")
	out = addOutputFlag(cmd, outTable, outJSON, outYAML)
	return cmd
}

func newTokenRevokeCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "revoke ID...",
		Short:   "Revoke tokens by ID",
		Long:    `Revoke tokens by ID (see 'gpufleet token list'); they stop working at once.`,
		Example: `  gpufleet token revoke tok-3 tok-7`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			failed := 0
			for _, id := range args {
				if err := c.RevokeToken(cmd.Context(), id); err != nil {
					if len(args) == 1 {
						return err
					}
					fmt.Fprintf(e.stderr, "error: %s: %v\n", id, err)
					failed++
					continue
				}
				fmt.Fprintf(e.stdout, "token %s revoked\n", id)
			}
			if failed > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
	return cmd
}

// parseDuration reads a Go duration (90m, 720h) or a number of days (30d).
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > 1<<20 {
			return 0, fmt.Errorf("bad number of days %q", days)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// printSecret says what was made and prints a new token alone on the last
// line of out, so that scripts can take it with tail -n 1.
func printSecret(out io.Writer, desc, what, token string) error {
	_, err := fmt.Fprintf(out, "%s; %s, shown only once:\n%s\n", desc, what, token)
	return err
}
