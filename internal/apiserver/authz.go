package apiserver

import (
	"fmt"
	"net/http"

	"github.com/gpufleet/gpufleet/internal/core"
)

// access says who may call a route. serve checks adminOnly itself; for
// teamRole and userScope the handler finds the object's team or owner and
// calls c.authorize or c.authorizeUser, and serve answers 500 if it did
// not (a handler that forgot is a bug, never a leak).
type access int

const (
	// anyCaller: any authenticated caller; the handler answers only with
	// what the caller may see (its teams' objects, itself).
	anyCaller access = iota + 1
	// teamRole: the object belongs to a team, where the caller needs the
	// route's role. A caller who cannot see the team gets 404, with the
	// answer a missing object gets; one whose role is too weak gets 403
	// naming the role needed.
	teamRole
	// userScope: the object is a user's account or token. The user itself
	// and admins may act on it; with need team-admin, so may a team-admin
	// of a service account's team (actsFor). Anyone else gets 404 (or 403
	// when the route says what it does and the caller shares a team with
	// the user).
	userScope
	// adminOnly: global admins only; others get 403.
	adminOnly
)

// route is one row of the authorization table.
type route struct {
	pattern string
	access  access
	// need is the role needed in the object's team (teamRole), or
	// team-admin where a team-admin may act for its service accounts
	// (userScope).
	need core.Role
	// doing says what the route does, for 403s: a format taking the team
	// ("submitting to team %s") for teamRole, the user for userScope, a
	// phrase ("creating teams") for adminOnly.
	doing string
	// action names a mutating route in the audit trail, and ok is the
	// status it answers on success.
	action string
	ok     int
	serve  func(*Server, *call) (reply, error)
	// stream, instead of serve, writes the answer itself (logs); it
	// returns an error only before it has written anything.
	stream func(*Server, http.ResponseWriter, *call) error
	// scrape: a metrics reader (core.User.MetricsReader) may call it, even
	// on an admin route; it may call no other route.
	scrape bool
}

