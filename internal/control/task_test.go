package control

import (
	"testing"

	"github.com/gpufleet/gpufleet/internal/core"
)

func TestTaskForCarriesTheImage(t *testing.T) {
	w := &core.Workload{ID: "wl-1"}
	w.Image = "ghcr.io/acme/serve:2"
	w.Status.Attempts = 2
	tk := TaskFor(w)
	if tk.Image != w.Image || tk.Attempt != 2 || len(tk.Command) != 0 {
		t.Errorf("TaskFor: image %q attempt %d command %q", tk.Image, tk.Attempt, tk.Command)
	}
}
