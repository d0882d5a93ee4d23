// Package executortest is the conformance suite that every executor passes:
// Run starts, stops, adopts and reads the logs of tasks through the
// executor.Executor interface only, and checks what comes back on Exits.
//
// The suite's commands work both on executors that run them (local: sh,
// sleep, echo) and on the in-memory fake, which does not: Options.Finish
// tells the suite how to end a task on an executor that does not run
// commands, and the commands carry the fake's conventions ("no-such-program",
// an "ignore-sigterm" argument) in a form a real shell ignores.
//
// executortest imports executor, core and the standard library only (it is
// test support, so "testing" too). It must not import any executor
// implementation.
package executortest
