package wire

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

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
