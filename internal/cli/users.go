package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpufleet/gpufleet/api"
)

// roles are the roles a user may hold in a team, weakest first.
var roles = []string{api.RoleViewer, api.RoleMember, api.RoleTeamAdmin}

// checkRole returns a usage error naming flag when role is not a role.
func checkRole(flag, role string) error {
	if !slices.Contains(roles, role) {
		return usagef("--%s %q: want viewer, member or team-admin", flag, role)
	}
	return nil
}

// membershipFlags are the repeatable --team and --role flags of `create
// user`, kept in the order they were given so that each --role can be paired
// with its --team.
type membershipFlags struct {
	seq []flagArg
}

type flagArg struct{ flag, value string }

// seqValue is a pflag.Value that appends to a shared sequence.
type seqValue struct {
	flag string
	seq  *[]flagArg
}

func (v seqValue) String() string { return "" }
func (v seqValue) Type() string   { return "string" }
func (v seqValue) Set(s string) error {
	*v.seq = append(*v.seq, flagArg{v.flag, s})
	return nil
}

var _ pflag.Value = seqValue{}

func (mf *membershipFlags) add(cmd *cobra.Command) {
	cmd.Flags().Var(seqValue{"team", &mf.seq}, "team", "a team the user belongs to (repeatable)")
	cmd.Flags().Var(seqValue{"role", &mf.seq}, "role", "the user's role in the matching --team, paired in order: viewer, member or team-admin (repeatable; default member)")
}

// parse pairs the flags in order: the first --role goes with the first
// --team, the second with the second, and so on; a --team without a --role
// makes the user a member. Each --role must come after its --team and,
// when there are fewer --role than --team, before the next --team, so that
// `--team a --team b --role viewer` (which one is the viewer?) is refused
// rather than guessed. withRoles reports whether any --role was given.
func (mf *membershipFlags) parse() (ms []api.Membership, withRoles bool, err error) {
	var teamAt, roleAt []int
	var teams, rs []string
	for i, a := range mf.seq {
		if a.flag == "team" {
			teamAt, teams = append(teamAt, i), append(teams, strings.TrimSpace(a.value))
		} else {
			roleAt, rs = append(roleAt, i), append(rs, strings.TrimSpace(a.value))
		}
	}
	for i, t := range teams {
		if t == "" {
			return nil, false, usagef("--team %q: want a team name", mf.seq[teamAt[i]].value)
		}
		if slices.Contains(teams[:i], t) {
			return nil, false, usagef("--team %s: given twice", t)
		}
	}
	for i, r := range rs {
		if err := checkRole("role", r); err != nil {
			return nil, false, err
		}
		switch {
		case i >= len(teams):
			return nil, false, usagef("--role %s: no --team for it (give --team TEAM --role ROLE pairs)", r)
		case roleAt[i] < teamAt[i]:
			return nil, false, usagef("--role %s comes before its --team %s (write --team TEAM --role ROLE)", r, teams[i])
		case len(rs) < len(teams) && roleAt[i] > teamAt[i+1]:
			return nil, false, usagef("--role %s: which --team is it for? With fewer --role than --team, put each --role right after its --team", r)
		}
	}
	for i, t := range teams {
		role := api.RoleMember
		if i < len(rs) {
			role = rs[i]
		}
		ms = append(ms, api.Membership{Team: t, Role: role})
	}
	return ms, len(rs) > 0, nil
}

// membershipsOf returns a user's memberships; a user described by Teams
// alone (an older server) is a member of each.
func membershipsOf(u api.User) []api.Membership {
	if len(u.Memberships) > 0 {
		return u.Memberships
	}
	ms := make([]api.Membership, len(u.Teams))
	for i, t := range u.Teams {
		ms[i] = api.Membership{Team: t, Role: api.RoleMember}
	}
	return ms
}

// roleIn is a user's role in team, or "".
func roleIn(u api.User, team string) string {
	for _, m := range membershipsOf(u) {
		if m.Team == team {
			return m.Role
		}
	}
	return ""
}

