package virtualnode

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/hwdb"
)

// layout writes a node's state into its tree the way the kernel lays out
// sysfs: device directories under devices/, and bus, class and kernel
// directories of relative symlinks to them.
type layout struct {
	*tree
	st *state
}

// cpusPerNode is how many CPUs each virtual NUMA node has.
const cpusPerNode = 8

// Netdev attribute values the kernel prints.
const (
	ethernetBroadcast = "ff:ff:ff:ff:ff:ff\n"
	ipoibBroadcast    = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff\n"
	// The InfiniBand character devices share major 231: umadN has minor
	// N, issmN 64+N and uverbsN 192+N.
	infinibandMajor = 231
	issmMinorBase   = 64
	uverbsMinorBase = 192
	// uioMajor is the major the kernel allocates to UIO at run time.
	uioMajor = 239
)

// writeSkeleton writes what every node has, whatever its NICs.
func (l layout) writeSkeleton() {
	for _, d := range []string{
		"", "bus", "bus/pci", "bus/pci/devices", "bus/pci/drivers", "bus/pci/slots",
		"bus/auxiliary", "bus/auxiliary/devices", "bus/auxiliary/drivers",
		"class", "class/net", "class/infiniband", "class/infiniband_verbs", "class/infiniband_mad", "class/uio",
		"devices", "devices/system", "devices/system/cpu", "devices/system/node",
		"devices/virtual", "devices/virtual/net", "kernel", "kernel/iommu_groups",
	} {
		l.dir(d)
	}
	l.file("bus/pci/drivers_autoprobe", "1\n")
	l.file("bus/pci/drivers_probe", "")
	l.file("bus/pci/rescan", "")
	l.file("class/infiniband_verbs/abi_version", "6\n")
	l.file("class/infiniband_mad/abi_version", "5\n")
	l.writeNUMANodes()
	l.writeLoopback()
	l.devDir("")
	l.devDir("vfio")
	l.devDir("infiniband")
	l.devFile("vfio/vfio")
}

// writeNUMANodes writes devices/system/node and the CPU lists it refers to.
func (l layout) writeNUMANodes() {
	n := l.st.NUMANodes
	online := fmt.Sprintf("0-%d\n", n-1)
	for _, f := range []string{"online", "possible", "has_cpu", "has_memory", "has_normal_memory"} {
		l.file("devices/system/node/"+f, online)
	}
	for i := range n {
		d := "devices/system/node/node" + strconv.Itoa(i)
		l.dir(d)
		l.file(d+"/cpulist", cpuList(i))
		l.file(d+"/cpumap", cpuMask(i, n))
		l.file(d+"/distance", nodeDistances(i, n))
	}
	cpus := fmt.Sprintf("0-%d\n", n*cpusPerNode-1)
	for _, f := range []string{"online", "possible", "present"} {
		l.file("devices/system/cpu/"+f, cpus)
	}
}

// nodeDistances is a NUMA node's distance line: 10 to itself, 21 to the
// others, as on two-socket hosts.
func nodeDistances(node, nodes int) string {
	d := make([]string, nodes)
	for i := range d {
		d[i] = "21"
	}
	d[node] = "10"
	return strings.Join(d, " ") + "\n"
}

// cpuList is a NUMA node's CPU list, "8-15".
func cpuList(node int) string {
	return fmt.Sprintf("%d-%d\n", node*cpusPerNode, (node+1)*cpusPerNode-1)
}

// localCPUs is a function's local_cpulist: its NUMA node's CPUs, or all
// of them for a function of no node (-1), as on a single-socket host.
func (l layout) localCPUs(node int) string {
	if node < 0 {
		return fmt.Sprintf("0-%d\n", l.st.NUMANodes*cpusPerNode-1)
	}
	return cpuList(node)
}