// table says, for each route, who may call it. It is the one place to read
// to know who may do what:
//
//   - viewer: read its teams' workloads, logs, events and members;
//   - member: also submit to its teams and cancel their workloads;
//   - team-admin: also manage its teams' members (adding only users it may
//     see: mayAdd), service accounts (each of one team, and their tokens:
//     actsFor) and allowed priority classes;
//   - admin: everything, including teams, quotas, users and the audit trail;
//   - metrics-reader (a service account in no team, for a scraper): GET
//     /metrics and whoami, nothing else (routes marked scrape).
//
// Everyone may read the nodes (with only its teams' allocations named), the
// priority classes, itself and its own tokens.
var table = []route{
	{pattern: "GET /api/v1/whoami", access: anyCaller, scrape: true, serve: (*Server).whoami},

	{pattern: "POST /api/v1/workloads", access: teamRole, need: core.RoleMember, doing: "submitting to team %s",
		action: "create workload", ok: http.StatusCreated, serve: (*Server).submit},
	{pattern: "GET /api/v1/workloads", access: anyCaller, serve: (*Server).listWorkloads},
	{pattern: "GET /api/v1/workloads/{id}", access: teamRole, need: core.RoleViewer, serve: (*Server).getWorkload},
	{pattern: "DELETE /api/v1/workloads/{id}", access: teamRole, need: core.RoleMember, doing: "cancelling the workloads of team %s",
		action: "cancel workload", ok: http.StatusOK, serve: (*Server).cancelWorkload},
	{pattern: "GET /api/v1/workloads/{id}/logs", access: teamRole, need: core.RoleViewer, stream: (*Server).logs},
	{pattern: "GET /api/v1/workloads/{id}/events", access: teamRole, need: core.RoleViewer, serve: (*Server).events},
	{pattern: "GET /api/v1/workloads/{id}/attempts", access: teamRole, need: core.RoleViewer, serve: (*Server).attempts},
	{pattern: "GET /api/v1/workloads/{id}/usage", access: teamRole, need: core.RoleViewer, serve: (*Server).workloadUsage},
	// A raw TCP stream to a workload's port (Upgrade: tcp): members, as
	// for what reaches inside the workload.
	{pattern: "GET /api/v1/workloads/{id}/portforward", access: teamRole, need: core.RoleMember, doing: "forwarding ports of team %s's workloads", stream: (*Server).portForward},

	// Job arrays (arrays.go): one submission of many tasks, each a
	// workload; reading and cancelling the whole array.
	{pattern: "POST /api/v1/arrays", access: teamRole, need: core.RoleMember, doing: "submitting to team %s",
		action: "create array", ok: http.StatusCreated, serve: (*Server).submitArray},
	{pattern: "GET /api/v1/arrays/{id}", access: teamRole, need: core.RoleViewer, serve: (*Server).getArray},
	{pattern: "DELETE /api/v1/arrays/{id}", access: teamRole, need: core.RoleMember, doing: "cancelling the workloads of team %s",
		action: "cancel array", ok: http.StatusOK, serve: (*Server).cancelArray},

	{pattern: "GET /api/v1/nodes", access: anyCaller, serve: (*Server).nodes},
	// A node's state, health, events and evidence are for every caller
	// (allocations only of the caller's teams, as in the list); changing
	// them is for admins.
	{pattern: "GET /api/v1/nodes/{name}", access: anyCaller, serve: (*Server).nodes},
	{pattern: "GET /api/v1/nodes/{name}/events", access: anyCaller, serve: (*Server).nodeEvents},
	{pattern: "GET /api/v1/nodes/{name}/evidence", access: anyCaller, serve: (*Server).nodeEvidence},
	{pattern: "POST /api/v1/nodes/{name}/cordon", access: adminOnly, doing: "cordoning nodes",
		action: "cordon node", ok: http.StatusOK, serve: (*Server).cordonNode},
	{pattern: "POST /api/v1/nodes/{name}/uncordon", access: adminOnly, doing: "uncordoning nodes",
		action: "uncordon node", ok: http.StatusOK, serve: (*Server).uncordonNode},
	{pattern: "POST /api/v1/nodes/{name}/drain", access: adminOnly, doing: "draining nodes",
		action: "drain node", ok: http.StatusOK, serve: (*Server).drainNode},
	{pattern: "POST /api/v1/nodes/{name}/validate", access: adminOnly, doing: "qualifying nodes",
		action: "validate node", ok: http.StatusOK, serve: (*Server).validateNode},
	{pattern: "POST /api/v1/nodes/{name}/faults", access: adminOnly, doing: "injecting faults",
		action: "inject fault", ok: http.StatusOK, serve: (*Server).injectFault},
	{pattern: "GET /api/v1/priorityclasses", access: anyCaller, serve: (*Server).priorityClasses},
	// Where work runs: names, regions, kinds, capacity and prices, no
	// team's work in them.
	{pattern: "GET /api/v1/clusters", access: anyCaller, serve: (*Server).clusters},
	{pattern: "GET /api/v1/pools", access: anyCaller, serve: (*Server).pools},
	// The servers sharing the store, and which leads.
	{pattern: "GET /api/v1/servers", access: adminOnly, doing: "listing servers", serve: (*Server).servers},

	{pattern: "GET /api/v1/teams", access: anyCaller, serve: (*Server).teams},
	{pattern: "POST /api/v1/teams", access: adminOnly, doing: "creating teams",
		action: "create team", ok: http.StatusCreated, serve: (*Server).createTeam},
	// An admin changes the quota; a team-admin only the priority classes
	// (the handler checks which fields are given).
	{pattern: "PATCH /api/v1/teams/{name}", access: teamRole, need: core.RoleTeamAdmin, doing: "changing the priority classes of team %s",
		action: "update team", ok: http.StatusOK, serve: (*Server).updateTeam},
	// Refused (409, naming them) while the team has pending or running
	// workloads; its history, service accounts and memberships go with it.
	{pattern: "DELETE /api/v1/teams/{name}", access: adminOnly, doing: "deleting teams",
		action: "delete team", ok: http.StatusNoContent, serve: (*Server).deleteTeam},
	{pattern: "GET /api/v1/teams/{team}/members", access: teamRole, need: core.RoleViewer, serve: (*Server).members},
	// Secrets: team-admins create and delete them; the team reads their
	// names and keys, never a value.
	{pattern: "POST /api/v1/teams/{team}/secrets", access: teamRole, need: core.RoleTeamAdmin, doing: "creating secrets of team %s",
		action: "create secret", ok: http.StatusCreated, serve: (*Server).createSecret},
	{pattern: "GET /api/v1/teams/{team}/secrets", access: teamRole, need: core.RoleViewer, serve: (*Server).listSecrets},
	{pattern: "DELETE /api/v1/teams/{team}/secrets/{name}", access: teamRole, need: core.RoleTeamAdmin, doing: "deleting secrets of team %s",
		action: "delete secret", ok: http.StatusNoContent, serve: (*Server).deleteSecret},
	// Acceptance cards: a member of the card's team starts a run (the
	// runner checks the team), its viewers read it, a team-admin records
	// the decision.
	{pattern: "POST /api/v1/acceptance/runs", access: anyCaller, doing: "running acceptance cards",
		action: "run acceptance card", ok: http.StatusCreated, serve: (*Server).startAcceptance},
	{pattern: "GET /api/v1/acceptance/runs", access: anyCaller, serve: (*Server).listAcceptance},
	{pattern: "GET /api/v1/acceptance/runs/{id}", access: teamRole, need: core.RoleViewer, serve: (*Server).getAcceptance},
	{pattern: "GET /api/v1/acceptance/runs/{id}/report", access: teamRole, need: core.RoleViewer, stream: (*Server).acceptanceReport},
	{pattern: "POST /api/v1/acceptance/runs/{id}/decision", access: teamRole, need: core.RoleTeamAdmin, doing: "deciding on team %s's acceptance runs",
		action: "decide acceptance run", ok: http.StatusOK, serve: (*Server).decideAcceptance},
	// Volumes: members create them within the team's storage limit;
	// team-admins delete them (with their data).
	{pattern: "POST /api/v1/teams/{team}/volumes", access: teamRole, need: core.RoleMember, doing: "creating volumes of team %s",
		action: "create volume", ok: http.StatusCreated, serve: (*Server).createVolume},
	{pattern: "GET /api/v1/teams/{team}/volumes", access: teamRole, need: core.RoleViewer, serve: (*Server).listVolumes},
	{pattern: "DELETE /api/v1/teams/{team}/volumes/{name}", access: teamRole, need: core.RoleTeamAdmin, doing: "deleting volumes of team %s",
		action: "delete volume", ok: http.StatusNoContent, serve: (*Server).deleteVolume},
	{pattern: "GET /api/v1/teams/{team}/storage", access: teamRole, need: core.RoleViewer, serve: (*Server).teamStorage},
	{pattern: "PUT /api/v1/teams/{team}/members/{user}", access: teamRole, need: core.RoleTeamAdmin, doing: "managing the members of team %s",
		action: "set member", ok: http.StatusOK, serve: (*Server).setMember},
	{pattern: "DELETE /api/v1/teams/{team}/members/{user}", access: teamRole, need: core.RoleTeamAdmin, doing: "managing the members of team %s",
		action: "remove member", ok: http.StatusNoContent, serve: (*Server).removeMember},

	// An admin creates anyone; a team-admin service accounts of its team,
	// named after it (the handler authorizes the one membership).
	{pattern: "POST /api/v1/users", access: teamRole, need: core.RoleTeamAdmin, doing: "creating service accounts in team %s",
		action: "create user", ok: http.StatusCreated, serve: (*Server).createUser},
	{pattern: "GET /api/v1/users", access: adminOnly, doing: "listing users", serve: (*Server).users},
	{pattern: "GET /api/v1/users/{name}", access: userScope, serve: (*Server).user},
	// The account and its tokens go; its workloads stay.
	{pattern: "DELETE /api/v1/users/{name}", access: adminOnly, doing: "deleting users",
		action: "delete user", ok: http.StatusNoContent, serve: (*Server).deleteUser},

	{pattern: "POST /api/v1/tokens", access: userScope, need: core.RoleTeamAdmin, doing: "creating tokens for %s",
		action: "create token", ok: http.StatusCreated, serve: (*Server).createToken},
	{pattern: "GET /api/v1/tokens", access: userScope, need: core.RoleTeamAdmin, serve: (*Server).tokens},
	{pattern: "DELETE /api/v1/tokens/{id}", access: userScope, need: core.RoleTeamAdmin,
		action: "revoke token", ok: http.StatusNoContent, serve: (*Server).revokeToken},

	{pattern: "GET /api/v1/audit", access: adminOnly, doing: "reading the audit trail", serve: (*Server).auditTrail},

	// Cost: prices are public to callers; reports, series, exports and
	// budgets hold the rows of the caller's teams (every team's and the
	// idle row for admins); admins set prices and budgets.
	{pattern: "GET /api/v1/prices", access: anyCaller, serve: (*Server).prices},
	{pattern: "POST /api/v1/prices", access: adminOnly, doing: "setting prices",
		action: "set price", ok: http.StatusCreated, serve: (*Server).addPrice},
	{pattern: "GET /api/v1/cost", access: anyCaller, serve: (*Server).costReport},
	{pattern: "GET /api/v1/cost/series", access: anyCaller, serve: (*Server).costSeries},
	{pattern: "GET /api/v1/cost/export", access: anyCaller, stream: (*Server).costExport},
	// An estimate prices hypothetical work from the public prices: a POST
	// for its body; nothing changes.
	{pattern: "POST /api/v1/cost/estimate", access: anyCaller, action: "estimate cost", ok: http.StatusOK, serve: (*Server).costEstimate},
	{pattern: "GET /api/v1/budgets", access: anyCaller, serve: (*Server).budgets},
	{pattern: "GET /api/v1/teams/{name}/budget", access: teamRole, need: core.RoleViewer, serve: (*Server).budget},
	{pattern: "PUT /api/v1/teams/{name}/budget", access: adminOnly, doing: "setting budgets",
		action: "set budget", ok: http.StatusOK, serve: (*Server).setBudget},
	{pattern: "DELETE /api/v1/teams/{name}/budget", access: adminOnly, doing: "setting budgets",
		action: "delete budget", ok: http.StatusNoContent, serve: (*Server).deleteBudget},
	{pattern: "POST /api/v1/workloads/{id}/outputs", access: teamRole, need: core.RoleMember, doing: "reporting the outputs of team %s's workloads",
		action: "report outputs", ok: http.StatusOK, serve: (*Server).reportOutputs},

	// Advice for a workload brief: the fleet's kinds of GPU,
	// what is free now and the pools' prices, no team's objects, so any
	// caller. A POST for its body; nothing changes, and the audit trail
	// records the call.
	{pattern: "POST /api/v1/plan", access: anyCaller, action: "plan workload", ok: http.StatusOK, serve: (*Server).planWorkload},

	// Cluster totals only, no team names: anyone may read them.
	{pattern: "GET /api/v1/usage", access: anyCaller, serve: (*Server).usageHistory},
	// Metrics name every team and node: admins, and metrics readers (a
	// scraper's service account, which may read nothing else).
	{pattern: "GET /metrics", access: adminOnly, scrape: true, doing: "reading the metrics", stream: (*Server).metrics},
}

