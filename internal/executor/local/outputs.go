package local

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// EnvOutputsFile names, for every task, the file where it reports the work
// it completed: lines such as "accepted=120 rejected=3 unit=images", one
// appended per batch (the format is core.ParseOutputs'). The file is
// <workload>/usage/outputs-attempt-N, in the workload's usage directory,
// which the task may write. When the attempt ends the executor reads it
// into Exit.Outputs; no file means the task reported nothing.
const EnvOutputsFile = "GPUFLEET_OUTPUTS_FILE"

// maxOutputsFile bounds what is read of an outputs file.
const maxOutputsFile = 64 << 10

// OutputsFile returns the outputs file of a workload's attempt, or "" for
// an ID that is not a plain name or an attempt below 1.
func (e *Executor) OutputsFile(id core.WorkloadID, attempt int) string {
	adir, err := e.attemptDir(id, attempt)
	if err != nil {
		return ""
	}
	return outputsFile(adir)
}

// outputsFile is <workload>/usage/outputs-attempt-N, next to the usage
// file: in a directory the task may write.
func outputsFile(adir string) string {
	return filepath.Join(filepath.Dir(adir), "usage", "outputs-"+filepath.Base(adir))
}

// withOutputs fills in x's outputs from the attempt's outputs file.
func withOutputs(x *executor.Exit, adir string) {
	x.Outputs, x.OutputsMalformed = readOutputs(outputsFile(adir))
}

// readOutputs reads and parses an outputs file. The task owns the file and
// the directory it is in, so the file is read the way the simulated usage
// file is (usage.readSimUsage): opened without following a symbolic link
// (which would make the server, with its rights, read a file of the
// task's choosing and quote it back in the notes) and without blocking (a
// FIFO would wait for a writer), and read only if fstat says it is a
// regular file with one name (a hard link to a file the task may not read
// is refused too), at most maxOutputsFile bytes of it; a longer file is
// parsed up to the last whole line read, with a note. The directories
// above the usage directory are the server's, so no link can be planted
// there. A missing file reports nothing (nil, no note); one that cannot
// be read reports nothing, with a note saying why.
func readOutputs(path string) (*core.Outputs, []string) {
	b, notes, ok := readTaskFile(path, "outputs", maxOutputsFile)
	if !ok {
		return nil, notes
	}
	out, reported, malformed := core.ParseOutputsReport(b)
	notes = append(notes, malformed...)
	if !reported {
		return nil, notes
	}
	return &out, notes
}

// readTaskFile reads a file the task wrote (what is "outputs" or
// "metrics"), as readOutputs says: without following a link or blocking,
// a regular file with one name, at most limit bytes, cut at the last
// whole line when longer (with a note). ok is false when there is nothing
// to parse: no file (no note), or one that cannot be read (a note).
func readTaskFile(path, what string, limit int) (b []byte, notes []string, ok bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, false
	case errors.Is(err, syscall.ELOOP):
		return nil, []string{"the " + what + " file is a symbolic link: not followed, not read"}, false
	case err != nil:
		return nil, []string{"the " + what + " file cannot be opened: " + cause(err)}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, []string{"the " + what + " file cannot be read: " + cause(err)}, false
	}
	if !fi.Mode().IsRegular() || links(fi) != 1 {
		return nil, []string{"the " + what + " file is not a regular file with one name (a FIFO, a device, a directory or a hard link): not read"}, false
	}
	b, err = io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, []string{"the " + what + " file cannot be read: " + cause(err)}, false
	}
	if len(b) > limit {
		// The last line read is cut short: drop it, lest "accepted=1234"
		// count as 12.
		b = b[:limit]
		b = b[:bytes.LastIndexByte(b, '\n')+1]
		notes = append(notes, fmt.Sprintf("file larger than %d KiB: the rest ignored", limit>>10))
	}
	return b, notes, true
}

// EnvMetricsFile names, for every task, the file where it reports figures
// about its own run, one JSON line each ({"name":"p95_latency_ms",
// "value":182,"unit":"ms"}, core.ParseMetrics), which acceptance cards
// judge: <workload>/usage/metrics-attempt-N, read at the attempt's end
// into Exit.Metrics as the outputs file is.
const EnvMetricsFile = "GPUFLEET_METRICS_FILE"

// maxMetricsFile bounds what is read of a metrics file.
const maxMetricsFile = 64 << 10

// metricsFile is <workload>/usage/metrics-attempt-N.
func metricsFile(adir string) string {
	return filepath.Join(filepath.Dir(adir), "usage", "metrics-"+filepath.Base(adir))
}

// withMetrics fills in x's metrics from the attempt's metrics file.
func withMetrics(x *executor.Exit, adir string, attempt int) {
	b, notes, ok := readTaskFile(metricsFile(adir), "metrics", maxMetricsFile)
	if ok {
		var malformed []string
		x.Metrics, malformed = core.ParseMetrics(b, attempt)
		notes = append(notes, malformed...)
	}
	x.MetricsMalformed = notes
}

// links returns the number of names of the file, 1 when unknown.
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// cause is err without the path, which the notes need not repeat.
func cause(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