// cpuMask is a NUMA node's CPUs as the kernel prints a cpumask: 32-bit hex
// words, most significant first, the first cut to the CPU count.
func cpuMask(node, nodes int) string {
	ncpu := nodes * cpusPerNode
	words := make([]uint32, (ncpu+31)/32)
	for c := node * cpusPerNode; c < (node+1)*cpusPerNode; c++ {
		words[c/32] |= 1 << (c % 32)
	}
	var b strings.Builder
	for i := len(words) - 1; i >= 0; i-- {
		digits := 8
		if i == len(words)-1 && ncpu%32 != 0 {
			digits = (ncpu%32 + 3) / 4
		}
		fmt.Fprintf(&b, "%0*x", digits, words[i])
		if i > 0 {
			b.WriteByte(',')
		}
	}
	b.WriteByte('\n')
	return b.String()
}

func (l layout) writeLoopback() {
	lo := &Netdev{Name: "lo", Index: 1, Address: "00:00:00:00:00:00", Type: 772, MTU: 65536, Up: true, OperState: "unknown"}
	dir := "devices/virtual/net/lo"
	l.dir(dir)
	l.writeNetdevAttrs(dir, lo, 0)
	l.link(dir+"/subsystem", "class/net")
	l.link("class/net/lo", dir)
}

// writeFunction writes a new function's directory and every link to it.
func (l layout) writeFunction(f *Function) {
	if !f.IsVF() {
		l.dir(parentDir(f.SysPath)) // the host bridge, pci0000:XX, or one that exists
	}
	l.dir(f.SysPath)
	l.writePCIAttrs(f)
	l.link(f.SysPath+"/subsystem", "bus/pci")
	l.link("bus/pci/devices/"+f.Addr, f.SysPath)
	if f.IOMMUGroup != noIOMMUGroup {
		group := l.iommuGroupDir(f)
		l.dir(group)
		l.dir(group + "/devices")
		l.file(group+"/type", "DMA\n")
		l.link(group+"/devices/"+f.Addr, f.SysPath)
		l.link(f.SysPath+"/iommu_group", group)
	}
	if f.SRIOV != nil {
		l.writeSRIOV(f)
	}
	if f.IsVF() {
		l.link(f.SysPath+"/physfn", parentDir(f.SysPath)+"/"+f.PF)
	}
	l.writeBinding(f)
	if pf := l.st.iovPF(f); f.IsVF() && pf != nil {
		l.writeVFIOV(pf, f)
	}
	if f.IsVF() {
		// Last, as the kernel has the VF probed before its write to
		// sriov_numvfs returns: whoever sees the link sees the VF bound.
		l.link(parentDir(f.SysPath)+"/"+f.PF+"/virtfn"+strconv.Itoa(f.VFIndex), f.SysPath)
	}
}

// removeFunction undoes writeFunction, as a hot-unplug does.
func (l layout) removeFunction(f *Function) {
	l.removeBinding(f)
	if f.IsVF() {
		l.remove(parentDir(f.SysPath) + "/" + f.PF + "/virtfn" + strconv.Itoa(f.VFIndex))
	}
	if pf := l.st.iovPF(f); f.IsVF() && pf != nil {
		l.remove(pf.iovDir() + "/" + f.Addr)
	}
	l.remove("bus/pci/devices/" + f.Addr)
	if f.IOMMUGroup != noIOMMUGroup {
		l.remove(l.iommuGroupDir(f))
	}
	l.remove(f.SysPath)
}

func (l layout) iommuGroupDir(f *Function) string {
	return "kernel/iommu_groups/" + strconv.Itoa(f.IOMMUGroup)
}

// writePCIAttrs writes the attributes every PCI function has.
func (l layout) writePCIAttrs(f *Function) {
	p := f.SysPath + "/"
	l.file(p+"vendor", hexAttr(uint32(f.Vendor), 4))
	l.file(p+"device", hexAttr(uint32(f.Device), 4))
	l.file(p+"subsystem_vendor", hexAttr(uint32(f.SubsystemVendor), 4))
	l.file(p+"subsystem_device", hexAttr(uint32(f.SubsystemDevice), 4))
	l.file(p+"class", hexAttr(f.Class, 6))
	l.file(p+"revision", hexAttr(uint32(f.Revision), 2))
	l.file(p+"numa_node", strconv.Itoa(f.NUMA)+"\n")
	l.file(p+"local_cpulist", l.localCPUs(f.NUMA))
	l.file(p+"modalias", modalias(f)+"\n")
	l.file(p+"config", configSpace(f))
}

