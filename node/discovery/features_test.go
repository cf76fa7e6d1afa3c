package discovery_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestDiscoverSwitchdevRepresentors: with devlink saying switchdev, each
// VF gets the netdev on the PF's switch (same phys_switch_id) whose
// phys_port_name is pf0vfN; the virtual node's veth peers are those.
func TestDiscoverSwitchdevRepresentors(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, virtualnode.DefaultSpec())
	addRepresentor(t, node.SysRoot(), "other0", "ffff0000", "pf0vf4") // on another switch
	inv := discover(t, db, node, discovery.Options{ESwitch: fakeESwitch{pf0: discovery.ModeSwitchdev}})
	pf := findPF(t, inv, pf0)
	if pf.ESwitch != (discovery.ESwitch{Mode: discovery.ModeSwitchdev, SwitchdevCapable: true}) {
		t.Errorf("eswitch %+v, want switchdev with no reason, capable", pf.ESwitch)
	}
	for _, vf := range pf.VFs {
		built, _ := node.Device(vf.Address)
		want := netdevNameBuilt(built.Representor)
		if vf.Representor != want {
			t.Errorf("VF %d representor %q, want %q", vf.Index, vf.Representor, want)
		}
	}
	if pf.VFs[4].Representor == "" {
		t.Error("VF 4 has no representor; the test needs one to tell the switches apart")
	}
	legacy := findPF(t, inv, pf1)
	if legacy.ESwitch.Mode != discovery.ModeLegacy || legacy.VFs[0].Representor != "" {
		t.Errorf("%s eswitch %+v with VF 0 representor %q, want legacy without", pf1, legacy.ESwitch, legacy.VFs[0].Representor)
	}
}

// TestDiscoverRelativeRoot: a sysfs root given relative to the working
// directory, as `hwnetctl inventory --sysfs sys` does, finds the same
// functions and representors as an absolute one.
func TestDiscoverRelativeRoot(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, virtualnode.DefaultSpec())
	opts := discovery.Options{ESwitch: fakeESwitch{pf0: discovery.ModeSwitchdev, pf1: discovery.ModeSwitchdev}}
	abs := discover(t, db, node, opts)
	t.Chdir(node.Dir())
	opts.SysfsRoot, opts.DevRoot, opts.DB, opts.VDPA = "sys", "dev", db, vnodetest.VDPA(nil)
	rel, err := discovery.Discover(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Len() != abs.Len() {
		t.Errorf("relative root found %d functions, absolute %d", rel.Len(), abs.Len())
	}
	for _, addr := range []string{pf0, pf1} {
		for i, vf := range findPF(t, rel, addr).VFs {
			want := findPF(t, abs, addr).VFs[i].Representor
			if vf.Representor != want || (want == "" && vf.Netdev != nil) {
				t.Errorf("%s VF %d: representor %q with a relative root, %q with an absolute one", addr, vf.Index, vf.Representor, want)
			}
		}
	}
}

func addRepresentor(t *testing.T, sys, name, switchID, portName string) {
	t.Helper()
	addSwitchPort(t, sys, "devices/virtual/net", name, switchID, portName)
}

// addSwitchPort adds netdev name below sys/parent (a device's net/
// directory, or devices/virtual/net) with a switch ID and port name.
func addSwitchPort(t *testing.T, sys, parent, name, switchID, portName string) {
	t.Helper()
	dir := filepath.Join(sys, parent, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "phys_switch_id"), switchID)
	writeFile(t, filepath.Join(dir, "phys_port_name"), portName+"\n")
	if err := os.Symlink("../../"+parent+"/"+name, filepath.Join(sys, "class/net", name)); err != nil {
		t.Fatal(err)
	}
}

func TestDiscoverVDPADevices(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, virtualnode.DefaultSpec())
	vdpa := vnodetest.VDPA{{Parent: pf1vf0, VDPADevice: discovery.VDPADevice{Name: "vdpa0", Driver: "vhost_vdpa", Path: "/dev/vhost-vdpa-0"}}}
	inv := discover(t, db, node, discovery.Options{VDPA: vdpa})
	f, _ := inv.Function(pf1vf0)
	if len(f.VDPA) != 1 || f.VDPA[0] != vdpa[0].VDPADevice {
		t.Errorf("%s vdpa %+v, want %+v", pf1vf0, f.VDPA, vdpa[0].VDPADevice)
	}
}

