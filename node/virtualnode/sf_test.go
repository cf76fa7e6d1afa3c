package virtualnode_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// sfSpec is two ConnectX-6 Dx PFs on NUMA node 1, each with 2 VFs and 2
// scalable functions.
func sfSpec(name string) *virtualnode.Spec {
	return &virtualnode.Spec{Name: name, PFs: []virtualnode.PFSpec{{Model: "ConnectX-6 Dx", Count: 2, VFs: 2, SFs: 2, NUMA: []int{1}}}}
}

// TestBuildSFs: each PF's SFs are drawn as mlx5 lays them out, and a node
// opened from its state file has the same SFs.
func TestBuildSFs(t *testing.T) {
	n := build(t, sfSpec("sfs"), false)
	checkTree(t, n)
	if got := checkSFs(t, n); got != 4 {
		t.Errorf("the node has %d SFs, want 2 on each of 2 PFs", got)
	}
	opened, err := virtualnode.Open(n.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(opened.Devices(), n.Devices()) {
		t.Errorf("opened node's devices differ from the built node's")
	}
}

// checkSFs checks every SF of the node against the tree and returns how
// many there are. An SF is the auxiliary device mlx5_core.sf.<N> below its
// PF's device directory, listed in bus/auxiliary/devices and bound to
// mlx5_core.sf, with its sfnum, its netdev and RDMA device below it, and
// the eth auxiliary device mlx5_core.eth.<N> that the netdev comes from.
func checkSFs(t *testing.T, n *virtualnode.Node) int {
	t.Helper()
	sys, count := n.SysRoot(), 0
	for _, f := range n.Devices() {
		for i, sf := range f.SFs {
			count++
			dir := filepath.Join(sys, sf.SysPath)
			if filepath.Dir(sf.SysPath) != f.SysPath || filepath.Base(sf.SysPath) != sf.Name {
				t.Errorf("%s: SF at %s, want %s/%s", f.Addr, sf.SysPath, f.SysPath, sf.Name)
			}
			sameFile(t, dir, filepath.Join(sys, "bus/auxiliary/devices", sf.Name))
			sameFile(t, dir, filepath.Join(sys, "bus/auxiliary/drivers/mlx5_core.sf", sf.Name))
			if got := readAttr(t, filepath.Join(dir, "sfnum")); got != strconv.Itoa(88+i) || sf.Num != 88+i {
				t.Errorf("%s: sfnum %s (state %d), want %d", sf.Name, got, sf.Num, 88+i)
			}
			if drv, sub := linkBase(t, filepath.Join(dir, "driver")), linkBase(t, filepath.Join(dir, "subsystem")); drv != "mlx5_core.sf" || sub != "auxiliary" {
				t.Errorf("%s: driver %s subsystem %s, want mlx5_core.sf and auxiliary", sf.Name, drv, sub)
			}
			checkSFNetdev(t, n, f, sf, dir)
			checkSFRDMA(t, n, sf, dir)
			eth := "mlx5_core.eth." + sf.Name[len("mlx5_core.sf."):]
			sameFile(t, filepath.Join(dir, eth), filepath.Join(sys, "bus/auxiliary/devices", eth))
		}
	}
	return count
}

// checkSFNetdev checks the SF's netdev: named as systemd names it, below
// the SF, leading back to it and listed in class/net.
func checkSFNetdev(t *testing.T, n *virtualnode.Node, pf virtualnode.Function, sf *virtualnode.SF, dir string) {
	t.Helper()
	rid, err := virtualnode.ParseRoutingID(pf.Addr)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("enp%ds0f%ds%d", rid>>8, rid&7, sf.Num)
	if sf.Netdev == nil || sf.Netdev.Name != want {
		t.Fatalf("%s: netdev %+v, want %s", sf.Name, sf.Netdev, want)
	}
	nd := filepath.Join(dir, "net", want)
	sameFile(t, filepath.Join(nd, "device"), dir)
	sameFile(t, nd, filepath.Join(n.SysRoot(), "class/net", want))
	got := readAttr(t, filepath.Join(nd, "address")) + " " + readAttr(t, filepath.Join(nd, "ifindex"))
	if want := fmt.Sprintf("%s %d", sf.Netdev.Address, sf.Netdev.Index); got != want {
		t.Errorf("%s: tree has %s, Devices says %s", nd, got, want)
	}
}

// checkSFRDMA checks the SF's RDMA device and its verbs device.
func checkSFRDMA(t *testing.T, n *virtualnode.Node, sf *virtualnode.SF, dir string) {
	t.Helper()
	if sf.RDMA == nil {
		t.Fatalf("%s: no RDMA device", sf.Name)
	}
	sameFile(t, filepath.Join(dir, "infiniband", sf.RDMA.Name), filepath.Join(n.SysRoot(), "class/infiniband", sf.RDMA.Name))
	checkRDMA(t, n, dir)
}

// TestLinksSFs: with links, each SF's netdev is a real link like a VF's,
// with its representor the other end; Destroy takes them all.
func TestLinksSFs(t *testing.T) {
	n, h := buildSFLinks(t)
	checkLinksMatchTree(t, n, h)
	checkTree(t, n)
	checkSFs(t, n)
	// Unbinding a PF takes its SFs' links with its own.
	ctx, pf := context.Background(), n.Devices()[0].Addr
	if err := n.SetNumVFs(ctx, pf, 0); err != nil {
		t.Fatal(err)
	}
	if err := n.BindDriver(ctx, pf, ""); err != nil {
		t.Fatal(err)
	}
	checkLinksMatchTree(t, n, h)
	if err := n.Destroy(); err != nil {
		t.Fatal(err)
	}
	netnsFile := filepath.Join(virtualnode.NetnsDir, virtualnode.NetnsPrefix+n.Name())
	for _, path := range []string{netnsFile, n.Dir()} {
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there after Destroy: %v", path, err)
		}
	}
}

