package apiserver

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/executor"
)

// MaxLogBytes bounds one non-following log read; ?limitBytes= asks for less
// and the answer then holds the log's last bytes. A followed log starts at
// its last limitBytes bytes when ?limitBytes= is given, else at its start.
const MaxLogBytes = 16 << 20

// MaxSinceSeconds bounds ?sinceSeconds= (a year), which starts the log at
// the output written that many seconds ago or later (give or take a second),
// within the other bounds.
const MaxSinceSeconds = 365 * 24 * 3600

// MaxTailLines bounds ?tailLines=, which keeps only the log's last lines
// (within its last MaxLogBytes, or limitBytes), and starts a followed log
// there.
const MaxTailLines = 100000

// logs streams a workload's log. With follow=true it keeps sending what is
// appended until the workload has finished and the log is drained.
func (s *Server) logs(w http.ResponseWriter, c *call) error {
	r := c.r
	wl, err := s.workload(c)
	if err != nil {
		return err
	}
	follow := r.URL.Query().Get("follow") == "true"
	limit := int64(MaxLogBytes)
	if v := r.URL.Query().Get("limitBytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxLogBytes {
			return invalid("limitBytes", "must be a number from 1 to %d", MaxLogBytes)
		}
		limit = n
	}
	tail := 0
	if v := r.URL.Query().Get("tailLines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxTailLines {
			return invalid("tailLines", "must be a number of lines from 1 to %d", MaxTailLines)
		}
		tail = n
	}
	since := int64(-1) // the offset output written since sinceSeconds starts at
	if v := r.URL.Query().Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxSinceSeconds {
			return invalid("sinceSeconds", "must be a number of seconds from 1 to %d", MaxSinceSeconds)
		}
		ls, ok := s.logSource(wl.ID).(LogSincer)
		if !ok {
			return invalid("sinceSeconds", "this executor's logs carry no times: use tailLines")
		}
		off, err := ls.LogOffsetSince(wl.ID, time.Now().Add(-time.Duration(n)*time.Second))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		since = off
	}
	// A log is long (16 MiB) or followed for as long as the workload
	// runs: past the server's read and write timeouts, until its session
	// ends.
	sw := newStreamWriter(w, r)
	defer sw.release()
	w = sw
	if follow {
		w.Header().Set("Trailer", api.StreamClosedTrailer)
	}
	if lf, ok := s.logSource(wl.ID).(LogFollower); ok && follow {
		return s.followStream(sw, c, wl, lf)
	}
	f, err := s.opts.Logs.Logs(wl.ID)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if f == nil && !follow {
		return nil // no log yet: it is empty
	}
	if f != nil {
		defer f.Close()
		// Without follow, at most the last limit bytes; with follow, from
		// the last limitBytes bytes when the caller asks for them.
		if !follow || r.URL.Query().Has("limitBytes") || tail > 0 || since >= 0 {
			if sk, ok := f.(io.ReadSeeker); ok {
				start := int64(0)
				if end, err := sk.Seek(0, io.SeekEnd); err == nil && end > limit && (!follow || r.URL.Query().Has("limitBytes") || tail > 0) {
					start = end - limit
				}
				start = max(start, since)
				if tail > 0 {
					start = tailStart(sk, start, tail)
				}
				sk.Seek(start, io.SeekStart)
			} else if tail > 0 && !follow {
				// A stream (a pod's log): keep its last lines as it goes.
				_, err := w.Write(lastLines(io.LimitReader(f, limit), tail))
				_ = err // the client is gone
				return nil
			}
		}
		if !follow {
			io.Copy(w, io.LimitReader(f, limit))
			return nil
		}
	}
	ctx := r.Context()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if f == nil {
			f, _ = s.opts.Logs.Logs(wl.ID)
			if f != nil {
				defer f.Close()
			}
		}
		if f != nil {
			if _, err := io.Copy(w, untilDone{ctx, f}); err != nil && ctx.Err() == nil {
				return nil // the client is gone
			}
			sw.Flush()
		}
		if ctx.Err() != nil {
			sw.sayClosed(ctx)
			return nil
		}
		cur, err := s.opts.Store.Workload(ctx, wl.ID)
		if err != nil || cur.Status.Phase.Terminal() {
			if f != nil {
				io.Copy(w, untilDone{ctx, f}) // what was written before the end
			}
			sw.sayClosed(ctx)
			return nil
		}
		select {
		case <-ctx.Done():
			sw.sayClosed(ctx)
			return nil
		case <-tick.C:
		}
	}
}

