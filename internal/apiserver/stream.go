package apiserver

import (
	"net/http"
	"time"
)

// streamWriter carries an answer that lasts as long as a workload runs (a
// followed log) past the HTTP server's whole-request deadlines
// (http.Server's ReadTimeout and WriteTimeout), which otherwise cut it
// short:
//
//   - the read deadline, once passed, ends the request's context, and with
//     it the stream. It is cleared when the request has no body (nothing
//     is left to read, so nothing for a slow client to trickle).
//   - the write deadline is renewed before each write and flush, by the
//     server's WriteTimeout, rather than cleared: a client that stops
//     reading is still cut off once a write makes no progress for that
//     long.
//
// A ResponseWriter that has no deadlines (a test recorder) is written as it
// is.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func newStreamWriter(w http.ResponseWriter, r *http.Request) *streamWriter {
	s := &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
	if hs, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
		s.timeout = hs.WriteTimeout
	}
	if r.Body == nil || r.Body == http.NoBody {
		s.rc.SetReadDeadline(time.Time{}) // not supported: there is none to lift
	}
	return s
}

func (s *streamWriter) renew() {
	if s.timeout > 0 {
		s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.renew()
	return s.ResponseWriter.Write(b)
}

// Flush sends what is buffered, under a fresh write deadline.
func (s *streamWriter) Flush() {
	s.renew()
	s.rc.Flush()
}

// Unwrap lets an http.ResponseController reach the connection.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
