package discovery_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// layoutSpec is a node of the layouts real machines have and the default
// node does not draw: a VM's virtio-net NIC, whose netdev hangs below the
// virtio0 sub-device and which holds the default route, and a QLogic
// ib_qib HCA of PCI class 0x0c06 (serial bus, InfiniBand) with its IPoIB
// netdev and RDMA device.
func layoutSpec(name string) *virtualnode.Spec {
	return &virtualnode.Spec{Name: name, NICs: []virtualnode.NICSpec{
		{Name: "eth0", Vendor: "1af4", Device: "1041", Driver: "virtio-pci", NetdevUnder: "virtio0", DefaultRoute: true},
		{Vendor: "1077", Device: "7322", Driver: "ib_qib", Class: "0c0600", LinkType: "infiniband"},
	}}
}

// TestDiscoverLayouts: each layout is found with its netdev, whatever its
// class or where the netdev hangs.
func TestDiscoverLayouts(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, layoutSpec("layouts"))
	inv := discover(t, db, node, discovery.Options{})
	tests := []struct {
		name, device, class, model string
		addrLen                    int
		rdma                       bool
	}{
		{"virtio-net: netdev below virtio0", "1041", "0x020000", "virtio-net", 6, false},
		{"ib_qib: class 0x0c06 HCA", "7322", "0x0c0600", "", 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := nicByDevice(t, inv, tt.device)
			if fn.Class != tt.class || fn.Model != tt.model {
				t.Errorf("class %s model %q, want %s %q", fn.Class, fn.Model, tt.class, tt.model)
			}
			if fn.Netdev == nil || fn.Netdev.AddrLen != tt.addrLen {
				t.Fatalf("netdev %+v, want one with a %d-byte address", fn.Netdev, tt.addrLen)
			}
			if (fn.RDMA != nil) != tt.rdma {
				t.Errorf("RDMA device %+v, want one: %t", fn.RDMA, tt.rdma)
			}
			if len(fn.Problems) != 0 {
				t.Errorf("problems %q, want none", fn.Problems)
			}
		})
	}
}

func nicByDevice(t *testing.T, inv *discovery.Inventory, device string) discovery.Function {
	t.Helper()
	for _, n := range inv.NICs {
		if n.Device.String() == device {
			return n
		}
	}
	t.Fatalf("no NIC with device %s in %+v", device, inv.NICs)
	return discovery.Function{}
}

