package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpufleet/gpufleet/internal/core"
)

// EnvStopFile names the file where a task finds why it is being stopped,
// written before its SIGTERM: "GPUFLEET_STOP_REASON=Preempted" (or
// Reclaimed, Drained, Cancelled, MaxRuntimeExceeded, ...), so that a job
// knows to checkpoint into $GPUFLEET_CHECKPOINT_DIR, which its next attempt
// finds. The file is in the workload's usage directory, one per attempt;
// absent until a stop is asked.
const EnvStopFile = "GPUFLEET_STOP_FILE"

func stopFile(adir string) string {
	return filepath.Join(filepath.Dir(adir), "usage", "stop-"+filepath.Base(adir))
}

// AnnounceStop writes why an attempt is stopped where the task reads it
// ($GPUFLEET_STOP_FILE); the control loop calls it before Stop.
func (e *Executor) AnnounceStop(id core.WorkloadID, attempt int, reason string) error {
	adir, err := e.attemptDir(id, attempt)
	if err != nil {
		return err
	}
	// The directory is the task's to write: what it left at these names
	// (a link to a file of the server's, say) is removed, never followed,
	// and the file is made anew (O_EXCL|O_NOFOLLOW), then renamed over
	// the name the task reads, which replaces whatever was there.
	p := stopFile(adir)
	tmp := p + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.WriteString("GPUFLEET_STOP_REASON=" + reason + "\n")
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		os.Remove(tmp)
		return werr
	}
	return os.Rename(tmp, p)
}

// RemoveCheckpoint deletes a workload's checkpoint directory (once it has
// ended and its retention passed); one already gone is not an error.
func (e *Executor) RemoveCheckpoint(id core.WorkloadID) error {
	adir, err := e.attemptDir(id, 1)
	if err != nil {
		return err
	}
	return os.RemoveAll(taskDirs(filepath.Dir(adir)).checkpoint)
}
