package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
)

func newPortForwardCmd(e *env) *cobra.Command {
	var team, address string
	cmd := &cobra.Command{
		Use:   "port-forward ID|NAME [LOCAL:]PORT",
		Short: "Forward a local port to a running workload's port, over the API",
		Long: `Forward a local port to a port a running workload declares, as kubectl
port-forward does: each connection to 127.0.0.1:LOCAL (LOCAL defaults to
PORT; 0 picks a free one) becomes a stream to the workload's PORT through
the API server, authenticated with your token (a member of the workload's
team). It runs until interrupted.`,
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
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			context.AfterFunc(ctx, func() { ln.Close() })
			var wg sync.WaitGroup
			defer wg.Wait()
			for {
				conn, err := ln.Accept()
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				wg.Go(func() {
					defer conn.Close()
					up, err := c.DialPortForward(ctx, w.ID, remote)
					if err != nil {
						fmt.Fprintf(e.stderr, "error: %v\n", err)
						return
					}
					defer up.Close()
					context.AfterFunc(ctx, func() { up.Close(); conn.Close() })
					done := make(chan struct{}, 2)
					go func() {
						io.Copy(up, conn)
						if cw, ok := up.(interface{ CloseWrite() error }); ok {
							cw.CloseWrite()
						}
						done <- struct{}{}
					}()
					go func() { io.Copy(conn, up); done <- struct{}{} }()
					<-done
				})
			}
		},
	}
	addTeamFlag(cmd, &team)
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "the local address to listen on")
	return cmd
}

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
