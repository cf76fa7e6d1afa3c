package virtualnode

import (
	"fmt"
	"strconv"

	"github.com/hwnet-io/hwnet/hwdb"
)

// Function is one PCI function of a virtual node as built: what hardware
// discovery should find in the tree.
type Function struct {
	// Addr is the PCI address, "0000:3b:00.0".
	Addr string `json:"addr"`
	// SysPath is the device directory relative to the sysfs root,
	// "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0".
	SysPath string `json:"sysPath"`
	// PF is the address of a VF's physical function; "" for other functions.
	PF string `json:"pf,omitempty"`
	// VFIndex is a VF's index on its PF (N of the PF's virtfnN link).
	VFIndex int `json:"vfIndex,omitempty"`
	// PKeyIdx is, for a VF of an mlx4 InfiniBand PF, the physical P_Key
	// index its virtual index 0 maps to, as pkey_idx/0 reads ("none");
	// "" for the driver's default, 0.
	PKeyIdx string `json:"pKeyIdx,omitempty"`
	// Model is the hwdb model name; "" for root ports and NICs hwdb does
	// not know.
	Model string `json:"model,omitempty"`

	Vendor          hwdb.PCIID `json:"vendor"`
	Device          hwdb.PCIID `json:"device"`
	SubsystemVendor hwdb.PCIID `json:"subsystemVendor"`
	SubsystemDevice hwdb.PCIID `json:"subsystemDevice"`
	// Class is the 24-bit PCI class: 0x020000 Ethernet, 0x020700
	// InfiniBand, 0x060400 PCI bridge.
	Class    uint32 `json:"class"`
	Revision uint8  `json:"revision"`

	// Driver is the bound driver's name; "" when unbound.
	Driver     string `json:"driver,omitempty"`
	NUMA       int    `json:"numa"`
	IOMMUGroup int    `json:"iommuGroup"`
	// LinkType is the port's link layer; "" for root ports.
	LinkType hwdb.LinkType `json:"linkType,omitempty"`
	// Ifname is the name the function's netdev has whenever a netdev driver
	// binds it; "" for root ports.
	Ifname string `json:"ifname,omitempty"`
	// Card is the address of the first PF of a multi-port card, whose
	// switch ID every port and VF of the card shares; "" means the
	// function's own PF's. Port is the PF's port on that card.
	Card string `json:"card,omitempty"`
	Port int    `json:"port,omitempty"`
	// NetdevUnder is the sub-device the netdev hangs below, as virtio-net's
	// "virtio0" (<function>/virtio0/net/<name>); "" puts it in the
	// function's own net/ directory.
	NetdevUnder string `json:"netdevUnder,omitempty"`
	// Speed is the netdev's link speed in Mb/s.
	Speed int `json:"speed,omitempty"`
	// RDMACapable says the function has an RDMA device while a netdev
	// driver binds it.
	RDMACapable bool `json:"rdmaCapable,omitempty"`
	// Wireless says the netdev is a Wi-Fi interface (phy80211).
	Wireless bool `json:"wireless,omitempty"`
	// DualPort says the function carries a second port's netdev (mlx4).
	DualPort bool `json:"dualPort,omitempty"`

	// SRIOV is set on PFs.
	SRIOV *SRIOV `json:"sriov,omitempty"`
	// Bridge is set on root ports.
	Bridge *Bridge `json:"bridge,omitempty"`
	// Netdev is the function's netdev; nil on vfio-pci, unbound or root
	// port functions.
	Netdev *Netdev `json:"netdev,omitempty"`
	// Representor is the other end of the netdev's veth pair, which plays
	// the function's representor; nil when Netdev is.
	Representor *Netdev `json:"representor,omitempty"`
	// Port2 is the second port's netdev of a DualPort function (dev_port
	// 1) and Port2Peer the other end of its veth pair; nil otherwise. Link
	// mutations act on the first port only.
	Port2     *Netdev `json:"port2,omitempty"`
	Port2Peer *Netdev `json:"port2Peer,omitempty"`
	// RDMA is the function's RDMA device, when it has one.
	RDMA *RDMADevice `json:"rdma,omitempty"`
	// UIO is the function's UIO device while a UIO driver binds it.
	UIO *UIODevice `json:"uio,omitempty"`
	// SFs are a PF's mlx5 scalable functions, in sfnum order; they go
	// when its driver unbinds, as the kernel deletes them then.
	SFs []*SF `json:"sfs,omitempty"`
}

// SRIOV is a PF's SR-IOV capability.
type SRIOV struct {
	TotalVFs int `json:"totalVFs"`
	NumVFs   int `json:"numVFs"`
	// Offset and Stride place VF i at routing ID PF + Offset + Stride*i.
	Offset   int        `json:"offset"`
	Stride   int        `json:"stride"`
	VFDevice hwdb.PCIID `json:"vfDevice"`
	// VFDriver is the driver that binds new VFs.
	VFDriver string `json:"vfDriver"`
	// VFPKey is the default partition key of new InfiniBand VFs, "" for
	// the default partition's 0xffff.
	VFPKey string `json:"vfPKey,omitempty"`
	// PKeys is an mlx4 InfiniBand PF's physical P_Key table (iov.go),
	// first entry first; nil for a PF without one.
	PKeys []string `json:"pKeys,omitempty"`
}

// Bridge is a root port's bus range.
type Bridge struct {
	Secondary   int `json:"secondary"`
	Subordinate int `json:"subordinate"`
}