// hexAttr formats an ID attribute as the kernel does, "0x8086\n".
func hexAttr(v uint32, digits int) string {
	return fmt.Sprintf("0x%0*x\n", digits, v)
}

// modalias is the kernel's PCI modalias, which ghw needs on every device:
// pci:v00008086d00001592sv00008086sd00000001bc02sc00i00.
func modalias(f *Function) string {
	return fmt.Sprintf("pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02X",
		uint32(f.Vendor), uint32(f.Device), uint32(f.SubsystemVendor), uint32(f.SubsystemDevice),
		f.Class>>16, f.Class>>8&0xff, f.Class&0xff)
}

// configSpace is the function's 256-byte configuration space: IDs, class
// and header matching the attribute files, and a PCI Express capability.
func configSpace(f *Function) string {
	var c [256]byte
	binary.LittleEndian.PutUint16(c[0x00:], uint16(f.Vendor))
	binary.LittleEndian.PutUint16(c[0x02:], uint16(f.Device))
	binary.LittleEndian.PutUint16(c[0x04:], 0x0006) // command: memory space, bus master
	binary.LittleEndian.PutUint16(c[0x06:], 0x0010) // status: capability list
	c[0x08] = f.Revision
	c[0x09], c[0x0a], c[0x0b] = byte(f.Class), byte(f.Class>>8), byte(f.Class>>16)
	pcieType := byte(0) // endpoint
	switch {
	case f.Bridge != nil:
		c[0x0e] = 0x01 // type 1 header
		rid, _ := parseRoutingID(f.Addr)
		c[0x18], c[0x19], c[0x1a] = byte(rid.bus()), byte(f.Bridge.Secondary), byte(f.Bridge.Subordinate)
		pcieType = 4 // root port
	case f.SRIOV != nil:
		c[0x0e] = 0x80 // multi-function, as dual-port SR-IOV NICs are
	}
	if f.Bridge == nil {
		binary.LittleEndian.PutUint16(c[0x2c:], uint16(f.SubsystemVendor))
		binary.LittleEndian.PutUint16(c[0x2e:], uint16(f.SubsystemDevice))
	}
	c[0x34] = 0x40
	c[0x40] = 0x10 // PCI Express capability, last in the list
	binary.LittleEndian.PutUint16(c[0x42:], uint16(pcieType)<<4|2)
	return string(c[:])
}

// writeSRIOV writes a PF's SR-IOV attributes.
func (l layout) writeSRIOV(f *Function) {
	p, sr := f.SysPath+"/", f.SRIOV
	l.file(p+"sriov_totalvfs", strconv.Itoa(sr.TotalVFs)+"\n")
	l.file(p+"sriov_numvfs", strconv.Itoa(sr.NumVFs)+"\n")
	l.file(p+"sriov_offset", strconv.Itoa(sr.Offset)+"\n")
	l.file(p+"sriov_stride", strconv.Itoa(sr.Stride)+"\n")
	l.file(p+"sriov_vf_device", fmt.Sprintf("%x\n", uint16(sr.VFDevice)))
	l.file(p+"sriov_drivers_autoprobe", "1\n")
}

