package vfadmin

import (
	"context"
	"errors"
	"fmt"
	"net"

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
	return n.onVF(ctx, vf, func(h *netlink.Handle, l netlink.Link) error { return h.LinkSetMTU(l, mtu) })
}

// Read is the VF's settings as its PF reports them in IFLA_VFINFO_LIST,
// with its netdev's MTU when the netdev is here. A PF that reports no
// VLAN protocol (no IFLA_VF_VLAN_LIST) is taken to use 802.1Q.
func (n Netlink) Read(ctx context.Context, vf VF) (vfsettings.Settings, error) {
	var s vfsettings.Settings
	err := n.onPF(ctx, vf, func(_ *netlink.Handle, l netlink.Link) error {
		for _, info := range l.Attrs().Vfs {
			if info.ID == vf.Index {
				s = fromVfInfo(info)
				return nil
			}
		}
		return fmt.Errorf("PF %s reports no VF %d", l.Attrs().Name, vf.Index)
	})
	if err != nil {
		return s, err
	}
	err = n.onVF(ctx, vf, func(_ *netlink.Handle, l netlink.Link) error {
		s.MTU = ptr(l.Attrs().MTU)
		return nil
	})
	if err != nil && !errors.Is(err, ErrGone) && !errors.Is(err, ErrNotBack) {
		return s, err
	}
	return s, nil
}

func fromVfInfo(info netlink.VfInfo) vfsettings.Settings {
	proto := vfsettings.ProtoDot1Q
	if info.VlanProto == unix.ETH_P_8021AD {
		proto = vfsettings.ProtoDot1AD
	}
	states := map[uint32]string{
		netlink.VF_LINK_STATE_AUTO: vfsettings.LinkAuto, netlink.VF_LINK_STATE_ENABLE: vfsettings.LinkEnable,
		netlink.VF_LINK_STATE_DISABLE: vfsettings.LinkDisable,
	}
	mac := vfsettings.UnsetMAC
	if len(info.Mac) == 6 {
		mac = info.Mac.String()
	}
	return vfsettings.Settings{VLAN: ptr(info.Vlan), VLANQoS: ptr(info.Qos), VLANProto: proto,
		SpoofChk: ptr(info.Spoofchk), Trust: ptr(info.Trust != 0),
		MinTxRate: ptr(uint64(info.MinTxRate)), MaxTxRate: ptr(uint64(info.MaxTxRate)),
		LinkState: states[info.LinkState], MAC: mac}
}

func ptr[T any](v T) *T { return &v }

// onVF runs do on the VF's own netdev.
func (n Netlink) onVF(ctx context.Context, vf VF, do func(h *netlink.Handle, l netlink.Link) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name, err := resolver{n.SysfsRoot}.vfNetdev(vf.PCIAddress)
	if err != nil {
		return err
	}
	h, err := n.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if errors.As(err, new(netlink.LinkNotFoundError)) {
		return fmt.Errorf("VF netdev %s: %w: %w", name, ErrNotBack, err)
	}
	if err != nil {
		return fmt.Errorf("VF netdev %s: %w", name, err)
	}
	return do(h, l)
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
	name, err := resolver{n.SysfsRoot}.pfNetdev(vf)
	if err != nil {
		return err
	}
	l, err := h.LinkByName(name)
	switch {
	case errors.As(err, new(netlink.LinkNotFoundError)) && vf.PFPCIAddress != "":
		return fmt.Errorf("PF %s (%s): %w: %w", name, vf.PFPCIAddress, ErrNotBack, err)
	case errors.As(err, new(netlink.LinkNotFoundError)):
		return fmt.Errorf("PF %s: %w: %w", name, ErrGone, err)
	case err != nil:
		return fmt.Errorf("PF %s: %w", name, err)
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

// PKeyTable, PKeyIndex and SetPKeyIndex go through sysfs, where mlx4
// shows a VF's partition key mapping (IOV): netlink has no call for it.
func (n Netlink) PKeyTable(ctx context.Context, vf VF) ([]string, error) {
	return IOV{n.SysfsRoot}.PKeyTable(ctx, vf)
}

func (n Netlink) PKeyIndex(ctx context.Context, vf VF) (string, error) {
	return IOV{n.SysfsRoot}.PKeyIndex(ctx, vf)
}

func (n Netlink) SetPKeyIndex(ctx context.Context, vf VF, idx string) error {
	return IOV{n.SysfsRoot}.SetPKeyIndex(ctx, vf, idx)
}