// TestDiscoverSharedVFDevice: NVIDIA VFs from ConnectX-6 Dx on share
// device 101e, so a VF's model comes from its PF; a VF whose PF is not
// visible says why it has no model.
func TestDiscoverSharedVFDevice(t *testing.T) {
	db := vnodetest.OpenDB(t)
	spec := &virtualnode.Spec{Name: "dx", PFs: []virtualnode.PFSpec{
		{Model: "ConnectX-6 Dx", VFs: 2}, {Model: "ConnectX-7", VFs: 2},
	}}
	node := buildTree(t, db, spec)
	inv := discover(t, db, node, discovery.Options{})
	for _, pf := range inv.PFs {
		for _, vf := range pf.VFs {
			if vf.Device != 0x101e || vf.Model != pf.Model {
				t.Errorf("VF %s (%s) model %q, want its PF's %q", vf.Address, vf.Device, vf.Model, pf.Model)
			}
		}
	}
	cx7 := inv.PFs[1]
	removeFunction(t, node.SysRoot(), cx7.Address)
	inv = discover(t, db, node, discovery.Options{})
	f, _ := inv.Function(cx7.VFs[0].Address)
	if f.Model != "" || !hasProblem(f, "shared by") {
		t.Errorf("orphan VF model %q problems %q, want no model and a problem naming the shared VF ID", f.Model, f.Problems)
	}
}

// TestDiscoverUIO: a VF bound to uio_pci_generic or igb_uio has the
// /dev/uioN a DPDK application opens; one whose node is missing says so.
func TestDiscoverUIO(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, virtualnode.DefaultSpec())
	bound := map[string]string{pf0vf3: "uio_pci_generic", pf1vf0: "igb_uio"}
	uioNode := map[string]string{}
	for addr, driver := range bound {
		if err := node.BindDriver(t.Context(), addr, driver); err != nil {
			t.Fatal(err)
		}
		built, _ := node.Device(addr)
		uioNode[addr] = filepath.Join(node.DevRoot(), built.UIO.Name())
	}
	inv := discover(t, db, node, discovery.Options{})
	for _, built := range node.Devices() {
		f, _ := inv.Function(built.Addr)
		if f.UIODevice != uioNode[built.Addr] || (bound[built.Addr] != "" && (f.Driver != bound[built.Addr] || f.Netdev != nil || len(f.Problems) > 0)) {
			t.Errorf("%s: driver %s uio %q netdev %v problems %q; want uio %q", built.Addr, f.Driver, f.UIODevice, f.Netdev, f.Problems, uioNode[built.Addr])
		}
	}
	if err := os.Remove(uioNode[pf0vf3]); err != nil {
		t.Fatal(err)
	}
	removeAll(t, dev(node.SysRoot(), pf1vf0, "uio", filepath.Base(uioNode[pf1vf0])))
	inv = discover(t, db, node, discovery.Options{})
	for addr, problem := range map[string]string{
		pf0vf3: "bound to uio_pci_generic but " + uioNode[pf0vf3] + " does not exist",
		pf1vf0: "uio: the directory lists no UIO device",
	} {
		if f, _ := inv.Function(addr); f.UIODevice != "" || !hasProblem(f, problem) {
			t.Errorf("%s: uio %q problems %q, want none and %q", addr, f.UIODevice, f.Problems, problem)
		}
	}
}

func findPF(t *testing.T, inv *discovery.Inventory, addr string) *discovery.PF {
	t.Helper()
	for i := range inv.PFs {
		if inv.PFs[i].Address == addr {
			return &inv.PFs[i]
		}
	}
	t.Fatalf("PF %s not in the inventory", addr)
	return nil
}

// TestDiscoverBadRoot: a sysfs root without PCI is an error naming it.
func TestDiscoverBadRoot(t *testing.T) {
	dir := t.TempDir()
	_, err := discovery.Discover(t.Context(), discovery.Options{SysfsRoot: dir, DB: vnodetest.OpenDB(t)})
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("error %v, want one naming %s", err, dir)
	}
}
