package core

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Role is what a user may do in one team. Each role includes the ones
// before it.
type Role string

const (
	// RoleViewer reads the team's workloads, logs, events and usage.
	RoleViewer Role = "viewer"
	// RoleMember also submits and cancels the team's workloads.
	RoleMember Role = "member"
	// RoleTeamAdmin also manages the team's members and service accounts
	// and the priority classes the team may use.
	RoleTeamAdmin Role = "team-admin"
)

// Roles lists the roles, weakest first.
func Roles() []Role { return []Role{RoleViewer, RoleMember, RoleTeamAdmin} }

// Includes reports whether r grants everything need does.
func (r Role) Includes(need Role) bool { return r.rank() >= need.rank() && need.rank() > 0 }

func (r Role) rank() int { return slices.Index(Roles(), r) + 1 }

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if r.rank() == 0 {
		return "", fmt.Errorf("role %q: want viewer, member or team-admin: %w", s, ErrInvalid)
	}
	return r, nil
}

// Membership is a user's role in one team.
type Membership struct {
	Team TeamName `json:"team"`
	Role Role     `json:"role"`
}

// User is a person or a service account (a user for pipelines and CI, that
// no person logs in as). A user acts for its teams with its role in each;
// an admin manages everything: teams, quotas, nodes and users, and acts
// for every team.
//
// A service account belongs to exactly one team, for as long as it exists:
// it never joins another team and never leaves its own (CheckNew and
// CheckChange, which the store applies to every write). One made by a
// team-admin is named after its team ("research.ci"). Accounts made before
// that rule may only leave teams until one is left.
type User struct {
	Name           string `json:"name"`
	Admin          bool   `json:"admin,omitempty"`
	ServiceAccount bool   `json:"serviceAccount,omitempty"`
	// MetricsReader marks the service account of a metrics scraper: in no
	// team, not an admin, it may read GET /metrics and nothing of any
	// team (the metrics-reader role).
	MetricsReader bool         `json:"metricsReader,omitempty"`
	Memberships   []Membership `json:"memberships,omitempty"`
	CreatedAt     time.Time    `json:"createdAt"`
}

