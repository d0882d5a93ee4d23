package main

import (
	"os"

	"github.com/gpufleet/gpufleet/internal/cli"
	"github.com/gpufleet/gpufleet/internal/sim/plot"
)

func main() {
	os.Exit(cli.MainWith(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, cli.Options{Plot: plot.Allocation}))
}