// TestInventoryJSONEmptyLists: a node without PFs says "pfs": [] and a PF
// without VFs "vfs": [], never null, which JSON consumers trip on.
func TestInventoryJSONEmptyLists(t *testing.T) {
	db := vnodetest.OpenDB(t)
	spec := &virtualnode.Spec{Name: "nopf", NICs: []virtualnode.NICSpec{{Vendor: "8086", Device: "1521", Driver: "igb"}}}
	out, err := json.Marshal(discover(t, db, buildTree(t, db, spec), discovery.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"pfs":[]`) {
		t.Errorf("inventory JSON %s, want \"pfs\":[]", out)
	}
	spec = &virtualnode.Spec{Name: "novfs", PFs: []virtualnode.PFSpec{{Model: "E810-C"}}}
	out, _ = json.Marshal(discover(t, db, buildTree(t, db, spec), discovery.Options{}))
	if !strings.Contains(string(out), `"vfs":[]`) || !strings.Contains(string(out), `"nics":[]`) {
		t.Errorf("inventory JSON %s, want \"vfs\":[] and \"nics\":[]", out)
	}
}

// TestDiscoverRootVirtioDefaultRoute: on real links, the virtio-net NIC of
// a VM that carries the default route is excluded, so no selector (vendors
// ["1af4"]) can pool the node's only NIC.
func TestDiscoverRootVirtioDefaultRoute(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := vnodetest.BuildForTest(t, layoutSpec("disc-virtio"), db, true)
	inv := discover(t, db, node, discovery.Options{Netns: "/run/netns/" + node.NetnsName()})
	fn := nicByDevice(t, inv, "1041")
	if fn.Netdev == nil || !fn.Netdev.DefaultRoute || len(fn.Excluded) != 1 || !strings.Contains(fn.Excluded[0], "default route") {
		t.Errorf("virtio NIC netdev %+v excluded %q, want excluded for the default route", fn.Netdev, fn.Excluded)
	}
}

// TestDiscoverForeignTreeAsksNotThisHost: a sysfs tree that is not this
// host's /sys (a customer's dump) is read alone: link facts from the tree,
// eswitch modes not from this host's devlink, and the inventory says so.
// Otherwise a link of this host that shares a name and ifindex would lend
// the tree its state and default route.
func TestDiscoverForeignTreeAsksNotThisHost(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, virtualnode.DefaultSpec())
	inv, err := discovery.Discover(t.Context(), discovery.Options{SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot(), DB: db})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(inv.LinkFacts, "alone") {
		t.Errorf("link facts %q, want the tree alone", inv.LinkFacts)
	}
	for _, pf := range inv.PFs {
		if !strings.Contains(pf.ESwitch.Reason, "not this host's") {
			t.Errorf("%s: eswitch %+v, want devlink not asked", pf.Address, pf.ESwitch)
		}
		for _, vf := range pf.VFs {
			if vf.Netdev != nil && (vf.Netdev.StateFrom != "sysfs" || vf.Netdev.DefaultRoute) {
				t.Errorf("%s: netdev %+v, want state from sysfs and no default route", vf.Address, vf.Netdev)
			}
		}
	}
}

// TestDiscoverWirelessExcluded: Wi-Fi is a property of the netdev
// (phy80211), not of class 0x0280, which ConnectX-3 reports too (lspci in
// the SR-IOV network device plugin's issue #260): a Wi-Fi function is
// listed with the reason, while a ConnectX-3 PF and its VFs, class 0x0280
// with plain netdevs, are offered.
func TestDiscoverWirelessExcluded(t *testing.T) {
	db := vnodetest.OpenDB(t)
	spec := &virtualnode.Spec{Name: "wifi",
		NICs: []virtualnode.NICSpec{{Name: "wlp1s0", Vendor: "8086", Device: "2723", Driver: "iwlwifi", Class: "028000", Wireless: true}},
		PFs:  []virtualnode.PFSpec{{Model: "ConnectX-3", VFs: 2, LinkType: "ethernet"}, {Model: "ConnectX-3 Pro", VFs: 1, LinkType: "infiniband"}},
	}
	inv := discover(t, db, buildTree(t, db, spec), discovery.Options{})
	fn := nicByDevice(t, inv, "2723")
	if len(fn.Excluded) != 1 || !strings.Contains(fn.Excluded[0], "wireless") || !strings.Contains(fn.Excluded[0], "wlp1s0") {
		t.Errorf("Wi-Fi function excluded %q, want excluded as wireless, naming wlp1s0", fn.Excluded)
	}
	if len(inv.PFs) != 2 {
		t.Fatalf("inventory has %d PFs, want the 2 ConnectX-3", len(inv.PFs))
	}
	for _, pf := range inv.PFs {
		if pf.Class != "0x028000" || len(pf.VFs) == 0 {
			t.Errorf("PF %s (%s) class %s with %d VFs, want class 0x028000 with VFs", pf.Address, pf.Model, pf.Class, len(pf.VFs))
		}
		for _, vf := range pf.VFs {
			if vf.Class != "0x028000" || vf.Device != 0x1004 || len(vf.Excluded) > 0 {
				t.Errorf("VF %s class %s device %s excluded %q, want a 0x028000 1004 VF that is offered", vf.Address, vf.Class, vf.Device, vf.Excluded)
			}
		}
	}
}

// TestDiscoverMultiPortSwitchdev: on a dual-port mlx5 card both ports'
// uplinks and every representor share one phys_switch_id, and mlx5
// registers the representors in the PF's own net/ directory, named by
// port (pf<P>vf<N>, kernel commit c12ecc230564; older ice: pf<P>vfr<N>).
// Each VF gets its own port's representor, and each PF its uplink (p<P>)
// with no "several netdevs" problem.
func TestDiscoverMultiPortSwitchdev(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, virtualnode.DefaultSpec())
	sys, shared := node.SysRoot(), "0c42a1fffe00aa00"
	for port, addr := range []string{pf0, pf1} {
		built, _ := node.Device(addr)
		uplink := filepath.Join(sys, built.SysPath, "net", built.Netdev.Name)
		writeFile(t, filepath.Join(uplink, "phys_switch_id"), shared+"\n")
		writeFile(t, filepath.Join(uplink, "phys_port_name"), fmt.Sprintf("p%d\n", port))
		for vf := range 4 {
			name, portName := fmt.Sprintf("rep%d_%d", port, vf), fmt.Sprintf("pf%dvf%d", port, vf)
			if port == 1 {
				portName = fmt.Sprintf("pf%dvfr%d", port, vf)
			}
			addSwitchPort(t, sys, built.SysPath+"/net", name, shared, portName)
		}
	}
	inv := discover(t, db, node, discovery.Options{ESwitch: fakeESwitch{pf0: discovery.ModeSwitchdev, pf1: discovery.ModeSwitchdev}})
	for port, addr := range []string{pf0, pf1} {
		pf := findPF(t, inv, addr)
		built, _ := node.Device(addr)
		if pf.Netdev == nil || pf.Netdev.Name != built.Netdev.Name || len(pf.Problems) != 0 {
			t.Errorf("%s: netdev %+v problems %q, want uplink %s and no problem", addr, pf.Netdev, pf.Problems, built.Netdev.Name)
		}
		for _, vf := range pf.VFs[:4] {
			if want := fmt.Sprintf("rep%d_%d", port, vf.Index); vf.Representor != want {
				t.Errorf("%s VF %d: representor %q, want %q", addr, vf.Index, vf.Representor, want)
			}
		}
	}
}

// TestDiscoverOneCardSwitchdev: the virtual node's dual-port card (both
// ports on one switch ID, uplinks p0 and p1, representors pf<P>vf<N>):
// each VF gets its own port's representor, the veth peer the node built.
func TestDiscoverOneCardSwitchdev(t *testing.T) {
	db := vnodetest.OpenDB(t)
	spec := &virtualnode.Spec{Name: "onecard", PFs: []virtualnode.PFSpec{{Model: "ConnectX-6 Dx", Count: 2, VFs: 4, OneCard: true}}}
	node := buildTree(t, db, spec)
	switchdev := fakeESwitch{}
	for _, d := range node.Devices() {
		if d.SRIOV != nil {
			switchdev[d.Addr] = discovery.ModeSwitchdev
		}
	}
	inv := discover(t, db, node, discovery.Options{ESwitch: switchdev})
	if len(inv.PFs) != 2 {
		t.Fatalf("%d PFs, want 2", len(inv.PFs))
	}
	for _, pf := range inv.PFs {
		if len(pf.Problems) != 0 {
			t.Errorf("%s: problems %q, want none", pf.Address, pf.Problems)
		}
		for _, vf := range pf.VFs {
			built, _ := node.Device(vf.Address)
			if want := netdevNameBuilt(built.Representor); vf.Representor != want || want == "" {
				t.Errorf("%s VF %d: representor %q, want %q", pf.Address, vf.Index, vf.Representor, want)
			}
		}
	}
}

// TestDiscoverHostSysfsElsewhereIsLive: this host's sysfs mounted at
// another path (a DaemonSet's /host/sys) is still this host's: its links
// come from netlink.
func TestDiscoverHostSysfsElsewhereIsLive(t *testing.T) {
	inv, err := discovery.Discover(t.Context(), discovery.Options{SysfsRoot: "/proc/self/root/sys", DB: vnodetest.OpenDB(t),
		ESwitch: vnodetest.NoESwitch{}, VDPA: vnodetest.VDPA(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(inv.LinkFacts, "netlink") {
		t.Errorf("link facts %q, want netlink for this host's own sysfs", inv.LinkFacts)
	}
}

// TestDiscoverMlx4DualPort: mlx4 registers both ports of a ConnectX-3 on
// one function, dev_port 0 and 1 (ib0 and ib1, or two Ethernet
// netdevs); the inventory lists both, in port order, with no problem.
func TestDiscoverMlx4DualPort(t *testing.T) {
	db := vnodetest.OpenDB(t)
	spec := &virtualnode.Spec{Name: "mlx4", PFs: []virtualnode.PFSpec{
		{Model: "ConnectX-3", LinkType: "infiniband", Names: []string{"ib0"}, DualPort: true},
		{Model: "ConnectX-3 Pro", LinkType: "ethernet", Names: []string{"ens1"}, DualPort: true, VFs: 1},
	}}
	inv := discover(t, db, buildTree(t, db, spec), discovery.Options{})
	for _, tc := range []struct {
		pf    int
		names []string
		addr  int
	}{{0, []string{"ib0", "ib0d1"}, 20}, {1, []string{"ens1", "ens1d1"}, 6}} {
		pf := inv.PFs[tc.pf]
		var names []string
		for i, nd := range pf.Ports {
			names = append(names, nd.Name)
			if nd.Port != i || nd.AddrLen != tc.addr {
				t.Errorf("%s port %s: dev_port %d address length %d, want %d and %d", pf.Address, nd.Name, nd.Port, nd.AddrLen, i, tc.addr)
			}
		}
		if !slices.Equal(names, tc.names) || pf.Netdev == nil || pf.Netdev.Name != tc.names[0] || len(pf.Problems) > 0 {
			t.Errorf("%s: ports %q netdev %+v problems %q, want ports %q, the first as netdev, no problem", pf.Address, names, pf.Netdev, pf.Problems, tc.names)
		}
	}
}
