package virtualnode_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"

	"github.com/hwnet-io/hwnet/hwdb"
)

// checkTree checks what every tree must hold, whatever its spec.
func checkTree(t *testing.T, n *virtualnode.Node) {
	t.Helper()
	checkLinks(t, n.SysRoot())
	entries, err := os.ReadDir(filepath.Join(n.SysRoot(), "bus/pci/devices"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		checkPCIFunction(t, n, e.Name())
	}
	checkDevicesMatchTree(t, n)
}

// checkLinks checks that every symlink is relative, resolves inside the
// tree and ends with its target's name, as the kernel writes them.
func checkLinks(t *testing.T, sys string) {
	t.Helper()
	err := filepath.WalkDir(sys, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return err
		}
		target, err := os.Readlink(path)
		if err != nil {
			return err
		}
		resolved := filepath.Join(filepath.Dir(path), target)
		switch {
		case filepath.IsAbs(target):
			t.Errorf("%s -> %s is absolute", path, target)
		case !strings.HasPrefix(resolved, sys+"/"):
			t.Errorf("%s -> %s leaves the tree", path, target)
		case filepath.Base(target) != filepath.Base(resolved):
			t.Errorf("%s -> %s does not end with its target's name", path, target)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s -> %s does not resolve: %v", path, target, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkPCIFunction checks one function's attributes against each other and
// against the links that lead to it.
func checkPCIFunction(t *testing.T, n *virtualnode.Node, addr string) {
	t.Helper()
	dir := filepath.Join(n.SysRoot(), "bus/pci/devices", addr)
	attr := func(name string) string { return readAttr(t, filepath.Join(dir, name)) }
	vendor, device, class := attr("vendor"), attr("device"), attr("class")
	want := fmt.Sprintf("pci:v0000%sd0000%ssv0000%ssd0000%sbc%ssc%si%s", vendor[2:], device[2:],
		attr("subsystem_vendor")[2:], attr("subsystem_device")[2:], class[2:4], class[4:6], class[6:8])
	if got := attr("modalias"); !strings.EqualFold(got, want) {
		t.Errorf("%s: modalias %s, want %s", addr, got, want)
	}
	checkConfig(t, addr, []byte(attr("config")), vendor, device, class)
	group := linkBase(t, filepath.Join(dir, "iommu_group"))
	sameFile(t, dir, filepath.Join(n.SysRoot(), "kernel/iommu_groups", group, "devices", addr))
	node := attr("numa_node")
	if got, want := attr("local_cpulist"), readAttr(t, filepath.Join(n.SysRoot(), "devices/system/node/node"+node, "cpulist")); got != want {
		t.Errorf("%s: local_cpulist %s, NUMA node %s has %s", addr, got, node, want)
	}
	driver := driverOf(t, dir)
	if driver != "" {
		sameFile(t, dir, filepath.Join(n.SysRoot(), "bus/pci/drivers", driver, addr))
	}
	if _, err := os.Stat(filepath.Join(dir, "sriov_totalvfs")); err == nil {
		checkVirtfns(t, n, dir, addr)
	}
	checkBinding(t, n, dir, driver, group)
}

func checkConfig(t *testing.T, addr string, config []byte, vendor, device, class string) {
	t.Helper()
	if len(config) != 256 {
		t.Fatalf("%s: config has %d bytes, want 256", addr, len(config))
	}
	got := fmt.Sprintf("0x%04x 0x%04x 0x%02x%02x%02x", binary.LittleEndian.Uint16(config[0:]),
		binary.LittleEndian.Uint16(config[2:]), config[0xb], config[0xa], config[0x9])
	if want := vendor + " " + device + " " + class; got != want {
		t.Errorf("%s: config says %s, files say %s", addr, got, want)
	}
}

// checkVirtfns checks a PF's VFs: each virtfnN sits at the routing ID
// offset and stride give, and its physfn leads back.
func checkVirtfns(t *testing.T, n *virtualnode.Node, dir, addr string) {
	t.Helper()
	num, offset, stride := attrInt(t, dir, "sriov_numvfs"), attrInt(t, dir, "sriov_offset"), attrInt(t, dir, "sriov_stride")
	if total := attrInt(t, dir, "sriov_totalvfs"); num > total {
		t.Errorf("%s: sriov_numvfs %d above sriov_totalvfs %d", addr, num, total)
	}
	links, _ := filepath.Glob(filepath.Join(dir, "virtfn*"))
	if len(links) > num {
		t.Errorf("%s: %d virtfn links, sriov_numvfs is %d", addr, len(links), num)
	}
	pfRID, err := virtualnode.ParseRoutingID(addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		i, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(l), "virtfn"))
		if err != nil || i >= num {
			t.Errorf("%s: unexpected %s", addr, l)
			continue
		}
		want := (pfRID + virtualnode.RoutingID(offset+stride*i)).Addr()
		if got := linkBase(t, l); got != want {
			t.Errorf("%s: virtfn%d -> %s, offset %d and stride %d put it at %s", addr, i, got, offset, stride, want)
		}
		sameFile(t, dir, filepath.Join(l, "physfn"))
	}
}

// checkBinding checks what the driver brings: vfio-pci a group device and
// no netdev, a UIO driver a UIO device and no netdev, a netdev driver one
// netdev in class/net.
func checkBinding(t *testing.T, n *virtualnode.Node, dir, driver, group string) {
	t.Helper()
	netdevs, _ := os.ReadDir(filepath.Join(dir, "net"))
	_, vfioErr := os.Stat(filepath.Join(n.DevRoot(), "vfio", group))
	uios, _ := os.ReadDir(filepath.Join(dir, "uio"))
	if virtualnode.IsUIODriver(driver) {
		if len(netdevs) != 0 || vfioErr == nil || len(uios) != 1 {
			t.Fatalf("%s on %s: %d netdevs, /dev/vfio/%s: %v, %d UIO devices", dir, driver, len(netdevs), group, vfioErr, len(uios))
		}
		checkUIO(t, n, dir, driver, uios[0].Name())
		return
	}
	if len(uios) != 0 {
		t.Errorf("%s on %q: %d UIO devices, want none", dir, driver, len(uios))
	}
	switch driver {
	case "vfio-pci":
		if len(netdevs) != 0 || vfioErr != nil {
			t.Errorf("%s on vfio-pci: %d netdevs, /dev/vfio/%s: %v", dir, len(netdevs), group, vfioErr)
		}
		return
	case "pcieport":
		return
	case "":
		if len(netdevs) != 0 || vfioErr == nil {
			t.Errorf("%s unbound: %d netdevs, /dev/vfio/%s exists", dir, len(netdevs), group)
		}
		return
	}
	if len(netdevs) != 1 || vfioErr == nil {
		t.Fatalf("%s on %s: %d netdevs, /dev/vfio/%s exists", dir, driver, len(netdevs), group)
	}
	nd := filepath.Join(dir, "net", netdevs[0].Name())
	sameFile(t, nd, filepath.Join(n.SysRoot(), "class/net", netdevs[0].Name()))
	addrLen, typ := attrInt(t, nd, "addr_len"), readAttr(t, filepath.Join(nd, "type"))
	if got := len(strings.Split(readAttr(t, filepath.Join(nd, "address")), ":")); got != addrLen || addrLen == 20 != (typ == "32") {
		t.Errorf("%s: %d-byte address, addr_len %d, type %s", nd, got, addrLen, typ)
	}
	if _, err := os.Stat(filepath.Join(dir, "infiniband")); err == nil {
		checkRDMA(t, n, dir)
	}
}

func checkRDMA(t *testing.T, n *virtualnode.Node, dir string) {
	t.Helper()
	devs, _ := os.ReadDir(filepath.Join(dir, "infiniband"))
	verbs, _ := os.ReadDir(filepath.Join(dir, "infiniband_verbs"))
	if len(devs) != 1 || len(verbs) != 1 {
		t.Fatalf("%s: %d RDMA devices and %d verbs devices, want 1 each", dir, len(devs), len(verbs))
	}
	rd := filepath.Join(dir, "infiniband", devs[0].Name())
	sameFile(t, rd, filepath.Join(n.SysRoot(), "class/infiniband", devs[0].Name()))
	if gid := readAttr(t, filepath.Join(rd, "ports/1/gids/0")); !strings.HasPrefix(gid, "fe80:0000:0000:0000:") || len(gid) != 39 {
		t.Errorf("%s: GID 0 %q is not link-local", rd, gid)
	}
	for _, node := range []string{verbs[0].Name(), "rdma_cm"} {
		if _, err := os.Stat(filepath.Join(n.DevRoot(), "infiniband", node)); err != nil {
			t.Error(err)
		}
	}
	checkMAD(t, n, dir, devs[0].Name())
}

// checkMAD checks the port's umadN and issmN: one N for both, the RDMA
// device and port they serve, the minors the kernel gives them, the class
// links and the device nodes.
func checkMAD(t *testing.T, n *virtualnode.Node, dir, rdmaDev string) {
	t.Helper()
	mads, _ := os.ReadDir(filepath.Join(dir, "infiniband_mad"))
	if len(mads) != 2 {
		t.Fatalf("%s: %d infiniband_mad devices, want umadN and issmN", dir, len(mads))
	}
	num := strings.TrimPrefix(mads[1].Name(), "umad")
	minor, err := strconv.Atoi(num)
	if err != nil || mads[0].Name() != "issm"+num {
		t.Fatalf("%s: infiniband_mad has %s and %s, want issmN and umadN", dir, mads[0].Name(), mads[1].Name())
	}
	for _, m := range []struct {
		name  string
		minor int
	}{{"umad" + num, minor}, {"issm" + num, 64 + minor}} {
		md := filepath.Join(dir, "infiniband_mad", m.name)
		got := readAttr(t, filepath.Join(md, "ibdev")) + " port " + readAttr(t, filepath.Join(md, "port")) + " dev " + readAttr(t, filepath.Join(md, "dev"))
		if want := fmt.Sprintf("%s port 1 dev 231:%d", rdmaDev, m.minor); got != want {
			t.Errorf("%s: %s, want %s", md, got, want)
		}
		sameFile(t, md, filepath.Join(n.SysRoot(), "class/infiniband_mad", m.name))
		sameFile(t, dir, filepath.Join(md, "device"))
		if _, err := os.Stat(filepath.Join(n.DevRoot(), "infiniband", m.name)); err != nil {
			t.Error(err)
		}
	}
}

// checkUIO checks a UIO device: its attributes, class link and /dev node.
func checkUIO(t *testing.T, n *virtualnode.Node, dir, driver, name string) {
	t.Helper()
	ud := filepath.Join(dir, "uio", name)
	got := readAttr(t, filepath.Join(ud, "name")) + " dev " + readAttr(t, filepath.Join(ud, "dev"))
	if want := fmt.Sprintf("%s dev 239:%s", driver, strings.TrimPrefix(name, "uio")); got != want {
		t.Errorf("%s: %s, want %s", ud, got, want)
	}
	sameFile(t, ud, filepath.Join(n.SysRoot(), "class/uio", name))
	sameFile(t, dir, filepath.Join(ud, "device"))
	if _, err := os.Stat(filepath.Join(n.DevRoot(), name)); err != nil {
		t.Error(err)
	}
}

// checkDevicesMatchTree checks that Devices describes what the tree shows.
func checkDevicesMatchTree(t *testing.T, n *virtualnode.Node) {
	t.Helper()
	for _, f := range n.Devices() {
		dir := filepath.Join(n.SysRoot(), f.SysPath)
		sameFile(t, dir, filepath.Join(n.SysRoot(), "bus/pci/devices", f.Addr))
		got := fmt.Sprintf("driver %s numa %s group %s", driverOf(t, dir),
			readAttr(t, filepath.Join(dir, "numa_node")), linkBase(t, filepath.Join(dir, "iommu_group")))
		if want := fmt.Sprintf("driver %s numa %d group %d", f.Driver, f.NUMA, f.IOMMUGroup); got != want {
			t.Errorf("%s: tree has %s, Devices says %s", f.Addr, got, want)
		}
		if f.Netdev == nil {
			continue
		}
		nd := filepath.Join(dir, "net", f.Netdev.Name)
		got = readAttr(t, filepath.Join(nd, "address")) + " " + readAttr(t, filepath.Join(nd, "ifindex")) + " " + readAttr(t, filepath.Join(nd, "operstate"))
		if want := fmt.Sprintf("%s %d %s", f.Netdev.Address, f.Netdev.Index, f.Netdev.OperState); got != want {
			t.Errorf("%s: tree has %s, Devices says %s", nd, got, want)
		}
	}
}

// driverOf returns the name of the driver bound to the function in dir,
// or "" when none is.
func driverOf(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(dir, "driver")); err != nil {
		return ""
	}
	return linkBase(t, filepath.Join(dir, "driver"))
}