// call is one request on its way through a route.
type call struct {
	r  *http.Request
	u  *core.User
	rt *route
	// audit is the entry of a mutating request (nil for reads); handlers
	// name its object and team.
	audit      *core.AuditEntry
	authorized bool
	// session is the request's, when its route streams (sessions.go).
	session *session
}

// authorize checks the caller's role in team against the route's need.
// kind and id name the object for the 404, which is the answer a missing
// object gets.
func (c *call) authorize(team core.TeamName, kind, id string) error {
	if c.audit != nil && c.audit.Team == "" {
		c.audit.Team = string(team)
	}
	if c.session != nil {
		// Checked again while the stream lasts.
		c.session.need(team, c.rt.need)
	}
	if c.u.Admin {
		c.authorized = true
		return nil
	}
	role, ok := c.u.Role(team)
	if !ok {
		return notFound(kind, id)
	}
	if c.audit != nil {
		c.audit.Role = string(role)
	}
	if !role.Includes(c.rt.need) {
		return forbidden("%s needs the %s role; you are a %s", fmt.Sprintf(c.rt.doing, team), c.rt.need, role)
	}
	c.authorized = true
	return nil
}

// authorizeUser checks that the caller may act on target's account: it is
// target, an admin, or (when the route needs team-admin) a team-admin of a
// service account's team (actsFor). kind and id name the object for the
// 404.
func (c *call) authorizeUser(target *core.User, kind, id string) error {
	if c.u.Admin || c.u.Name == target.Name {
		c.authorized = true
		return nil
	}
	if c.rt.need == core.RoleTeamAdmin && actsFor(c.u, target) {
		if c.audit != nil {
			c.audit.Role, c.audit.Team = string(core.RoleTeamAdmin), string(target.Memberships[0].Team)
		}
		c.authorized = true
		return nil
	}
	if c.rt.doing != "" && c.sharesTeam(target) {
		return forbidden("%s needs the admin role (a team-admin may act for its teams' service accounts)", fmt.Sprintf(c.rt.doing, target.Name))
	}
	return notFound(kind, id)
}

