package virtualnode_test

// Tests that need root: network namespaces, veth links and mounts. They
// skip without root, and fail instead when HWNET_REQUIRE_ROOT=1.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// rootSpec is the default spec under a name of the test's own, so that its
// netns cannot collide with another test's or a running node's.
func rootSpec(t *testing.T) *virtualnode.Spec {
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	s := virtualnode.DefaultSpec()
	s.Name = fmt.Sprintf("t%d-%08x", os.Getpid(), h.Sum32())
	return s
}

// netlinkIn returns a netlink handle in the node's netns.
func netlinkIn(t *testing.T, n *virtualnode.Node) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromName(n.NetnsName())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// checkLinksMatchTree checks that every netdev in the tree is a real link
// with the tree's ifindex, MAC and state, and that no other link exists.
func checkLinksMatchTree(t *testing.T, n *virtualnode.Node, h *netlink.Handle) {
	t.Helper()
	want := 1 // lo
	for _, f := range n.Devices() {
		if f.Netdev == nil {
			continue
		}
		want += 2
		dir := filepath.Join(n.SysRoot(), "class/net", f.Netdev.Name)
		real := checkLink(t, h, f.Netdev, readAttr(t, dir+"/ifindex"), readAttr(t, dir+"/address"))
		if f.Netdev.Type == virtualnode.ArphrdInfiniBand && real.HardwareAddr.String() == f.Netdev.Address {
			t.Errorf("%s: IPoIB address on an Ethernet veth", f.Netdev.Name)
		}
		rep := filepath.Join(n.SysRoot(), "class/net", f.Representor.Name)
		checkLink(t, h, f.Representor, readAttr(t, rep+"/ifindex"), readAttr(t, rep+"/address"))
		ends := []*virtualnode.Netdev{f.Port2, f.Port2Peer}
		for _, sf := range f.SFs {
			ends = append(ends, sf.Netdev, sf.Representor)
		}
		for _, nd := range ends {
			if nd == nil {
				continue
			}
			want++
			dir := filepath.Join(n.SysRoot(), "class/net", nd.Name)
			checkLink(t, h, nd, readAttr(t, dir+"/ifindex"), readAttr(t, dir+"/address"))
		}
	}
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != want {
		t.Errorf("netns has %d links, the tree %d netdevs", len(links), want)
	}
}

// checkLink compares one real link with what the tree says of it.
func checkLink(t *testing.T, h *netlink.Handle, nd *virtualnode.Netdev, treeIndex, treeAddr string) *netlink.LinkAttrs {
	t.Helper()
	link, err := h.LinkByName(nd.Name)
	if err != nil {
		t.Fatalf("%s: %v", nd.Name, err)
	}
	a := link.Attrs()
	if treeIndex != fmt.Sprint(a.Index) {
		t.Errorf("%s: tree ifindex %s, link %d", nd.Name, treeIndex, a.Index)
	}
	if nd.Type == virtualnode.ArphrdEther && treeAddr != a.HardwareAddr.String() {
		t.Errorf("%s: tree address %s, link %s", nd.Name, treeAddr, a.HardwareAddr)
	}
	waitOperState(t, h, nd)
	return a
}

// waitOperState waits for the link's operstate to reach the tree's: the
// kernel updates it from a work queue, shortly after a link changes.
func waitOperState(t *testing.T, h *netlink.Handle, nd *virtualnode.Netdev) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		link, err := h.LinkByName(nd.Name)
		if err != nil {
			t.Fatal(err)
		}
		// netlink spells "lowerlayerdown" as "lower-layer-down".
		if got = strings.ReplaceAll(link.Attrs().OperState.String(), "-", ""); got == nd.OperState {
			return
		}
	}
	t.Errorf("%s: operstate %s, tree says %s", nd.Name, got, nd.OperState)
}

