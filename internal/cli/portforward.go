package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/spf13/cobra"

	"github.com/gpufleet/gpufleet/api"
)

func newPortForwardCmd(e *env) *cobra.Command {
	var team, address string
	cmd := &cobra.Command{
		Use:   "port-forward ID|NAME [LOCAL:]PORT",
		Short: "Forward a local port to a running workload's port, over the API",
		Long: `Forward a local port to a port a running workload declares, as kubectl
port-forward does: each connection to 127.0.0.1:LOCAL (LOCAL defaults to
PORT; 0 picks a free one) becomes a stream to the workload's PORT through
the API server (a WebSocket), authenticated with your token (a member of
the workload's team). It runs until interrupted, or until the server ends
a stream because the token was revoked or expired, its user deleted, or
its role in the team lost: it then says why and exits with an error.`,
		Example: `  gpufleet port-forward wl-4pzi4zb2m4pxh5ys 8888
  gpufleet port-forward llm-serve 9000:8000`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			local, remote, err := parseForward(args[1])
			if err != nil {
				return err
			}
			c, err := e.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			w, err := resolveWorkload(ctx, c, e.now(), args[0], team)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(local)))
			if err != nil {
				return err
			}
			defer ln.Close()
			fmt.Fprintf(e.stdout, "Forwarding from %s -> %d\n", ln.Addr(), remote)
			ctx, cancel := context.WithCancelCause(ctx)
			defer cancel(nil)
			context.AfterFunc(ctx, func() { ln.Close() })
			var wg sync.WaitGroup
			defer wg.Wait()
			var stderr sync.Mutex // the streams' errors, one at a time
			for {
				conn, err := ln.Accept()
				if err != nil {
					if ctx.Err() != nil {
						var closed *tunnelClosed
						if cause := context.Cause(ctx); errors.As(cause, &closed) {
							return closed
						}
						return nil
					}
					return err
				}
				wg.Go(func() {
					defer conn.Close()
					up, err := dialTunnel(ctx, c, w.ID, remote)
					if err != nil {
						stderr.Lock()
						fmt.Fprintf(e.stderr, "error: %v\n", err)
						stderr.Unlock()
						return
					}
					defer up.Close()
					context.AfterFunc(ctx, func() { up.Close(); conn.Close() })
					done := make(chan struct{}, 2)
					go func() {
						io.Copy(up, conn)
						done <- struct{}{}
					}()
					go func() {
						// A stream the server ended for lost rights ends
						// every stream: new ones would be refused.
						var closed *tunnelClosed
						if _, err := io.Copy(conn, up); errors.As(err, &closed) {
							cancel(closed)
						}
						done <- struct{}{}
					}()
					<-done
				})
			}
		},
	}
	addTeamFlag(cmd, &team)
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "the local address to listen on")
	return cmd
}

// dialTunnel opens a stream to port of workload id: a WebSocket whose
// binary messages carry it (api.Client.PortForwardURL).
func dialTunnel(ctx context.Context, c *api.Client, id string, port int) (net.Conn, error) {
	hdr := http.Header{}
	if c.Token != "" {
		hdr.Set("Authorization", "Bearer "+c.Token)
	}
	ws, resp, err := websocket.Dial(ctx, c.PortForwardURL(id, port), &websocket.DialOptions{HTTPClient: c.HTTP, HTTPHeader: hdr})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(resp.Body)
			return nil, api.AnswerError(resp.StatusCode, b)
		}
		return nil, err
	}
	return tunnel{websocket.NetConn(ctx, ws, websocket.MessageBinary)}, nil
}

// tunnel is a port-forward stream: a read after the server ended it for
// lost rights fails with tunnelClosed.
type tunnel struct{ net.Conn }

func (t tunnel) Read(p []byte) (int, error) {
	n, err := t.Conn.Read(p)
	var ce websocket.CloseError
	if errors.As(err, &ce) && ce.Code == websocket.StatusPolicyViolation {
		err = &tunnelClosed{reason: ce.Reason}
	}
	return n, err
}

// tunnelClosed is a stream the server ended, and why.
type tunnelClosed struct{ reason string }

func (e *tunnelClosed) Error() string { return "the server closed the port-forward: " + e.reason }

// parseForward reads [LOCAL:]PORT.
func parseForward(s string) (local, remote int, err error) {
	l, r, ok := strings.Cut(s, ":")
	if !ok {
		r = l
	}
	remote, err = strconv.Atoi(r)
	if err != nil || remote < 1 || remote > 65535 {
		return 0, 0, usagef("%q: want [LOCAL:]PORT with ports from 1 to 65535 (8888, 9000:8000)", s)
	}
	local = remote
	if ok {
		if local, err = strconv.Atoi(l); err != nil || local < 0 || local > 65535 {
			return 0, 0, usagef("%q: the local port must be from 0 (any free one) to 65535", s)
		}
	}
	return local, remote, nil
}
