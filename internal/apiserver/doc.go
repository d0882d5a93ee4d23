// Package apiserver serves gpufleet's REST API under /api/v1: it decodes the
// api wire types, validates them (the same api.Workload.Validate the CLI
// runs, plus the checks that need the store), calls the store, and maps
// errors to HTTP status in one place (classify). Handlers make no scheduling
// decisions and never touch the executor: logs come through the small
// LogSource interface.
//
// Every request except /healthz, /readyz and the OpenAPI document carries a
// bearer token; tokens are stored as SHA-256 hashes. Another team's workload
// answers 404, never 403, so that IDs do not leak.
//
// apiserver imports api, core and store; never sched, control or executor.
package apiserver
