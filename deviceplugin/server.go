package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/node/watch"
)

// ErrSocketRemoved is returned by Serve when the socket file disappeared:
// kubelet deletes every socket in its directory when it starts, and
// expects plugins to serve and register again.
var ErrSocketRemoved = errors.New("device plugin socket removed")

// maxSocketPath is the room for a path in a unix socket address.
const maxSocketPath = len(unix.RawSockaddrUnix{}.Path) - 1

// registerTimeout bounds one registration attempt of Run.
const registerTimeout = 10 * time.Second

// Serving that failed is tried again after serveRetry, doubling up to
// serveRetryMax while it keeps failing.
const (
	serveRetry    = 500 * time.Millisecond
	serveRetryMax = 30 * time.Second
)

// errAlreadyServing is a second Serve of one plugin at once.
var errAlreadyServing = errors.New("already serving")

// Run serves the plugin and registers it with kubelet, and does both again
// each time kubelet deletes the socket, until ctx is done. Registration is
// retried until kubelet answers, and so is serving that failed (a node out
// of inotify instances or descriptors): a plugin that gave up would take
// its pool from kubelet until the agent restarted. It returns an error
// only for a second Run or Serve at once. It is the simple way to run a
// plugin; Serve and Register are its parts.
func (p *Plugin) Run(ctx context.Context) error {
	retry := serveRetry
	for {
		err := p.serve(ctx, p.registerUntilDone)
		switch {
		case err == nil || errors.Is(err, errAlreadyServing):
			return err
		case errors.Is(err, ErrSocketRemoved):
			p.log.Info("device plugin socket removed (kubelet restarted?); serving and registering again", "socket", p.socket)
			retry = serveRetry
			continue
		}
		p.log.Error("device plugin not serving; trying again", "resource", p.name, "in", retry, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
		retry = min(2*retry, serveRetryMax)
	}
}

// Serve serves the plugin on SocketPath, after removing any stale socket
// there, until ctx is done (it then stops and removes the socket and
// returns nil) or the socket file is deleted (it then stops and returns
// ErrSocketRemoved). Only one Serve runs at a time. It creates PluginDir
// if it does not exist.
func (p *Plugin) Serve(ctx context.Context) error {
	return p.serve(ctx, nil)
}

// serve serves and, once the socket accepts connections, runs whileServing
// (if not nil) with a context that ends when serving does.
func (p *Plugin) serve(ctx context.Context, whileServing func(context.Context)) error {
	if !p.serving.CompareAndSwap(false, true) {
		return fmt.Errorf("%s: %w on %s", p.name, errAlreadyServing, p.socket)
	}
	defer p.serving.Store(false)
	defer p.registered.Store(false)
	ep, err := p.listen()
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	defer ep.close()
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ep.lis) }()
	defer srv.Stop() // ends ListAndWatch streams too
	if whileServing != nil {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); whileServing(wctx) }()
		defer func() { cancel(); <-done }()
	}
	return ep.wait(ctx, served)
}

// endpoint is a listening socket and the watch on its directory.
type endpoint struct {
	path    string
	lis     *net.UnixListener
	watcher *watch.SocketWatcher // the socket's name in its directory
	ino     uint64               // the socket file's inode, to tell it from a new one
}

func (p *Plugin) listen() (*endpoint, error) {
	if len(p.socket) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes long, more than the %d a unix socket takes", p.socket, len(p.socket), maxSocketPath)
	}
	if err := os.MkdirAll(p.opts.PluginDir, 0o755); err != nil {
		return nil, err
	}
	// Watching before listening cannot miss a deletion that follows.
	name := filepath.Base(p.socket)
	w, err := watch.WatchSockets(p.opts.PluginDir, func(entry string) bool { return entry == name })
	if err != nil {
		return nil, err
	}
	ep := &endpoint{path: p.socket, watcher: w}
	if err := ep.open(); err != nil {
		w.Close()
		return nil, err
	}
	return ep, nil
}

func (ep *endpoint) open() error {
	if err := os.Remove(ep.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: ep.path, Net: "unix"})
	if err != nil {
		return err
	}
	// close removes the file only if it is still this socket.
	lis.SetUnlinkOnClose(false)
	ep.lis = lis
	// A socket deleted this soon (kubelet starting at the same moment)
	// leaves ino 0: gone then says so, and the Remove event is already
	// queued for wait.
	if ep.ino, err = inode(ep.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		lis.Close()
		return err
	}
	return nil
}

// wait returns nil when ctx is done, ErrSocketRemoved when the socket
// file is gone or replaced, or why serving or watching failed. Any change
// of the socket's name, lost events included, is looked at: the watch
// keeps only the latest of a name's changes while wait is busy.
func (ep *endpoint) wait(ctx context.Context, served <-chan error) error {
	changed := make(chan watch.SocketEvent, 1)
	watched := make(chan error, 1)
	wctx, stop := context.WithCancel(ctx)
	go func() { watched <- ep.watcher.Run(wctx, changed) }()
	ended := false
	defer func() {
		if stop(); !ended {
			<-watched
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-served:
			return fmt.Errorf("serve %s: %w", ep.path, err)
		case <-changed:
			if ep.gone() {
				return ErrSocketRemoved
			}
		case err := <-watched:
			ended = true
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch %s: the watch ended: %w", filepath.Dir(ep.path), err)
		}
	}
}

// gone reports whether the socket file is no longer this endpoint's: the
// Remove event of the stale socket that open deleted comes after open.
func (ep *endpoint) gone() bool {
	ino, err := inode(ep.path)
	return err != nil || ino != ep.ino
}

func (ep *endpoint) close() {
	ep.watcher.Close()
	if !ep.gone() {
		os.Remove(ep.path)
	}
	ep.lis.Close()
}

func inode(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return 0, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	return st.Ino, nil
}

// Register registers the plugin with kubelet: its socket's name, the
// resource name and its options. Kubelet then connects to SocketPath, so
// Serve must be running.
func (p *Plugin) Register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix:"+p.opts.KubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("%s: register with kubelet at %s: %w", p.name, p.opts.KubeletSocket, err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(p.socket),
		ResourceName: p.name,
		Options:      pluginOptions(),
	})
	if err != nil {
		return fmt.Errorf("%s: register with kubelet at %s: %w", p.name, p.opts.KubeletSocket, err)
	}
	p.log.Info("registered with kubelet", "socket", p.socket, "kubelet", p.opts.KubeletSocket, "devices", len(p.current.Load().devices))
	return nil
}

// registerUntilDone registers, retrying with a growing interval, until
// kubelet accepts or ctx is done.
func (p *Plugin) registerUntilDone(ctx context.Context) {
	for wait := p.firstRetry; ; wait = min(2*wait, p.maxRetry) {
		rctx, cancel := context.WithTimeout(ctx, registerTimeout)
		err := p.Register(rctx)
		cancel()
		if err == nil {
			p.registered.Store(true)
			return
		}
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("registration failed; retrying", "err", err, "retryIn", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-p.kubeletUp:
		}
	}
}

// KubeletStarted tells Run that kubelet has just (re)created its socket:
// a registration waiting to be retried is retried at once rather than at
// the end of its wait. It never blocks.
func (p *Plugin) KubeletStarted() {
	select {
	case p.kubeletUp <- struct{}{}:
	default:
	}
}
