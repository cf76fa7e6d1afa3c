package devlink

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Netlink is the kernel's devlink, through its generic netlink family. It
// stops asking once the kernel says it has no devlink family: a kernel
// that lacks it lacks it at every re-discovery too, and each question
// costs a netlink round trip per PF.
type Netlink struct {
	// get finds a devlink device by bus and name: netlink's, or a test's.
	get func(bus, name string) (*netlink.DevlinkDevice, error)
	// ports adds, sets, deletes and lists devlink ports: netlink's, or a
	// test's.
	ports portAPI
	// portName is a netdev's phys_port_name ("pf0sf88" for an SF's
	// representor), which names the SF a port is: the library's port
	// dump leaves the sfnum out.
	portName func(netdev string) (string, error)
	mu       sync.Mutex
	absent   error
}

// portAPI is the part of netlink's Handle that works on devlink ports.
type portAPI interface {
	DevLinkPortAdd(bus, device string, flavour uint16, attrs netlink.DevLinkPortAddAttrs) (*netlink.DevlinkPort, error)
	DevlinkPortFnSet(bus, device string, index uint32, attrs netlink.DevlinkPortFnSetAttrs) error
	DevLinkPortDel(bus, device string, index uint32) error
	DevLinkGetAllPortList() ([]*netlink.DevlinkPort, error)
}

// NewNetlink is the kernel's devlink.
func NewNetlink() *Netlink {
	return &Netlink{get: netlink.DevLinkGetDeviceByName, ports: &netlink.Handle{}, portName: sysfsPortName}
}

// sysfsPortName reads the netdev's phys_port_name from sysfs.
func sysfsPortName(netdev string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/sys/class/net", netdev, "phys_port_name"))
	return strings.TrimSpace(string(b)), err
}

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

// AddSF adds the PF's SF sfnum, with the PF's own function number as
// pfnum (mlx5 refuses any other), and activates it; a port that cannot be
// activated is deleted again, so that a failure leaves no SF half made.
func (n *Netlink) AddSF(ctx context.Context, pciAddress string, sfnum int) error {
	pfnum, err := pfNumber(pciAddress)
	if err == nil {
		err = CheckSFNum(sfnum)
	}
	if err == nil {
		_, err = n.device(ctx, pciAddress)
	}
	if err != nil {
		return fmt.Errorf("devlink: PF %s: add SF %d: %w", pciAddress, sfnum, err)
	}
	port, err := n.ports.DevLinkPortAdd("pci", pciAddress, nl.DEVLINK_PORT_FLAVOUR_PCI_SF,
		netlink.DevLinkPortAddAttrs{PfNumber: pfnum, SfNumber: uint32(sfnum), SfNumberValid: true})
	if err != nil {
		return fmt.Errorf("devlink: PF %s: port add flavour pcisf pfnum %d sfnum %d: %w", pciAddress, pfnum, sfnum, err)
	}
	if err := n.setState(pciAddress, port.PortIndex, nl.DEVLINK_PORT_FN_STATE_ACTIVE); err != nil {
		return errors.Join(fmt.Errorf("devlink: PF %s: SF %d: %w", pciAddress, sfnum, err),
			n.ports.DevLinkPortDel("pci", pciAddress, port.PortIndex))
	}
	return nil
}

// DeleteSF deactivates the PF's SF sfnum and deletes its port.
func (n *Netlink) DeleteSF(ctx context.Context, pciAddress string, sfnum int) error {
	if _, err := n.device(ctx, pciAddress); err != nil {
		return fmt.Errorf("devlink: PF %s: delete SF %d: %w", pciAddress, sfnum, err)
	}
	index, err := n.sfPort(pciAddress, sfnum)
	if err != nil {
		return fmt.Errorf("devlink: PF %s: delete SF %d: %w", pciAddress, sfnum, err)
	}
	if err := n.setState(pciAddress, index, nl.DEVLINK_PORT_FN_STATE_INACTIVE); err != nil {
		return fmt.Errorf("devlink: PF %s: SF %d: %w", pciAddress, sfnum, err)
	}
	if err := n.ports.DevLinkPortDel("pci", pciAddress, index); err != nil {
		return fmt.Errorf("devlink: PF %s: port del %d (SF %d): %w", pciAddress, index, sfnum, err)
	}
	return nil
}

// setState sets the port function's state, as `devlink port function set
// pci/PF/INDEX state active|inactive` does.
func (n *Netlink) setState(pciAddress string, index uint32, state uint8) error {
	attrs := netlink.DevlinkPortFnSetAttrs{FnAttrs: netlink.DevlinkPortFn{State: state}, StateValid: true}
	if err := n.ports.DevlinkPortFnSet("pci", pciAddress, index, attrs); err != nil {
		return fmt.Errorf("port function set %d state %s: %w", index, stateName(state), err)
	}
	return nil
}

func stateName(state uint8) string {
	if state == nl.DEVLINK_PORT_FN_STATE_ACTIVE {
		return "active"
	}
	return "inactive"
}

// sfPort is the index of the PF's pcisf port whose representor's
// phys_port_name ends in sf<sfnum>.
func (n *Netlink) sfPort(pciAddress string, sfnum int) (uint32, error) {
	ports, err := n.ports.DevLinkGetAllPortList()
	if err != nil {
		return 0, fmt.Errorf("port list: %w", err)
	}
	for _, p := range ports {
		if p.BusName != "pci" || p.DeviceName != pciAddress || p.PortFlavour != nl.DEVLINK_PORT_FLAVOUR_PCI_SF || p.NetdeviceName == "" {
			continue
		}
		name, err := n.portName(p.NetdeviceName)
		if err != nil {
			return 0, fmt.Errorf("port %d: %w", p.PortIndex, err)
		}
		if _, num, ok := strings.Cut(name, "sf"); ok && num == strconv.Itoa(sfnum) {
			return p.PortIndex, nil
		}
	}
	return 0, errors.New("no pcisf port has it")
}

// pfNumber is the PF's function number in its PCI address
// (DDDD:BB:DD.F): the pfnum mlx5 wants for its own SFs.
func pfNumber(pciAddress string) (uint16, error) {
	_, fn, ok := strings.Cut(pciAddress, ".")
	f, err := strconv.ParseUint(fn, 16, 3)
	if !ok || err != nil {
		return 0, fmt.Errorf("PCI address %q: no function number", pciAddress)
	}
	return uint16(f), nil
}
