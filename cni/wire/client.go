package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
)

// ErrUnreachable marks a failure to connect: the socket is missing or
// nobody listens on it, so the agent never saw the request.
var ErrUnreachable = errors.New("not reachable")

// Client sends requests to the agent's socket, one connection each: a
// shim process makes one request, so net/http's pooling Transport (and its
// goroutines) would only add latency.
type Client struct {
	socketPath string
}

// NewClient returns a client for the agent listening on socketPath.
func NewClient(socketPath string) *Client {
	return &Client{socketPath: socketPath}
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.socketPath)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return conn, err
}

// Do sends one request and returns the agent's response. A CNI error from
// the agent is in Response.Error, not in the returned error, which reports
// only failures to get an answer; errors.Is(err, ErrUnreachable) tells
// whether the agent could have seen the request.
func (c *Client) Do(ctx context.Context, req *Request) (*Response, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encoding hwnet request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://hwnet-agent"+Path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("hwnet request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set(VersionHeader, Version)
	hreq.Close = true
	conn, err := c.dial(ctx) // its errors name the socket
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Closing the connection is how the agent learns the shim gave up.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	resp, err := roundTrip(conn, hreq)
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("hwnet-agent at %s: %w", c.socketPath, err)
	}
	return resp, nil
}

func roundTrip(conn net.Conn, hreq *http.Request) (*Response, error) {
	if err := hreq.Write(conn); err != nil {
		return nil, err
	}
	hresp, err := http.ReadResponse(bufio.NewReader(conn), hreq)
	if err != nil {
		return nil, err
	}
	defer hresp.Body.Close()
	return decodeResponse(hresp)
}

func decodeResponse(hresp *http.Response) (*Response, error) {
	data, err := io.ReadAll(io.LimitReader(hresp.Body, MaxRequestBytes))
	if err != nil {
		return nil, fmt.Errorf("reading hwnet-agent response: %w", err)
	}
	var resp Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("hwnet-agent answered HTTP %d with an unreadable body %.200q: %w", hresp.StatusCode, data, err)
	}
	if hresp.StatusCode != http.StatusOK && resp.Error == nil {
		return nil, fmt.Errorf("hwnet-agent answered HTTP %d without an error: %.200q", hresp.StatusCode, data)
	}
	return &resp, nil
}
