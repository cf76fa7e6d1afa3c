package virtualnode_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

const (
	e810PF  = "0000:3b:00.0"
	e810VF0 = "0000:3b:01.0"
	ibVF0   = "0000:41:01.0"
)

// vfsOf returns the node's VFs of the PF, in address order.
func vfsOf(n *virtualnode.Node, pf string) []virtualnode.Function {
	var vfs []virtualnode.Function
	for _, f := range n.Devices() {
		if f.PF == pf {
			vfs = append(vfs, f)
		}
	}
	return vfs
}

// exists reports whether rel exists below the node's sys root, without
// following a final symlink.
func exists(n *virtualnode.Node, rel string) bool {
	_, err := os.Lstat(filepath.Join(n.SysRoot(), rel))
	return err == nil
}

func TestSetNumVFs(t *testing.T) {
	ctx := context.Background()
	n := build(t, virtualnode.DefaultSpec(), false)
	pfDir := filepath.Join(n.SysRoot(), "bus/pci/devices", e810PF)
	for _, num := range []int{4, 8, 0, 8, 8, 2} {
		old := vfsOf(n, e810PF)
		if err := n.SetNumVFs(ctx, e810PF, num); err != nil {
			t.Fatal(err)
		}
		vfs := vfsOf(n, e810PF)
		links, _ := filepath.Glob(filepath.Join(pfDir, "virtfn*"))
		if len(vfs) != num || len(links) != num || attrInt(t, pfDir, "sriov_numvfs") != num {
			t.Fatalf("numvfs %d: %d VFs, %d virtfn links, sriov_numvfs %s", num, len(vfs), len(links), readAttr(t, filepath.Join(pfDir, "sriov_numvfs")))
		}
		for _, vf := range old[min(num, len(old)):] {
			if exists(n, "bus/pci/devices/"+vf.Addr) || exists(n, vf.SysPath) || exists(n, "class/net/"+vf.Ifname) ||
				exists(n, "kernel/iommu_groups/"+strconv.Itoa(vf.IOMMUGroup)) {
				t.Errorf("numvfs %d: VF %s left traces in the tree", num, vf.Addr)
			}
		}
		checkTree(t, n)
	}
	// As with the kernel, re-created VFs bind the PF's VF driver: the
	// spec's vfio-pci binding of VFs 6 and 7 does not survive.
	if err := n.SetNumVFs(ctx, e810PF, 8); err != nil {
		t.Fatal(err)
	}
	for _, vf := range vfsOf(n, e810PF) {
		if vf.Driver != "iavf" || vf.Netdev == nil {
			t.Errorf("re-created VF %s: driver %q, netdev %v", vf.Addr, vf.Driver, vf.Netdev)
		}
	}
}

func TestBindDriver(t *testing.T) {
	ctx := context.Background()
	n := build(t, virtualnode.DefaultSpec(), false)
	tests := []struct {
		addr, driver      string
		netdev, rdma, uio bool
	}{
		{e810VF0, "vfio-pci", false, false, false},
		{e810VF0, "iavf", true, false, false},
		{e810VF0, "", false, false, false},
		{e810VF0, "iavf", true, false, false},
		{e810VF0, "uio_pci_generic", false, false, true},
		{e810VF0, "igb_uio", false, false, true},
		{e810VF0, "iavf", true, false, false},
		{ibVF0, "vfio-pci", false, false, false},
		{ibVF0, "mlx5_core", true, true, false},
		{ibVF0, "uio_pci_generic", false, false, true},
		{ibVF0, "mlx5_core", true, true, false},
		{"0000:43:00.0", "vfio-pci", false, false, false},
		{"0000:43:00.0", "igb", true, false, false},
	}
	for _, tt := range tests {
		before, _ := n.Device(tt.addr)
		override := readAttr(t, filepath.Join(n.SysRoot(), before.SysPath, "driver_override"))
		if err := n.BindDriver(ctx, tt.addr, tt.driver); err != nil {
			t.Fatal(err)
		}
		f, _ := n.Device(tt.addr)
		// Only a write changes driver_override, in the kernel.
		if got := readAttr(t, filepath.Join(n.SysRoot(), f.SysPath, "driver_override")); got != override {
			t.Errorf("bind %s to %q: driver_override %q, it was %q", tt.addr, tt.driver, got, override)
		}
		if f.Driver != tt.driver || (f.Netdev != nil) != tt.netdev || (f.RDMA != nil) != tt.rdma || (f.UIO != nil) != tt.uio {
			t.Errorf("bind %s to %q: driver %q, netdev %v, RDMA %v, UIO %v", tt.addr, tt.driver, f.Driver, f.Netdev, f.RDMA, f.UIO)
		}
		if before.Driver != "" && exists(n, "bus/pci/drivers/"+before.Driver+"/"+tt.addr) {
			t.Errorf("bind %s to %q: %s still lists it", tt.addr, tt.driver, before.Driver)
		}
		if before.RDMA != nil && rdmaLeftBehind(n, before.RDMA) {
			t.Errorf("bind %s to %q: RDMA device %s left behind", tt.addr, tt.driver, before.RDMA.Name)
		}
		if before.UIO != nil && (exists(n, "class/uio/"+before.UIO.Name()) || fileExists(filepath.Join(n.DevRoot(), before.UIO.Name()))) {
			t.Errorf("bind %s to %q: UIO device %s left behind", tt.addr, tt.driver, before.UIO.Name())
		}
		checkTree(t, n)
	}
}

