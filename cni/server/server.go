// Package server is hwnet-agent's end of the CNI socket: it accepts the
// requests the hwnet shim forwards (package wire) and answers them with a
// Handler, one goroutine per request.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/hwnet-io/hwnet/api/agentrestart"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
)

// shutdownGrace bounds how long Serve waits, once its context ends, for
// handlers (whose contexts are then cancelled) to return.
const shutdownGrace = 5 * time.Second

// Handler runs one CNI request. Its result is printed by the shim as is. A
// *types.Error (or an error wrapping one) keeps its CNI code; any other
// error is reported with code 999. ctx ends when the shim goes away.
type Handler interface {
	Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error)
}

// Server serves a Handler on a unix socket.
type Server struct {
	handler Handler
	logger  *slog.Logger
	access  nodesocket.Access
	// answered is when a request last got its answer (Unix nanoseconds).
	answered atomic.Int64
	// backWithin is how long after stopping the agent expects to serve
	// again: Serve leaves a restart notice saying so; none when 0.
	backWithin time.Duration
}

// LeaveRestartNotice makes Serve, once its context ends, leave a restart
// notice (package agentrestart) expecting the agent back within d before
// it removes the socket, and withdraw any notice once it listens. The
// shim's STATUS reads it while the socket is gone, so that an agent's
// restart does not turn the node NotReady. Call it before Serve.
func (s *Server) LeaveRestartNotice(d time.Duration) { s.backWithin = d }

// AnsweredWithin tells whether a CNI request was answered within d: the
// socket served then, as a probe of it would show.
func (s *Server) AnsweredWithin(d time.Duration) bool {
	last := s.answered.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < d
}

// New returns a server for h that logs each request to logger and serves
// only the peers access admits (the zero Access: root).
func New(h Handler, logger *slog.Logger, access nodesocket.Access) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{handler: h, logger: logger, access: access}
}

// Serve listens on socketPath (mode 0600, its directory made 0700 whoever
// created it; 0660 and 0750 for the access's group; a stale socket
// replaced) and serves until ctx ends; it then leaves its restart notice
// (LeaveRestartNotice), cancels the requests in flight, waits briefly for
// them and removes the socket. A connection from
// a peer the access does not admit is closed before its request is read.
func (s *Server) Serve(ctx context.Context, socketPath string) error {
	ln, err := listen(socketPath, s.access)
	if err != nil {
		return err
	}
	defer ln.remove()
	notice := agentrestart.Path(socketPath)
	if s.backWithin > 0 {
		if err := agentrestart.Withdraw(notice); err != nil {
			s.logger.Error("CNI socket served, its predecessor's restart notice left", "path", notice, "err", err)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+wire.Path, s.serveCNI)
	srv := &http.Server{
		Handler:           mux,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.access.Listener(ln.UnixListener, "CNI socket", s.logger)) }()
	select {
	case err := <-served:
		return fmt.Errorf("CNI socket %s: %w", socketPath, err)
	case <-ctx.Done():
	}
	s.leaveNotice(notice)
	graceCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(graceCtx); err != nil {
		srv.Close()
	}
	<-served
	return nil
}

// leaveNotice writes the restart notice at path, if the server leaves one.
// The notice goes before the socket: a STATUS between the two would find
// neither and turn the node NotReady.
func (s *Server) leaveNotice(path string) {
	if s.backWithin <= 0 {
		return
	}
	now := time.Now()
	if err := agentrestart.Leave(path, &agentrestart.Notice{Stopped: now, Until: now.Add(s.backWithin)}); err != nil {
		s.logger.Error("CNI socket stopping without a restart notice: the node turns NotReady until an agent serves", "path", path, "err", err)
	}
}

func (s *Server) serveCNI(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { s.answered.Store(time.Now().UnixNano()) }()
	if v := r.Header.Get(wire.VersionHeader); v != wire.Version {
		err := types.NewError(types.ErrInternal, fmt.Sprintf("hwnet-agent speaks wire version %s, the hwnet binary sent %q: "+
			"the hwnet binary in the CNI bin directory and hwnet-agent come from different releases", wire.Version, v), "")
		s.logger.Warn("cni request refused", "err", err)
		writeResponse(w, http.StatusBadRequest, &wire.Response{Error: err})
		return
	}
	req, err := wire.DecodeRequest(http.MaxBytesReader(w, r.Body, wire.MaxRequestBytes))
	if err != nil {
		s.logger.Warn("cni request refused", "err", err)
		writeResponse(w, http.StatusBadRequest, &wire.Response{Error: types.NewError(types.ErrDecodingFailure, err.Error(), "")})
		return
	}
	result, err := s.handle(r.Context(), req)
	s.logRequest(r.Context(), req, time.Since(start), err)
	if err != nil {
		writeResponse(w, http.StatusOK, &wire.Response{Error: wire.AsCNIError(err)})
		return
	}
	writeResponse(w, http.StatusOK, &wire.Response{Result: result})
}