// writeBinding writes what the bound driver brings: the driver links, a
// VFIO group device, or a netdev with its representor and RDMA device.
func (l layout) writeBinding(f *Function) {
	p := f.SysPath + "/"
	l.file(p+"uevent", uevent(f))
	// A function made with a user-space driver got it through an
	// override; after that only a write changes the override, as in the
	// kernel, whatever binds or unbinds.
	if !l.exists(p + "driver_override") {
		override := "(null)\n"
		if f.Driver == driverVFIO || isUIODriver(f.Driver) {
			override = f.Driver + "\n"
		}
		l.file(p+"driver_override", override)
	}
	if f.Driver != "" {
		drv := "bus/pci/drivers/" + f.Driver
		l.ensureDriver(drv)
		l.link(p+"driver", drv)
		l.link(drv+"/"+f.Addr, f.SysPath)
	}
	if f.Driver == driverVFIO && f.IOMMUGroup != noIOMMUGroup {
		l.devFile("vfio/" + strconv.Itoa(f.IOMMUGroup))
	}
	if f.UIO != nil {
		l.writeUIO(f)
	}
	if f.Netdev != nil {
		l.writeNetdev(f)
		l.writeRepresentor(f)
	}
	if f.Port2 != nil {
		l.writePort2(f)
	}
	if f.RDMA != nil {
		l.writeRDMA(f.rdmaHolder())
	}
	if f.hasIOV() {
		l.writeIOV(f)
	}
	for _, sf := range f.SFs {
		l.writeSF(f, sf)
	}
}

// removeBinding undoes writeBinding, as unbinding the driver does.
func (l layout) removeBinding(f *Function) {
	if f.Driver != "" {
		l.remove(f.SysPath + "/driver")
		l.remove("bus/pci/drivers/" + f.Driver + "/" + f.Addr)
	}
	if f.Driver == driverVFIO {
		l.devRemove("vfio/" + strconv.Itoa(f.IOMMUGroup))
	}
	if f.UIO != nil {
		l.removeUIO(f)
	}
	if f.Netdev != nil {
		l.remove("class/net/" + f.Netdev.Name)
		l.remove(f.netdevParent() + "/net")
		if f.Wireless {
			l.remove(f.netdevParent() + "/ieee80211")
		}
		if f.NetdevUnder != "" {
			l.remove(f.netdevParent())
		}
		l.remove("class/net/" + f.Representor.Name)
		l.remove(representorDir(f.Representor))
	}
	if f.Port2 != nil {
		l.remove("class/net/" + f.Port2.Name)
		l.remove("class/net/" + f.Port2Peer.Name)
		l.remove(representorDir(f.Port2Peer))
	}
	if f.RDMA != nil {
		l.removeRDMA(f.rdmaHolder())
	}
	for _, sf := range f.SFs {
		l.removeSF(sf)
	}
}

// ensureDriver makes a driver's directory the first time a function binds
// to it.
func (l layout) ensureDriver(drv string) {
	if l.exists(drv) {
		return
	}
	l.dir(drv)
	for _, f := range []string{"bind", "unbind", "new_id", "remove_id", "uevent"} {
		l.file(drv+"/"+f, "")
	}
}

func uevent(f *Function) string {
	var b strings.Builder
	if f.Driver != "" {
		fmt.Fprintf(&b, "DRIVER=%s\n", f.Driver)
	}
	fmt.Fprintf(&b, "PCI_CLASS=%X\nPCI_ID=%04X:%04X\nPCI_SUBSYS_ID=%04X:%04X\nPCI_SLOT_NAME=%s\nMODALIAS=%s\n",
		f.Class, uint16(f.Vendor), uint16(f.Device), uint16(f.SubsystemVendor), uint16(f.SubsystemDevice),
		f.Addr, modalias(f))
	return b.String()
}

// writeNetdev writes the function's net/<ifname> directory.
func (l layout) writeNetdev(f *Function) {
	nd := f.Netdev
	dir := f.netdevParent() + "/net/" + nd.Name
	if f.NetdevUnder != "" {
		l.dir(f.netdevParent())
	}
	l.dir(f.netdevParent() + "/net")
	l.dir(dir)
	l.writeNetdevAttrs(dir, nd, f.Speed)
	if id := l.st.switchID(f); id != "" && !f.IsVF() {
		l.file(dir+"/phys_switch_id", id+"\n")
		if f.Card != "" {
			l.file(dir+"/phys_port_name", "p"+strconv.Itoa(f.Port)+"\n")
		}
	}
	if f.Wireless {
		l.dir(f.netdevParent() + "/ieee80211")
		l.dir(f.netdevParent() + "/ieee80211/phy0")
		l.link(dir+"/phy80211", f.netdevParent()+"/ieee80211/phy0")
		l.dir(dir + "/wireless")
	}
	l.writePortLinks(f.netdevParent(), dir, nd)
	if f.DualPort {
		l.file(dir+"/dev_port", "0\n")
	}
}

