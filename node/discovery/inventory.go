// Package discovery scans a node's sysfs (and /dev) into an immutable
// Inventory of its network PCI functions: SR-IOV physical functions with
// their virtual and scalable functions, and standalone NICs. Cost is
// linear in the number of functions; nothing is ever dropped silently: a
// function that cannot be offered to pods stays in the inventory with the
// reasons why.
//
// The rules that make it right on real machines' layouts (see
// docs/hardware-layouts.md):
//   - A function is a NIC when its class is network (0x02), when it is part
//     of SR-IOV, or when it has a netdev or an RDMA device whatever its
//     class (ib_qib HCAs are 0x0c06, InfiniBand serial bus).
//   - A function's netdev is in its own net/ directory or, when it has
//     none, below one of its sub-devices (virtio-net's virtioN/net/<name>,
//     found through class/net resolved up to the nearest PCI function).
//   - A PF's scalable functions are the auxiliary devices whose directory
//     is a child of the PF's and that have an sfnum (mlx5_core.sf.N, from
//     bus/auxiliary/devices); their netdevs and RDMA devices are theirs,
//     never the PF's.
//   - Link state, MTU and default routes come from netlink of the named
//     network namespace, or of this process's when the sysfs root is
//     /sys or a sysfs mount; another root with no namespace is another
//     machine's tree and is read alone, asking neither this host's netlink
//     nor devlink nor vdpa.
package discovery

import (
	"encoding/json"

	"github.com/hwnet-io/hwnet/hwdb"
)

// Inventory is a snapshot of the node's network PCI functions. It is never
// modified after Discover returns it, so it can be shared between goroutines.
type Inventory struct {
	// PFs are the SR-IOV capable physical functions, sorted by PCI address.
	PFs []PF `json:"pfs"`
	// NICs are the network functions that are neither SR-IOV PFs nor VFs of
	// a PF in this inventory, sorted by PCI address.
	NICs []Function `json:"nics"`
	// Problems are node-wide failures, such as an unreadable sysfs root or
	// a netlink dump that failed; per-function ones live on the function.
	Problems []string `json:"problems,omitempty"`
	// LinkFacts says where link state, MTU and default routes came from:
	// netlink, or the sysfs tree alone when it is not this host's.
	LinkFacts string `json:"linkFacts,omitempty"`

	byAddress map[string]*Function
}

// PF is an SR-IOV physical function and its enabled virtual functions.
type PF struct {
	Function
	SRIOV   SRIOV   `json:"sriov"`
	ESwitch ESwitch `json:"eswitch"`
	// VFs are sorted by VF index.
	VFs []VF `json:"vfs"`
	// SFs are the PF's scalable functions, sorted by sfnum.
	SFs []SF `json:"sfs,omitempty"`
	// MaxSFs is the most SFs the PF's model carries, by the hardware
	// database; 0 for a model without or not in it.
	MaxSFs int `json:"maxSFs,omitempty"`
}

// SF is a scalable function of a PF: an auxiliary device (mlx5's
// mlx5_core.sf.<N>) whose directory is a child of the PF's, with a netdev
// and an RDMA device of its own. SFs are not PCI functions: Function and
// Len do not count them.
type SF struct {
	// Name is the auxiliary device's name, "mlx5_core.sf.4".
	Name string `json:"name"`
	// AuxType is the name's middle part, "sf": what sriovdp's auxTypes
	// selector matches.
	AuxType string `json:"auxType"`
	// SFNum is the sfnum it was created with (devlink port add ... sfnum
	// 88); -1 when unreadable.
	SFNum int `json:"sfNum"`
	// Driver is the auxiliary driver bound to it, "mlx5_core.sf"; "" when
	// unbound.
	Driver string `json:"driver,omitempty"`
	// NUMANode is its PF's: an auxiliary device has no numa_node.
	NUMANode int     `json:"numaNode"`
	Netdev   *Netdev `json:"netdev,omitempty"`
	RDMA     *RDMA   `json:"rdma,omitempty"`
	// Representor is the SF's representor netdev when the PF is in
	// switchdev mode (port name pf<P>sf<sfnum>).
	Representor string `json:"representor,omitempty"`
	// Excluded and Problems mean what they mean on a Function.
	Excluded []string `json:"excluded,omitempty"`
	Problems []string `json:"problems,omitempty"`
}

// VF is a virtual function of a PF.
type VF struct {
	Function
	// Index is N of the PF's virtfnN link.
	Index int `json:"index"`
	// PF is the PCI address of the physical function.
	PF string `json:"pf"`
	// Representor is the VF representor netdev when the PF is in switchdev mode.
	Representor string `json:"representor,omitempty"`
}

// SRIOV holds a PF's SR-IOV capability as sysfs reports it.
type SRIOV struct {
	TotalVFs int        `json:"totalVFs"`
	NumVFs   int        `json:"numVFs"`
	VFDevice hwdb.PCIID `json:"vfDevice"`
	Offset   int        `json:"offset"`
	Stride   int        `json:"stride"`
}

// ESwitch is the PF's embedded switch mode.
type ESwitch struct {
	// Mode is "legacy", "switchdev" or "unknown".
	Mode string `json:"mode"`
	// Reason explains a mode that was assumed rather than read.
	Reason string `json:"reason,omitempty"`
	// SwitchdevCapable says the PF can take switchdev mode: its model can,
	// by the hardware database, or it is in switchdev mode already.
	SwitchdevCapable bool `json:"switchdevCapable,omitempty"`
}

