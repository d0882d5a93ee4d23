package local_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
	"github.com/gpufleet/gpufleet/internal/executor/local"
)

// outputsTask is a task that runs script with $F set to its outputs file.
func outputsTask(id core.WorkloadID, script string) executor.Task {
	return task(id, "sh", "-c", `F="$`+local.EnvOutputsFile+`"; `+script)
}

func TestOutputsFileIsReadIntoTheExit(t *testing.T) {
	e := newExecutor(t, "", nil)
	tk := outputsTask("out-1", `echo "accepted=120 rejected=3 unit=images" >> "$F"
echo "# a comment" >> "$F"
echo "accepted=oops" >> "$F"
echo "accepted=80 rejected=1 unit=images egressGiB=0.5" >> "$F"
echo "file=$F"`)
	tk.Env = map[string]string{local.EnvOutputsFile: "/tmp/not-this-one"}
	x := run(t, e, tk)
	want := &core.Outputs{Accepted: 200, Rejected: 4, Unit: "images", EgressBytes: 1 << 29}
	if diff := cmp.Diff(want, x.Outputs); diff != "" {
		t.Errorf("Exit.Outputs (-want +got):\n%s", diff)
	}
	if len(x.OutputsMalformed) != 1 || !strings.HasPrefix(x.OutputsMalformed[0], `line 3: accepted: "oops"`) {
		t.Errorf("Exit.OutputsMalformed = %q, want one note for line 3", x.OutputsMalformed)
	}
	path := e.OutputsFile("out-1", 1)
	if out := output(t, e, "out-1"); !strings.Contains(out, "file="+path+"\n") {
		t.Errorf("output %q: want the file %s, whatever the task's own variables say", out, path)
	}
	if want := filepath.Join(filepath.Dir(e.UsageFile("out-1", 1)), "outputs-attempt-1"); path != want {
		t.Errorf("OutputsFile = %q, want %q, next to the usage file", path, want)
	}

	t.Run("a task that writes nothing reports nothing", func(t *testing.T) {
		x := run(t, e, outputsTask("out-2", `echo "file=$F"`))
		if x.Outputs != nil || x.OutputsMalformed != nil {
			t.Errorf("Exit: Outputs %+v, malformed %q; want neither", x.Outputs, x.OutputsMalformed)
		}
		if out := output(t, e, "out-2"); out != "file="+e.OutputsFile("out-2", 1)+"\n" {
			t.Errorf("output %q: a task without GPUs gets the file too", out)
		}
	})

	t.Run("a zero is a report, a file of malformed lines is none", func(t *testing.T) {
		x := run(t, e, outputsTask("out-3", `echo "accepted=0" > "$F"`))
		if diff := cmp.Diff(&core.Outputs{}, x.Outputs); diff != "" || x.OutputsMalformed != nil {
			t.Errorf("Exit.Outputs (-want +got):\n%s malformed %q", diff, x.OutputsMalformed)
		}
		x = run(t, e, outputsTask("out-4", `echo "accepted=-1" > "$F"`))
		if x.Outputs != nil || len(x.OutputsMalformed) != 1 {
			t.Errorf("Exit: Outputs %+v, malformed %q; want none and one note", x.Outputs, x.OutputsMalformed)
		}
	})

	t.Run("each attempt has its own file, and starts without one", func(t *testing.T) {
		tk := outputsTask("out-5", `echo "accepted=1" >> "$F"; echo "accepted=5" >> "${F%-1}-2"`)
		run(t, e, tk) // attempt 1 also writes attempt 2's file
		tk.Attempt = 2
		tk.Command = []string{"true"}
		if x := run(t, e, tk); x.Outputs != nil {
			t.Errorf("attempt 2 reported %+v, written by attempt 1 before it ran", x.Outputs)
		}
	})
}

func TestOutputsFileIsReadSafely(t *testing.T) {
	e := newExecutor(t, "", nil)
	tests := []struct {
		name   string
		script string
		note   string
	}{
		{"a symbolic link is not followed", `echo "accepted=5" > "$PWD/target"; ln -s "$PWD/target" "$F"`, "symbolic link"},
		{"a link to a directory is not followed", `ln -s "$PWD" "$F"`, "symbolic link"},
		{"a hard link is refused", `echo "accepted=5" > "$F.t"; ln "$F.t" "$F"`, "not a regular file"},
		{"a FIFO is refused without waiting for a writer", `mkfifo "$F"`, "not a regular file"},
		{"a directory is refused", `mkdir "$F"; echo "accepted=5" > "$F/x"`, "not a regular file"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := core.WorkloadID("safe-" + itoa(i))
			x := run(t, e, outputsTask(id, tt.script+` && echo done`))
			if out := output(t, e, id); out != "done\n" {
				t.Fatalf("the task failed to set up: %q", out)
			}
			if x.Outputs != nil {
				t.Errorf("Exit.Outputs = %+v, want none", x.Outputs)
			}
			if len(x.OutputsMalformed) != 1 || !strings.Contains(x.OutputsMalformed[0], tt.note) {
				t.Errorf("Exit.OutputsMalformed = %q, want one note about a %s", x.OutputsMalformed, tt.note)
			}
		})
	}
}

