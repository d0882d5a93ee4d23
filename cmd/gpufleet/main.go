// Command gpufleet is the one binary of the platform: the server and every
// client verb. All of it lives in internal/cli.
package main

import (
	"os"

	"github.com/gpufleet/gpufleet/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
