// Package containertest builds, offline, the busybox image the tests of
// containers on one machine run (the local executor's and the server's),
// and says which podman arguments work on machines like CI's. Test
// support only.
//
// It imports the standard library only.
package containertest