// sharesTeam reports whether the caller sees one of target's teams, and so
// may know that target exists (it is in the team's members).
func (c *call) sharesTeam(target *core.User) bool { return sharesTeam(c.u, target) }

func sharesTeam(u, target *core.User) bool {
	for _, m := range target.Memberships {
		if u.InTeam(m.Team) {
			return true
		}
	}
	return false
}

// actsFor reports whether u, not an admin, may act for target's account
// (mint, list and revoke its tokens): target is a service account, not an
// admin, and u is team-admin of its team. A service account has one team;
// one made before that rule needs u to be team-admin of every one of its
// teams, so that joining a second team never hands it to that team.
func actsFor(u, target *core.User) bool {
	if !target.ServiceAccount || target.Admin || len(target.Memberships) == 0 {
		return false
	}
	for _, m := range target.Memberships {
		if !u.Can(m.Team, core.RoleTeamAdmin) {
			return false
		}
	}
	return true
}

// mayAdd reports whether u, a team-admin of team but not an admin, may see
// target to give it a role in team: it is in team already, or shares
// another team with u, or is a person in no team (an admin creates people
// without a team to make them eligible for any team-admin to add). Anyone
// else, another team's service account above all, answers as a missing
// user. The store then refuses a service account joining a second team.
func mayAdd(u, target *core.User, team core.TeamName) bool {
	if _, ok := target.Role(team); ok {
		return true
	}
	if len(target.Memberships) == 0 {
		return !target.ServiceAccount && !target.Admin
	}
	return sharesTeam(u, target)
}

// setObject names the request's object in its audit entry.
func (c *call) setObject(id string) {
	if c.audit != nil {
		c.audit.Object = id
	}
}
