package local

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

// The log's time index, DataDir/workloads/<id>/log.idx, says when its
// output was written, so that a reader can start at a time (logs --since)
// without timestamps in the log itself. Each line is "<offset> <unix ns>":
// the log's size when the supervisor wrote output at that time. The
// supervisor adds a line at the first write of an attempt and at the first
// write at least indexInterval after the last line, so the output between
// two lines was written within indexInterval of the first.
const indexInterval = time.Second

type logIndex struct {
	f    *os.File
	last time.Time
}

// openLogIndex opens the index for appending; a nil index (no space, say)
// marks nothing.
func openLogIndex(wdir string) *logIndex {
	f, err := os.OpenFile(filepath.Join(wdir, "log.idx"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	return &logIndex{f: f}
}

// mark records where the log ends at now, unless a line was written less
// than indexInterval ago.
func (x *logIndex) mark(log *os.File, now time.Time) {
	if x == nil || (!x.last.IsZero() && now.Sub(x.last) < indexInterval) {
		return
	}
	off, err := log.Seek(0, io.SeekEnd)
	if err != nil {
		return
	}
	if _, err := fmt.Fprintf(x.f, "%d %d\n", off, now.UnixNano()); err == nil {
		x.last = now
	}
}

func (x *logIndex) close() {
	if x != nil {
		x.f.Close()
	}
}

// LogOffsetSince returns the offset in the workload's log from which its
// output was written at since or later (give or take indexInterval: it
// may start up to that much earlier), or the log's size when nothing was
// written since. The error wraps fs.ErrNotExist for a workload without a
// log.
func (e *Executor) LogOffsetSince(id core.WorkloadID, since time.Time) (int64, error) {
	wdir, err := e.workloadDir(id)
	if err != nil {
		return 0, err
	}
	fi, err := os.Stat(filepath.Join(wdir, "log"))
	if err != nil {
		return 0, fmt.Errorf("logs of %s: %w", id, err)
	}
	f, err := os.Open(filepath.Join(wdir, "log.idx"))
	if errors.Is(err, fs.ErrNotExist) {
		return fi.Size(), nil // no output yet
	} else if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		a, b, ok := strings.Cut(sc.Text(), " ")
		off, err1 := strconv.ParseInt(a, 10, 64)
		ns, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		// This line's output was written in [t, t+indexInterval).
		if time.Unix(0, ns).Add(indexInterval).After(since) {
			return min(off, fi.Size()), nil
		}
	}
	return fi.Size(), sc.Err()
}