func linkBase(t *testing.T, path string) string {
	t.Helper()
	target, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(target)
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA != nil || errB != nil || !os.SameFile(fa, fb) {
		t.Errorf("%s and %s are not the same file (%v, %v)", a, b, errA, errB)
	}
}

func attrInt(t *testing.T, dir, name string) int {
	t.Helper()
	v, err := strconv.Atoi(readAttr(t, filepath.Join(dir, name)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDefaultTree(t *testing.T) {
	n := build(t, virtualnode.DefaultSpec(), false)
	checkTree(t, n)
	tests := []struct {
		addr, pf, driver, netdev, rdma string
		vfIndex, numa                  int
		class                          uint32
	}{
		{addr: "0000:3b:00.0", driver: "ice", netdev: "enp59s0f0", class: virtualnode.ClassEthernet},
		{addr: "0000:3b:01.3", pf: "0000:3b:00.0", vfIndex: 3, driver: "iavf", netdev: "enp59s0f0v3", class: virtualnode.ClassEthernet},
		{addr: "0000:3b:01.6", pf: "0000:3b:00.0", vfIndex: 6, driver: "vfio-pci", class: virtualnode.ClassEthernet},
		{addr: "0000:3e:00.0", driver: "ice", netdev: "enp62s0f0", numa: 1, class: virtualnode.ClassEthernet},
		{addr: "0000:3e:01.7", pf: "0000:3e:00.0", vfIndex: 7, driver: "vfio-pci", numa: 1, class: virtualnode.ClassEthernet},
		{addr: "0000:41:00.0", driver: "mlx5_core", netdev: "ibp65s0f0", rdma: "mlx5_0", class: virtualnode.ClassInfiniBand},
		{addr: "0000:41:01.1", pf: "0000:41:00.0", vfIndex: 1, driver: "mlx5_core", netdev: "ibp65s0f0v1", rdma: "mlx5_2", class: virtualnode.ClassInfiniBand},
		{addr: "0000:43:00.0", driver: "igb", netdev: "mgmt", class: virtualnode.ClassEthernet},
	}
	for _, tt := range tests {
		f, ok := n.Device(tt.addr)
		if !ok {
			t.Errorf("no device %s", tt.addr)
			continue
		}
		got := fmt.Sprintf("pf %q vf %d driver %s netdev %q rdma %q numa %d class %#06x",
			f.PF, f.VFIndex, f.Driver, netdevName(f.Netdev), rdmaName(f.RDMA), f.NUMA, f.Class)
		want := fmt.Sprintf("pf %q vf %d driver %s netdev %q rdma %q numa %d class %#06x",
			tt.pf, tt.vfIndex, tt.driver, tt.netdev, tt.rdma, tt.numa, tt.class)
		if got != want {
			t.Errorf("%s:\n got %s\nwant %s", tt.addr, got, want)
		}
	}
	if got := len(n.Devices()); got != 3+2*8+4+1 {
		t.Errorf("%d devices, want 24", got)
	}
}

func netdevName(nd *virtualnode.Netdev) string {
	if nd == nil {
		return ""
	}
	return nd.Name
}

func rdmaName(d *virtualnode.RDMADevice) string {
	if d == nil {
		return ""
	}
	return d.Name
}

func TestIPoIBAddresses(t *testing.T) {
	n := build(t, virtualnode.DefaultSpec(), false)
	for _, f := range n.Devices() {
		if f.LinkType != hwdb.InfiniBand || f.Netdev == nil {
			continue
		}
		b, err := parseHardwareAddr(f.Netdev.Address)
		if err != nil || len(b) != 20 || !bytes.Equal(b[4:12], []byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0}) {
			t.Errorf("%s: IPoIB address %s (%v) is not 20 bytes with a link-local GID", f.Addr, f.Netdev.Address, err)
			continue
		}
		// The address ends with the port GUID that GID 0 also carries.
		guid := fmt.Sprintf("%x:%x:%x:%x", b[12:14], b[14:16], b[16:18], b[18:20])
		if f.RDMA == nil || f.RDMA.PortGUID != guid {
			t.Errorf("%s: address GUID %s, RDMA device %+v", f.Addr, guid, f.RDMA)
		}
		dir := filepath.Join(n.SysRoot(), f.SysPath, "net", f.Netdev.Name)
		if got := readAttr(t, filepath.Join(dir, "addr_len")) + "/" + readAttr(t, filepath.Join(dir, "type")); got != "20/32" {
			t.Errorf("%s: addr_len/type %s, want 20/32", dir, got)
		}
	}
}

func parseHardwareAddr(s string) ([]byte, error) {
	var b []byte
	for part := range strings.SplitSeq(s, ":") {
		v, err := strconv.ParseUint(part, 16, 8)
		if err != nil {
			return nil, err
		}
		b = append(b, byte(v))
	}
	return b, nil
}

// TestRouting builds the big layouts benchmarks and tests use, and odd
// offsets and strides: VFs spill into the following buses and the next
// NIC takes the bus after the PF's last possible VF.
func TestRouting(t *testing.T) {
	tests := []struct {
		name, spec string
		present    []string
	}{
		{
			name:    "1 PF x 2048 VFs",
			spec:    "name: big\npfs: [{model: E810-C, vfs: 2048}]\nnics: [{vendor: \"8086\", device: \"1521\", driver: igb}]",
			present: []string{"0000:3b:01.0", "0000:3c:00.0", "0000:43:00.7", "0000:45:00.0"},
		},
		{
			name:    "16 PFs x 128 VFs",
			spec:    "name: wide\npfs: [{model: E810-C, count: 16, vfs: 128, totalVFs: 128, numa: [0, 1]}]",
			present: []string{"0000:3b:10.7", "0000:3d:00.0", "0000:59:00.0", "0000:59:10.7"},
		},
		{
			name:    "offset 2, stride 4",
			spec:    "name: odd\npfs: [{model: ConnectX-6, vfs: 70, totalVFs: 70, vfOffset: 2, vfStride: 4, vfio: 1-2}]\nnics: [{name: m, vendor: \"8086\", device: \"1521\", driver: igb}]",
			present: []string{"0000:3b:00.2", "0000:3b:00.6", "0000:3c:02.6", "0000:3e:00.0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := build(t, mustParse(t, tt.spec), false)
			checkTree(t, n)
			for _, addr := range tt.present {
				if _, ok := n.Device(addr); !ok {
					t.Errorf("no device at %s", addr)
				}
			}
		})
	}
}

// TestIdentities checks that MACs and GUIDs are unique within a node,
// the same for every build of a node and different between nodes.
func TestIdentities(t *testing.T) {
	db := vnodetest.OpenDB(t)
	ids := func(name string) map[string]string {
		spec := virtualnode.DefaultSpec()
		spec.Name = name
		st, err := virtualnode.Plan(spec, db)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, f := range st.Functions {
			for _, id := range identities(f) {
				if other, dup := seen[id]; dup {
					t.Errorf("%s: %s is also %s's", f.Addr, id, other)
				}
				seen[id] = f.Addr
			}
		}
		return seen
	}
	a, again, b := ids("a"), ids("a"), ids("b")
	for id := range a {
		if _, ok := again[id]; !ok {
			t.Errorf("%s changed between builds", id)
		}
		if _, ok := b[id]; ok {
			t.Errorf("%s is in two nodes", id)
		}
	}
}

func identities(f *virtualnode.Function) []string {
	var ids []string
	if f.Netdev != nil {
		ids = append(ids, f.Netdev.Address, f.Representor.Address)
	}
	if f.RDMA != nil {
		ids = append(ids, "guid "+f.RDMA.PortGUID)
	}
	return ids
}
