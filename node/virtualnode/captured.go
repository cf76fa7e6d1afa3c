package virtualnode

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
)

// Captured is a node's NIC layout as discovery read it from a captured
// tree (hwnetctl capture unpack): what BuildCaptured draws again.
type Captured struct {
	// Name names the virtual node, as Spec.Name does.
	Name string
	// Sys is the captured tree's sysfs root, for what the inventory does
	// not keep: device paths, subsystem IDs, revisions, where a netdev
	// hangs, RDMA ports' LIDs and system image GUIDs.
	Sys       string
	Inventory *discovery.Inventory
}

// BuildCaptured draws a captured node as a virtual node, as Build draws a
// spec: the same PCI addresses and device paths, IDs, drivers, NUMA
// nodes, IOMMU groups, SR-IOV registers, netdev names, addresses and
// states, RDMA devices and scalable functions, so that discovery finds
// what it found in the capture; with opts.Links each netdev is a veth as
// on a built node. It returns what it leaves out (vDPA devices). A PCI
// domain other than 0000 is refused.
func BuildCaptured(ctx context.Context, c Captured, opts Options) (*Node, []string, error) {
	if err := checkNodeName(c.Name); err != nil {
		return nil, nil, &SpecError{Field: "name", Err: err}
	}
	sys, err := filepath.EvalSymlinks(c.Sys)
	if err != nil {
		return nil, nil, fmt.Errorf("captured tree: %w", err)
	}
	r := &replay{st: newState(c.Name), sys: sys}
	if err := r.plan(c.Inventory); err != nil {
		return nil, nil, err
	}
	n, err := create(ctx, r.st, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("build virtual node %s: %w", c.Name, err)
	}
	return n, r.omitted, nil
}

// replay turns an inventory back into the functions that give it.
type replay struct {
	st  *state
	sys string
	// omitted says what the virtual node does not draw.
	omitted []string
}

// plan lays out the bridges above the functions first, then the PFs and
// NICs, then the VFs: the order writeTree needs their parents in.
func (r *replay) plan(inv *discovery.Inventory) error {
	var top, vfs []*Function
	for i := range inv.NICs {
		f, err := r.function(&inv.NICs[i])
		if err != nil {
			return err
		}
		top = append(top, f)
	}
	for i := range inv.PFs {
		pf, err := r.pf(&inv.PFs[i])
		if err != nil {
			return err
		}
		top = append(top, pf)
		for j := range inv.PFs[i].VFs {
			vf, err := r.vf(pf, &inv.PFs[i].VFs[j])
			if err != nil {
				return err
			}
			vfs = append(vfs, vf)
		}
	}
	bridges, err := r.bridges(top)
	if err != nil {
		return err
	}
	r.st.Functions = slices.Concat(bridges, top, vfs)
	r.count()
	return nil
}

// function draws one captured function as it was, but for its
// representor, which every netdev of a virtual node has: the other end
// of its veth.
func (r *replay) function(d *discovery.Function) (*Function, error) {
	rid, err := parseRoutingID(d.Address)
	if err != nil || !strings.HasPrefix(d.Address, "0000:") {
		return nil, fmt.Errorf("function %q: the virtual node draws PCI domain 0000 only", d.Address)
	}
	sysPath, err := r.devicePath("bus/pci/devices/" + d.Address)
	if err != nil {
		return nil, fmt.Errorf("function %s: %w", d.Address, err)
	}
	class, err := strconv.ParseUint(strings.TrimPrefix(d.Class, "0x"), 16, 24)
	if err != nil {
		return nil, fmt.Errorf("function %s: class %q: %w", d.Address, d.Class, err)
	}
	f := &Function{
		Addr: d.Address, SysPath: sysPath, Model: d.Model, Vendor: d.Vendor, Device: d.Device,
		SubsystemVendor: hwdb.PCIID(r.hex(sysPath + "/subsystem_vendor")), SubsystemDevice: hwdb.PCIID(r.hex(sysPath + "/subsystem_device")),
		Class: uint32(class), Revision: uint8(r.hex(sysPath + "/revision")), Driver: d.Driver, NUMA: d.NUMANode,
		IOMMUGroup: noIOMMUGroup, LinkType: d.LinkType, RDMACapable: d.RDMA != nil,
	}
	if d.IOMMUGroup != "" {
		if f.IOMMUGroup, err = strconv.Atoi(d.IOMMUGroup); err != nil || f.IOMMUGroup < 0 {
			return nil, fmt.Errorf("function %s: IOMMU group %q is not a number", d.Address, d.IOMMUGroup)
		}
	}
	if err := r.netdevs(f, rid, d); err != nil {
		return nil, fmt.Errorf("function %s: %w", d.Address, err)
	}
	f.RDMA = r.rdma(f.SysPath, d.RDMA)
	if d.UIODevice != "" {
		n, ok := numbered(filepath.Base(d.UIODevice), "uio")
		if !ok {
			return nil, fmt.Errorf("function %s: UIO device %q is not /dev/uioN", d.Address, d.UIODevice)
		}
		f.UIO = &UIODevice{Number: n}
	}
	if len(d.VDPA) > 0 {
		r.omitted = append(r.omitted, fmt.Sprintf("%s: %d vDPA devices", d.Address, len(d.VDPA)))
	}
	return f, nil
}

