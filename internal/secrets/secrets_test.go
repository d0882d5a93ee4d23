package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSealOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	k, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 600", fi.Mode(), err)
	}
	data := map[string]string{"HF_TOKEN": "hf_secret_value"}
	sealed, err := k.Seal("research", "hf", data)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "hf_secret_value") {
		t.Fatal("the sealed bytes hold the value")
	}
	got, err := k.Open("research", "hf", sealed)
	if err != nil || !cmp.Equal(data, got) {
		t.Fatalf("open: %v %v", got, err)
	}
	// Bound to its team and name: moved, it does not open.
	if _, err := k.Open("vision", "hf", sealed); err == nil {
		t.Error("a secret opened as another team's")
	}
	if _, err := k.Open("research", "db", sealed); err == nil {
		t.Error("a secret opened under another name")
	}
	// The same key again after a restart.
	k2, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k2.Open("research", "hf", sealed); err != nil || !cmp.Equal(data, got) {
		t.Errorf("after a restart: %v %v", got, err)
	}
	// A key file others may read is refused.
	os.Chmod(path, 0o644)
	if _, err := LoadOrCreate(path); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a loose key file: %v", err)
	}
}
