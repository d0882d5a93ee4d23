package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/sim"
)

// Main runs the gpufleet command line with args (without the program name)
// and returns the process exit code. SIGINT and SIGTERM cancel the running
// verb.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return MainWith(args, stdin, stdout, stderr, Options{})
}

// Options are what a binary built around the command line adds to it.
type Options struct {
	// Plot draws the packing experiment's allocation curves
	// (internal/sim/plot.Allocation) for sim packing --plot: only
	// cmd/gpufleet-sim links the plotting library, so that the server's
	// binary goes without it.
	Plot func(w io.Writer, format, title string, runs []sim.PackingRun) error
}

// MainWith is Main with what the binary adds (Options).
func MainWith(args []string, stdin io.Reader, stdout, stderr io.Writer, o Options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, &env{
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
		getenv: os.Getenv,
		now:    time.Now,
		plot:   o.Plot,
	})
}

// env is what one run of the command line sees of the world outside it.
// Tests fill it in instead of touching the process environment.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time

	// The global --addr and --token flags, empty when not given.
	addrFlag, tokenFlag string
	// plot draws sim packing's curves; nil in a binary without the
	// plotting library (Options.Plot).
	plot func(w io.Writer, format, title string, runs []sim.PackingRun) error
}

// usageError is a mistake in how the command was called: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitError ends the run with a chosen exit code, printing err when it is
// not nil.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func run(ctx context.Context, args []string, e *env) int {
	started := false
	root := newRootCmd(e)
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		started = true
		return nil
	}
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}

	var ee exitError
	var ue usageError
	var se *api.StatusError
	switch {
	case errors.As(err, &se) && se.Status == http.StatusUnauthorized && cmd.Name() != "login":
		fmt.Fprintf(e.stderr, "error: %v\n%s", err, e.tokenHint())
		return 1
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintf(e.stderr, "error: %v\n", ee.err)
		}
		return ee.code
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return 130
	case errors.As(err, &ue) || !started:
		// Errors before the verb ran are cobra's: unknown verb or flag, or
		// the wrong number of arguments.
		fmt.Fprintf(e.stderr, "error: %v\n", err)
		fmt.Fprintf(e.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return 2
	default:
		fmt.Fprintf(e.stderr, "error: %v\n", err)
		return 1
	}
}

// tokenHint says, after the server refused the call for want of a valid
// token, where the CLI looked for one and how to give one.
func (e *env) tokenHint() string {
	how := "Set GPUFLEET_TOKEN (or --token), or run 'gpufleet login', which saves one.\n" +
		"A local server writes its admin token to DATA/admin-token (default .gpufleet/admin-token):\n" +
		"  export GPUFLEET_TOKEN=$(cat .gpufleet/admin-token)\n"
	switch {
	case e.tokenFlag != "":
		return "The server refused the token given with --token: it is mistyped, revoked or expired.\n" + how
	case e.getenv("GPUFLEET_TOKEN") != "":
		return "The server refused the token in GPUFLEET_TOKEN: it is mistyped, revoked or expired.\n" + how
	}
	if fc, err := e.readConfigFile(); err == nil && fc.Token != "" {
		path, _ := e.configPath()
		return "The server refused the token saved by 'gpufleet login' in " + path + ": it is revoked or expired.\n" + how
	}
	return "No token was given.\n" + how
}

func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "gpufleet",
		Short: "Share GPUs between teams: run the server, submit and watch workloads",
		Long: `gpufleet runs GPU workloads for teams on shared machines.

Client verbs find the server and the token in the flags --addr and --token,
then in GPUFLEET_ADDR and GPUFLEET_TOKEN, then in the file that
'gpufleet login' writes ($XDG_CONFIG_HOME/gpufleet/config.json).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       Version,
	}
	// --version prints what 'gpufleet version' prints.
	root.SetVersionTemplate(versionLine() + "\n")
	root.PersistentFlags().StringVar(&e.addrFlag, "addr", "", "server address, HOST:PORT or URL (default $GPUFLEET_ADDR, the login file, or "+defaultAddr+")")
	root.PersistentFlags().StringVar(&e.tokenFlag, "token", "", "API token (default $GPUFLEET_TOKEN or the login file)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newServerCmd(e),
		newLoginCmd(e),
		newSubmitCmd(e),
		newGetCmd(e),
		newDescribeCmd(e),
		newLogsCmd(e),
		newCancelCmd(e),
		newWaitCmd(e),
		newCreateCmd(e),
		newSetCmd(e),
		newDeleteCmd(e),
		newTokenCmd(e),
		newWhoAmICmd(e),
		newAuditCmd(e),
		newApplyCmd(e),
		newWhyCmd(e),
		newUsageCmd(e),
		newCostCmd(e),
		newPlanCmd(e),
		newAcceptCmd(e),
		newOpenCmd(e),
		newPortForwardCmd(e),
		// The node lifecycle (node.go).
		newCordonCmd(e),
		newUncordonCmd(e),
		newDrainCmd(e),
		newNodeCmd(e),
		newDebugCmd(e),
		newVersionCmd(e),
		newSimCmd(e),
	)
	return root
}