// Function is one PCI function and everything discovery learnt about it.
// VFIODevice and UIODevice are the device nodes (under DevRoot) that
// vfio-pci and the UIO drivers (uio_pci_generic, igb_uio) give it.
type Function struct {
	Address    string        `json:"pciAddress"`
	Vendor     hwdb.PCIID    `json:"vendor"`
	Device     hwdb.PCIID    `json:"device"`
	VendorName string        `json:"vendorName,omitempty"`
	DeviceName string        `json:"deviceName,omitempty"`
	Model      string        `json:"model,omitempty"`
	Class      string        `json:"class"`
	Driver     string        `json:"driver,omitempty"`
	NUMANode   int           `json:"numaNode"`
	IOMMUGroup string        `json:"iommuGroup,omitempty"`
	VFIODevice string        `json:"vfioDevice,omitempty"`
	UIODevice  string        `json:"uioDevice,omitempty"`
	LinkType   hwdb.LinkType `json:"linkType,omitempty"`
	Netdev     *Netdev       `json:"netdev,omitempty"`
	// Ports are the netdevs of a function with several ports, one per
	// dev_port (mlx4 puts both ports of a ConnectX-3 on one function);
	// Netdev is the first. Empty for a function with one netdev. Pools
	// offer each port as a device of its own.
	Ports []Netdev     `json:"ports,omitempty"`
	RDMA  *RDMA        `json:"rdma,omitempty"`
	VDPA  []VDPADevice `json:"vdpa,omitempty"`
	// Excluded gives the reasons the function must not be offered to pods;
	// empty means it can be.
	Excluded []string `json:"excluded,omitempty"`
	// Problems lists what could not be read or did not make sense.
	Problems []string `json:"problems,omitempty"`
}

// Netdev is the kernel network interface a function is bound to.
type Netdev struct {
	Name    string `json:"name"`
	Ifindex int    `json:"ifindex"`
	// HardwareAddr is the MAC (6 bytes) or IPoIB address (20 bytes).
	HardwareAddr string `json:"hardwareAddr"`
	AddrLen      int    `json:"addrLen"`
	// Type is the ARPHRD type: 1 for Ethernet, 32 for InfiniBand, derived
	// from the address length.
	Type      int    `json:"type"`
	MTU       int    `json:"mtu"`
	OperState string `json:"operState"`
	// Up is the administrative state (IFF_UP): a link that is up with
	// OperState "down" has lost its carrier.
	Up bool `json:"up"`
	// Speed is in Mb/s; -1 when the link reports none.
	Speed int `json:"speed"`
	// StateFrom says whether MTU and OperState came from "netlink" or "sysfs".
	StateFrom string `json:"stateFrom"`
	// Elsewhere is true when sysfs shows the netdev but netlink's listing
	// of the namespace does not: it is in another network namespace (a
	// pod's), as far as discovery can tell.
	Elsewhere bool `json:"elsewhere,omitempty"`
	// DefaultRoute is true when the node's default route goes through it.
	DefaultRoute bool `json:"defaultRoute,omitempty"`
	// Port is the netdev's dev_port on a function with several ports
	// (mlx4: 0 and 1); 0 otherwise.
	Port int `json:"port,omitempty"`
	// Wireless is true for a Wi-Fi interface (phy80211 or wireless in
	// its sysfs directory).
	Wireless bool `json:"wireless,omitempty"`
}

// RDMA is the RDMA device of a function and its first port.
// CharDevices are the device nodes (under DevRoot) a pod needs to use it:
// /dev/infiniband/uverbsN, umadN, issmN and rdma_cm.
type RDMA struct {
	Device    string        `json:"device"`
	NodeGUID  string        `json:"nodeGUID,omitempty"`
	PortGUID  string        `json:"portGUID,omitempty"`
	LinkLayer hwdb.LinkType `json:"linkLayer,omitempty"`
	// PKey is an InfiniBand port's default partition key, the first entry
	// of its P_Key table (ports/1/pkeys/0), as 0x and four hex digits: what
	// sriovdp's pKeys selector matches. Empty on RoCE.
	PKey        string   `json:"pKey,omitempty"`
	PortState   string   `json:"portState,omitempty"`
	CharDevices []string `json:"charDevices,omitempty"`
}

// VDPADevice is a vDPA device whose parent is the function.
type VDPADevice struct {
	Name   string `json:"name"`
	Driver string `json:"driver,omitempty"`
	// Path is the vhost-vdpa character device, for the vhost_vdpa driver.
	Path string `json:"path,omitempty"`
	// Netdev is the virtio netdev, for the virtio_vdpa driver.
	Netdev string `json:"netdev,omitempty"`
}

// Function returns the function with this PCI address, whether PF, VF or NIC.
func (inv *Inventory) Function(address string) (*Function, bool) {
	f, ok := inv.byAddress[address]
	return f, ok
}

// Len returns the number of functions in the inventory.
func (inv *Inventory) Len() int { return len(inv.byAddress) }

// UnmarshalJSON decodes an inventory, as hwnetctl inventory -o json writes
// it, and rebuilds its address index so that Function and Len work.
func (inv *Inventory) UnmarshalJSON(data []byte) error {
	type fields Inventory // without this method
	if err := json.Unmarshal(data, (*fields)(inv)); err != nil {
		return err
	}
	inv.index()
	return nil
}

func (inv *Inventory) index() {
	inv.byAddress = make(map[string]*Function, len(inv.NICs)+len(inv.PFs)*9)
	for i := range inv.NICs {
		inv.byAddress[inv.NICs[i].Address] = &inv.NICs[i]
	}
	for i := range inv.PFs {
		pf := &inv.PFs[i]
		inv.byAddress[pf.Address] = &pf.Function
		for j := range pf.VFs {
			inv.byAddress[pf.VFs[j].Address] = &pf.VFs[j].Function
		}
	}
}
