package wire

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/test/sockdir"
)

// serveHTTP answers every request on a fresh socket with h.
func serveHTTP(t *testing.T, h http.HandlerFunc) string {
	socket := filepath.Join(sockdir.New(t), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return socket
}

func TestClientUnreachable(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T) string
	}{
		{"socket missing", func(t *testing.T) string { return filepath.Join(sockdir.New(t), "none.sock") }},
		{"nobody listening", func(t *testing.T) string {
			socket := filepath.Join(sockdir.New(t), "dead.sock")
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
			return socket
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			socket := tc.prepare(t)
			_, err := NewClient(socket).Do(context.Background(), &Request{Command: CommandAdd, Config: []byte(`{}`)})
			if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), socket) {
				t.Fatalf("Do = %v, want ErrUnreachable naming %s", err, socket)
			}
		})
	}
}

func TestClientBadAnswers(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string
	}{
		{"not JSON", http.StatusInternalServerError, "oops", "HTTP 500 with an unreadable body"},
		{"failure without an error", http.StatusNotFound, "{}", "HTTP 404 without an error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			socket := serveHTTP(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			})
			_, err := NewClient(socket).Do(context.Background(), &Request{Command: CommandAdd, Config: []byte(`{}`)})
			if err == nil || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Do = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestClientRoundTrip sends a request to net/http's server, as the agent
// runs it, and reads an answer larger than its write buffer, which an
// HTTP/1.1 client would get chunked.
func TestClientRoundTrip(t *testing.T) {
	result := `{"cniVersion":"1.1.0","dns":{"search":["` + strings.Repeat("x", 64<<10) + `"]}}`
	socket := serveHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		req, err := DecodeRequest(r.Body)
		if r.URL.Path != Path || r.Header.Get(VersionHeader) != Version || err != nil || req.ContainerID != "c1" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error": {"code": 999, "msg": "bad request"}}`))
			return
		}
		w.Write([]byte(`{"result": ` + result + `}`))
	})
	resp, err := NewClient(socket).Do(context.Background(), &Request{Command: CommandAdd, ContainerID: "c1", Config: []byte(`{}`)})
	if err != nil || resp.Error != nil || string(resp.Result) != result {
		t.Fatalf("Do = %+v, %v; want the %d-byte result", resp, err, len(result))
	}
}

// TestClientNotHTTP fails naming what a listener that is not the agent
// answered.
func TestClientNotHTTP(t *testing.T) {
	socket := filepath.Join(sockdir.New(t), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			conn.Read(make([]byte, 4096)) // the request, sent in one write
			conn.Write([]byte("SSH-2.0-OpenSSH\r\n"))
			conn.Close()
		}
	}()
	_, err = NewClient(socket).Do(context.Background(), &Request{Command: CommandAdd, Config: []byte(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "SSH-2.0-OpenSSH") {
		t.Fatalf("Do = %v, want an error quoting the answer", err)
	}
}

// TestClientContentLength reads an answer as long as its Content-Length
// says, from a server that keeps the connection open after it.
func TestClientContentLength(t *testing.T) {
	socket := filepath.Join(sockdir.New(t), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.Read(make([]byte, 4096)) // the request, sent in one write
		body := `{"result": {"cniVersion": "1.1.0"}}`
		conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body))
		<-release
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := NewClient(socket).Do(ctx, &Request{Command: CommandAdd, Config: []byte(`{}`)})
	if err != nil || string(resp.Result) != `{"cniVersion": "1.1.0"}` {
		t.Fatalf("Do = %+v, %v; want the result before the connection closes", resp, err)
	}
}
