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
// netdev is still in the node's network namespace and whether its PF's
// link is up. Link events reach the agent a moment after the kernel
// moved a netdev or took a link down (seconds, when the agent's loop
// waits on kubelet); a hand-out in that moment would give a pod a device
// whose netdev something else took, or whose PF carries no traffic, and
// the verdicts, judged from the events, cannot see it yet.
type Probe struct {
	mu sync.Mutex
	// sock is a socket in the node's network namespace, whose
	// SIOCGIFFLAGS looks a netdev up by name there. A netlink
	// RTM_GETLINK answers the same question with every attribute of the
	// link, and took 0.1-0.9 ms per device of each hand-out on a loaded
	// node against 2-5 us (BenchmarkPresent).
	sock int
	// names are the netdevs of the devices, by device ID.
	names map[string]Netdevs
}

// Netdevs are the netdevs a hand-out of a device probes, by name in the
// node's network namespace; "" is none.
type Netdevs struct {
	// Own is the device's netdev, which must be in the namespace.
	Own string
	// PF is its PF's, whose link must be up.
	PF string
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

// Expect says which netdevs each device has in the node, by device ID;
// a device without one is not probed.
func (p *Probe) Expect(names map[string]Netdevs) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = names
}

// Present is nil when the device has no netdev to probe or its netdev is
// in the node's network namespace; an answer the kernel cannot give is an
// error too: a hand-out fails closed.
func (p *Probe) Present(id string) error {
	name := p.netdevs(id).Own
	if name == "" {
		return nil
	}
	_, err := p.flags("its netdev", name)
	return err
}

// PFUp is nil when the device has no PF netdev to probe or its PF's link
// is up (administratively, and passing traffic: IFF_RUNNING, which the
// kernel also clears for the dormant and testing states the verdicts
// count as up); a link down, a PF netdev gone from the namespace, or an
// answer the kernel cannot give is an error: a hand-out fails closed.
func (p *Probe) PFUp(id string) error {
	name := p.netdevs(id).PF
	if name == "" {
		return nil
	}
	flags, err := p.flags("its PF's netdev", name)
	if err != nil {
		return err
	}
	if up := uint16(unix.IFF_UP | unix.IFF_RUNNING); flags&up != up {
		return fmt.Errorf("its PF's link %s is down", name)
	}
	return nil
}

func (p *Probe) netdevs(id string) Netdevs {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.names[id]
}

// flags looks the named netdev up in the node's namespace (SIOCGIFFLAGS)
// and returns its flags; an error says it is not there, or that the
// kernel cannot say. whose names it in the error.
func (p *Probe) flags(whose, name string) (uint16, error) {
	ifr, err := unix.NewIfreq(name)
	if err == nil {
		err = unix.IoctlIfreq(p.sock, unix.SIOCGIFFLAGS, ifr)
	}
	if errors.Is(err, unix.ENODEV) {
		return 0, fmt.Errorf("%s %s is not in the node's network namespace", whose, name)
	}
	if err != nil {
		return 0, fmt.Errorf("whether %s %s is in the node's network namespace is unknown: %w", whose, name, err)
	}
	return ifr.Uint16(), nil
}

// Close closes the socket.
func (p *Probe) Close() { unix.Close(p.sock) }
