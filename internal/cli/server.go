package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/app"
	"github.com/gpufleet/gpufleet/internal/config"
)

func newServerCmd(e *env) *cobra.Command {
	cfg := config.Default()
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the gpufleet server on this machine",
		Long: `Run the gpufleet server: the API, the scheduler and the local executor.
It runs until interrupted (SIGINT or SIGTERM).

Unlike the client verbs, --addr here is the address to listen on, and
GPUFLEET_ADDR does not apply.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			return app.Run(cmd.Context(), cfg, e.stdout)
		},
	}
	f := cmd.Flags()
	// A local --addr shadows the global one: it is the listen address.
	f.StringVar(&cfg.Addr, "addr", cfg.Addr, "address to listen on, HOST:PORT")
	f.StringVar(&cfg.DataDir, "data", cfg.DataDir, "directory for the store, the admin token and workload files")
	f.StringVar(&cfg.FakeGPUs, "fake-gpus", cfg.FakeGPUs, "simulate GPUs instead of detecting them, e.g. 4xH100-80GB or 2xH100-80GB,2xA10-24GB")
	f.BoolVar(&cfg.Demo, "demo", cfg.Demo, "create two demo teams and simulate "+config.DemoFakeGPUs+" when no GPU is found")
	f.StringVar(&cfg.NodeName, "node-name", cfg.NodeName, "name this machine is registered under")
	return cmd
}