// buildSFLinks builds sfSpec with links, as root, and a netlink handle
// in its netns.
func buildSFLinks(t *testing.T) (*virtualnode.Node, *netlink.Handle) {
	t.Helper()
	vnodetest.RequireRoot(t)
	spec := rootSpec(t)
	spec.PFs, spec.NICs = sfSpec(spec.Name).PFs, nil
	n, err := virtualnode.Build(context.Background(), spec, vnodetest.OpenDB(t), virtualnode.Options{Dir: vnodetest.Dir(t), Links: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Destroy() }) // Destroy is idempotent: this one is for a failure before the test's own
	return n, netlinkIn(t, n)
}

// TestSFsGoWithTheirPFDriver: unbinding mlx5_core from a PF deletes its
// SFs, their auxiliary devices, netdevs and RDMA devices, and binding it
// again brings none back: the kernel makes SFs only on `devlink port add`.
func TestSFsGoWithTheirPFDriver(t *testing.T) {
	n := build(t, sfSpec("sfs-unbind"), false)
	ctx := context.Background()
	pf := n.Devices()[0]
	if err := n.SetNumVFs(ctx, pf.Addr, 0); err != nil {
		t.Fatal(err)
	}
	for _, driver := range []string{"", "mlx5_core"} {
		if err := n.BindDriver(ctx, pf.Addr, driver); err != nil {
			t.Fatal(err)
		}
		checkTree(t, n)
		if got := checkSFs(t, n); got != 2 {
			t.Errorf("on %q: the node has %d SFs, want the other PF's 2", driver, got)
		}
		for _, sf := range pf.SFs {
			for _, gone := range []string{sf.SysPath, "bus/auxiliary/devices/" + sf.Name, "class/net/" + sf.Netdev.Name,
				"class/net/" + sf.Representor.Name, "class/infiniband/" + sf.RDMA.Name} {
				if _, err := os.Lstat(filepath.Join(n.SysRoot(), gone)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("on %q: %s is still there (%v)", driver, gone, err)
				}
			}
		}
	}
}