// noIOMMUGroup marks a function of a node without an IOMMU.
const noIOMMUGroup = -1

// pf draws a PF with its SR-IOV registers; VFs it creates later take the
// driver its VFs have now, else the model's.
func (r *replay) pf(d *discovery.PF) (*Function, error) {
	f, err := r.function(&d.Function)
	if err != nil {
		return nil, err
	}
	f.SRIOV = &SRIOV{TotalVFs: d.SRIOV.TotalVFs, NumVFs: d.SRIOV.NumVFs, Offset: d.SRIOV.Offset,
		Stride: d.SRIOV.Stride, VFDevice: d.SRIOV.VFDevice, VFDriver: d.Driver}
	for _, vf := range d.VFs {
		if vf.Driver != "" && vf.Driver != driverVFIO && !isUIODriver(vf.Driver) {
			f.SRIOV.VFDriver = vf.Driver
		}
		if vf.RDMA != nil && vf.RDMA.PKey != "" && vf.RDMA.PKey != defaultPKey {
			f.SRIOV.VFPKey = vf.RDMA.PKey
		}
	}
	for k := range d.SFs {
		sf, err := r.sf(f, &d.SFs[k])
		if err != nil {
			return nil, fmt.Errorf("PF %s: %w", d.Address, err)
		}
		f.SFs = append(f.SFs, sf)
	}
	if len(d.VFs) == 0 && f.Ifname != "" && d.SRIOV.TotalVFs > 0 {
		if err := checkIfname(vfIfname(f, d.SRIOV.TotalVFs-1)); err != nil {
			return nil, fmt.Errorf("PF %s: VF netdev names get too long: %w", d.Address, err)
		}
	}
	return f, nil
}

// sf draws a scalable function of pf with its netdev and RDMA device as
// captured, and a veth peer for its representor.
func (r *replay) sf(pf *Function, d *discovery.SF) (*SF, error) {
	index, ok := numbered(d.Name, sfDriver+".")
	if !ok || d.Netdev == nil || d.SFNum < 0 {
		return nil, fmt.Errorf("scalable function %q: the virtual node draws %s.<N> with an sfnum and a netdev only", d.Name, sfDriver)
	}
	if err := checkIfname(d.Netdev.Name); err != nil {
		return nil, fmt.Errorf("scalable function %s: %w", d.Name, err)
	}
	rid, _ := parseRoutingID(pf.Addr) // the PF's address parsed already
	sf := &SF{Name: d.Name, SysPath: pf.SysPath + "/" + d.Name, Index: index, Num: d.SFNum, Netdev: capturedNetdev(d.Netdev)}
	sf.Representor = r.peer(sf.Netdev, fmt.Sprintf("%ss%d", representorName(rid), d.SFNum), sfMAC(r.st, rid, d.SFNum, roleRepresentor).String())
	sf.RDMA = r.rdma(sf.SysPath, d.RDMA)
	return sf, nil
}

func (r *replay) vf(pf *Function, d *discovery.VF) (*Function, error) {
	f, err := r.function(&d.Function)
	if err != nil {
		return nil, err
	}
	f.PF, f.VFIndex = pf.Addr, d.Index
	return f, nil
}