// TestLinksDualPort: a DualPort function's second port is a real link
// too, beside the first, with dev_port 0 and 1 in the tree as mlx4 gives.
func TestLinksDualPort(t *testing.T) {
	vnodetest.RequireRoot(t)
	spec := rootSpec(t)
	spec.PFs, spec.NICs = []virtualnode.PFSpec{{Model: "ConnectX-3", LinkType: "ethernet", Names: []string{"ens1"}, DualPort: true, VFs: 1}}, nil
	n := build(t, spec, true)
	checkLinksMatchTree(t, n, netlinkIn(t, n))
	for name, port := range map[string]string{"ens1": "0", "ens1d1": "1"} {
		if got := readAttr(t, filepath.Join(n.SysRoot(), "class/net", name, "dev_port")); got != port {
			t.Errorf("%s: dev_port %q, want %q", name, got, port)
		}
	}
}

func TestLinks(t *testing.T) {
	vnodetest.RequireRoot(t)
	n := build(t, rootSpec(t), true)
	h := netlinkIn(t, n)
	checkLinksMatchTree(t, n, h)
	checkTree(t, n)
	mgmt, err := h.LinkByName("mgmt")
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := h.AddrList(mgmt, unix.AF_INET)
	if err != nil || len(addrs) != 1 || addrs[0].IPNet.String() != "10.255.0.2/24" {
		t.Errorf("mgmt addresses %v (%v), want 10.255.0.2/24", addrs, err)
	}
	routes, err := h.RouteList(nil, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(routes, func(r netlink.Route) bool { return isDefault(r) && r.LinkIndex == mgmt.Attrs().Index }) {
		t.Errorf("no default route via 10.255.0.1 on mgmt in %v", routes)
	}
}

// inside is what a program sees inside a node.
type inside struct {
	pciDevices []string
	address    string // of enp59s0f0v1 in /sys
	realMAC    string // of enp59s0f0v1 in netlink
	ipLink     string
	devErr     error // of reaching a VFIO group, a verbs device and /dev/null
}

func lookInside(ctx context.Context, vfioGroup int) (in inside, err error) {
	entries, err := os.ReadDir("/sys/bus/pci/devices")
	if err != nil {
		return in, err
	}
	for _, e := range entries {
		in.pciDevices = append(in.pciDevices, e.Name())
	}
	b, err := os.ReadFile("/sys/class/net/enp59s0f0v1/address")
	if err != nil {
		return in, err
	}
	in.address = strings.TrimSpace(string(b))
	link, err := netlink.LinkByName("enp59s0f0v1") // in this thread's netns
	if err != nil {
		return in, err
	}
	in.realMAC = link.Attrs().HardwareAddr.String()
	out, err := exec.CommandContext(ctx, "ip", "-o", "link").Output()
	in.ipLink = string(out)
	_, err1 := os.Stat(fmt.Sprintf("/dev/vfio/%d", vfioGroup))
	_, err2 := os.Stat("/dev/infiniband/uverbs0")
	in.devErr = errors.Join(err1, err2, os.WriteFile("/dev/null", []byte("x"), 0))
	return in, err
}

func TestRun(t *testing.T) {
	vnodetest.RequireRoot(t)
	n := build(t, rootSpec(t), true)
	ctx := context.Background()
	want, err := os.ReadDir(filepath.Join(n.SysRoot(), "bus/pci/devices"))
	if err != nil {
		t.Fatal(err)
	}
	vfio, _ := n.Device("0000:3b:01.6")
	var in inside
	if err := n.Run(ctx, func() (err error) { in, err = lookInside(ctx, vfio.IOMMUGroup); return err }); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(in.pciDevices, want, func(a string, b fs.DirEntry) bool { return a == b.Name() }) {
		t.Errorf("inside, /sys/bus/pci/devices lists %v, want %v", in.pciDevices, want)
	}
	vf := deviceByNetdev(t, n, "enp59s0f0v1")
	if in.address != in.realMAC || in.address != vf.Netdev.Address {
		t.Errorf("inside, enp59s0f0v1 has address %s in /sys, %s in netlink, %s in Devices", in.address, in.realMAC, vf.Netdev.Address)
	}
	for _, f := range n.Devices() {
		if f.Netdev != nil && !strings.Contains(in.ipLink, " "+f.Netdev.Name+"@") {
			t.Errorf("ip -o link inside does not list %s:\n%s", f.Netdev.Name, in.ipLink)
		}
	}
	if in.devErr != nil {
		t.Errorf("inside, /dev: %v", in.devErr)
	}
	checkHostSysfs(t)
}

// checkHostSysfs checks that the calling thread still sees the host's
// sysfs: the node's mount namespace stays on its own thread.
func checkHostSysfs(t *testing.T) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/sys", &st); err != nil || st.Type != unix.SYSFS_MAGIC {
		t.Errorf("/sys outside the node is no longer sysfs (%v)", err)
	}
}

