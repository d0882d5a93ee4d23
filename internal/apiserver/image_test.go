package apiserver

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/store"
)

// TestImageIsKeptAndNeedsNoCommand: a workload may name an image instead of
// a command; the image is stored (the spec in SQLite), read back by GET and
// list, and a workload with neither is refused naming command.
func TestImageIsKeptAndNeedsNoCommand(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{})
	var got api.Workload
	f.must("member", "POST", "/api/v1/workloads",
		`{"team":"research","image":"ghcr.io/acme/serve:2","resources":{"gpus":1}}`, http.StatusCreated, &got)
	if got.Image != "ghcr.io/acme/serve:2" || len(got.Command) != 0 || got.Name != "serve" {
		t.Errorf("submitted: name %q image %q command %q", got.Name, got.Image, got.Command)
	}
	var again api.Workload
	f.must("member", "GET", "/api/v1/workloads/"+got.ID, "", http.StatusOK, &again)
	if again.Image != got.Image {
		t.Errorf("GET: image %q, want %q", again.Image, got.Image)
	}
	w, err := f.st.Workload(context.Background(), core.WorkloadID(got.ID))
	if err != nil {
		t.Fatal(err)
	}
	if w.Image != got.Image {
		t.Errorf("store: image %q, want %q", w.Image, got.Image)
	}

	a := f.do("member", "POST", "/api/v1/workloads", `{"team":"research","resources":{"gpus":1}}`)
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"command"`) {
		t.Errorf("no image, no command: %d %s", a.status, a.body)
	}
	a = f.do("member", "POST", "/api/v1/workloads", `{"team":"research","image":"a b","resources":{"gpus":1}}`)
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"image"`) {
		t.Errorf("bad image: %d %s", a.status, a.body)
	}
}

// TestImageAloneIsRefusedWhereOnlyCommandsRun: on a server whose executor
// runs commands (the local one), a workload with an image is a 400 naming
// image and saying where images run, with or without a command, and
// nothing is stored.
func TestImageAloneIsRefusedWhereOnlyCommandsRun(t *testing.T) {
	f := newFixture(t, store.Options{}, RateLimit{}, func(o *Options) { o.CommandsOnly = true })
	a := f.do("member", "POST", "/api/v1/workloads", `{"team":"research","image":"ghcr.io/acme/serve:2","resources":{"gpus":1}}`)
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"image"`) || !strings.Contains(a.body, "local executor") {
		t.Errorf("image alone: %d %s, want 400 naming image", a.status, a.body)
	}
	if ws, err := f.st.Workloads(context.Background(), store.WorkloadFilter{}); err != nil || len(ws) != 0 {
		t.Errorf("stored after a refusal: %v %v", ws, err)
	}
	// With a command too: still refused, the image is never ignored.
	a = f.do("member", "POST", "/api/v1/workloads", `{"team":"research","image":"ghcr.io/acme/serve:2","command":["serve"],"resources":{"gpus":1}}`)
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"image"`) || !strings.Contains(a.body, "--executor kubernetes") {
		t.Errorf("image and command: %d %s, want 400 naming image and how to run images", a.status, a.body)
	}
}
