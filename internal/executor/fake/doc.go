// Package fake is an in-memory executor for control-loop tests and the
// simulator. It runs no processes but genuinely keeps state: Start records a
// task as running, Finish ends it, Stop ends it as a SIGTERM would, and every
// end is delivered on Exits exactly once. It passes the executortest
// conformance suite.
//
// Conventions that mimic a real executor:
//
//   - A command whose argv[0] is "no-such-program" fails to start.
//   - A command with "ignore-sigterm" among its arguments ignores Stop's
//     SIGTERM and ends with SIGKILL once its grace has passed on the fake's
//     clock.
//
// fake imports executor, core and the standard library only.
package fake
