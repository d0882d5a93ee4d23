// Package apiserver serves gpufleet's REST API under /api/v1: it decodes the
// api wire types, validates them (the same spec.CheckWorkload the CLI
// runs, plus the checks that need the store), calls the store, and maps
// errors to HTTP status in one place (classify). Handlers make no scheduling
// decisions and never touch the executor: logs come through the small
// LogSource interface.
//
// Every request except /healthz, /readyz and the OpenAPI document carries a
// bearer token; tokens are stored as SHA-256 hashes and never logged. Who
// may call what is one table (authz.go): each route says whether any caller,
// an admin, a role in the object's team, or the account's owner may call
// it, and serve applies it to every request. An object of a team the caller
// cannot see answers 404 with the body a missing one gets, so that IDs do not
// leak; a role too weak in the caller's own team answers 403 naming the role
// needed. Answers name another team's workload only as "a workload of
// another team" (redact.go), and a team-admin's hold on accounts stops at
// its own team: it adds only users it may see and acts only for its own
// team's service accounts (mayAdd, actsFor). Each token, and each address
// without a valid token, has a rate limit (ratelimit.go, on
// golang.org/x/time/rate; admins have none), and every mutating
// request, whatever its answer, is recorded in the audit trail (audit.go).
//
// A write the store refuses because its disk is full answers 507
// insufficient_storage, naming the problem (nothing was written); /readyz
// answers 503 while the store cannot write (store.Writable), and 200 again
// once space returns.
//
// POST /plan (plan.go) reads a fleet summary from the store and the ledger
// and hands it, with the brief, to internal/plan, which decides; the handler
// only translates.
//
// apiserver imports api, core and store; never sched, control or executor.
package apiserver