func TestOutputsFileIsBounded(t *testing.T) {
	e := newExecutor(t, "", nil)
	// 7000 lines of 11 bytes: 77000 bytes, past the 64 KiB read.
	x := run(t, e, outputsTask("big", `i=0; while [ $i -lt 7000 ]; do echo "accepted=1"; i=$((i+1)); done > "$F"`))
	if fi, err := os.Stat(e.OutputsFile("big", 1)); err != nil || fi.Size() != 77000 {
		t.Fatalf("the task wrote %v, %v; want 77000 bytes", fi, err)
	}
	// Only whole lines within the first 64 KiB count: the cut one is dropped.
	want := &core.Outputs{Accepted: 64 << 10 / 11}
	if diff := cmp.Diff(want, x.Outputs); diff != "" {
		t.Errorf("Exit.Outputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"file larger than 64 KiB: the rest ignored"}, x.OutputsMalformed); diff != "" {
		t.Errorf("Exit.OutputsMalformed (-want +got):\n%s", diff)
	}
}

func TestOutputsOfAdoptedAndLostTasks(t *testing.T) {
	t.Run("a task that ended while the server was away", func(t *testing.T) {
		dir := t.TempDir()
		a := newExecutor(t, dir, nil)
		tk := outputsTask("adopted", `echo "accepted=7 unit=tokens" > "$F"`)
		run(t, a, tk)
		b := newExecutor(t, dir, nil)
		if ok, err := b.Adopt(t.Context(), tk); err != nil || !ok {
			t.Fatalf("Adopt: got (%v, %v), want (true, nil)", ok, err)
		}
		if diff := cmp.Diff(&core.Outputs{Accepted: 7, Unit: "tokens"}, waitExit(t, b, tk).Outputs); diff != "" {
			t.Errorf("Exit.Outputs (-want +got):\n%s", diff)
		}
	})

	t.Run("a task still running when adopted", func(t *testing.T) {
		dir := t.TempDir()
		a := newExecutor(t, dir, nil)
		tk := outputsTask("watched", `echo "accepted=2" > "$F"; sleep 1; echo "accepted=3" >> "$F"`)
		start(t, a, tk)
		b := newExecutor(t, dir, nil)
		if ok, err := b.Adopt(t.Context(), tk); err != nil || !ok {
			t.Fatalf("Adopt: got (%v, %v), want (true, nil)", ok, err)
		}
		if diff := cmp.Diff(&core.Outputs{Accepted: 5}, waitExit(t, b, tk).Outputs); diff != "" {
			t.Errorf("Exit.Outputs (-want +got):\n%s", diff)
		}
		waitExit(t, a, tk)
	})

	t.Run("a lost task's report counts", func(t *testing.T) {
		dir := t.TempDir()
		e := newExecutor(t, dir, nil)
		tk := outputsTask("lost", `echo "accepted=4" > "$F"; echo ready; exec sleep 30`)
		start(t, e, tk)
		waitOutput(t, e, tk.WorkloadID, "ready")
		p := readPidFile(t, dir, tk.WorkloadID, 1)
		if err := syscall.Kill(p.ShimPID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		x := waitExit(t, e, tk)
		if x.Reason != local.ReasonLost {
			t.Errorf("Exit.Reason = %q, want %s", x.Reason, local.ReasonLost)
		}
		if diff := cmp.Diff(&core.Outputs{Accepted: 4}, x.Outputs); diff != "" {
			t.Errorf("Exit.Outputs (-want +got):\n%s", diff)
		}
		waitDead(t, p.PID)
	})
}

// A task's metrics file is read into its exit: the last value of a name
// is its value, every value its samples; a bad line is skipped with a
// note, a link is not followed.
func TestMetricsFileIsReadIntoTheExit(t *testing.T) {
	e := newExecutor(t, "", nil)
	tk := task("met-1", "sh", "-c", `M="$`+local.EnvMetricsFile+`"
echo '{"name":"p95_latency_ms","value":250,"unit":"ms"}' >> "$M"
echo 'not json' >> "$M"
echo '{"name":"p95_latency_ms","value":182,"unit":"ms"}' >> "$M"
echo '{"name":"throughput_per_second","value":41.5}' >> "$M"`)
	x := run(t, e, tk)
	want := []core.Metric{{Name: "p95_latency_ms", Value: 182, Unit: "ms", Attempt: 1, Samples: []float64{250, 182}}, {Name: "throughput_per_second", Value: 41.5, Attempt: 1}}
	if diff := cmp.Diff(want, x.Metrics); diff != "" {
		t.Errorf("Exit.Metrics (-want +got):\n%s", diff)
	}
	if len(x.MetricsMalformed) != 1 || !strings.HasPrefix(x.MetricsMalformed[0], "line 2:") {
		t.Errorf("Exit.MetricsMalformed = %q, want one note for line 2", x.MetricsMalformed)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(`{"name":"leak","value":1}`+"\n"), 0o600)
	ln := task("met-2", "sh", "-c", `ln -s `+secret+` "$`+local.EnvMetricsFile+`"`)
	if x := run(t, e, ln); len(x.Metrics) != 0 || len(x.MetricsMalformed) != 1 || !strings.Contains(x.MetricsMalformed[0], "symbolic link") {
		t.Errorf("a linked metrics file: metrics %v notes %q, want none read and a note", x.Metrics, x.MetricsMalformed)
	}
}