// rdmaLeftBehind reports whether anything of the RDMA device is still in
// the tree: its class entries or its device nodes.
func rdmaLeftBehind(n *virtualnode.Node, d *virtualnode.RDMADevice) bool {
	umad, issm := "umad"+strconv.Itoa(d.Umad), "issm"+strconv.Itoa(d.Umad)
	if exists(n, "class/infiniband/"+d.Name) || exists(n, "class/infiniband_mad/"+umad) || exists(n, "class/infiniband_mad/"+issm) {
		return true
	}
	for _, node := range []string{"uverbs" + strconv.Itoa(d.Uverbs), umad, issm} {
		if fileExists(filepath.Join(n.DevRoot(), "infiniband", node)) {
			return true
		}
	}
	return false
}

// TestRDMACM: /dev/infiniband/rdma_cm is there on a node with RDMA
// devices, and stays when they go, as the rdma_ucm module does; a node
// that never had any lacks it.
func TestRDMACM(t *testing.T) {
	ctx := context.Background()
	rdmaCM := func(n *virtualnode.Node) bool { return fileExists(filepath.Join(n.DevRoot(), "infiniband", "rdma_cm")) }
	plain := build(t, mustParse(t, "name: plain\npfs: [{model: E810-C, vfs: 2}]"), false)
	if rdmaCM(plain) {
		t.Error("a node without RDMA devices has /dev/infiniband/rdma_cm")
	}
	n := build(t, mustParse(t, "name: one-ib\npfs: [{model: ConnectX-6, vfs: 0}]"), false)
	if !rdmaCM(n) {
		t.Fatal("a node with an RDMA device lacks /dev/infiniband/rdma_cm")
	}
	pf := n.Devices()[0]
	if err := n.BindDriver(ctx, pf.Addr, "vfio-pci"); err != nil {
		t.Fatal(err)
	}
	if f, _ := n.Device(pf.Addr); f.RDMA != nil || !rdmaCM(n) {
		t.Errorf("after unbinding the only RDMA device: RDMA %v, rdma_cm there %t; want none and true", f.RDMA, rdmaCM(n))
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestSetLinkUp(t *testing.T) {
	ctx := context.Background()
	n := build(t, virtualnode.DefaultSpec(), false)
	for _, tt := range []struct {
		ifname                        string
		up                            bool
		operstate, carrier, rep, port string
	}{
		{"enp59s0f0v1", false, "down", "0", "lowerlayerdown", ""},
		{"enp59s0f0v1", true, "up", "1", "up", ""},
		{"ibp65s0f0v2", false, "down", "0", "lowerlayerdown", "4: ACTIVE"},
		{"ibp65s0f0v2", true, "up", "1", "up", "4: ACTIVE"},
	} {
		if err := n.SetLinkUp(ctx, tt.ifname, tt.up); err != nil {
			t.Fatal(err)
		}
		nd := filepath.Join(n.SysRoot(), "class/net", tt.ifname)
		got := readAttr(t, nd+"/operstate") + " " + readAttr(t, nd+"/carrier")
		if want := tt.operstate + " " + tt.carrier; got != want {
			t.Errorf("%s up=%t: operstate and carrier %q, want %q", tt.ifname, tt.up, got, want)
		}
		f := deviceByNetdev(t, n, tt.ifname)
		rep := filepath.Join(n.SysRoot(), "class/net", f.Representor.Name, "operstate")
		if got := readAttr(t, rep); got != tt.rep {
			t.Errorf("%s up=%t: representor operstate %q, want %q", tt.ifname, tt.up, got, tt.rep)
		}
		if tt.port != "" {
			port := filepath.Join(n.SysRoot(), "class/infiniband", f.RDMA.Name, "ports/1/state")
			if got := readAttr(t, port); got != tt.port {
				t.Errorf("%s up=%t: IB port state %q, want %q", tt.ifname, tt.up, got, tt.port)
			}
		}
	}
	checkTree(t, n)
}

func deviceByNetdev(t *testing.T, n *virtualnode.Node, ifname string) virtualnode.Function {
	t.Helper()
	for _, f := range n.Devices() {
		if f.Netdev != nil && f.Netdev.Name == ifname {
			return f
		}
	}
	t.Fatalf("no device has netdev %s", ifname)
	return virtualnode.Function{}
}

func TestRemoveVF(t *testing.T) {
	n := build(t, virtualnode.DefaultSpec(), false)
	for _, addr := range []string{"0000:3b:01.2", "0000:3b:01.6", ibVF0} {
		f, _ := n.Device(addr)
		pfDir := filepath.Join(n.SysRoot(), "bus/pci/devices", f.PF)
		numVFs := readAttr(t, filepath.Join(pfDir, "sriov_numvfs"))
		if err := n.RemoveVF(context.Background(), addr); err != nil {
			t.Fatal(err)
		}
		if _, ok := n.Device(addr); ok || exists(n, f.SysPath) || exists(n, "bus/pci/devices/"+addr) ||
			fileExists(filepath.Join(pfDir, "virtfn"+strconv.Itoa(f.VFIndex))) {
			t.Errorf("VF %s is still there", addr)
		}
		if f.Netdev != nil && exists(n, "class/net/"+f.Netdev.Name) {
			t.Errorf("VF %s: netdev %s is still there", addr, f.Netdev.Name)
		}
		if got := readAttr(t, filepath.Join(pfDir, "sriov_numvfs")); got != numVFs {
			t.Errorf("VF %s: sriov_numvfs changed from %s to %s", addr, numVFs, got)
		}
	}
	checkTree(t, n)
}

func TestMutationErrors(t *testing.T) {
	ctx := context.Background()
	n := build(t, virtualnode.DefaultSpec(), false)
	tests := []struct {
		name string
		op   func() error
		want string
	}{
		{"numvfs on a VF", func() error { return n.SetNumVFs(ctx, e810VF0, 1) },
			"set sriov_numvfs of 0000:3b:01.0 to 1: not an SR-IOV physical function"},
		{"numvfs above total", func() error { return n.SetNumVFs(ctx, "0000:41:00.0", 128) },
			"set sriov_numvfs of 0000:41:00.0 to 128: out of range 0-127 (sriov_totalvfs)"},
		{"numvfs unknown PF", func() error { return n.SetNumVFs(ctx, "0000:99:00.0", 1) },
			"set sriov_numvfs of 0000:99:00.0 to 1: no PCI function 0000:99:00.0: file does not exist"},
		{"PF with VFs to vfio-pci", func() error { return n.BindDriver(ctx, e810PF, "vfio-pci") },
			`bind 0000:3b:00.0 to "vfio-pci": the PF has 8 VFs: set sriov_numvfs to 0 first`},
		{"root port", func() error { return n.BindDriver(ctx, "0000:3a:00.0", "vfio-pci") },
			`bind 0000:3a:00.0 to "vfio-pci": a root port keeps pcieport`},
		{"bad driver", func() error { return n.BindDriver(ctx, e810VF0, "../x") },
			`bind 0000:3b:01.0 to "../x": "../x" is not a driver name`},
		{"remove a PF", func() error { return n.RemoveVF(ctx, e810PF) },
			"remove VF 0000:3b:00.0: not a virtual function"},
		{"unknown netdev", func() error { return n.SetLinkUp(ctx, "eth0", false) },
			"set link eth0 up=false: no function has this netdev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(); err == nil || err.Error() != tt.want {
				t.Errorf("error\n got %v\nwant %s", err, tt.want)
			}
		})
	}
	if err := n.BindDriver(ctx, "0000:43:00.0", "vfio-pci"); err != nil {
		t.Fatal(err)
	}
	if err := n.SetNumVFs(ctx, "0000:43:00.0", 1); err == nil {
		t.Error("SetNumVFs on a standalone NIC succeeded")
	}
	if err := n.BindDriver(ctx, e810PF, ""); err == nil {
		t.Error("unbinding a PF with VFs succeeded")
	}
	checkTree(t, n)
}