// devicePath is rel's target relative to the sysfs root, "devices/...".
func (r *replay) devicePath(rel string) (string, error) {
	target, err := filepath.EvalSymlinks(filepath.Join(r.sys, rel))
	if err != nil {
		return "", err
	}
	p, err := filepath.Rel(r.sys, target)
	if err != nil || !strings.HasPrefix(p, "devices/") {
		return "", fmt.Errorf("%s leads to %s, not below devices/", rel, target)
	}
	return p, nil
}

// hex reads a "0x..." attribute; a missing or malformed one reads 0, as
// the virtual node's own functions have no other.
func (r *replay) hex(rel string) uint64 {
	data, err := os.ReadFile(filepath.Join(r.sys, rel))
	if err != nil {
		return 0
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(data)), "0x"), 16, 32)
	if err != nil {
		return 0
	}
	return v
}

// count sets the node's counters past every number the capture used, so
// that what the kernel emulation makes later takes new ones.
func (r *replay) count() {
	next := &r.st.Next
	r.st.NUMANodes = 1
	for _, f := range r.st.Functions {
		r.st.NUMANodes = max(r.st.NUMANodes, f.NUMA+1)
		next.IOMMUGroup = max(next.IOMMUGroup, f.IOMMUGroup+1)
		for _, nd := range f.linkEnds() {
			next.Ifindex = max(next.Ifindex, nd.Index+1)
		}
		if f.UIO != nil {
			next.UIO = max(next.UIO, f.UIO.Number+1)
		}
		r.countRDMA(f.RDMA)
		for _, sf := range f.SFs {
			r.countRDMA(sf.RDMA)
			next.AuxIndex = max(next.AuxIndex, sf.Index+1)
		}
	}
	// Representors take indexes past the captured netdevs'.
	for _, f := range r.st.Functions {
		for _, peer := range f.peers() {
			peer.Index = r.st.allocIfindex()
		}
	}
}

// countRDMA sets the RDMA counters past the device's numbers.
func (r *replay) countRDMA(d *RDMADevice) {
	if d == nil {
		return
	}
	next := &r.st.Next
	next.Uverbs, next.Umad, next.LID = max(next.Uverbs, d.Uverbs+1), max(next.Umad, d.Umad+1), max(next.LID, d.LID+1)
	prefix := strings.TrimRight(d.Name, "0123456789")
	n, _ := strconv.Atoi(strings.TrimPrefix(d.Name, prefix))
	next.RDMA[prefix] = max(next.RDMA[prefix], n+1)
}

// bridges are the PCI bridges between the host bridges and the captured
// functions, drawn as root ports, shallowest first.
func (r *replay) bridges(fs []*Function) ([]*Function, error) {
	seen := map[string]bool{}
	var out []*Function
	for _, f := range fs {
		for child, dir := f.SysPath, parentDir(f.SysPath); strings.Count(dir, "/") > 1; child, dir = dir, parentDir(dir) {
			if seen[dir] {
				break
			}
			seen[dir] = true
			rid, err := parseRoutingID(filepath.Base(dir))
			below, berr := parseRoutingID(filepath.Base(child))
			if err != nil || berr != nil {
				return nil, fmt.Errorf("function %s: %s is no PCI bridge the virtual node can draw", f.Addr, dir)
			}
			out = append(out, &Function{
				Addr: rid.addr(), SysPath: dir, Vendor: rootPortVendor, Device: rootPortDevice,
				SubsystemVendor: rootPortVendor, Class: classPCIBridge, Revision: 4, Driver: driverRootPort,
				NUMA: f.NUMA, IOMMUGroup: noIOMMUGroup, Bridge: &Bridge{Secondary: below.bus(), Subordinate: maxBus},
			})
		}
	}
	slices.SortStableFunc(out, func(a, b *Function) int {
		return cmp.Compare(strings.Count(a.SysPath, "/"), strings.Count(b.SysPath, "/"))
	})
	return out, nil
}

