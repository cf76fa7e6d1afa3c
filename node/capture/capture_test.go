package capture_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	capturefmt "github.com/hwnet-io/hwnet/api/capture"
	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/capture"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// spec has every layout the tests know of a NIC: VFs on iavf and on
// vfio-pci, InfiniBand VFs with a partition key of their own, a dual-port
// mlx4 function, scalable functions, a NIC with the default route.
func spec() *virtualnode.Spec {
	s := virtualnode.DefaultSpec()
	s.Name = "captured"
	s.PFs = append(s.PFs,
		virtualnode.PFSpec{Model: "ConnectX-6", LinkType: "infiniband", VFs: 2, VFPKey: "0x8001", Names: []string{"ib9"}},
		virtualnode.PFSpec{Model: "ConnectX-3", LinkType: "infiniband", Names: []string{"ib7"}, DualPort: true},
		virtualnode.PFSpec{Model: "ConnectX-6 Dx", VFs: 1, SFs: 2, Names: []string{"p0"}})
	return s
}

func discover(t *testing.T, db *hwdb.DB, sys, dev string) *discovery.Inventory {
	t.Helper()
	inv, err := discovery.Discover(context.Background(), discovery.Options{SysfsRoot: sys, DevRoot: dev, DB: db,
		ESwitch: vnodetest.NoESwitch{}, VDPA: vnodetest.VDPA{}})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestTakeUnpack: a capture of a node, written to its file and read back,
// unpacks into a tree that discovery reads as the node's: the same PFs,
// VFs, NICs, drivers, netdevs, NUMA nodes, IOMMU groups, RDMA devices and
// partition keys; only the identifiers it scrubbed differ, and none of the
// node's is left in the file.
func TestTakeUnpack(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := vnodetest.BuildForTest(t, spec(), db, false)
	c, err := capture.Take(capture.Options{SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot(), Kernel: "6.1.0-test",
		Now: func() time.Time { return time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	data, err := capturefmt.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := capturefmt.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "unpacked")
	if err := capture.Unpack(back, dir); err != nil {
		t.Fatal(err)
	}
	want := discover(t, db, node.SysRoot(), node.DevRoot())
	got := discover(t, db, filepath.Join(dir, "sys"), filepath.Join(dir, "dev"))
	for _, id := range identifiers(want) {
		if strings.Contains(string(data), id) {
			t.Errorf("the capture still holds the node's %s", id)
		}
	}
	if w, g := layout(t, want, node.DevRoot()), layout(t, got, filepath.Join(dir, "dev")); w != g {
		t.Errorf("the unpacked capture discovers as\n%s\nwant\n%s", g, w)
	}
	if len(want.PFs) < 4 || len(got.Problems) != 0 {
		t.Errorf("%d PFs, problems %q: want the spec's PFs and none", len(want.PFs), got.Problems)
	}
	if sfs := got.PFs[len(got.PFs)-1].SFs; len(sfs) != 2 || sfs[0].Netdev == nil || sfs[0].RDMA == nil {
		t.Errorf("the capture's SFs %+v: want the p0's two, with netdevs and RDMA devices", sfs)
	}
}

// identifiers are the MACs and GUIDs the inventory shows.
func identifiers(inv *discovery.Inventory) []string {
	var out []string
	add := func(f *discovery.Function) {
		if f.Netdev != nil && f.Netdev.AddrLen == 6 {
			out = append(out, f.Netdev.HardwareAddr)
		}
		if f.RDMA != nil && f.RDMA.NodeGUID != "" {
			out = append(out, f.RDMA.NodeGUID)
		}
	}
	eachFunction(inv, add)
	return out
}

// eachFunction calls f with every PF, VF and NIC of the inventory, and
// with a function holding each SF's netdev and RDMA device.
func eachFunction(inv *discovery.Inventory, f func(*discovery.Function)) {
	for i := range inv.PFs {
		f(&inv.PFs[i].Function)
		for j := range inv.PFs[i].VFs {
			f(&inv.PFs[i].VFs[j].Function)
		}
		for _, sf := range inv.PFs[i].SFs {
			f(&discovery.Function{Address: sf.Name, Netdev: sf.Netdev, RDMA: sf.RDMA})
		}
	}
	for i := range inv.NICs {
		f(&inv.NICs[i])
	}
}

// layout is the inventory as JSON with what scrubbing changes cleared and
// the trees' directories left out.
func layout(t *testing.T, inv *discovery.Inventory, devRoot string) string {
	t.Helper()
	forget := func(f *discovery.Function) {
		if f.Netdev != nil {
			f.Netdev.HardwareAddr = ""
		}
		for i := range f.Ports {
			f.Ports[i].HardwareAddr = ""
		}
		if f.RDMA != nil {
			f.RDMA.NodeGUID, f.RDMA.PortGUID = "", ""
		}
	}
	eachFunction(inv, forget)
	inv.LinkFacts = "" // names the tree's directory
	data, err := json.MarshalIndent(inv, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(data), devRoot, "DEV")
}

// TestVirtualNodeDrawsTheCapture: a capture built into a virtual node (as
// hwnetctl virtual-node create --capture does) discovers exactly as the
// unpacked capture does, identifiers included: the node's own capture,
// and each contributed one in node/discovery/testdata/captures (a VM's
// virtio-net on no NUMA node and without an IOMMU among them).
func TestVirtualNodeDrawsTheCapture(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := vnodetest.BuildForTest(t, spec(), db, false)
	own, err := capture.Take(capture.Options{SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot()})
	if err != nil {
		t.Fatal(err)
	}
	captures := map[string]*capturefmt.Capture{"the node's own": own}
	files, err := filepath.Glob("../discovery/testdata/captures/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".inventory.json") {
			continue
		}
		if captures[filepath.Base(f)], err = capturefmt.Load(f); err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range captures {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "unpacked")
			if err := capture.Unpack(c, dir); err != nil {
				t.Fatal(err)
			}
			want := exactly(t, discover(t, db, filepath.Join(dir, "sys"), filepath.Join(dir, "dev")), dir)
			vn, omitted, err := capture.VirtualNode(context.Background(), c, "replayed", db, virtualnode.Options{Dir: vnodetest.Dir(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { vn.Destroy() })
			got := exactly(t, discover(t, db, vn.SysRoot(), vn.DevRoot()), vn.Dir())
			if got != want || len(omitted) != 0 {
				t.Errorf("the virtual node (leaving out %q) discovers as\n%s\nwant\n%s", omitted, got, want)
			}
		})
	}
}

// exactly is the inventory as JSON with the tree's directory left out.
func exactly(t *testing.T, inv *discovery.Inventory, dir string) string {
	t.Helper()
	inv.LinkFacts = ""
	data, err := json.MarshalIndent(inv, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(data), dir, "TREE")
}

// TestVirtualNodeOfACaptureHasLinks: with links, each captured netdev is
// a real link in the node's netns, with the name, MAC and state the
// capture had, a dual-port function's second port and the scalable
// functions' included; destroyed,
// the node leaves its netns and links behind it.
func TestVirtualNodeOfACaptureHasLinks(t *testing.T) {
	vnodetest.RequireRoot(t)
	db := vnodetest.OpenDB(t)
	node := vnodetest.BuildForTest(t, spec(), db, false)
	c, err := capture.Take(capture.Options{SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot()})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "unpacked")
	if err := capture.Unpack(c, dir); err != nil {
		t.Fatal(err)
	}
	captured := discover(t, db, filepath.Join(dir, "sys"), filepath.Join(dir, "dev"))
	name := fmt.Sprintf("replayed-%d", os.Getpid())
	vn, _, err := capture.VirtualNode(context.Background(), c, name, db, virtualnode.Options{Dir: vnodetest.Dir(t), Links: true})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := discovery.Discover(context.Background(), discovery.Options{SysfsRoot: vn.SysRoot(), DevRoot: vn.DevRoot(),
		Netns: "/run/netns/" + vn.NetnsName(), DB: db, ESwitch: vnodetest.NoESwitch{}, VDPA: vnodetest.VDPA{}})
	if err != nil {
		t.Fatal(err)
	}
	ports := 0
	sfs := map[string]*discovery.Function{}
	eachFunction(inv, func(f *discovery.Function) {
		if _, pci := inv.Function(f.Address); !pci {
			sfs[f.Address] = f
		}
	})
	eachFunction(captured, func(want *discovery.Function) {
		got, ok := inv.Function(want.Address)
		if !ok {
			got, ok = sfs[want.Address]
		}
		if !ok {
			t.Errorf("%s: not in the virtual node", want.Address)
			return
		}
		for i, w := range append([]discovery.Netdev{}, want.Ports...) {
			if i > 0 && (len(got.Ports) <= i || got.Ports[i].Name != w.Name || got.Ports[i].StateFrom != "netlink") {
				t.Errorf("%s: ports %+v, want %s from netlink", want.Address, got.Ports, w.Name)
			}
			ports++
		}
		if want.Netdev == nil {
			return
		}
		w, g := *want.Netdev, got.Netdev
		if g == nil || g.Name != w.Name || g.HardwareAddr != w.HardwareAddr || g.OperState != w.OperState || g.Up != w.Up || g.StateFrom != "netlink" {
			t.Errorf("%s: netdev %+v, want %+v from netlink", want.Address, g, w)
		}
	})
	if ports == 0 {
		t.Error("the capture has no dual-port function: the test checks no second port")
	}
	if err := vn.Destroy(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/run/netns/" + vn.NetnsName()); !os.IsNotExist(err) {
		t.Errorf("netns %s after Destroy: %v", vn.NetnsName(), err)
	}
}