// TestOpen reopens a node from its state directory, as another process
// does, and destroys it from there; Destroy is idempotent.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	n := build(t, virtualnode.DefaultSpec(), false)
	other, err := virtualnode.Open(n.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(other.Devices(), n.Devices()) {
		t.Error("Open sees other devices than Build made")
	}
	if err := other.SetNumVFs(ctx, e810PF, 2); err != nil {
		t.Fatal(err)
	}
	third, err := virtualnode.Open(n.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got := len(vfsOf(third, e810PF)); got != 2 {
		t.Errorf("after SetNumVFs 2 in another Node, Open sees %d VFs", got)
	}
	for _, d := range []*virtualnode.Node{other, other, n} {
		if err := d.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(n.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state directory still there: %v", err)
	}
	if _, err := virtualnode.Open(n.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open after Destroy: %v, want ErrNotExist", err)
	}
}

func TestBuildRefusesUsedDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := virtualnode.Build(context.Background(), virtualnode.DefaultSpec(), vnodetest.OpenDB(t), virtualnode.Options{Dir: dir})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Build into a used directory: %v, want ErrExist", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Errorf("Build removed what was there: %v", err)
	}
}

// TestSetCarrier: the netdev stays administratively up while its carrier
// goes, which is what separates a broken VF from an idle one.
func TestSetCarrier(t *testing.T) {
	ctx := context.Background()
	n := build(t, virtualnode.DefaultSpec(), true)
	for _, tt := range []struct {
		on                   bool
		operstate, flags, up string
	}{
		{false, "down", "0x1003", "0"},
		{true, "up", "0x1003", "1"},
	} {
		if err := n.SetCarrier(ctx, "enp59s0f0v1", tt.on); err != nil {
			t.Fatal(err)
		}
		nd := filepath.Join(n.SysRoot(), "class/net/enp59s0f0v1")
		got := readAttr(t, nd+"/operstate") + " " + readAttr(t, nd+"/flags") + " " + readAttr(t, nd+"/carrier")
		if want := tt.operstate + " " + tt.flags + " " + tt.up; got != want {
			t.Errorf("carrier on=%t: operstate, flags and carrier %q, want %q", tt.on, got, want)
		}
	}
}

// TestLoadDriver: loading a driver no function uses makes its directory
// with the attributes the kernel gives it, as modprobe does; a name no
// driver can have is refused.
func TestLoadDriver(t *testing.T) {
	spec := &virtualnode.Spec{Name: "load", PFs: []virtualnode.PFSpec{{Model: "E810-C", VFs: 2}}}
	n := build(t, spec, false)
	drv := "bus/pci/drivers/vfio-pci"
	if exists(n, drv) {
		t.Fatalf("%s before any VF is on vfio-pci", drv)
	}
	if err := n.LoadDriver("vfio-pci"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{drv, drv + "/bind", drv + "/unbind"} {
		if !exists(n, f) {
			t.Errorf("%s missing after LoadDriver", f)
		}
	}
	if err := n.LoadDriver("../x"); err == nil {
		t.Error("LoadDriver(\"../x\") took a name no driver can have")
	}
}
