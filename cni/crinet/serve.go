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
	"github.com/hwnet-io/hwnet/internal/nodesocket"
)

// shutdownGrace bounds how long Serve waits for calls in flight at the end.
const shutdownGrace = 5 * time.Second

// Serve serves the API on a unix socket at path, mode 0600 in a directory
// made 0700 whoever created it (0660 and 0750 for Options.Access's group),
// until ctx ends; then it removes the socket. A socket left by an agent
// that died is replaced; one a live agent answers on is not. A connection
// from a peer the access does not admit is closed before a call is read.
func (s *Server) Serve(ctx context.Context, path string) error {
	ln, err := listen(path, s.opts.Access)
	if err != nil {
		return err
	}
	ours, _ := os.Lstat(path)
	defer removeIfOurs(path, ln, ours)
	srv := grpc.NewServer()
	crinetapi.RegisterRuntimeServiceServer(srv, s)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.opts.Access.Listener(ln, "CRI network socket", s.opts.Logger)) }()
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

func listen(path string, access nodesocket.Access) (*net.UnixListener, error) {
	if err := access.Dir(filepath.Dir(path)); err != nil {
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
	if err := access.Socket(path); err != nil {
		ln.Close()
		os.Remove(path)
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
