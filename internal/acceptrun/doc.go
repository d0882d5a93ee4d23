// Package acceptrun runs acceptance cards on the platform: Runner.Start
// stores a run and runs its stages in the background, submitting each
// stage's workloads as the caller, through every check of the API (the
// API server's SubmitAs), watching them in the store, disrupting a failure
// stage (a requeue through the store, or a drain of the node), driving a
// load stage with loadgen through the proxy's dial (Dialer), reading
// the platform's metrics and the workloads' own, and judging each stage
// with the pure package accept. Every change is stored as it happens
// (store.PutAcceptanceRun), so the CLI and the portal see a run advance;
// Open marks Error the runs a stopped server left Running.
//
// It owns the running of a card; what a card means, its criteria and
// verdicts are accept's.
//
// It imports api (the card and run wire types), accept, core, loadgen and
// store; never the API server (which it reaches through Submitter and
// Dialer), the scheduler or an executor.
package acceptrun