// UnmarshalJSON also reads users stored before roles (schema 2 and
// earlier), whose "teams" made them members of each.
func (u *User) UnmarshalJSON(b []byte) error {
	type plain User
	var v struct {
		plain
		Teams []TeamName `json:"teams"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*u = User(v.plain)
	for _, t := range v.Teams {
		if _, ok := u.Role(t); !ok {
			u.Memberships = append(u.Memberships, Membership{Team: t, Role: RoleMember})
		}
	}
	return nil
}

// ServiceAccountTeam is the team a service account's name says it belongs
// to: "research" for "research.ci". ok is false for a name without a dot
// (a person's, or a service account an admin named otherwise).
func ServiceAccountTeam(name string) (team TeamName, ok bool) {
	t, rest, ok := strings.Cut(name, ".")
	if !ok || t == "" || rest == "" {
		return "", false
	}
	return TeamName(t), true
}

// CheckNew checks a user about to be created: a service account is in
// exactly one team, and a name with a dot ("research.ci") is a service
// account's, of the team before the dot, so that the names a team's
// service accounts may take are the team's alone; a metrics reader is the
// exception, a service account in no team. Errors wrap ErrInvalid.
func (u *User) CheckNew() error {
	team, named := ServiceAccountTeam(u.Name)
	switch {
	case strings.Contains(u.Name, ".") && (!named || !u.ServiceAccount):
		return fmt.Errorf("user %s: only a service account's name has a dot, after its team (research.ci): %w", u.Name, ErrInvalid)
	case u.MetricsReader && (!u.ServiceAccount || u.Admin || len(u.Memberships) > 0 || named):
		return fmt.Errorf("metrics reader %s: is a service account in no team, not an admin, named without a dot: %w", u.Name, ErrInvalid)
	case u.MetricsReader:
	case u.ServiceAccount && len(u.Memberships) != 1:
		return fmt.Errorf("service account %s: belongs to exactly one team: %w", u.Name, ErrInvalid)
	case named && u.Memberships[0].Team != team:
		return fmt.Errorf("service account %s: belongs to team %s, the one its name begins with: %w", u.Name, team, ErrInvalid)
	}
	return nil
}

// CheckChange checks a change from before to u: a service account never
// joins a team it was not in (an account in no team, made before this rule,
// may be given one) and never leaves its last team; a metrics reader joins
// none and stays one. Errors wrap ErrConflict.
func (u *User) CheckChange(before *User) error {
	if !before.ServiceAccount && !u.ServiceAccount {
		return nil
	}
	if before.MetricsReader || u.MetricsReader {
		if u.MetricsReader != before.MetricsReader || len(u.Memberships) > 0 {
			return fmt.Errorf("metrics reader %s: joins no team and stays a metrics reader: %w", u.Name, ErrConflict)
		}
		return nil
	}
	if u.ServiceAccount != before.ServiceAccount {
		return fmt.Errorf("user %s: whether it is a service account never changes: %w", u.Name, ErrConflict)
	}
	for _, t := range u.Teams() {
		if _, was := before.Role(t); !was && len(before.Memberships) > 0 {
			return fmt.Errorf("service account %s belongs to team %s and cannot join team %s: %w", u.Name, before.Teams()[0], t, ErrConflict)
		}
	}
	switch {
	case len(u.Memberships) > 1 && len(before.Memberships) == 0:
		return fmt.Errorf("service account %s: belongs to one team: %w", u.Name, ErrConflict)
	case len(u.Memberships) == 0 && len(before.Memberships) > 0:
		return fmt.Errorf("service account %s cannot leave its team %s (revoke its tokens to disable it): %w", u.Name, before.Teams()[0], ErrConflict)
	}
	return nil
}

// Role is the user's role in team; ok is false when it is not a member.
// An admin's role is not looked up here: see Can.
func (u *User) Role(team TeamName) (r Role, ok bool) {
	for _, m := range u.Memberships {
		if m.Team == team {
			return m.Role, true
		}
	}
	return "", false
}

// Can reports whether the user may act in team with the given role: an
// admin may do anything anywhere.
func (u *User) Can(team TeamName, need Role) bool {
	if u.Admin {
		return true
	}
	r, ok := u.Role(team)
	return ok && r.Includes(need)
}

// InTeam reports whether the user may see team's objects.
func (u *User) InTeam(team TeamName) bool { return u.Can(team, RoleViewer) }

// Teams lists the teams the user belongs to, in the order of its
// memberships.
func (u *User) Teams() []TeamName {
	out := make([]TeamName, 0, len(u.Memberships))
	for _, m := range u.Memberships {
		out = append(out, m.Team)
	}
	return out
}

// SetRole gives the user a role in team (replacing the one it had).
func (u *User) SetRole(team TeamName, r Role) {
	for i := range u.Memberships {
		if u.Memberships[i].Team == team {
			u.Memberships[i].Role = r
			return
		}
	}
	u.Memberships = append(u.Memberships, Membership{Team: team, Role: r})
}

// RemoveTeam takes the user out of team; it reports whether it was in.
func (u *User) RemoveTeam(team TeamName) bool {
	n := len(u.Memberships)
	u.Memberships = slices.DeleteFunc(u.Memberships, func(m Membership) bool { return m.Team == team })
	return len(u.Memberships) != n
}

// Token is an API token's record; the token itself is never stored, only
// its hash, and is shown once, when it is made.
type Token struct {
	// ID names the token for listing and revoking ("tok-" and 10
	// characters); it is not a secret and cannot authenticate.
	ID        string     `json:"id"`
	Name      string     `json:"name,omitempty"`
	User      string     `json:"user"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// AuditEntry records one mutating request: who, in what role, did what to
// which object, when, and how it ended. It never holds a token or a
// request body.
type AuditEntry struct {
	ID   int64     `json:"id"`
	Time time.Time `json:"time"`
	// User is the caller ("" when the request did not authenticate), and
	// Role its role for the object's team ("admin" for an admin).
	User string `json:"user"`
	Role string `json:"role,omitempty"`
	// Action is the verb and the kind of object ("create workload"),
	// Method and Path the request's.
	Action string `json:"action"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// Object is what was acted on (a workload ID, a team, a user, a token
	// ID), and Team its team when it has one.
	Object string `json:"object,omitempty"`
	Team   string `json:"team,omitempty"`
	// Status is the HTTP status answered, and Message the error, if any.
	Status  int    `json:"status"`
	Message string `json:"message,omitempty"`
}
