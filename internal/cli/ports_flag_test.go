package cli

import (
	"strings"
	"testing"
)

// A bad --port is refused before anything is sent, naming the field and
// the flag.
func TestBadPortNamesTheFlag(t *testing.T) {
	r := runCLI(t, invocation{args: []string{"submit", "--port", "0", "--port", "http=8000", "--port", "8000", "--", "x"},
		vars: map[string]string{"GPUFLEET_ADDR": "127.0.0.1:1", "GPUFLEET_TOKEN": "t"}})
	for _, want := range []string{"ports[0].port: 0: want a port from 1 to 65535 (flag --port)", "ports[2].port: 8000 is declared twice (flag --port)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q: want %q", r.stderr, want)
		}
	}
	if r.code == 0 {
		t.Error("exit 0")
	}
}