// writePortLinks writes what every port's netdev directory has: IPoIB's
// attributes and the links to its device, parent, and class.
func (l layout) writePortLinks(parent, dir string, nd *Netdev) {
	if nd.Type == arphrdInfiniBand {
		l.file(dir+"/mode", "datagram\n")
		l.file(dir+"/pkey", "0xffff\n")
	}
	l.link(dir+"/device", parent)
	l.link(dir+"/subsystem", "class/net")
	l.link("class/net/"+nd.Name, dir)
}

// writePort2 writes a DualPort function's second netdev beside the first,
// with dev_port 1 as mlx4 gives its second port, and its veth peer as a
// virtual netdev.
func (l layout) writePort2(f *Function) {
	dir := f.netdevParent() + "/net/" + f.Port2.Name
	l.dir(dir)
	l.writeNetdevAttrs(dir, f.Port2, f.Speed)
	l.file(dir+"/dev_port", "1\n")
	l.writePortLinks(f.netdevParent(), dir, f.Port2)
	l.writePeer(f.Port2Peer, f.Port2.Index, "", "")
}

// writeRepresentor writes the veth peer of the function's netdev; a VF's
// carries the switch ID and port name of a switchdev representor.
func (l layout) writeRepresentor(f *Function) {
	id, portName := l.st.switchID(f), ""
	if id != "" && f.IsVF() {
		portName = fmt.Sprintf("pf%dvf%d", f.Port, f.VFIndex)
	}
	l.writePeer(f.Representor, f.Netdev.Index, id, portName)
}

// writePeer writes a veth peer as a virtual netdev with the few
// attributes tools look up a representor by: the switch ID and port name
// when portName is not "".
func (l layout) writePeer(rep *Netdev, peerIndex int, switchID, portName string) {
	dir := representorDir(rep)
	l.dir(dir)
	l.file(dir+"/address", rep.Address+"\n")
	l.file(dir+"/ifindex", strconv.Itoa(rep.Index)+"\n")
	l.file(dir+"/iflink", strconv.Itoa(peerIndex)+"\n")
	l.file(dir+"/type", strconv.Itoa(rep.Type)+"\n")
	l.file(dir+"/operstate", rep.OperState+"\n")
	if portName != "" {
		l.file(dir+"/phys_switch_id", switchID+"\n")
		l.file(dir+"/phys_port_name", portName+"\n")
	}
	l.link(dir+"/subsystem", "class/net")
	l.link("class/net/"+rep.Name, dir)
}

func representorDir(rep *Netdev) string { return "devices/virtual/net/" + rep.Name }

// writeNetdevAttrs writes a netdev's attributes, link state included:
// those that tools read, not all the kernel has, as a big tree has
// thousands of netdevs.
func (l layout) writeNetdevAttrs(dir string, nd *Netdev, speed int) {
	addrLen, bcast := "6\n", ethernetBroadcast
	if nd.Type == arphrdInfiniBand {
		addrLen, bcast = "20\n", ipoibBroadcast
	}
	l.file(dir+"/address", nd.Address+"\n")
	l.file(dir+"/addr_len", addrLen)
	l.file(dir+"/broadcast", bcast)
	l.file(dir+"/type", strconv.Itoa(nd.Type)+"\n")
	l.file(dir+"/ifindex", strconv.Itoa(nd.Index)+"\n")
	l.file(dir+"/iflink", strconv.Itoa(nd.Index)+"\n")
	l.file(dir+"/mtu", strconv.Itoa(nd.MTU)+"\n")
	l.file(dir+"/dev_id", "0x0\n")
	l.writeLinkState(dir, nd, speed)
}

