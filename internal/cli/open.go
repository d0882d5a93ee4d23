package cli

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

// The ports of a workload, as a person writes them (submit's --port, ports
// in -f, open's PORT), and the verb that prints where the server proxies
// them.

// parsePort reads a port as --port takes it: a number (8888) or
// NAME=NUMBER (http=8000). Only the form is checked here: the range, the
// name and duplicates are spec.CheckWorkload's.
func parsePort(s string) (api.Port, error) {
	name, num, named := strings.Cut(s, "=")
	if !named {
		num, name = s, ""
	}
	if named && name == "" {
		return api.Port{}, fmt.Errorf("want PORT or NAME=PORT, e.g. 8888 or http=8000")
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil {
		return api.Port{}, fmt.Errorf("want PORT or NAME=PORT, e.g. 8888 or http=8000")
	}
	return api.Port{Name: name, Port: n}, nil
}

// portsText lists ports as --port writes them: "8888, http=8000".
func portsText(ports []api.Port) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p.Port)
		if p.Name != "" {
			s[i] = p.Name + "=" + s[i]
		}
	}
	return strings.Join(s, ", ")
}

// pickPort is the declared port that arg names (its number or its name),
// or the first declared port when arg is "".
func pickPort(w *api.Workload, arg string) (api.Port, error) {
	if len(w.Ports) == 0 {
		return api.Port{}, fmt.Errorf("workload %s declares no port, so nothing of it is served (declare one at submission: --port 8888, or ports: in -f)", w.ID)
	}
	if arg == "" {
		return w.Ports[0], nil
	}
	for _, p := range w.Ports {
		if strconv.Itoa(p.Port) == arg || p.Name != "" && p.Name == arg {
			return p, nil
		}
	}
	return api.Port{}, fmt.Errorf("workload %s does not declare port %s; it declares %s", w.ID, arg, portsText(w.Ports))
}

// browserOpeners are the programs that open a URL in the user's browser,
// by system; the first found on PATH is used. Linux's "open" is often
// openvt, so there only xdg-open is tried.
var browserOpeners = map[string][]string{"darwin": {"open"}}

const defaultOpener = "xdg-open"

func newOpenCmd(e *env) *cobra.Command {
	var team string
	var browser bool
	cmd := &cobra.Command{
		Use:   "open [--browser] ID|NAME [PORT]",
		Short: "Print the URL where the server serves a workload's port",
		Long: `Print the URL where the server proxies a workload's port:
http://ADDR/w/ID/PORT/, for the workload's first declared port or the one
PORT names (its number or its name), or, on a server with a proxy domain
(proxy.baseURL), the port's own host: https://ID-PORT.DOMAIN/, an origin of
its own, which Jupyter needs. For a service whose first port it is,
a second line gives the URL that follows the service by name across
requeues and restarts: http://ADDR/s/TEAM/NAME/.

The proxy serves viewers and above of the workload's team, with a Bearer
token (curl -H "Authorization: Bearer $GPUFLEET_TOKEN" URL) or, in a
browser, a cookie that a first visit with ?gpufleet-token=TOKEN sets; it
answers 503 while the workload does not run.

--browser opens the URL in a browser (xdg-open, or open on macOS) with your
token in the query, which the server exchanges for a cookie and removes
from the address at once; the browser's history may still hold the first
address.

` + workloadArg,
		Example: `  gpufleet open wl-0042
  gpufleet open my-notebook --browser
  gpufleet open llm-serve http`,
		Args: func(_ *cobra.Command, args []string) error {
			switch len(args) {
			case 0:
				return usagef("open: which workload? give its ID or name")
			case 1, 2:
				return nil
			}
			return usagef("open takes a workload and at most one port, got %d arguments", len(args))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.client()
			if err != nil {
				return err
			}
			w, err := resolveWorkload(cmd.Context(), c, e.now(), args[0], team)
			if err != nil {
				return err
			}
			var portArg string
			if len(args) == 2 {
				portArg = args[1]
			}
			p, err := pickPort(w, portArg)
			if err != nil {
				return err
			}
			u := fmt.Sprintf("%s/w/%s/%d/", c.Addr, url.PathEscape(w.ID), p.Port)
			if p.URL != "" { // a host of its own (the server's proxy.baseURL)
				u = p.URL
			}
			fmt.Fprintln(e.stdout, u)
			if w.Kind == api.KindService && w.Name != "" && p.Port == w.Ports[0].Port {
				fmt.Fprintf(e.stdout, "%s/s/%s/%s/\n", c.Addr, url.PathEscape(w.Team), url.PathEscape(w.Name))
			}
			if ph := w.Status.Phase; ph != api.PhaseRunning {
				fmt.Fprintf(e.stderr, "note: workload %s is %s: its URL answers 503 until it runs\n", w.ID, ph)
			}
			if !browser {
				return nil
			}
			if c.Token != "" {
				u += "?" + url.Values{"gpufleet-token": {c.Token}}.Encode()
			}
			return openBrowser(e, u)
		},
	}
	addTeamFlag(cmd, &team)
	cmd.Flags().BoolVar(&browser, "browser", false, "open the URL in a browser, signed in with your token")
	return cmd
}

// openBrowser runs the system's opener on u. Without one it says so: the
// URL is printed already.
func openBrowser(e *env, u string) error {
	names := browserOpeners[runtime.GOOS]
	if names == nil {
		names = []string{defaultOpener}
	}
	for _, n := range names {
		path, ok := lookPath(e.getenv("PATH"), n)
		if !ok {
			continue
		}
		cmd := exec.Command(path, u)
		cmd.Stdout, cmd.Stderr = e.stderr, e.stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("cannot open a browser: %s: %w", n, err)
		}
		return nil
	}
	return errors.New("cannot open a browser: " + strings.Join(names, " or ") + " is not on PATH; open the URL above yourself (a browser needs ?gpufleet-token=TOKEN added once)")
}

// lookPath finds an executable file called name in the directories of
// path (a PATH value), as exec.LookPath does with the process's own.
func lookPath(path, name string) (string, bool) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // never the current directory
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}
