package apiserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A proxied WebSocket (RFC 6455) passes through as bytes: the proxy
// neither ends nor parses its messages. To close one with a reason when
// its session ends, wsCloser follows the frames the workload sends to the
// client, header by header, so that it knows where one ends: there it
// stops passing them, adds a close frame of its own (1008, policy
// violation, with the reason), and closes. A control frame may come
// between the fragments of a message, so any frame boundary will do.
// Cut in the middle of a frame (the workload's connection closed under
// it), the connection is closed without one.

// isWebSocket reports whether r asks to upgrade to a WebSocket.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// wsHijacker hands the connection ReverseProxy hijacks for an upgrade to
// it through a wsCloser of the request's session.
type wsHijacker struct {
	http.ResponseWriter
	ctx context.Context
}

func (h *wsHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return newWSCloser(h.ctx, conn), brw, nil
}

// Unwrap lets an http.ResponseController reach the connection.
func (h *wsHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// wsStatusPolicy is the close code of a session whose rights were lost:
// 1008, a message that violates the endpoint's policy.
const wsStatusPolicy = 1008

// errSessionEnded is what a write answers once the session ended.
var errSessionEnded = errors.New("the session ended")

// wsCloser is a client's upgraded connection, written by the copy of the
// workload's frames.
type wsCloser struct {
	net.Conn
	ctx  context.Context
	stop func() bool

	mu     sync.Mutex
	head   []byte // the header of the next frame, so far
	left   uint64 // the bytes of the current frame's payload not passed yet
	writes int    // writes in flight
	broken bool   // a write failed: where the frames end is not known
	closed bool
}

func newWSCloser(ctx context.Context, conn net.Conn) *wsCloser {
	c := &wsCloser{Conn: conn, ctx: ctx}
	// A write blocked on a client that does not read gives up soon after
	// the session ends.
	c.stop = context.AfterFunc(ctx, func() {
		if endedWhy(ctx) != "" {
			conn.SetWriteDeadline(time.Now().Add(closeGrace))
		}
	})
	return c
}

// Write passes the workload's frames, up to the first frame boundary
// after the session ended.
func (c *wsCloser) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, net.ErrClosed
	}
	ended := endedWhy(c.ctx) != ""
	cut := len(p)
	for i := 0; i < len(p); {
		if c.left > 0 {
			k := int(min(c.left, uint64(len(p)-i)))
			c.left -= uint64(k)
			i += k
			continue
		}
		if ended && len(c.head) == 0 {
			cut = i
			break
		}
		c.head = append(c.head, p[i])
		i++
		if n, ok := frameLength(c.head); ok {
			c.left, c.head = n, c.head[:0]
		}
	}
	c.writes++
	c.mu.Unlock()
	n, err := c.Conn.Write(p[:cut])
	c.mu.Lock()
	c.writes--
	if err != nil {
		c.broken = true
	}
	c.mu.Unlock()
	if err == nil && cut < len(p) {
		err = errSessionEnded
	}
	return n, err
}

// Close closes the connection, after a close frame saying why when the
// session ended and the frames passed end at a boundary.
func (c *wsCloser) Close() error {
	c.stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return net.ErrClosed
	}
	c.closed = true
	if why := endedWhy(c.ctx); why != "" && c.left == 0 && len(c.head) == 0 && c.writes == 0 && !c.broken {
		c.Conn.SetWriteDeadline(time.Now().Add(closeGrace))
		c.Conn.Write(closeFrame(wsStatusPolicy, why))
	}
	return c.Conn.Close()
}

// frameLength returns the payload length of the frame whose header h
// holds, once h holds all of it.
func frameLength(h []byte) (uint64, bool) {
	if len(h) < 2 {
		return 0, false
	}
	n := uint64(h[1] & 0x7f)
	size := 2
	switch n {
	case 126:
		size += 2
	case 127:
		size += 8
	}
	if h[1]&0x80 != 0 {
		size += 4 // the masking key
	}
	if len(h) < size {
		return 0, false
	}
	switch n {
	case 126:
		n = uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		n = binary.BigEndian.Uint64(h[2:10])
	}
	return n, true
}

// closeFrame is an unmasked close frame (a server's) with code and reason.
func closeFrame(code uint16, reason string) []byte {
	reason = closeReason(reason)
	f := []byte{0x88, byte(2 + len(reason)), byte(code >> 8), byte(code)}
	return append(f, reason...)
}

// closeReason cuts a close frame's reason to fit a control frame's 125
// bytes with its code, at a character's boundary.
func closeReason(reason string) string {
	const most = 125 - 2
	if len(reason) <= most {
		return reason
	}
	cut := most
	for cut > 0 && reason[cut]&0xc0 == 0x80 {
		cut--
	}
	return reason[:cut]
}
