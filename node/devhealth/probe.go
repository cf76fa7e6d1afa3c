package devhealth

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/osthread"
)

// Probe asks the kernel, at the moment of a hand-out, whether a device's
// netdev is still in the node's network namespace. Link events reach the
// agent a moment after the kernel moved a netdev; a hand-out in that
// moment would give a pod a device whose netdev something else took, and
// the verdicts, judged from the events, cannot see it yet.
type Probe struct {
	mu sync.Mutex
	// sock is a socket in the node's network namespace, whose
	// SIOCGIFINDEX looks a netdev up by name there. A netlink
	// RTM_GETLINK answers the same question with every attribute of the
	// link, and took 0.1-0.9 ms per device of each hand-out on a loaded
	// node against 2-5 us (BenchmarkPresent).
	sock int
	// names are the netdevs the devices have in the node, by device ID.
	names map[string]string
}

// NewProbe opens a socket in the network namespace at path ("" is this
// process's).
func NewProbe(path string) (*Probe, error) {
	sock, err := socketIn(path)
	if err != nil {
		return nil, err
	}
	return &Probe{sock: sock}, nil
}

// socketIn opens a datagram socket in the network namespace at path,
// from a thread of its own that ends in that namespace.
func socketIn(path string) (int, error) {
	open := func() (int, error) { return unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0) }
	if path == "" {
		fd, err := open()
		if err != nil {
			return -1, fmt.Errorf("probe socket: %w", err)
		}
		return fd, nil
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return -1, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer ns.Close()
	fd := -1
	err = osthread.Run(func() error {
		if err := netns.Set(ns); err != nil {
			return err
		}
		var err error
		fd, err = open()
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("probe socket in %s: %w", path, err)
	}
	return fd, nil
}

// Expect says which netdev each device has in the node, by device ID;
// a device without one is not probed.
func (p *Probe) Expect(names map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = names
}

// Present is nil when the device has no netdev to probe or its netdev is
// in the node's network namespace; an answer the kernel cannot give is an
// error too: a hand-out fails closed.
func (p *Probe) Present(id string) error {
	p.mu.Lock()
	name := p.names[id]
	p.mu.Unlock()
	if name == "" {
		return nil
	}
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		err = unix.IoctlIfreq(p.sock, unix.SIOCGIFINDEX, ifr)
	}
	if errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("its netdev %s is not in the node's network namespace", name)
	}
	if err != nil {
		return fmt.Errorf("whether its netdev %s is in the node's network namespace is unknown: %w", name, err)
	}
	return nil
}

// Close closes the socket.
func (p *Probe) Close() { unix.Close(p.sock) }
