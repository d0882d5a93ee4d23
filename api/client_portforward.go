package api

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// PortForwardURL is the address of a port-forward to port of workload id
// (GET /workloads/{id}/portforward?port=N), for a WebSocket client: with
// Upgrade: websocket, the stream is carried in binary messages, and a
// close frame with code 1008 (policy violation) says why the server ended
// it (the token was revoked or expired, its user deleted, or its role in
// the workload's team lost).
func (c *Client) PortForwardURL(id string, port int) string {
	return c.Addr + "/api/v1/workloads/" + url.PathEscape(id) + "/portforward?port=" + strconv.Itoa(port)
}

// DialPortForward opens a raw TCP stream to port of a running workload,
// over the API (GET /workloads/{id}/portforward with Upgrade: tcp). The
// server closes it, without a word, once the token's rights to it are
// lost; PortForwardURL's WebSocket says why.
func (c *Client) DialPortForward(ctx context.Context, id string, port int) (net.Conn, error) {
	u, err := url.Parse(c.Addr)
	if err != nil {
		return nil, err
	}
	host := u.Host
	var d net.Dialer
	var conn net.Conn
	switch u.Scheme {
	case "https":
		if !strings.Contains(host, ":") {
			host += ":443"
		}
		conn, err = (&tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: u.Hostname()}}).DialContext(ctx, "tcp", host)
	default:
		if !strings.Contains(host, ":") {
			host += ":80"
		}
		conn, err = d.DialContext(ctx, "tcp", host)
	}
	if err != nil {
		return nil, err
	}
	path := "/api/v1/workloads/" + url.PathEscape(id) + "/portforward?port=" + strconv.Itoa(port)
	req := "GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
	if c.Token != "" {
		req += "Authorization: Bearer " + c.Token + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, err
	}
	length := -1
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			conn.Close()
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if f := strings.Fields(status); len(f) < 2 || f[1] != "101" {
		defer conn.Close()
		var b []byte
		if length >= 0 && length < 1<<20 {
			b = make([]byte, length)
			io.ReadFull(br, b)
		}
		code, _ := strconv.Atoi(strings.Fields(status + " 0")[1])
		if len(b) == 0 {
			return nil, fmt.Errorf("port-forward: %s", strings.TrimSpace(status))
		}
		return nil, AnswerError(code, b)
	}
	return &bufferedConn{Conn: conn, r: br}, nil
}

// bufferedConn reads what the reader buffered first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// CloseWrite closes the sending side when the connection can.
func (b *bufferedConn) CloseWrite() error {
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
