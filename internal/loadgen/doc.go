// Package loadgen is the load generator of acceptance cards' load stages:
// it sends a workload requests at a concurrency, step after step, and
// measures each one (end-to-end latency, and for streamed OpenAI answers
// the time to first token, the gaps between tokens and the output
// tokens). It reaches the workload through a dial function the caller
// gives (the API server's, the one its proxy takes), so it goes where
// the proxy goes. What it measured is turned into metrics by the pure
// accept.LoadResults.
//
// It starts once the workload's port accepts a connection. Each step runs
// Concurrency workers, each sending the next request body
// (in turn, over all of them) as soon as its last answer is in. Requests
// started during the warm-up are not counted; the measured part ends
// after Duration (no request is started later) or after Count requests.
// Requests still in flight at the end may take Drain longer, then fail
// as cut off. An answer is read up to accept.MaxLoadAnswerBytes; a longer
// one fails. Run returns when every step has run, or ctx ends (the steps
// measured so far, the one cut short marked so).
//
// loadgen imports api (its request and answer bounds) and accept (the
// figures it returns); never the API server, whose dial it is given.
package loadgen
