package cli

import (
	"strings"
	"testing"
)

// TestTokenHints: a call the server refuses for want of a valid token says
// how to give one, by where the CLI found the token it sent.
func TestTokenHints(t *testing.T) {
	f := newTestServer(t)
	dir := t.TempDir()
	vars := func(token string) map[string]string {
		return map[string]string{"GPUFLEET_ADDR": f.URL, "GPUFLEET_TOKEN": token, "XDG_CONFIG_HOME": dir, "HOME": dir}
	}
	how := "Set GPUFLEET_TOKEN (or --token), or run 'gpufleet login', which saves one.\n" +
		"A local server writes its admin token to DATA/admin-token (default .gpufleet/admin-token):\n" +
		"  export GPUFLEET_TOKEN=$(cat .gpufleet/admin-token)\n"
	for _, tt := range []struct {
		name string
		inv  invocation
		want string
	}{
		{"none", invocation{args: []string{"get", "workloads"}, vars: vars("")}, "No token was given.\n"},
		{"a bad GPUFLEET_TOKEN", invocation{args: []string{"logs", "x"}, vars: vars("wrong")}, "The server refused the token in GPUFLEET_TOKEN: it is mistyped, revoked or expired.\n"},
		{"a bad --token", invocation{args: []string{"submit", "--token", "wrong", "--", "true"}, vars: vars("")}, "The server refused the token given with --token: it is mistyped, revoked or expired.\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, tt.inv)
			if r.code != 1 || !strings.HasPrefix(r.stderr, "error: ") || !strings.HasSuffix(r.stderr, tt.want+how) {
				t.Errorf("got %+v, want exit 1 ending with %q", r, tt.want+how)
			}
		})
	}
}

// TestVersionFlag: gpufleet --version works and says what gpufleet version
// says.
func TestVersionFlag(t *testing.T) {
	flag := runCLI(t, invocation{args: []string{"--version"}})
	verb := runCLI(t, invocation{args: []string{"version"}})
	if flag.code != 0 || verb.code != 0 || flag.stdout != verb.stdout || !strings.HasPrefix(flag.stdout, "gpufleet "+Version) {
		t.Errorf("--version: %+v; version: %+v; want the same line, exit 0", flag, verb)
	}
}

// refusedTokenHint is what follows the error when the server refuses the
// token in GPUFLEET_TOKEN.
const refusedTokenHint = "The server refused the token in GPUFLEET_TOKEN: it is mistyped, revoked or expired.\n" +
	"Set GPUFLEET_TOKEN (or --token), or run 'gpufleet login', which saves one.\n" +
	"A local server writes its admin token to DATA/admin-token (default .gpufleet/admin-token):\n" +
	"  export GPUFLEET_TOKEN=$(cat .gpufleet/admin-token)\n"