// panicError is a handler's panic, turned into an error so one bad request
// fails alone instead of killing the agent and every request in flight.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string {
	return fmt.Sprintf("hwnet-agent internal error: panic: %v", p.value)
}

func (s *Server) handle(ctx context.Context, req *wire.Request) (result json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			result, err = nil, &panicError{value: v, stack: debug.Stack()}
		}
	}()
	result, err = s.handler.Handle(ctx, req)
	if err == nil && len(result) > 0 && !json.Valid(result) {
		return nil, fmt.Errorf("hwnet-agent produced an invalid %s result: %.200q", req.Command, result)
	}
	return result, err
}

func (s *Server) logRequest(ctx context.Context, req *wire.Request, took time.Duration, err error) {
	attrs := []slog.Attr{
		slog.String("command", req.Command),
		slog.String("containerID", req.ContainerID),
		slog.String("ifName", req.IfName),
		slog.Duration("duration", took),
	}
	level := slog.LevelInfo
	if req.Command == wire.CommandStatus {
		// containerd 2.x asks every 5 s: at Info it would bury the ADDs
		// and DELs. A failed one still logs at Error below.
		level = slog.LevelDebug
	}
	if err != nil {
		level = slog.LevelError
		attrs = append(attrs, slog.Any("err", err), slog.Uint64("code", uint64(wire.AsCNIError(err).Code)))
	}
	var p *panicError
	if errors.As(err, &p) {
		attrs = append(attrs, slog.String("stack", string(p.stack)))
	}
	s.logger.LogAttrs(ctx, level, "cni request", attrs...)
}

func writeResponse(w http.ResponseWriter, status int, resp *wire.Response) {
	// handle has checked the result is valid JSON, so this cannot fail.
	data, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// listener is the agent's socket; it remembers which file it created so
// that removing it never deletes a successor's socket.
type listener struct {
	*net.UnixListener
	path string
	file os.FileInfo
}

// listen creates the socket under a temporary name, restricts it to root
// (and the access's group) and renames it into place, so it is never
// connectable with a wider mode.
func listen(socketPath string, access nodesocket.Access) (*listener, error) {
	if err := access.Dir(filepath.Dir(socketPath)); err != nil {
		return nil, fmt.Errorf("CNI socket: %w", err)
	}
	if err := removeStale(socketPath); err != nil {
		return nil, err
	}
	tmp := socketPath + ".new"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("CNI socket: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("CNI socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	l := &listener{UnixListener: ln, path: socketPath}
	if err := l.publish(tmp, access); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, err
	}
	return l, nil
}

func (l *listener) publish(tmp string, access nodesocket.Access) error {
	if err := access.Socket(tmp); err != nil {
		return fmt.Errorf("CNI socket: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fmt.Errorf("CNI socket: %w", err)
	}
	fi, err := os.Lstat(l.path)
	if err != nil {
		return fmt.Errorf("CNI socket: %w", err)
	}
	l.file = fi
	return nil
}

func (l *listener) remove() {
	l.Close()
	if now, err := os.Lstat(l.path); err == nil && os.SameFile(now, l.file) {
		os.Remove(l.path)
	}
}

// removeStale deletes a socket left by an agent that died, but refuses to
// take over one that a live agent still answers on.
func removeStale(socketPath string) error {
	fi, err := os.Lstat(socketPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("CNI socket: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("CNI socket %s exists and is not a socket (mode %s)", socketPath, fi.Mode())
	}
	if conn, err := net.DialTimeout("unix", socketPath, time.Second); err == nil {
		conn.Close()
		return fmt.Errorf("CNI socket %s is in use: is another hwnet-agent running on this node?", socketPath)
	}
	if err := os.Remove(socketPath); err != nil {
		return fmt.Errorf("removing stale CNI socket: %w", err)
	}
	return nil
}
