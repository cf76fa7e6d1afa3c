package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/osthread"
)

// holderTimeout bounds the wait for the holder to be in its namespaces.
const holderTimeout = 10 * time.Second

// netnsPath is where a named network namespace is bound on the host.
func netnsPath(name string) string { return filepath.Join("/var/run/netns", name) }

// startHolder starts the process that owns the cluster's mount namespace:
// nsenter enters the node's netns, unshare makes a mount namespace whose
// mounts are slaves of the host's, then both exec sleep, so the holder's
// PID is sleep's. It waits until the holder really is in both namespaces.
func startHolder(ctx context.Context, p paths, netns string) (*process, error) {
	argv := []string{"nsenter", "--net=" + netnsPath(netns), "--",
		"unshare", "--mount", "--propagation", "slave", "--", "sleep", "infinity"}
	h, err := startDetached("holder", argv, p.log("holder"))
	if err != nil {
		return nil, err
	}
	if err := waitInNamespaces(ctx, h, netnsPath(netns)); err != nil {
		return h, err
	}
	return h, nil
}

// waitInNamespaces waits until h is in the network namespace at netnsFile
// and in a mount namespace other than the caller's: mounting before that
// would mount on the host.
func waitInNamespaces(ctx context.Context, h *process, netnsFile string) error {
	ctx, cancel := context.WithTimeout(ctx, holderTimeout)
	defer cancel()
	for {
		err := inNewNamespaces(h.PID, netnsFile)
		if err == nil {
			return nil
		}
		if !h.running() {
			return fmt.Errorf("namespace holder exited: %w; log: %s", err, h.Log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace holder (pid %d) not in its namespaces after %v: %w; log: %s", h.PID, holderTimeout, err, h.Log)
		case <-time.After(pollInterval / 10):
		}
	}
}

func inNewNamespaces(pid int, netnsFile string) error {
	proc := "/proc/" + strconv.Itoa(pid) + "/ns/"
	same, err := sameFile(proc+"mnt", "/proc/thread-self/ns/mnt")
	if err != nil || same {
		return errors.Join(err, errors.New("still in the host's mount namespace"))
	}
	same, err = sameFile(proc+"net", netnsFile)
	if err != nil || !same {
		return errors.Join(err, fmt.Errorf("not in network namespace %s", netnsFile))
	}
	return nil
}

// sameFile reports whether two paths are the same inode, namespaces
// included.
func sameFile(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, fmt.Errorf("stat %s: %w", a, err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, fmt.Errorf("stat %s: %w", b, err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}

// inNamespaces calls fn on an OS thread of its own (see osthread.Run)
// that joined the mount and network namespaces of the process pid.
func inNamespaces(pid int, fn func() error) error {
	return osthread.Run(func() error {
		if err := joinNamespaces(pid); err != nil {
			return err
		}
		return fn()
	})
}

// joinNamespaces moves the calling, locked thread into pid's mount and
// network namespaces. setns into a mount namespace needs a thread that
// shares no file system information (root, cwd) with the others.
func joinNamespaces(pid int) error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare file system information: %w", err)
	}
	for _, ns := range []struct {
		name string
		flag int
	}{{"mnt", unix.CLONE_NEWNS}, {"net", unix.CLONE_NEWNET}} {
		path := "/proc/" + strconv.Itoa(pid) + "/ns/" + ns.name
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		err = unix.Setns(fd, ns.flag)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("enter %s: %w", path, err)
		}
	}
	return nil
}

// netnsDialer dials from inside the network namespace at nsFile: a socket
// belongs to the namespace its creating thread was in. Addresses must be
// IP literals, as a name lookup would run on other threads.
func netnsDialer(nsFile string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			conn net.Conn
			err  error
		}
		done := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			conn, restored, err := dialIn(ctx, nsFile, network, addr)
			if restored {
				runtime.UnlockOSThread()
			}
			done <- result{conn, err}
		}()
		r := <-done
		return r.conn, r.err
	}
}

// dialIn dials on the calling, locked thread from inside nsFile and
// reports whether the thread is back in its own network namespace.
func dialIn(ctx context.Context, nsFile, network, addr string) (net.Conn, bool, error) {
	own, err := netns.Get()
	if err != nil {
		return nil, true, fmt.Errorf("current netns: %w", err)
	}
	defer own.Close()
	target, err := netns.GetFromPath(nsFile)
	if err != nil {
		return nil, true, fmt.Errorf("open netns %s: %w", nsFile, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return nil, true, fmt.Errorf("enter netns %s: %w", nsFile, err)
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err := netns.Set(own); err != nil {
		if conn != nil {
			conn.Close()
		}
		return nil, false, fmt.Errorf("leave netns %s: %w", nsFile, err)
	}
	return conn, true, err
}

// fileExists reports whether path exists, following links.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
