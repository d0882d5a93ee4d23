package api

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// DialPortForward opens a raw TCP stream to port of a running workload,
// over the API (GET /workloads/{id}/portforward with Upgrade: tcp).
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
		var eb ErrorBody
		if jsonErr := json.Unmarshal(b, &eb); jsonErr == nil && eb.Error.Message != "" {
			return nil, &StatusError{Status: code, Err: eb.Error}
		}
		return nil, fmt.Errorf("port-forward: %s", strings.TrimSpace(status))
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
