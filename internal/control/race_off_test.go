//go:build !race

package control_test

// raceDetector: the tests run under the race detector (race_on_test.go).
const raceDetector = false