func TestExec(t *testing.T) {
	vnodetest.RequireRoot(t)
	n := build(t, rootSpec(t), true)
	ctx := context.Background()
	var out strings.Builder
	cmd := exec.CommandContext(ctx, "sh", "-c", "cat /sys/bus/pci/devices/0000:3b:00.0/sriov_numvfs; ls /sys/class/net/enp59s0f0v0/device/physfn/net")
	cmd.Stdout = &out
	if err := n.Exec(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "8\nenp59s0f0\n"; got != want {
		t.Errorf("inside: %q, want %q", got, want)
	}
}

// TestQuietIPv6: the node's netns does no duplicate address detection or
// router solicitation, which would keep the kernel busy after a build,
// while the host's settings stay as they were.
func TestQuietIPv6(t *testing.T) {
	vnodetest.RequireRoot(t)
	const dad = "/proc/sys/net/ipv6/conf/default/accept_dad"
	host, err := os.ReadFile(dad)
	if err != nil {
		t.Skip("needs root and a kernel with IPv6:", err)
	}
	n := build(t, rootSpec(t), true)
	ctx := context.Background()
	var out strings.Builder
	cmd := exec.CommandContext(ctx, "sh", "-c", "cat "+dad+" /proc/sys/net/ipv6/conf/default/router_solicitations")
	cmd.Stdout = &out
	if err := n.Exec(ctx, cmd); err != nil {
		t.Fatal(err)
	}
	if out.String() != "0\n0\n" {
		t.Errorf("inside the node accept_dad and router_solicitations are %q, want 0 and 0", out.String())
	}
	if after, _ := os.ReadFile(dad); string(after) != string(host) {
		t.Errorf("host accept_dad changed from %q to %q", host, after)
	}
}

// TestMutationsWithLinks changes the hardware and checks that the links
// follow the tree.
func TestMutationsWithLinks(t *testing.T) {
	vnodetest.RequireRoot(t)
	n := build(t, rootSpec(t), true)
	h := netlinkIn(t, n)
	ctx := context.Background()
	steps := []struct {
		name    string
		op      func() error
		gone    []string
		present []string
	}{
		{"numvfs 4", func() error { return n.SetNumVFs(ctx, e810PF, 4) }, []string{"enp59s0f0v4", "enp59s0f0v7", "r3b01.5"}, []string{"enp59s0f0v3"}},
		{"numvfs 8", func() error { return n.SetNumVFs(ctx, e810PF, 8) }, nil, []string{"enp59s0f0v4", "enp59s0f0v7", "r3b01.7"}},
		{"to vfio-pci", func() error { return n.BindDriver(ctx, e810VF0, "vfio-pci") }, []string{"enp59s0f0v0", "r3b01.0"}, nil},
		{"back to iavf", func() error { return n.BindDriver(ctx, e810VF0, "iavf") }, nil, []string{"enp59s0f0v0", "r3b01.0"}},
		{"IB VF to vfio-pci", func() error { return n.BindDriver(ctx, ibVF0, "vfio-pci") }, []string{"ibp65s0f0v0"}, nil},
		{"link down", func() error { return n.SetLinkUp(ctx, "enp59s0f0v1", false) }, nil, []string{"enp59s0f0v1"}},
		{"link up", func() error { return n.SetLinkUp(ctx, "enp59s0f0v1", true) }, nil, []string{"enp59s0f0v1"}},
		{"remove VF", func() error { return n.RemoveVF(ctx, "0000:3b:01.2") }, []string{"enp59s0f0v2", "r3b01.2"}, nil},
		{"mgmt to vfio-pci", func() error { return n.BindDriver(ctx, "0000:43:00.0", "vfio-pci") }, []string{"mgmt"}, nil},
		{"mgmt back to igb", func() error { return n.BindDriver(ctx, "0000:43:00.0", "igb") }, nil, []string{"mgmt"}},
	}
	for _, s := range steps {
		if err := s.op(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for _, name := range s.gone {
			if _, err := h.LinkByName(name); err == nil {
				t.Errorf("%s: link %s still exists", s.name, name)
			}
		}
		for _, name := range s.present {
			if _, err := h.LinkByName(name); err != nil {
				t.Errorf("%s: link %s: %v", s.name, name, err)
			}
		}
		checkLinksMatchTree(t, n, h)
	}
	if routes, err := h.RouteList(nil, unix.AF_INET); err != nil || !slices.ContainsFunc(routes, isDefault) {
		t.Errorf("after mgmt came back, routes %v (%v) have no default route", routes, err)
	}
	checkTree(t, n)
}

func isDefault(r netlink.Route) bool {
	return (r.Dst == nil || r.Dst.String() == "0.0.0.0/0") && r.Gw.String() == "10.255.0.1"
}

// destroyEnv names the state directory that the test binary, run as a
// helper process, opens and destroys.
const destroyEnv = "HWNET_VIRTUALNODE_DESTROY"

// deleteNetnsEnv names the netns that the test binary, run as a helper
// process, deletes as Destroy does, printing the error.
const deleteNetnsEnv = "HWNET_VIRTUALNODE_DELETE_NETNS"

func TestMain(m *testing.M) {
	if name := os.Getenv(deleteNetnsEnv); name != "" {
		if err := virtualnode.DeleteNetns(name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if dir := os.Getenv(destroyEnv); dir != "" {
		if err := destroyDir(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func destroyDir(dir string) error {
	n, err := virtualnode.Open(dir)
	if err != nil {
		return err
	}
	return n.Destroy()
}

// TestDestroyLeavesNothing destroys a node from another process, as
// `hwnetctl virtual-node destroy` does, and checks that no link, netns,
// mount or file is left.
func TestDestroyLeavesNothing(t *testing.T) {
	vnodetest.RequireRoot(t)
	spec := rootSpec(t)
	n, err := virtualnode.Build(context.Background(), spec, vnodetest.OpenDB(t), virtualnode.Options{Dir: vnodetest.Dir(t), Links: true})
	if err != nil {
		t.Fatal(err)
	}
	// Only the node's own mounts count: packages tested at once mount
	// theirs in the same namespace.
	netnsFile := filepath.Join(virtualnode.NetnsDir, virtualnode.NetnsPrefix+spec.Name)
	if own := ownMounts(t, n.Dir(), netnsFile); len(own) == 0 {
		t.Fatalf("no mount under %s or at %s after Build", n.Dir(), netnsFile)
	}
	if err := n.Exec(context.Background(), exec.Command("true")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), destroyEnv+"="+n.Dir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("destroy in another process: %v\n%s", err, out)
	}
	if err := n.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if _, err := os.Stat(netnsFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("netns %s%s is still there: %v", virtualnode.NetnsPrefix, spec.Name, err)
	}
	if _, err := os.Stat(n.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state directory %s is still there: %v", n.Dir(), err)
	}
	if own := ownMounts(t, n.Dir(), netnsFile); len(own) != 0 {
		t.Errorf("mounts left after Destroy: %v", own)
	}
}

// ownMounts lists the mount points under dir or at file.
func ownMounts(t *testing.T, dir, file string) []string {
	t.Helper()
	return slices.DeleteFunc(mountPoints(t), func(p string) bool {
		return p != file && p != dir && !strings.HasPrefix(p, dir+"/")
	})
}

// mountPoints lists this process's mount points, sorted.
func mountPoints(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			points = append(points, fields[4])
		}
	}
	slices.Sort(points)
	return points
}
