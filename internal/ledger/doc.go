// Package ledger joins the store and the cost ledger: it gathers what a
// report needs (price versions from the configuration and the store, the
// pools' devices, the allocation intervals of a window and their
// workloads, the team volumes that existed in it, billed in DefaultPool)
// into a cost.Input, adds price versions after checking them, and
// evaluates the teams' budgets (cached) for the control loop, the API and
// the metrics. What a cost is stays internal/cost's; what is stored stays
// the store's.
//
// It imports api, core, cost and store.
package ledger
