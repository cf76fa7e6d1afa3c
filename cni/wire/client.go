package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strconv"
	"strings"
	"syscall"
)

// ErrUnreachable marks a failure to connect: the socket is missing or
// nobody listens on it, so the agent never saw the request.
var ErrUnreachable = errors.New("not reachable")

// Client sends requests to the agent's socket, one connection each: a
// shim process makes one request.
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
	conn, err := c.dial(ctx) // its errors name the socket
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// Closing the connection is how the agent learns the shim gave up.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	resp, err := roundTrip(conn, body)
	if err != nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("hwnet-agent at %s: %w", c.socketPath, err)
	}
	return resp, nil
}

// roundTrip speaks HTTP/1.0 by hand: the request is one fixed header and
// the answer, which an HTTP/1.0 request gets unchunked, ends at its
// Content-Length or when the agent closes the connection. net/http would link TLS, HTTP/2 and their
// initialisation into the shim, which the runtime executes twice per pod.
func roundTrip(conn net.Conn, body []byte) (*Response, error) {
	head := fmt.Sprintf("POST %s HTTP/1.0\r\nHost: hwnet-agent\r\nContent-Type: application/json\r\n%s: %s\r\nContent-Length: %d\r\n\r\n",
		Path, VersionHeader, Version, len(body))
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		return nil, err
	}
	r := textproto.NewReader(bufio.NewReader(conn))
	line, err := r.ReadLine()
	if err != nil {
		return nil, fmt.Errorf("reading hwnet-agent response: %w", err)
	}
	code, err := statusCode(line)
	if err != nil {
		return nil, err
	}
	header, err := r.ReadMIMEHeader()
	if err != nil {
		return nil, fmt.Errorf("reading hwnet-agent response header: %w", err)
	}
	data, err := readBody(r.R, header.Get("Content-Length"))
	if err != nil {
		return nil, fmt.Errorf("reading hwnet-agent response: %w", err)
	}
	return decodeResponse(code, data)
}

// readBody reads the answer's body: as long as its Content-Length says,
// else up to the close, and never more than MaxRequestBytes.
func readBody(r io.Reader, contentLength string) ([]byte, error) {
	if contentLength == "" {
		return io.ReadAll(io.LimitReader(r, MaxRequestBytes))
	}
	n, err := strconv.ParseInt(contentLength, 10, 64)
	if err != nil || n < 0 || n > MaxRequestBytes {
		return nil, fmt.Errorf("its Content-Length %q is not a length up to %d", contentLength, MaxRequestBytes)
	}
	data := make([]byte, n)
	_, err = io.ReadFull(r, data)
	return data, err
}

// statusCode reads the code of an HTTP status line ("HTTP/1.1 200 OK").
func statusCode(line string) (int, error) {
	proto, rest, _ := strings.Cut(line, " ")
	codeText, _, _ := strings.Cut(rest, " ")
	code, err := strconv.Atoi(codeText)
	if !strings.HasPrefix(proto, "HTTP/1.") || err != nil || len(codeText) != 3 {
		return 0, fmt.Errorf("hwnet-agent answered %.100q, not an HTTP status line", line)
	}
	return code, nil
}

func decodeResponse(code int, data []byte) (*Response, error) {
	var resp Response
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("hwnet-agent answered HTTP %d with an unreadable body %.200q: %w", code, data, err)
	}
	if code != statusOK && resp.Error == nil {
		return nil, fmt.Errorf("hwnet-agent answered HTTP %d without an error: %.200q", code, data)
	}
	return &resp, nil
}

// statusOK is HTTP's 200, which the agent answers every request it ran.
const statusOK = 200
