// Command gpufleet-sim is gpufleet's command line with the simulator's
// plots: `gpufleet-sim sim packing ... --plot alloc.svg` draws allocation
// against arrived demand, one line per policy. It is a binary of its own
// because the plotting library (gonum/plot and its fonts) would more than
// double what the server's binary carries for one flag; every other verb
// is gpufleet's.
package main

import (
	"os"

	"github.com/gpufleet/gpufleet/internal/cli"
	"github.com/gpufleet/gpufleet/internal/sim/plot"
)

func main() {
	os.Exit(cli.MainWith(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, cli.Options{Plot: plot.Allocation}))
}
