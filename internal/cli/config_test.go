package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "gpufleet"), 0o700)
	os.WriteFile(filepath.Join(dir, "gpufleet", "config.json"), []byte(`{"addr":"file:1","token":"file-token"}`), 0o600)

	tests := []struct {
		name                string
		vars                map[string]string
		addrFlag, tokenFlag string
		wantAddr, wantToken string
	}{
		{"nothing set gives the default address", map[string]string{"HOME": t.TempDir()}, "", "", defaultAddr, ""},
		{"the file is read", map[string]string{"XDG_CONFIG_HOME": dir}, "", "", "file:1", "file-token"},
		{"the environment wins over the file", map[string]string{"XDG_CONFIG_HOME": dir, "GPUFLEET_ADDR": "env:1", "GPUFLEET_TOKEN": "env-token"}, "", "", "env:1", "env-token"},
		{"each setting falls back on its own", map[string]string{"XDG_CONFIG_HOME": dir, "GPUFLEET_TOKEN": "env-token"}, "", "", "file:1", "env-token"},
		{"flags win over the environment", map[string]string{"XDG_CONFIG_HOME": dir, "GPUFLEET_ADDR": "env:1", "GPUFLEET_TOKEN": "env-token"}, "flag:1", "flag-token", "flag:1", "flag-token"},
		{"~/.config is the default directory", map[string]string{"HOME": filepath.Dir(dir), "XDG_CONFIG_HOME": ""}, "", "", defaultAddr, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env{getenv: func(k string) string { return tt.vars[k] }, addrFlag: tt.addrFlag, tokenFlag: tt.tokenFlag}
			addr, token, err := e.settings()
			if err != nil {
				t.Fatal(err)
			}
			if addr != tt.wantAddr || token != tt.wantToken {
				t.Errorf("got %q %q, want %q %q", addr, token, tt.wantAddr, tt.wantToken)
			}
		})
	}
}

func TestConfigPath(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"XDG_CONFIG_HOME", map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/gpufleet/config.json"},
		{"HOME", map[string]string{"HOME": "/h"}, "/h/.config/gpufleet/config.json"},
		{"a relative XDG_CONFIG_HOME is ignored", map[string]string{"XDG_CONFIG_HOME": "rel", "HOME": "/h"}, "/h/.config/gpufleet/config.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env{getenv: func(k string) string { return tt.vars[k] }}
			got, err := e.configPath()
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestLoginThenPrecedence logs in, then checks against the real server
// which token each layer makes the CLI send.
func TestLoginThenPrecedence(t *testing.T) {
	f := newTestServer(t)
	home := t.TempDir()
	vars := map[string]string{"HOME": home}

	got := runCLI(t, invocation{args: []string{"login", "--addr", f.URL}, vars: vars, stdin: aliceToken + "\n"})
	path := filepath.Join(home, ".config", "gpufleet", "config.json")
	if want := "logged in to " + f.URL + " as alice (saved in " + path + ")\n"; got.code != 0 || got.stdout != want {
		t.Fatalf("login: got %+v, want stdout %q", got, want)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("config file mode %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	var fc fileConfig
	if err := json.Unmarshal(b, &fc); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fileConfig{Addr: f.URL, Token: aliceToken}, fc); diff != "" {
		t.Errorf("config file (-want +got):\n%s", diff)
	}

	steps := []struct {
		name      string
		vars      map[string]string
		args      []string
		wantToken string
		wantCode  int
	}{
		{"the file alone", vars, nil, aliceToken, 0},
		{"the environment over the file", map[string]string{"HOME": home, "GPUFLEET_TOKEN": adminToken}, nil, adminToken, 0},
		{"a bad token in the environment fails", map[string]string{"HOME": home, "GPUFLEET_TOKEN": "wrong"}, nil, "wrong", 1},
		{"the flag over the environment", map[string]string{"HOME": home, "GPUFLEET_TOKEN": "wrong"}, []string{"--token", aliceToken}, aliceToken, 0},
		{"an address flag over the file", vars, []string{"--addr", "127.0.0.1:1"}, "", 1},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			f.takeToken()
			got := runCLI(t, invocation{args: append([]string{"get", "teams"}, s.args...), vars: s.vars})
			if sent := f.takeToken(); got.code != s.wantCode || sent != s.wantToken {
				t.Errorf("got code %d with token %q (stderr %q), want code %d with token %q", got.code, sent, got.stderr, s.wantCode, s.wantToken)
			}
		})
	}
}

func TestLoginRejectsABadToken(t *testing.T) {
	f := newTestServer(t)
	home := t.TempDir()
	got := runCLI(t, invocation{args: []string{"login", "--addr", f.URL, "--token", "wrong"}, vars: map[string]string{"HOME": home}})
	want := result{code: 1, stderr: "error: a valid token is required: send Authorization: Bearer TOKEN\n"}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "gpufleet", "config.json")); !os.IsNotExist(err) {
		t.Errorf("a config file was written: %v", err)
	}
}

func TestLoginWithoutTokenIsAUsageError(t *testing.T) {
	got := runCLI(t, invocation{args: []string{"login"}, vars: map[string]string{"HOME": t.TempDir()}})
	if got.code != 2 {
		t.Errorf("got %+v, want code 2", got)
	}
}
