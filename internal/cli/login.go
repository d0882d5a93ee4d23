package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

func newLoginCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "login [--addr HOST:PORT] [--token TOKEN]",
		Short: "Check a token and save it with the server address",
		Long: `Check a token against the server, then save the address and the token in
$XDG_CONFIG_HOME/gpufleet/config.json (default ~/.config/gpufleet/config.json),
readable by you only. Without --token the token is read from the first line
of standard input.`,
		Example: `  gpufleet login --addr gpu1.example.com:8080 < token.txt`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, _, err := e.settings()
			if err != nil {
				return err
			}
			token := e.tokenFlag
			if token == "" {
				if token, err = e.readToken(); err != nil {
					return err
				}
			}
			u, err := api.NewClient(addr, token).WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			path, err := e.writeConfigFile(fileConfig{Addr: addr, Token: token})
			if err != nil {
				return fmt.Errorf("save login: %w", err)
			}
			_, err = fmt.Fprintf(e.stdout, "logged in to %s as %s (saved in %s)\n", addr, u.Name, path)
			return err
		},
	}
	return cmd
}

// readToken reads a token from the first line of standard input, prompting
// when that is a terminal.
func (e *env) readToken() (string, error) {
	if f, ok := e.stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprint(e.stderr, "Token: ")
		}
	}
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	token := strings.TrimSpace(line)
	if token == "" {
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read token: %w", err)
		}
		return "", usagef("no token: give --token or write it on standard input")
	}
	return token, nil
}
