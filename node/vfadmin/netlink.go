package vfadmin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// Netlink sets VF attributes through the PF's netdev with rtnetlink.
type Netlink struct {
	// SysfsRoot is where a VF's netdev is found by its PCI address.
	SysfsRoot string
	// Netns is the path of the network namespace of the PFs, "" for the
	// agent's own.
	Netns string
}

func (n Netlink) SetVLAN(ctx context.Context, vf VF, vlan, qos int, proto string) error {
	p := unix.ETH_P_8021Q
	if proto == vfsettings.ProtoDot1AD {
		p = unix.ETH_P_8021AD
	}
	return n.onPF(ctx, vf, func(h *netlink.Handle, l netlink.Link) error {
		return h.LinkSetVfVlanQosProto(l, vf.Index, vlan, qos, p)
	})
}

func (n Netlink) SetSpoofChk(ctx context.Context, vf VF, on bool) error {
	return n.onPF(ctx, vf, func(h *netlink.Handle, l netlink.Link) error { return h.LinkSetVfSpoofchk(l, vf.Index, on) })
}

func (n Netlink) SetTrust(ctx context.Context, vf VF, on bool) error {
	return n.onPF(ctx, vf, func(h *netlink.Handle, l netlink.Link) error { return h.LinkSetVfTrust(l, vf.Index, on) })
}

func (n Netlink) SetRate(ctx context.Context, vf VF, minRate, maxRate uint64) error {
	return n.onPF(ctx, vf, func(h *netlink.Handle, l netlink.Link) error {
		return h.LinkSetVfRate(l, vf.Index, int(minRate), int(maxRate))
	})
}

func (n Netlink) SetLinkState(ctx context.Context, vf VF, state string) error {
	s := map[string]uint32{
		vfsettings.LinkAuto: netlink.VF_LINK_STATE_AUTO, vfsettings.LinkEnable: netlink.VF_LINK_STATE_ENABLE,
		vfsettings.LinkDisable: netlink.VF_LINK_STATE_DISABLE,
	}
	v, ok := s[state]
	if !ok {
		return fmt.Errorf("link state %q", state)
	}
	return n.onPF(ctx, vf, func(h *netlink.Handle, l netlink.Link) error { return h.LinkSetVfState(l, vf.Index, v) })
}

func (n Netlink) SetMAC(ctx context.Context, vf VF, mac string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return err
	}
	return n.onPF(ctx, vf, func(h *netlink.Handle, l netlink.Link) error { return h.LinkSetVfHardwareAddr(l, vf.Index, hw) })
}

// SetMTU sets the MTU of the VF's own netdev, which must be in this
// network namespace: before the pod's CNI ADD moves it, after its DEL.
func (n Netlink) SetMTU(ctx context.Context, vf VF, mtu int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name, err := n.vfNetdev(vf.PCIAddress)
	if err != nil {
		return err
	}
	h, err := n.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("VF netdev %s: %w", name, err)
	}
	return h.LinkSetMTU(l, mtu)
}

func (n Netlink) onPF(ctx context.Context, vf VF, set func(h *netlink.Handle, l netlink.Link) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := n.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(vf.PF)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return fmt.Errorf("PF %s: %w: %w", vf.PF, ErrGone, err)
	}
	if err != nil {
		return fmt.Errorf("PF %s: %w", vf.PF, err)
	}
	return set(h, l)
}

// handle is a netlink socket in the PFs' network namespace.
func (n Netlink) handle() (*netlink.Handle, error) {
	if n.Netns == "" {
		return netlink.NewHandle()
	}
	ns, err := netns.GetFromPath(n.Netns)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", n.Netns, err)
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}

// vfNetdev is the one netdev sysfs lists under the VF's PCI function.
func (n Netlink) vfNetdev(pci string) (string, error) {
	name, err := firstNetdev(filepath.Join(n.SysfsRoot, "bus/pci/devices", pci))
	if err != nil {
		return "", fmt.Errorf("VF %s: %w: no netdev in this network namespace (bound to a userspace driver, or in a pod): %v", pci, ErrGone, err)
	}
	return name, nil
}
