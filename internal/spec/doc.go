// Package spec checks what a client submits, as the wire carries it,
// before the server takes it: a workload spec (CheckWorkload, section by
// section in the order of its fields), its network policy, a job array's
// range, a volume, a secret, a team's quota and a report of outputs. Each
// problem names its field by its wire name ("resources.gpus",
// "ports[1].name"), so that the API server can answer 400 naming it and
// the CLI can refuse a file before it sends it; both run these same checks.
// The bounds of a spec are here; the rules of its names and strings
// (names, labels, images, mount paths, destinations) are core's, which the
// executors apply again.
//
// spec is pure: no I/O, no clock, nothing logged. It imports api for the
// wire types it reads, core and core/quantity.
package spec