// netdevs draws the function's netdev, and a dual-port function's second,
// where and as the capture had them, each with a representor whose state
// follows it as a veth peer's does.
func (r *replay) netdevs(f *Function, rid routingID, d *discovery.Function) error {
	if d.Netdev == nil {
		return nil
	}
	under, err := r.netdevUnder(f.SysPath, d.Netdev.Name)
	if err != nil {
		return err
	}
	f.Ifname, f.Speed, f.Wireless, f.NetdevUnder = d.Netdev.Name, d.Netdev.Speed, d.Netdev.Wireless, under
	f.Netdev = capturedNetdev(d.Netdev)
	f.Representor = r.peer(f.Netdev, representorName(rid), r.st.linkMAC(rid, roleRepresentor).String())
	if len(d.Ports) > 1 {
		f.DualPort = true
		f.Port2 = capturedNetdev(&d.Ports[1])
		f.Port2Peer = r.peer(f.Port2, representorName(rid)+"d1", r.st.linkMAC(rid, rolePort2Peer).String())
	}
	for _, nd := range f.linkEnds() {
		if err := checkIfname(nd.Name); err != nil {
			return err
		}
	}
	return nil
}

func capturedNetdev(nd *discovery.Netdev) *Netdev {
	return &Netdev{Name: nd.Name, Index: nd.Ifindex, Address: nd.HardwareAddr, Type: nd.Type, MTU: nd.MTU,
		Up: nd.Up, OperState: nd.OperState}
}

// peer is the veth end that plays nd's representor: down below a netdev
// set down, and without carrier where the netdev has none.
func (r *replay) peer(nd *Netdev, name, mac string) *Netdev {
	p := &Netdev{Name: name, Address: mac, Type: arphrdEther, MTU: nd.MTU, Up: true, OperState: "up"}
	switch {
	case !nd.Up:
		p.OperState = "lowerlayerdown"
	case nd.OperState != "up":
		p.Up, p.OperState = false, "down"
	}
	return p
}

// netdevUnder is the sub-device of the function the netdev hangs below,
// as virtio-net's virtio0; "" for the function's own net/.
func (r *replay) netdevUnder(sysPath, name string) (string, error) {
	if _, err := os.Lstat(filepath.Join(r.sys, sysPath, "net", name)); err == nil {
		return "", nil
	}
	dir, err := r.devicePath("class/net/" + name)
	if err != nil {
		return "", fmt.Errorf("netdev %s: %w", name, err)
	}
	under := parentDir(parentDir(dir))
	if parentDir(under) != sysPath || !validSubdevice(filepath.Base(under)) {
		return "", fmt.Errorf("netdev %s is at %s, which the virtual node cannot draw", name, dir)
	}
	return filepath.Base(under), nil
}

// rdma draws the RDMA device of the function or SF at dir with the
// GUIDs, LID, P_Key and character device numbers the capture had.
func (r *replay) rdma(dir string, d *discovery.RDMA) *RDMADevice {
	if d == nil {
		return nil
	}
	dir += "/infiniband/" + d.Device
	dev := &RDMADevice{Name: d.Device, NodeGUID: sysfsGUID(d.NodeGUID), PortGUID: sysfsGUID(d.PortGUID), SysImageGUID: r.text(dir + "/sys_image_guid"),
		LinkLayer: "Ethernet", LID: int(r.hex(dir + "/ports/1/lid")), PKey: d.PKey}
	if d.LinkLayer == hwdb.InfiniBand {
		dev.LinkLayer = "InfiniBand"
	}
	for _, c := range d.CharDevices {
		base := filepath.Base(c)
		if n, ok := numbered(base, "uverbs"); ok {
			dev.Uverbs = n
		}
		if n, ok := numbered(base, "umad"); ok {
			dev.Umad = n
		}
	}
	return dev
}

// sysfsGUID writes a GUID as discovery gives it, 0c:42:a1:03:00:00:3b:00,
// in sysfs's form, 0c42:a103:0000:3b00; anything else is kept as it is.
func sysfsGUID(g string) string {
	h := strings.ReplaceAll(g, ":", "")
	if len(h) != 16 {
		return g
	}
	return h[0:4] + ":" + h[4:8] + ":" + h[8:12] + ":" + h[12:16]
}

// numbered reads N of a name prefix+N.
func numbered(name, prefix string) (int, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

// text reads an attribute without its newline; "" when missing.
func (r *replay) text(rel string) string {
	data, _ := os.ReadFile(filepath.Join(r.sys, rel))
	return strings.TrimSpace(string(data))
}
