// Package cli is the command line of the gpufleet binary: one file per verb.
//
// Client verbs (submit, get, describe, why, logs, cancel, wait, create,
// set, delete, apply, login, whoami, token, audit, plan) talk to the server only through the api client; they
// translate flags and files into api types and answers into text, and decide
// nothing themselves. The same spec.CheckWorkload that the server runs is
// run here before anything is sent, and so is spec.CheckQuota for team
// quotas (quotaProblems names the flags), and plan.CheckBrief
// for `plan`'s brief (briefErrors names each field and its line). `server`
// builds a config.Config and hands over to app.Run. `sim` verbs read trace
// files and hand over to package sim, which runs the scheduler offline.
//
// cli imports api, accept (to read a card file with its lines), cost (how
// amounts and GPU-hours are shown), config and app (for `server`), sim and
// trace (for `sim`); never the store, the scheduler, the control loop or
// the executors (sim does, for the simulator).
//
// Exit codes: 0 success, 1 an error (a server error, an invalid workload, a
// failed or cancelled workload under `wait`), 2 a usage error (unknown verb
// or flag, bad flag value, wrong arguments), 124 `wait` timed out, 130
// interrupted. `wait` otherwise exits with the workload's own exit code.
package cli