// Netdev is a network interface as the tree shows it. With real links its
// Index and, for Ethernet, its Address are the veth's own.
type Netdev struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	// Address is the colon-separated hardware address: 6 bytes, or 20 for
	// IPoIB (the real veth behind an IPoIB netdev stays Ethernet).
	Address string `json:"address"`
	// Type is the ARPHRD type: 1 Ethernet, 32 InfiniBand.
	Type int `json:"type"`
	MTU  int `json:"mtu"`
	// Up is the administrative state; OperState is "up", "down" or
	// "lowerlayerdown" as the kernel derives it for a veth pair.
	Up        bool   `json:"up"`
	OperState string `json:"operState"`
}

// RDMADevice is a function's RDMA device with its single port.
type RDMADevice struct {
	// Name is e.g. "mlx5_0".
	Name string `json:"name"`
	// Uverbs is N of /dev/infiniband/uverbsN.
	Uverbs int `json:"uverbs"`
	// Umad is N of the port's /dev/infiniband/umadN and issmN.
	Umad int `json:"umad"`
	// GUIDs are in sysfs's form, "0c42:a103:0000:3b00".
	NodeGUID     string `json:"nodeGUID"`
	SysImageGUID string `json:"sysImageGUID"`
	PortGUID     string `json:"portGUID"`
	// LinkLayer is "InfiniBand" or "Ethernet" (RoCE).
	LinkLayer string `json:"linkLayer"`
	LID       int    `json:"lid,omitempty"`
	// PKey is an InfiniBand port's default partition key, its P_Key
	// table's first entry.
	PKey string `json:"pKey,omitempty"`
}

// UIODevice is the device a UIO driver (uio_pci_generic, igb_uio) gives
// a function: uio/uioN in sysfs and /dev/uioN.
type UIODevice struct {
	Number int `json:"number"`
}

// Name is the device's name, "uio0".
func (u *UIODevice) Name() string { return "uio" + strconv.Itoa(u.Number) }

// IsVF reports whether the function is a virtual function.
func (f *Function) IsVF() bool { return f.PF != "" }

// IsNetwork reports whether the function is a network controller, i.e. not
// one of the root ports the tree puts above each NIC.
func (f *Function) IsNetwork() bool { return f.Class>>16 == 0x02 }

// linkEnds lists the function's netdevs that are veth ends: each port's
// and each SF's netdev and its peer.
func (f *Function) linkEnds() []*Netdev {
	var out []*Netdev
	for _, nd := range []*Netdev{f.Netdev, f.Representor, f.Port2, f.Port2Peer} {
		if nd != nil {
			out = append(out, nd)
		}
	}
	for _, sf := range f.SFs {
		out = append(out, sf.Netdev, sf.Representor)
	}
	return out
}

// peers lists the veth ends that play representors: the ports' peers and
// the SFs'.
func (f *Function) peers() []*Netdev {
	var out []*Netdev
	for _, nd := range []*Netdev{f.Representor, f.Port2Peer} {
		if nd != nil {
			out = append(out, nd)
		}
	}
	for _, sf := range f.SFs {
		out = append(out, sf.Representor)
	}
	return out
}

// port2Name is systemd's name for a function's second port: the first
// port's name with d<dev_port> appended.
func port2Name(ifname string) string { return ifname + "d1" }

// clone returns a deep copy.
func (f *Function) clone() Function {
	c := *f
	c.SRIOV = clonePtr(f.SRIOV)
	c.Bridge = clonePtr(f.Bridge)
	c.Netdev = clonePtr(f.Netdev)
	c.Representor = clonePtr(f.Representor)
	c.Port2 = clonePtr(f.Port2)
	c.Port2Peer = clonePtr(f.Port2Peer)
	c.RDMA = clonePtr(f.RDMA)
	c.UIO = clonePtr(f.UIO)
	c.SFs = nil
	for _, sf := range f.SFs {
		c.SFs = append(c.SFs, sf.clone())
	}
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// Drivers with a special meaning to the tree.
const (
	driverVFIO     = "vfio-pci"
	driverRootPort = "pcieport"
)

// hasNetdevDriver reports whether the bound driver makes a netdev.
func (f *Function) hasNetdevDriver() bool { return makesNetdev(f.Driver) }

// makesNetdev reports whether a function bound to driver has a netdev.
func makesNetdev(driver string) bool {
	return driver != "" && driver != driverVFIO && driver != driverRootPort && !isUIODriver(driver)
}

// isUIODriver reports whether driver hands the function to user space
// through a UIO device, as DPDK's uio_pci_generic and igb_uio do.
func isUIODriver(driver string) bool {
	return driver == "uio_pci_generic" || driver == "igb_uio"
}

// routingID is a PCI function's bus, device and function number as one
// 16-bit value, the unit of SR-IOV's offset and stride.
type routingID uint16

func (r routingID) bus() int  { return int(r >> 8) }
func (r routingID) slot() int { return int(r >> 3 & 0x1f) }
func (r routingID) fn() int   { return int(r & 7) }

// addr returns the PCI address in domain 0.
func (r routingID) addr() string {
	return fmt.Sprintf("0000:%02x:%02x.%d", r.bus(), r.slot(), r.fn())
}

// parseRoutingID reads the routing ID back from an address made by addr.
func parseRoutingID(addr string) (routingID, error) {
	var bus, slot, fn int
	if _, err := fmt.Sscanf(addr, "0000:%02x:%02x.%1d", &bus, &slot, &fn); err != nil {
		return 0, fmt.Errorf("PCI address %q: %w", addr, err)
	}
	return routingID(bus<<8 | slot<<3 | fn), nil
}

// netdevParent is the directory, relative to the sysfs root, whose net/
// holds the function's netdev.
func (f *Function) netdevParent() string {
	if f.NetdevUnder == "" {
		return f.SysPath
	}
	return f.SysPath + "/" + f.NetdevUnder
}
