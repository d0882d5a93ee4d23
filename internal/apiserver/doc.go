// Package apiserver serves gpufleet's REST API under /api/v1, the proxy to
// workloads' ports (/w/, /s/ and workload hosts) and port-forwards. It is
// an edge: it decodes the api wire types, authorizes the caller, checks
// what needs the store, calls the domain package that decides, and maps
// errors to HTTP status in one place (classify).
//
// # What it owns
//
// Authentication and authorization: every request except /healthz,
// /readyz and the OpenAPI document carries a bearer token, stored only as
// a SHA-256 hash and never logged; who may call what is one table
// (authz.go), applied by serve to every request. An object of a team the
// caller cannot see answers 404, as a missing one does; a role too weak in
// the caller's own team answers 403 naming the role needed. Answers name
// another team's workload only as "a workload of another team" (redact.go).
// Open streams (followed logs, port-forwards, proxied exchanges) are
// authorized again every 2 s and closed once their rights are lost
// (sessions.go). Rate limits per token and per address (ratelimit.go;
// admins have none), and the audit trail of every mutating request,
// whatever its answer (audit.go).
//
// A submission (a workload, a job array, an acceptance stage through
// SubmitAs) goes through toCore: the spec's field checks
// (spec.CheckWorkload, which the CLI runs too), the submitting team (the one named, else the
// only team the caller may submit to, else the server's default team:
// submitTeam), an image refused where no executor runs images
// (Options.CommandsOnly), the team's volumes, datasets and secrets it
// names (storageRefs, volumes.go), and then core.Admission.Admit
// (internal/core/admit.go), the one step that gives a submission its
// defaults and refuses what may never run. Other decisions are their
// domain's too: plans (internal/plan), prices and budgets (internal/cost
// through internal/ledger), the node lifecycle (internal/qualify),
// acceptance runs (internal/acceptrun).
//
// A write the store refuses because its disk is full answers 507 naming
// the problem (nothing was written); /readyz answers 503 while the store
// cannot write, and 200 again once space returns.
//
// # Imports
//
// api, core, core/quantity, spec, store, and the domain packages whose
// routes it serves: cost, ledger, plan, accept, acceptrun, qualify and
// secrets. Of executor, only
// its interface type, for LogRouter (a multi-cluster executor names the
// executor that holds a workload's log); it never starts, stops or
// watches work, and never imports sched or control. Its row in
// docs/ARCHITECTURE.md is checked by internal/app's architecture test.
package apiserver
