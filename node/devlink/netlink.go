package devlink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Netlink is the kernel's devlink, through its generic netlink family. It
// stops asking once the kernel says it has no devlink family: a kernel
// that lacks it lacks it at every re-discovery too, and each question
// costs a netlink round trip per PF.
type Netlink struct {
	// get finds a devlink device by bus and name: netlink's, or a test's.
	get    func(bus, name string) (*netlink.DevlinkDevice, error)
	mu     sync.Mutex
	absent error
}

// NewNetlink is the kernel's devlink.
func NewNetlink() *Netlink { return &Netlink{get: netlink.DevLinkGetDeviceByName} }

// ESwitchMode asks devlink for the PF's eSwitch mode.
func (n *Netlink) ESwitchMode(ctx context.Context, pciAddress string) (string, error) {
	dev, err := n.device(ctx, pciAddress)
	if err != nil {
		return "", err
	}
	return dev.Attrs.Eswitch.Mode, nil
}

// SetESwitchMode asks devlink to put the PF's eSwitch in mode, as
// `devlink dev eswitch set pci/ADDR mode MODE` does.
func (n *Netlink) SetESwitchMode(ctx context.Context, pciAddress, mode string) error {
	if err := CheckMode(mode); err != nil {
		return err
	}
	dev, err := n.device(ctx, pciAddress)
	if err != nil {
		return err
	}
	if err := netlink.DevLinkSetEswitchMode(dev, mode); err != nil {
		return fmt.Errorf("devlink: PF %s: set eSwitch mode %s: %w", pciAddress, mode, err)
	}
	return nil
}

// device is the PF's devlink device.
func (n *Netlink) device(ctx context.Context, pciAddress string) (*netlink.DevlinkDevice, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	absent := n.absent
	n.mu.Unlock()
	if absent != nil {
		return nil, absent
	}
	dev, err := n.get("pci", pciAddress)
	if errors.Is(err, unix.ENOENT) {
		err = fmt.Errorf("devlink: the kernel has no devlink netlink family: %w", err)
		n.mu.Lock()
		n.absent = err
		n.mu.Unlock()
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("devlink: PF %s: %w", pciAddress, err)
	}
	return dev, nil
}