// formatMemberships renders memberships as "research:member,vision:viewer".
func formatMemberships(ms []api.Membership) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Team + ":" + m.Role
	}
	return strings.Join(parts, ",")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func newCreateUserCmd(e *env) *cobra.Command {
	var out *outputFlag
	var mf membershipFlags
	var admin, serviceAccount, metricsReader bool
	cmd := &cobra.Command{
		Use:   "user NAME [--team TEAM [--role ROLE]]... [--admin] [--service-account]",
		Short: "Create a user or a service account and print its token",
		Long: `Create a user (admin only) or a service account (an admin, or a team-admin
for its own teams). The new user's API token is printed alone on the last line
of standard output; it is shown only this once.

--team and --role come in pairs, in order: the first --role is the role in
the first --team, and so on. A --team without a --role makes the user a
member. Roles, weakest first: viewer (reads the team's workloads, logs and
usage), member (also submits and cancels them), team-admin (also manages the
team's members, service accounts and priority classes). --admin makes a
global administrator; --service-account a user for CI and pipelines rather
than a person.

A person created in no team may be added to a team by any team-admin ('set
member'); once in a team, only an admin or a team-admin who shares a team with
them adds them to another. A service account belongs to exactly one team, for
good. A team-admin names it after that team, TEAM.NAME; given such a name and
no --team, the account is a member of TEAM.`,
		Example: `  token=$(gpufleet create user alice --team research | tail -n 1)
  gpufleet create user bob --team research --role team-admin --team vision --role viewer
  gpufleet create user research.ci --service-account --team research --role member
  gpufleet create user research.nightly --service-account
  gpufleet create user prometheus --metrics-reader`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			ms, withRoles, err := mf.parse()
			if err != nil {
				return err
			}
			if serviceAccount {
				team, _, named := strings.Cut(args[0], ".")
				switch {
				case len(ms) > 1:
					return usagef("--service-account: a service account belongs to exactly one team; give one --team")
				case len(ms) == 0 && named && team != "":
					ms = []api.Membership{{Team: team, Role: api.RoleMember}} // the team its name says
				}
			}
			if metricsReader && (len(ms) > 0 || admin) {
				return usagef("--metrics-reader: a metrics reader is in no team and not an admin; drop --team and --admin")
			}
			in := &api.User{Name: args[0], Admin: admin, ServiceAccount: serviceAccount || metricsReader, MetricsReader: metricsReader}
			if withRoles {
				in.Memberships = ms
			} else {
				// Members only: the older form, which every server knows.
				for _, m := range ms {
					in.Teams = append(in.Teams, m.Team)
				}
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			u, err := c.CreateUser(cmd.Context(), in)
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, u); ok {
				return err
			}
			if u.Token == "" {
				return fmt.Errorf("user %s created, but the answer carries no token; make one with 'gpufleet token create --user %s'", u.Name, u.Name)
			}
			desc := "user/" + u.Name + " created"
			if ms := membershipsOf(*u); len(ms) > 0 {
				parts := make([]string, len(ms))
				for i, m := range ms {
					parts[i] = m.Team + " as " + m.Role
				}
				desc += " in " + strings.Join(parts, ", ")
			}
			switch {
			case u.Admin:
				desc += " (admin)"
			case u.MetricsReader:
				desc += " (a metrics reader: it may read /metrics and nothing else)"
			case u.ServiceAccount:
				desc += " (a service account)"
			}
			return printSecret(e.stdout, desc, "its token", u.Token)
		},
	}
	mf.add(cmd)
	cmd.Flags().BoolVar(&admin, "admin", false, "make the user a global administrator")
	cmd.Flags().BoolVar(&serviceAccount, "service-account", false, "make a service account (for CI and pipelines) rather than a person")
	cmd.Flags().BoolVar(&metricsReader, "metrics-reader", false, "make a metrics scraper's service account, in no team, that may read GET /metrics and nothing else (admin only)")
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

func newWhoAmICmd(e *env) *cobra.Command {
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Show who the token belongs to, and its teams and roles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			u, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, u); ok {
				return err
			}
			return describeUser(e.stdout, u)
		},
	}
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

// describeUser writes a user as aligned "Key: value" lines and a table of
// its teams.
func describeUser(w io.Writer, u *api.User) error {
	tw := newTabWriter(w)
	kv := func(key, val string) { fmt.Fprintf(tw, "%s:\t%s\n", key, or(val, "<none>")) }
	kv("Name", u.Name)
	kv("Admin", yesNo(u.Admin))
	kv("Service account", yesNo(u.ServiceAccount))
	if !u.CreatedAt.IsZero() {
		kv("Created", u.CreatedAt.Format(time.RFC3339))
	}
	ms := membershipsOf(*u)
	if len(ms) == 0 {
		kv("Teams", "")
		return tw.Flush()
	}
	fmt.Fprintf(tw, "Teams:\t\n")
	if err := tw.Flush(); err != nil {
		return err
	}
	t := newTable(w, "  TEAM", "ROLE")
	for _, m := range ms {
		t.row("  "+m.Team, m.Role)
	}
	return t.flush()
}

// printUsers prints a row per user; -o wide adds when it was created.
func printUsers(e *env, format string, us []api.User) error {
	header := []string{"NAME", "ADMIN", "SERVICE-ACCOUNT", "TEAMS", "AGE"}
	if format == outWide {
		header = append(header, "CREATED")
	}
	t := newTable(e.stdout, header...)
	for _, u := range us {
		row := []string{u.Name, yesNo(u.Admin), yesNo(u.ServiceAccount), formatMemberships(membershipsOf(u)), formatAge(e.now(), u.CreatedAt)}
		if format == outWide {
			row = append(row, formatTime(&u.CreatedAt))
		}
		t.row(row...)
	}
	return t.flush()
}

// printMembers prints a row per member of team with its role there.
func printMembers(e *env, team string, us []api.User) error {
	t := newTable(e.stdout, "NAME", "ROLE", "SERVICE-ACCOUNT")
	for _, u := range us {
		t.row(u.Name, roleIn(u, team), yesNo(u.ServiceAccount))
	}
	return t.flush()
}
