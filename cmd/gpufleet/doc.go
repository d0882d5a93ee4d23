// Command gpufleet is the one binary of the platform: the server and every
// client verb. main only calls cli.Main; all of it lives in internal/cli.
//
// It imports cli only.
package main
