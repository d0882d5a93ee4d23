package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/gpufleet/api"
)

// A secret's value reaches the workload's environment and nothing else:
// no API answer, log line of the server, event, audit entry, describe or
// file of the data directory holds it in clear.
func TestLiveSecret(t *testing.T) {
	s := startLiveServer(t)
	const value = "hf_s3cr3t_9d2e7a"
	if got := s.must(t, "create", "secret", "default", "hf", "--from-literal", "HF_TOKEN="+value); got != "secret/hf created in default (keys HF_TOKEN)\n" {
		t.Fatalf("create secret: %q", got)
	}
	// The workload prints the value's hash: the value itself is in no
	// spec, log or answer.
	id := strings.TrimSpace(s.must(t, "submit", "--gpus", "0.25", "--secret-env", "hf", "--", "sh", "-c", `printf %s "$HF_TOKEN" | sha256sum`))
	s.run(t, s.admin, "wait", id)
	sum := sha256.Sum256([]byte(value))
	if logs := s.must(t, "logs", id); !strings.Contains(logs, hex.EncodeToString(sum[:])) {
		t.Fatalf("the workload's view: %q, want the value's hash", logs)
	}
	var everything []string
	for _, args := range [][]string{{"get", "secrets", "--team", "default", "-o", "json"}, {"get", "workload", id, "-o", "json"},
		{"describe", id}, {"audit", "-o", "json"}, {"logs", id}} {
		everything = append(everything, s.must(t, args...))
	}
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+s.addr+"/api/v1/workloads/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		everything = append(everything, string(b))
	}
	for _, out := range everything {
		if strings.Contains(out, value) {
			t.Errorf("an answer holds the value:\n%s", out)
		}
	}
	var list api.List[api.Secret]
	mustJSON(t, s.must(t, "get", "secrets", "--team", "default", "-o", "json"), &list)
	if len(list.Items) != 1 || list.Items[0].Name != "hf" || len(list.Items[0].Keys) != 1 || list.Items[0].Data != nil {
		t.Errorf("get secrets: %+v", list)
	}
	// The data directory: the store, its WAL, everything.
	filepath.Walk(s.dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > 64<<20 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), value) {
			t.Errorf("%s holds the value in clear", p)
		}
		return nil
	})
	// Bad input changes nothing.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "secret", "default", "bad", "--from-literal", "../x=1"}, "data.../x"},
		{[]string{"create", "secret", "default", "hf", "--from-literal", "A=1"}, "already"},
		{[]string{"submit", "--secret-env", "nosuch", "--", "true"}, "secretEnv[0]"},
	} {
		if r := s.run(t, s.admin, tc.args...); r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %+v, want an error naming %s", tc.args, r, tc.want)
		}
	}
	if got := s.must(t, "delete", "secret", "default", "hf"); got != "secret/hf deleted\n" {
		t.Errorf("delete secret: %q", got)
	}
}
