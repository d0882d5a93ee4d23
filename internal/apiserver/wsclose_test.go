package apiserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// wsFrame encodes a WebSocket frame: FIN, the opcode, the payload's length
// in the shortest of its three forms, a masking key when masked.
func wsFrame(opcode byte, payload []byte, masked bool) []byte {
	f := []byte{0x80 | opcode}
	var mask byte
	if masked {
		mask = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		f = append(f, mask|byte(n))
	case n <= 0xffff:
		f = append(f, mask|126)
		f = binary.BigEndian.AppendUint16(f, uint16(n))
	default:
		f = append(f, mask|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	if masked {
		f = append(f, 1, 2, 3, 4)
	}
	return append(f, payload...)
}

// A proxied WebSocket's frames pass whole: once its session ends, the
// client gets the frames up to the first frame boundary at or after the
// end, then a close frame (1008) saying why, and nothing more; a session
// that did not end closes without one.
func TestWSCloserEndsAtAFrameBoundary(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var stream []byte
		bounds := []int{0}
		for range rapid.IntRange(1, 6).Draw(t, "frames") {
			n := rapid.SampledFrom([]int{0, 1, 7, 125, 126, 127, 300, 65535, 65536, 70000}).Draw(t, "payload")
			op := rapid.SampledFrom([]byte{0x1, 0x2, 0x9, 0xa}).Draw(t, "opcode")
			stream = append(stream, wsFrame(op, bytes.Repeat([]byte{'x'}, n), rapid.Bool().Draw(t, "masked"))...)
			bounds = append(bounds, len(stream))
		}
		ends := rapid.Bool().Draw(t, "ends")
		endAt := rapid.IntRange(0, len(stream)).Draw(t, "endAt")

		server, client := net.Pipe()
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		c := newWSCloser(ctx, server)
		got := make(chan []byte)
		go func() {
			b, _ := io.ReadAll(client)
			got <- b
		}()
		endedAt := -1
		end := func(written int) {
			if ends && endedAt < 0 && written >= endAt {
				endedAt = written
				cancel(&sessionEnded{reason: "the token was revoked"})
			}
		}
		for written := 0; written < len(stream); {
			end(written)
			k := min(rapid.IntRange(1, 70010).Draw(t, "write"), len(stream)-written)
			n, err := c.Write(stream[written : written+k])
			written += n
			if err != nil {
				if err != errSessionEnded || endedAt < 0 {
					t.Fatalf("write: %v (the session ended at %d)", err, endedAt)
				}
				break
			}
		}
		end(len(stream))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		want := stream
		if ends {
			cut := len(stream)
			for _, b := range bounds {
				if b >= endedAt {
					cut = b
					break
				}
			}
			want = append(stream[:cut:cut], closeFrame(1008, "the token was revoked")...)
		}
		if b := <-got; !bytes.Equal(b, want) {
			t.Fatalf("the client got %d bytes, want %d (the session ended at byte %d of %d, frames ending at %v)", len(b), len(want), endedAt, len(stream), bounds)
		}
	})
}

// A close frame's reason fits its 125 bytes, cut between characters.
func TestCloseFrameReasonFits(t *testing.T) {
	long := "the user " + string(bytes.Repeat([]byte("é"), 100)) + " was deleted"
	f := closeFrame(1008, long)
	if len(f) > 2+125 || int(f[1]) != len(f)-2 {
		t.Fatalf("close frame of %d bytes, length byte %d", len(f), f[1])
	}
	reason := f[4:]
	if !bytes.HasPrefix([]byte(long), reason) || len(reason) < 121 {
		t.Errorf("reason %q (%d bytes): want the longest prefix that fits", reason, len(reason))
	}
	if !utf8.Valid(reason) {
		t.Errorf("reason %q cut inside a character", reason)
	}
}
