package watch

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// socketBufferSize is the receive buffer asked for on kernel event
// sockets: room for a few thousand link messages, so that enabling 256 VFs
// on a PF does not overflow the default 208 KiB.
const socketBufferSize = 8 << 20

// netlinkConn is a netlink socket on Go's poller, so that a blocked read
// returns when the socket is closed.
type netlinkConn struct {
	file *os.File
	raw  syscall.RawConn
	// anySender takes datagrams from senders other than the kernel too.
	anySender bool
}

// dialNetlink opens a netlink socket of protocol in the network namespace
// at netnsPath ("" means the caller's), subscribed to the multicast groups
// in the bit mask groups.
func dialNetlink(netnsPath string, protocol int, groups uint32) (*netlinkConn, error) {
	var fd int
	err := inNetns(netnsPath, func() (err error) {
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, protocol)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: groups}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink socket: bind to groups %#x: %w", groups, err)
	}
	// Forcing the size needs CAP_NET_ADMIN; without it the kernel caps the
	// plain request at net.core.rmem_max, which still beats the default.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketBufferSize) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, socketBufferSize)
	}
	file := os.NewFile(uintptr(fd), "netlink")
	raw, err := file.SyscallConn()
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	return &netlinkConn{file: file, raw: raw}, nil
}

// recv reads one datagram from the kernel, skipping any that another
// process sent unless anySender. Unless wait, it returns unix.EAGAIN at
// once when none is queued. unix.ENOBUFS says the kernel dropped messages
// because the socket's buffer was full; the socket stays usable.
func (c *netlinkConn) recv(buf []byte, wait bool) (int, error) {
	for {
		var (
			n    int
			from unix.Sockaddr
			rerr error
		)
		err := c.raw.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			return rerr != unix.EAGAIN || !wait
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			return 0, err
		}
		if sa, ok := from.(*unix.SockaddrNetlink); ok && (sa.Pid == 0 || c.anySender) {
			return n, nil
		}
	}
}

func (c *netlinkConn) send(b []byte) error {
	var serr error
	err := c.raw.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	})
	return errors.Join(err, serr)
}

// Close closes the socket; a blocked recv returns an error.
func (c *netlinkConn) Close() error { return c.file.Close() }

// inNetns calls open in the network namespace at path, or directly when
// path is "". It runs open on a locked OS thread of a goroutine of its
// own: a socket stays in the namespace it was made in, and the thread is
// handed back to the Go scheduler only once it is back in its own
// namespace; otherwise it ends with the goroutine.
func inNetns(path string, open func() error) error {
	if path == "" {
		return open()
	}
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer target.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("read the thread's network namespace: %w", err)
			return
		}
		defer own.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter network namespace %s: %w", path, err)
			return
		}
		done <- open()
		if netns.Set(own) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return <-done
}
