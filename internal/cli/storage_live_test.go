package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/config"
)

// A team volume keeps what one workload wrote for the next; a read-only
// mount of it and a dataset refuse writes; a secret's files reach the
// workload with mode 0400 and are gone with it. Mounts need the server to
// be root (the workload's own mount namespace).
func TestLiveVolumesDatasetsSecretFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts need the server to run as root")
	}
	ds := t.TempDir()
	if err := os.WriteFile(filepath.Join(ds, "labels.txt"), []byte("cat\ndog\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(ds, 0o755)
	s := startLiveServerWith(t, func(c *config.Config) {
		c.Storage = config.Storage{TeamLimit: "10GiB", Datasets: map[string]string{"labels": ds}}
	})
	if got := s.must(t, "create", "volume", "default", "data", "--size", "4GiB"); got != "volume/data created in default (4GiB)\n" {
		t.Fatalf("create volume: %q", got)
	}
	// Over the limit: 4 + 7 > 10 GiB.
	if r := s.run(t, s.admin, "create", "volume", "default", "big", "--size", "7GiB"); r.code == 0 || !strings.Contains(r.stderr, "sizeBytes") {
		t.Errorf("a volume over the team's limit: %+v, want an error naming sizeBytes", r)
	}
	mnt := "/gpufleet-test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	dmnt := mnt + "-labels"
	t.Cleanup(func() { os.Remove(mnt); os.Remove(dmnt) })

	w1 := strings.TrimSpace(s.must(t, "submit", "--gpus", "0.25", "--volume", "data:"+mnt, "--", "sh", "-c", "echo kept > "+mnt+"/note"))
	if r := s.run(t, s.admin, "wait", w1); r.code != 0 {
		t.Fatalf("writer: %+v\n%s", r, s.must(t, "logs", w1))
	}
	const value = "pw-7f3a9c"
	s.must(t, "create", "secret", "default", "db", "--from-literal", "password="+value)
	script := `cat ` + mnt + `/note; ` +
		`if echo x > ` + mnt + `/other 2>/dev/null; then echo ro-volume-writable; fi; ` +
		`head -1 ` + dmnt + `/labels.txt; if echo x > ` + dmnt + `/new 2>/dev/null; then echo dataset-writable; fi; ` +
		`f="$GPUFLEET_SECRETS_DIR/db/password"; stat -c 'mode=%a' "$f"; sha256sum < "$f"`
	w2 := strings.TrimSpace(s.must(t, "submit", "--gpus", "0.25", "--volume", "data:"+mnt+":ro", "--mount", "labels:"+dmnt,
		"--secret-file", "db", "--", "sh", "-c", script))
	if r := s.run(t, s.admin, "wait", w2); r.code != 0 {
		t.Fatalf("reader: %+v\n%s", r, s.must(t, "logs", w2))
	}
	logs := s.must(t, "logs", w2)
	sum := sha256.Sum256([]byte(value))
	for _, want := range []string{"kept", "cat", "mode=400", hex.EncodeToString(sum[:])} {
		if !strings.Contains(logs, want) {
			t.Errorf("reader's output lacks %q:\n%s", want, logs)
		}
	}
	for _, bad := range []string{"ro-volume-writable", "dataset-writable", value} {
		if strings.Contains(logs, bad) {
			t.Errorf("reader's output holds %q:\n%s", bad, logs)
		}
	}
	var wl api.Workload
	mustJSON(t, s.must(t, "get", "workload", w2, "-o", "json"), &wl)
	if len(wl.Volumes) != 1 || !wl.Volumes[0].ReadOnly || len(wl.Mounts) != 1 || len(wl.SecretFiles) != 1 {
		t.Errorf("the workload's spec: volumes %+v mounts %+v secretFiles %v", wl.Volumes, wl.Mounts, wl.SecretFiles)
	}
	// Bad input: 400 naming the field, nothing stored.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--volume", "nosuch:/data", "--", "true"}, "volumes[0].name"},
		{[]string{"submit", "--mount", "nosuch:/data", "--", "true"}, "mounts[0].dataset"},
		{[]string{"submit", "--secret-file", "nosuch", "--", "true"}, "secretFiles[0]"},
	} {
		if r := s.run(t, s.admin, tc.args...); r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %+v, want an error naming %s", tc.args, r, tc.want)
		}
	}
	var vols api.List[api.Volume]
	mustJSON(t, s.must(t, "get", "volumes", "-o", "json"), &vols)
	if len(vols.Items) != 1 || vols.Items[0].Name != "data" || vols.Items[0].SizeBytes != 4<<30 {
		t.Errorf("get volumes: %+v", vols.Items)
	}
	if got := s.must(t, "delete", "volume", "default", "data"); got != "volume/data deleted\n" {
		t.Errorf("delete volume: %q", got)
	}
}
