package devlink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// TestNetlinkAbsentFamilyAskedOnce: a kernel without the devlink family
// is asked once, for reads and sets alike; any other failure, which may
// pass, is asked about every time.
func TestNetlinkAbsentFamilyAskedOnce(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		calls int
	}{
		{"no family", fmt.Errorf("genl: %w", unix.ENOENT), 1},
		{"transient", unix.EBUSY, 4},
	} {
		calls := 0
		n := &Netlink{get: func(string, string) (*netlink.DevlinkDevice, error) { calls++; return nil, tt.err }}
		for range 2 {
			_, errR := n.ESwitchMode(context.Background(), "0000:3b:00.0")
			errS := n.SetESwitchMode(context.Background(), "0000:3b:00.0", ModeSwitchdev)
			if !errors.Is(errR, tt.err) || !errors.Is(errS, tt.err) {
				t.Errorf("%s: errors %v and %v, want %v", tt.name, errR, errS, tt.err)
			}
		}
		if calls != tt.calls {
			t.Errorf("%s: devlink asked %d times, want %d", tt.name, calls, tt.calls)
		}
	}
}

// TestNetlinkMode: the mode is devlink's answer for the PF.
func TestNetlinkMode(t *testing.T) {
	n := &Netlink{get: func(bus, name string) (*netlink.DevlinkDevice, error) {
		d := &netlink.DevlinkDevice{BusName: bus, DeviceName: name}
		d.Attrs.Eswitch.Mode = ModeSwitchdev
		return d, nil
	}}
	if got, err := n.ESwitchMode(context.Background(), "0000:3b:00.0"); got != ModeSwitchdev || err != nil {
		t.Errorf("got %q, %v; want switchdev", got, err)
	}
}

// fakePorts records the port calls made, as netlink would send them.
type fakePorts struct {
	calls   []string
	failSet bool
	list    []*netlink.DevlinkPort
}

func (f *fakePorts) DevLinkPortAdd(bus, dev string, flavour uint16, a netlink.DevLinkPortAddAttrs) (*netlink.DevlinkPort, error) {
	f.calls = append(f.calls, fmt.Sprintf("add %s/%s flavour %d pfnum %d sfnum %d valid %t", bus, dev, flavour, a.PfNumber, a.SfNumber, a.SfNumberValid))
	return &netlink.DevlinkPort{BusName: bus, DeviceName: dev, PortIndex: 32768}, nil
}

func (f *fakePorts) DevlinkPortFnSet(bus, dev string, index uint32, a netlink.DevlinkPortFnSetAttrs) error {
	f.calls = append(f.calls, fmt.Sprintf("set %s/%s/%d state %d valid %t hwaddr %t", bus, dev, index, a.FnAttrs.State, a.StateValid, a.HwAddrValid))
	if f.failSet {
		return unix.EIO
	}
	return nil
}

func (f *fakePorts) DevLinkPortDel(bus, dev string, index uint32) error {
	f.calls = append(f.calls, fmt.Sprintf("del %s/%s/%d", bus, dev, index))
	return nil
}

func (f *fakePorts) DevLinkGetAllPortList() ([]*netlink.DevlinkPort, error) { return f.list, nil }

func fakeNetlink(ports *fakePorts) *Netlink {
	return &Netlink{
		get: func(bus, name string) (*netlink.DevlinkDevice, error) {
			return &netlink.DevlinkDevice{BusName: bus, DeviceName: name}, nil
		},
		ports: ports,
		portName: func(netdev string) (string, error) {
			return map[string]string{"eth-rep88": "pf1sf88", "eth-rep89": "pf1sf89"}[netdev], nil
		},
	}
}

// TestNetlinkSFs: an SF is added as `devlink port add pci/PF flavour
// pcisf pfnum <the PF's function> sfnum N` and activated on the port the
// kernel answers with, its hw_addr left to the driver; a port that cannot
// be activated is deleted again; a delete finds the SF's port by its
// representor's phys_port_name, deactivates it and deletes it.
func TestNetlinkSFs(t *testing.T) {
	const pf = "0000:3b:00.1"
	sf := uint16(nl.DEVLINK_PORT_FLAVOUR_PCI_SF)
	for _, tt := range []struct {
		name    string
		failSet bool
		op      func(*Netlink) error
		want    []string
	}{
		{"add", false, func(n *Netlink) error { return n.AddSF(context.Background(), pf, 7) }, []string{
			"add pci/0000:3b:00.1 flavour 7 pfnum 1 sfnum 7 valid true", "set pci/0000:3b:00.1/32768 state 1 valid true hwaddr false"}},
		{"add not activated", true, func(n *Netlink) error { return n.AddSF(context.Background(), pf, 7) }, []string{
			"add pci/0000:3b:00.1 flavour 7 pfnum 1 sfnum 7 valid true", "set pci/0000:3b:00.1/32768 state 1 valid true hwaddr false",
			"del pci/0000:3b:00.1/32768"}},
		{"delete", false, func(n *Netlink) error { return n.DeleteSF(context.Background(), pf, 89) }, []string{
			"set pci/0000:3b:00.1/5 state 0 valid true hwaddr false", "del pci/0000:3b:00.1/5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ports := &fakePorts{failSet: tt.failSet, list: []*netlink.DevlinkPort{
				{BusName: "pci", DeviceName: "0000:3b:00.0", PortIndex: 3, PortFlavour: sf, NetdeviceName: "eth-rep89"},
				{BusName: "pci", DeviceName: pf, PortIndex: 1, PortFlavour: nl.DEVLINK_PORT_FLAVOUR_PCI_VF, NetdeviceName: "eth-rep89"},
				{BusName: "pci", DeviceName: pf, PortIndex: 4, PortFlavour: sf, NetdeviceName: "eth-rep88"},
				{BusName: "pci", DeviceName: pf, PortIndex: 5, PortFlavour: sf, NetdeviceName: "eth-rep89"},
			}}
			err := tt.op(fakeNetlink(ports))
			if (err != nil) != tt.failSet {
				t.Errorf("error %v, want one: %t", err, tt.failSet)
			}
			if !slices.Equal(ports.calls, tt.want) {
				t.Errorf("calls\n%s\nwant\n%s", strings.Join(ports.calls, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestNetlinkSFRefused: an SF no port has, an sfnum devlink cannot carry
// and a PCI address without a function number are refused, naming them,
// before any port changes.
func TestNetlinkSFRefused(t *testing.T) {
	ports := &fakePorts{}
	n := fakeNetlink(ports)
	for _, tt := range []struct {
		err  error
		want string
	}{
		{n.DeleteSF(context.Background(), "0000:3b:00.1", 90), "no pcisf port"},
		{n.AddSF(context.Background(), "0000:3b:00.1", -1), "sfnum -1"},
		{n.AddSF(context.Background(), "3b", 1), `"3b"`},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("got %v, want an error naming %s", tt.err, tt.want)
		}
	}
	if len(ports.calls) > 0 {
		t.Errorf("ports changed: %v", ports.calls)
	}
}
