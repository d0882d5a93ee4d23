package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The test binary runs the probe's main when asked, so that each case
// starts a process of its own, whose dynamic loader reads its own
// LD_LIBRARY_PATH.
func TestMain(m *testing.M) {
	if os.Getenv("GPUFLEET_CUDA_PROBE_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// FakeDriver builds testdata/fakecuda.c as libcuda.so.1 in a directory of
// its own and returns the directory; the test is skipped without a C
// compiler.
func FakeDriver(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the fake libcuda.so.1")
	}
	dir := t.TempDir()
	src, _ := filepath.Abs(filepath.Join("testdata", "fakecuda.c"))
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(dir, "libcuda.so.1"), src, "-lpthread").CombinedOutput()
	if err != nil {
		t.Fatalf("build the fake libcuda.so.1: %v\n%s", err, out)
	}
	return dir
}

func TestProbe(t *testing.T) {
	driver := FakeDriver(t)
	for _, tc := range []struct {
		name     string
		env      []string
		want     report
		wantExit int
	}{
		{"no driver", []string{"LD_LIBRARY_PATH=" + t.TempDir()}, report{Call: "dlopen"}, 1},
		{"one GPU", []string{"LD_LIBRARY_PATH=" + driver},
			report{Library: filepath.Join(driver, "libcuda.so.1"), DriverVersion: 13000, DeviceCount: 1, Devices: []string{"Fake GPU"}}, 0},
		{"two GPUs", []string{"LD_LIBRARY_PATH=" + driver, "FAKE_CUDA_DEVICES=2"},
			report{Library: filepath.Join(driver, "libcuda.so.1"), DriverVersion: 13000, DeviceCount: 2, Devices: []string{"Fake GPU", "Fake GPU"}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want.Call == "dlopen" && realDriver() {
				t.Skip("this machine has a driver the loader finds whatever LD_LIBRARY_PATH says")
			}
			cmd := exec.Command(os.Args[0])
			cmd.Env = append([]string{"GPUFLEET_CUDA_PROBE_MAIN=1"}, tc.env...)
			out, err := cmd.Output()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			var got report
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("output %q: %v", out, err)
			}
			if tc.want.Call == "dlopen" && got.Call == "dlopen" && got.Error != "" {
				got.Error = "" // the loader's words
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || code != tc.wantExit {
				t.Errorf("exit %d, want %d; report (-want +got):\n%s", code, tc.wantExit, diff)
			}
		})
	}
}

// realDriver reports whether this machine has a libcuda.so.1 where the
// loader looks.
func realDriver() bool {
	for _, d := range libraryDirs {
		if _, err := os.Stat(filepath.Join(d, "libcuda.so.1")); err == nil {
			return true
		}
	}
	out, _ := exec.Command("/sbin/ldconfig", "-p").Output()
	return strings.Contains(string(out), "libcuda.so.1")
}