// writeLinkState writes the attributes that follow the link's state. The
// kernel refuses to read speed and carrier of a down link; the tree says
// -1 and 0.
func (l layout) writeLinkState(dir string, nd *Netdev, speed int) {
	flags, carrier := "0x1002", "0"
	if nd.Up {
		flags = "0x1003"
	}
	if nd.OperState == "up" || nd.OperState == "unknown" {
		carrier = "1"
	}
	if nd.OperState != "up" || speed == 0 {
		speed = -1
	}
	l.file(dir+"/operstate", nd.OperState+"\n")
	l.file(dir+"/carrier", carrier+"\n")
	l.file(dir+"/flags", flags+"\n")
	l.file(dir+"/speed", strconv.Itoa(speed)+"\n")
}

// switchID is the phys_switch_id of the eswitch the function belongs to:
// the EUI-64 of its PF's MAC. Only Ethernet SR-IOV functions have one.
func (st *state) switchID(f *Function) string {
	if f.LinkType != hwdb.Ethernet || (f.SRIOV == nil && !f.IsVF()) {
		return ""
	}
	pf := f.Addr
	if f.IsVF() {
		pf = f.PF
	}
	pf = cmp.Or(f.Card, pf)
	rid, _ := parseRoutingID(pf)
	mac := st.linkMAC(rid, roleFunction)
	return fmt.Sprintf("%02x%02x%02xfffe%02x%02x%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5])
}

// rdmaHolder is the device an RDMA device hangs below, a PCI function or
// an SF, with the netdev a RoCE port follows.
type rdmaHolder struct {
	dir    string
	rdma   *RDMADevice
	netdev *Netdev
	speed  int
}

func (f *Function) rdmaHolder() rdmaHolder {
	return rdmaHolder{dir: f.SysPath, rdma: f.RDMA, netdev: f.Netdev, speed: f.Speed}
}

// writeRDMA writes the holder's RDMA device, its verbs and MAD devices
// and their /dev/infiniband nodes, and rdma_cm, which the rdma_ucm module
// makes once for the whole node and keeps while it stays loaded.
func (l layout) writeRDMA(h rdmaHolder) {
	d := h.rdma
	dir := h.dir + "/infiniband/" + d.Name
	l.dir(h.dir + "/infiniband")
	l.dir(dir)
	l.file(dir+"/node_guid", d.NodeGUID+"\n")
	l.file(dir+"/sys_image_guid", d.SysImageGUID+"\n")
	l.file(dir+"/node_type", "1: CA\n")
	l.link(dir+"/device", h.dir)
	l.link(dir+"/subsystem", "class/infiniband")
	l.link("class/infiniband/"+d.Name, dir)
	l.writeRDMAPort(dir+"/ports/1", h)
	l.writeUverbs(h)
	l.writeMAD(h)
	l.devFile("infiniband/rdma_cm")
}

func (l layout) writeRDMAPort(port string, h rdmaHolder) {
	d := h.rdma
	l.dir(parentDir(port))
	l.dir(port)
	l.dir(port + "/gids")
	l.file(port+"/link_layer", d.LinkLayer+"\n")
	l.file(port+"/lid", fmt.Sprintf("0x%x\n", d.LID))
	l.file(port+"/rate", fmt.Sprintf("%d Gb/sec (4X)\n", h.speed/1000))
	l.file(port+"/gids/0", gid0(d.PortGUID)+"\n")
	if d.PKey != "" {
		l.dir(port + "/pkeys")
		l.file(port+"/pkeys/0", d.PKey+"\n")
	}
	l.writeRDMAPortState(port, h)
}

// writeRDMAPortState writes the port state: an InfiniBand port stays
// active whatever its IPoIB netdev does, a RoCE port follows its netdev.
func (l layout) writeRDMAPortState(port string, h rdmaHolder) {
	state, phys := "4: ACTIVE", "5: LinkUp"
	if h.rdma.LinkLayer == "Ethernet" && (h.netdev == nil || h.netdev.OperState != "up") {
		state, phys = "1: DOWN", "3: Disabled"
	}
	l.file(port+"/state", state+"\n")
	l.file(port+"/phys_state", phys+"\n")
}

func (l layout) writeUverbs(h rdmaHolder) {
	d := h.rdma
	name := "uverbs" + strconv.Itoa(d.Uverbs)
	dir := h.dir + "/infiniband_verbs/" + name
	l.dir(h.dir + "/infiniband_verbs")
	l.dir(dir)
	l.file(dir+"/ibdev", d.Name+"\n")
	l.file(dir+"/dev", fmt.Sprintf("%d:%d\n", infinibandMajor, uverbsMinorBase+d.Uverbs))
	l.link(dir+"/device", h.dir)
	l.link("class/infiniband_verbs/"+name, dir)
	l.devFile("infiniband/" + name)
}

// madDevice is one of a port's MAD character devices.
type madDevice struct {
	name  string
	minor int
}

// madDevices are the port's umadN, for management datagrams, and issmN,
// for the subnet manager; the kernel gives both the port's N.
func madDevices(d *RDMADevice) [2]madDevice {
	n := strconv.Itoa(d.Umad)
	return [2]madDevice{{"umad" + n, d.Umad}, {"issm" + n, issmMinorBase + d.Umad}}
}

// writeMAD writes the port's infiniband_mad devices, which belong to the
// PCI function (or SF) as the verbs device does.
func (l layout) writeMAD(h rdmaHolder) {
	l.dir(h.dir + "/infiniband_mad")
	for _, m := range madDevices(h.rdma) {
		dir := h.dir + "/infiniband_mad/" + m.name
		l.dir(dir)
		l.file(dir+"/ibdev", h.rdma.Name+"\n")
		l.file(dir+"/port", "1\n")
		l.file(dir+"/dev", fmt.Sprintf("%d:%d\n", infinibandMajor, m.minor))
		l.link(dir+"/device", h.dir)
		l.link("class/infiniband_mad/"+m.name, dir)
		l.devFile("infiniband/" + m.name)
	}
}

// removeRDMA undoes writeRDMA but for rdma_cm, which outlives the devices.
func (l layout) removeRDMA(h rdmaHolder) {
	d := h.rdma
	name := "uverbs" + strconv.Itoa(d.Uverbs)
	l.remove("class/infiniband/" + d.Name)
	l.remove("class/infiniband_verbs/" + name)
	l.devRemove("infiniband/" + name)
	for _, m := range madDevices(d) {
		l.remove("class/infiniband_mad/" + m.name)
		l.devRemove("infiniband/" + m.name)
	}
	l.remove(h.dir + "/infiniband")
	l.remove(h.dir + "/infiniband_verbs")
	l.remove(h.dir + "/infiniband_mad")
}

// writeUIO writes the function's uio/uioN class device and /dev/uioN.
func (l layout) writeUIO(f *Function) {
	name := f.UIO.Name()
	dir := f.SysPath + "/uio/" + name
	l.dir(f.SysPath + "/uio")
	l.dir(dir)
	l.file(dir+"/name", f.Driver+"\n")
	l.file(dir+"/version", "0.01.0\n")
	l.file(dir+"/event", "0\n")
	l.file(dir+"/dev", fmt.Sprintf("%d:%d\n", uioMajor, f.UIO.Number))
	l.link(dir+"/device", f.SysPath)
	l.link("class/uio/"+name, dir)
	l.devFile(name)
}

func (l layout) removeUIO(f *Function) {
	name := f.UIO.Name()
	l.remove("class/uio/" + name)
	l.devRemove(name)
	l.remove(f.SysPath + "/uio")
}

// writeLinkChange rewrites what follows a netdev's link state.
func (l layout) writeLinkChange(f *Function) {
	l.writeLinkState(f.netdevParent()+"/net/"+f.Netdev.Name, f.Netdev, f.Speed)
	l.file(representorDir(f.Representor)+"/operstate", f.Representor.OperState+"\n")
	if f.RDMA != nil {
		l.writeRDMAPortState(f.SysPath+"/infiniband/"+f.RDMA.Name+"/ports/1", f.rdmaHolder())
	}
}
