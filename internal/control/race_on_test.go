//go:build race

package control_test

// raceDetector: the tests run under the race detector, which slows them
// several times over, so that what they time means nothing.
const raceDetector = true