// followStream follows a log that its source streams (a pod's): attempt
// after attempt, until the workload has finished. Given ?limitBytes=, it
// starts at the latest attempt rather than at the first.
func (s *Server) followStream(w *streamWriter, c *call, wl *core.Workload, lf LogFollower) error {
	r := c.r
	ctx := r.Context()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fw := flushWriter{w: w, flusher: w}
	fw.flush()
	// The stream cannot be cut to its last lines before its end is known:
	// tailLines, like limitBytes, starts it at the latest attempt.
	currentOnly := r.URL.Query().Has("limitBytes") || r.URL.Query().Has("tailLines")
	streamed := 0 // the attempt last streamed
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		cur, err := s.opts.Store.Workload(ctx, wl.ID)
		if err != nil {
			w.sayClosed(ctx)
			return nil
		}
		if cur.Status.Attempts > streamed {
			rc, err := lf.FollowLogs(ctx, wl.ID, currentOnly)
			if err == nil {
				streamed = cur.Status.Attempts
				_, err = io.Copy(fw, untilDone{ctx, rc})
				rc.Close()
				if err != nil || ctx.Err() != nil {
					w.sayClosed(ctx)
					return nil // the client is gone, or the session ended
				}
				currentOnly = true // what came before is sent
				continue
			}
		}
		if cur.Status.Phase.Terminal() {
			return nil
		}
		select {
		case <-ctx.Done():
			w.sayClosed(ctx)
			return nil
		case <-tick.C:
		}
	}
}

// flushWriter sends each write to the client at once.
type flushWriter struct {
	w       io.Writer
	flusher http.Flusher
}

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	f.flush()
	return n, err
}

func (f flushWriter) flush() {
	if f.flusher != nil {
		f.flusher.Flush()
	}
}

// tailStart returns where the last n lines of f begin, looking no further
// back than min (a line longer than what is left starts there). A final
// line without its newline counts as a line.
func tailStart(f io.ReadSeeker, min int64, n int) int64 {
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return min
	}
	buf := make([]byte, 64<<10)
	pos := end
	seen := 0
	last := true // the byte at end-1 ends the last line, not one before it
	for pos > min {
		size := int64(len(buf))
		if pos-min < size {
			size = pos - min
		}
		pos -= size
		if _, err := f.Seek(pos, io.SeekStart); err != nil {
			return min
		}
		if _, err := io.ReadFull(f, buf[:size]); err != nil {
			return min
		}
		for i := size - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				last = false
				continue
			}
			if last {
				last = false
				continue
			}
			seen++
			if seen == n {
				return pos + i + 1
			}
		}
	}
	return min
}

// lastLines reads r to its end and returns its last n lines.
func lastLines(r io.Reader, n int) []byte {
	b, _ := io.ReadAll(r)
	end := len(b)
	if end > 0 && b[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}

// LogRouter is a LogSource over several executors (executor/multi): it says
// which one holds a workload's log, for what only some offer (LogSincer,
// LogFollower).
type LogRouter interface {
	LogSource(id core.WorkloadID) executor.Executor
}

// logSource is the executor that holds a workload's log: the LogSource
// itself, or the one its router names.
func (s *Server) logSource(id core.WorkloadID) any {
	if r, ok := s.opts.Logs.(LogRouter); ok {
		if src := r.LogSource(id); src != nil {
			return src
		}
	}
	return s.opts.Logs
}
