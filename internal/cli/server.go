package cli

import (
	"cmp"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/internal/app"
	"github.com/gpufleet/gpufleet/internal/config"
)

func newServerCmd(e *env) *cobra.Command {
	cfg := config.Default()
	var cfgFile string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the gpufleet server on this machine",
		Long: `Run the gpufleet server: the API, the scheduler and an executor: the local
one (processes on this machine, the default) or, with --executor kubernetes,
pods on the GPU nodes of a Kubernetes cluster. It runs until interrupted
(SIGINT or SIGTERM).

Unlike the client verbs, --addr here is the address to listen on, and
GPUFLEET_ADDR does not apply.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			run := cfg
			if cfgFile != "" {
				// The file goes under the flags: only flags given on the
				// command line override it.
				fromFile, err := config.Load(cfgFile)
				if err != nil {
					return usageError{err}
				}
				fl := cmd.Flags()
				for name, set := range map[string]func(){
					"addr":             func() { fromFile.Addr = cfg.Addr },
					"data":             func() { fromFile.DataDir = cfg.DataDir },
					"store":            func() { fromFile.Store = cfg.Store },
					"server-name":      func() { fromFile.ServerName = cfg.ServerName },
					"advertise-addr":   func() { fromFile.AdvertiseAddr = cfg.AdvertiseAddr },
					"secrets-key-file": func() { fromFile.SecretsKeyFile = cfg.SecretsKeyFile },
					"fake-gpus":        func() { fromFile.FakeGPUs = cfg.FakeGPUs },
					"demo":             func() { fromFile.Demo = cfg.Demo },
					"node-name":        func() { fromFile.NodeName = cfg.NodeName },
					"executor":         func() { fromFile.Executor = cfg.Executor },
					"allow-shared-uid": func() { fromFile.Local.AllowSharedUID = cfg.Local.AllowSharedUID },
					"container-runtime": func() {
						fromFile.Local.ContainerRuntime = cfg.Local.ContainerRuntime
					},
					"kubeconfig": func() {
						fromFile.Kubernetes.Kubeconfig = cfg.Kubernetes.Kubeconfig
					},
				} {
					if fl.Changed(name) {
						set()
					}
				}
				run = fromFile
			}
			if err := run.Validate(); err != nil {
				return usageError{err}
			}
			return app.Run(cmd.Context(), run, e.stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgFile, "config", "", "YAML file with server settings, priority classes and scheduler options (flags override it)")
	// A local --addr shadows the global one: it is the listen address.
	f.StringVar(&cfg.Addr, "addr", cfg.Addr, "address to listen on, HOST:PORT")
	f.StringVar(&cfg.DataDir, "data", cfg.DataDir, "directory for the store, the admin token and workload files")
	f.StringVar(&cfg.Store, "store", cmp.Or(os.Getenv("GPUFLEET_STORE"), cfg.Store), "where the state lives: empty for DATA/gpufleet.db (SQLite), or postgres://USER@HOST:5432/DB, which several servers share (default $GPUFLEET_STORE: a URL with a password belongs there, not in the command line)")
	f.StringVar(&cfg.AdvertiseAddr, "advertise-addr", cmp.Or(os.Getenv("GPUFLEET_ADVERTISE_ADDR"), cfg.AdvertiseAddr), "HOST:PORT the servers list shows for this server (default $GPUFLEET_ADVERTISE_ADDR, else the listen address)")
	f.StringVar(&cfg.ServerName, "server-name", cfg.ServerName, "this server's name among those sharing a store (default HOSTNAME:PORT)")
	f.StringVar(&cfg.SecretsKeyFile, "secrets-key-file", cfg.SecretsKeyFile, "file holding the key that seals team secrets (default DATA/secrets.key; servers sharing a PostgreSQL store need the same one)")
	f.StringVar(&cfg.FakeGPUs, "fake-gpus", cfg.FakeGPUs, "simulate GPUs instead of detecting them, e.g. 4xH100-80GB or 2xH100-80GB,2xA10-24GB")
	f.BoolVar(&cfg.Demo, "demo", cfg.Demo, "create two demo teams and simulate "+config.DemoFakeGPUs+" when no GPU is found")
	f.StringVar(&cfg.NodeName, "node-name", cfg.NodeName, "name this machine is registered under")
	f.StringVar(&cfg.Executor, "executor", cfg.Executor, `how workloads run: "local" (processes on this machine) or "kubernetes" (pods on the cluster's GPU nodes)`)
	f.StringVar(&cfg.Kubernetes.Kubeconfig, "kubeconfig", cfg.Kubernetes.Kubeconfig, "kubeconfig for --executor kubernetes (default: the service account in a pod, else $KUBECONFIG or ~/.kube/config)")
	f.BoolVar(&cfg.Local.AllowSharedUID, "allow-shared-uid", cfg.Local.AllowSharedUID, "start with several teams even where tasks cannot be confined from each other (not root, or no Landlock): single-user machines only")
	f.StringVar(&cfg.Local.ContainerRuntime, "container-runtime", cfg.Local.ContainerRuntime, `run workloads that name an image in containers on this machine: "podman" or "docker" (local executor; default: images are refused)`)
	return cmd
}
