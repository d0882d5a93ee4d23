package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is the release, set at build time with
// -ldflags "-X github.com/gpufleet/gpufleet/internal/cli.Version=v1.2.3".
var Version = "dev"

type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	Go      string `json:"go"`
}

func newVersionCmd(e *env) *cobra.Command {
	var out *outputFlag
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if ok, err := out.structured(e.stdout, version()); ok {
				return err
			}
			_, err := fmt.Fprintln(e.stdout, versionLine())
			return err
		},
	}
	out = addOutputFlag(cmd, "text", outJSON, outYAML)
	return cmd
}

// version is this binary's version, commit and Go release.
func version() versionInfo {
	v := versionInfo{Version: Version, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				v.Commit = s.Value
			}
		}
	}
	return v
}

// versionLine is the one line that both 'gpufleet version' and 'gpufleet
// --version' print: "gpufleet v1.2.3 (COMMIT) go1.26".
func versionLine() string {
	v := version()
	s := "gpufleet " + v.Version
	if v.Commit != "" {
		s += " (" + v.Commit + ")"
	}
	return s + " " + v.Go
}
