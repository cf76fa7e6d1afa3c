package crinet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
)

// shutdownGrace bounds how long Serve waits for calls in flight at the end.
const shutdownGrace = 5 * time.Second

// Serve serves the API on a unix socket at path, mode 0600 (root only),
// until ctx ends; then it removes the socket. A socket left by an agent
// that died is replaced; one a live agent answers on is not.
func (s *Server) Serve(ctx context.Context, path string) error {
	ln, err := listen(path)
	if err != nil {
		return err
	}
	ours, _ := os.Lstat(path)
	defer removeIfOurs(path, ln, ours)
	srv := grpc.NewServer()
	crinetapi.RegisterRuntimeServiceServer(srv, s)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("CRI network socket %s: %w", path, err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(shutdownGrace):
		srv.Stop()
	}
	<-served
	return nil
}

func listen(path string) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("CRI network socket: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("CRI network socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("CRI network socket: %w", err)
	}
	return ln, nil
}

// removeStale deletes a socket nothing answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("CRI network socket: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("CRI network socket %s exists and is not a socket (mode %s)", path, fi.Mode())
	}
	if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("CRI network socket %s is in use: is another hwnet-agent running on this node?", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing stale CRI network socket: %w", err)
	}
	return nil
}

// removeIfOurs closes the listener and removes the socket unless another
// agent has replaced it since.
func removeIfOurs(path string, ln *net.UnixListener, ours os.FileInfo) {
	ln.Close()
	if now, err := os.Lstat(path); err == nil && ours != nil && os.SameFile(now, ours) {
		os.Remove(path)
	}
}
