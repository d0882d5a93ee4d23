package apiserver

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/gpufleet/gpufleet/api"
)

// streamWriter carries an answer that lasts as long as a workload runs (a
// followed log) past the HTTP server's whole-request deadlines
// (http.Server's ReadTimeout and WriteTimeout), which otherwise cut it
// short, and ends it when its session ends (sessions.go):
//
//   - the read deadline, once passed, ends the request's context, and with
//     it the stream. It is cleared when the request has no body (nothing
//     is left to read, so nothing for a slow client to trickle).
//   - the write deadline is renewed before each write and flush, by the
//     server's WriteTimeout, rather than cleared: a client that stops
//     reading is still cut off once a write makes no progress for that
//     long.
//   - once the request's session has ended, no write deadline goes past
//     closeGrace from then: a write blocked on a client that does not
//     read fails, and the handler returns.
//
// A ResponseWriter that has no deadlines (a test recorder) is written as it
// is.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// lineOpen: the last byte written did not end a line. Only the
	// handler writes.
	lineOpen bool

	mu     sync.Mutex
	cutoff time.Time // when the session ended, plus closeGrace
	done   bool      // release was called: the connection is no longer the handler's
	stop   func() bool
}

// newStreamWriter wraps w; the handler calls release before it returns.
func newStreamWriter(w http.ResponseWriter, r *http.Request) *streamWriter {
	s := &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
	if hs, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
		s.timeout = hs.WriteTimeout
	}
	if r.Body == nil || r.Body == http.NoBody {
		s.rc.SetReadDeadline(time.Time{}) // not supported: there is none to lift
	}
	ctx := r.Context()
	s.stop = context.AfterFunc(ctx, func() {
		if endedWhy(ctx) == "" {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.done {
			s.cutoff = time.Now().Add(closeGrace)
			s.rc.SetWriteDeadline(s.cutoff)
		}
	})
	return s
}

// release is called when the handler returns: the connection may serve
// another request, whose deadlines are not the session's.
func (s *streamWriter) release() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	s.stop()
}

func (s *streamWriter) renew() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Time
	if s.timeout > 0 {
		d = time.Now().Add(s.timeout)
	}
	if !s.cutoff.IsZero() && (d.IsZero() || d.After(s.cutoff)) {
		d = s.cutoff
	}
	if !d.IsZero() {
		s.rc.SetWriteDeadline(d)
	}
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.renew()
	n, err := s.ResponseWriter.Write(b)
	if n > 0 {
		s.lineOpen = b[n-1] != '\n'
	}
	return n, err
}

// Flush sends what is buffered, under a fresh write deadline.
func (s *streamWriter) Flush() {
	s.renew()
	s.rc.Flush()
}

// Unwrap lets an http.ResponseController reach the connection.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// sayClosed ends a text stream whose session ctx ended with the line that
// says why (closeLine), on a line of its own, and the trailer
// api.StreamClosedTrailer when the handler declared it. It writes nothing
// when the session did not end (its client left).
func (s *streamWriter) sayClosed(ctx context.Context) {
	why := endedWhy(ctx)
	if why == "" {
		return
	}
	s.Header().Set(api.StreamClosedTrailer, why)
	line := closeLine(why)
	if s.lineOpen {
		line = "\n" + line
	}
	io.WriteString(s, line)
	s.Flush()
}

// untilDone reads r until ctx ends: a copy from it stops at its next read
// once the session has ended.
type untilDone struct {
	ctx context.Context
	r   io.Reader
}

func (u untilDone) Read(p []byte) (int, error) {
	if err := u.ctx.Err(); err != nil {
		return 0, err
	}
	return u.r.Read(p)
}
