package cli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/internal/config"
	"github.com/gpufleet/gpufleet/internal/executor/local/containertest"
)

// A server with --container-runtime runs a workload's image in a
// container: it serves its port through the proxy, writes to its volume
// and checkpoint, reads its secret file; a server without one refuses an
// image with a 400 naming image.
func TestLiveContainer(t *testing.T) {
	plain := startLiveServer(t)
	if r := plain.run(t, plain.admin, "submit", "--image", containertest.Image, "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "image") || !strings.Contains(r.stderr, "--container-runtime") {
		t.Errorf("an image without a runtime: %+v, want a 400 naming image that says how to enable one", r)
	}
	podman := containertest.Podman(t)
	s := startLiveServerWith(t, func(c *config.Config) {
		c.Local.ContainerRuntime, c.Local.ContainerArgs = podman, containertest.Args
	})
	s.must(t, "create", "volume", "default", "out", "--size", "1GiB")
	s.must(t, "create", "secret", "default", "tok", "--from-literal", "token=c0ntainer-s3cret")
	script := `echo "$GPUFLEET_WORKLOAD_ID" > /out/who; cat "$GPUFLEET_SECRETS_DIR/tok/token" > "$GPUFLEET_CHECKPOINT_DIR/seen"; ` +
		`echo hello-from-the-container > index.html; exec busybox httpd -f -p "$PORT"`
	id := strings.TrimSpace(s.must(t, "submit", "--kind", "notebook", "--gpus", "0.25", "--image", containertest.Image,
		"--volume", "out:/out", "--secret-file", "tok", "--", "sh", "-c", script))
	url := "http://" + s.addr + "/w/" + id + "/8888/index.html"
	eventually(t, "the container answers through the proxy", func() string {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+s.admin)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "hello-from-the-container") {
			return resp.Status + " " + string(b) + "\n" + s.must(t, "logs", id)
		}
		return ""
	})
	who, err := os.ReadFile(filepath.Join(s.dir, "volumes", "default", "out", "who"))
	if err != nil || strings.TrimSpace(string(who)) != id {
		t.Errorf("the volume on the host: %q %v, want the workload's ID", who, err)
	}
	seen, err := os.ReadFile(filepath.Join(s.dir, "workloads", id, "checkpoint", "seen"))
	if err != nil || string(seen) != "c0ntainer-s3cret" {
		t.Errorf("the checkpoint on the host: %q %v, want the secret file's value", seen, err)
	}
	s.must(t, "cancel", id)
	if r := s.run(t, s.admin, "wait", id); r.code == 0 {
		t.Errorf("wait after cancel: %+v", r)
	}
}
