package devhealth

import (
	"errors"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Probe asks netlink, at the moment of a hand-out, whether a device's
// netdev is still in the node's network namespace. Link events reach the
// agent a moment after the kernel moved a netdev; a hand-out in that
// moment would give a pod a device whose netdev something else took, and
// the verdicts, judged from the events, cannot see it yet.
type Probe struct {
	mu sync.Mutex
	h  *netlink.Handle
	// names are the netdevs the devices have in the node, by device ID.
	names map[string]string
}

// NewProbe opens a netlink socket in the network namespace at path ("" is
// this process's).
func NewProbe(path string) (*Probe, error) {
	if path == "" {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		return &Probe{h: h}, nil
	}
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", path, err)
	}
	return &Probe{h: h}, nil
}

// Expect says which netdev each device has in the node, by device ID;
// a device without one is not probed.
func (p *Probe) Expect(names map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = names
}

// Present is nil when the device has no netdev to probe or its netdev is
// in the node's network namespace; an answer netlink cannot give is an
// error too: a hand-out fails closed.
func (p *Probe) Present(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	name := p.names[id]
	if name == "" {
		return nil
	}
	_, err := p.h.LinkByName(name)
	if _, gone := errors.AsType[netlink.LinkNotFoundError](err); gone {
		return fmt.Errorf("its netdev %s is not in the node's network namespace", name)
	}
	if err != nil {
		return fmt.Errorf("whether its netdev %s is in the node's network namespace is unknown: %w", name, err)
	}
	return nil
}

// Close closes the netlink socket.
func (p *Probe) Close() { p.h.Close() }
