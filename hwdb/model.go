// Package hwdb is hwnet's hardware database: PCI vendor and device names for
// every NIC (from an embedded copy of pci.ids's vendor and device lines) and
// a curated table of SR-IOV capable NIC models with their PF and VF device
// IDs, drivers and capabilities. A DB is immutable once opened; lookups do not allocate.
package hwdb

// LinkType is the link layer a NIC port can run.
type LinkType string

// Link layers.
const (
	Ethernet   LinkType = "ethernet"
	InfiniBand LinkType = "infiniband"
)

// DPDKBinding says how a DPDK application takes a VF of a model.
type DPDKBinding string

// DPDK bindings.
const (
	// VFIO means the VF is unbound from its kernel driver and bound to vfio-pci.
	VFIO DPDKBinding = "vfio-pci"
	// Bifurcated means the VF stays on its kernel driver (mlx5) and DPDK
	// shares it through the verbs interface.
	Bifurcated DPDKBinding = "bifurcated"
)

// Model is one SR-IOV capable NIC model in the curated table.
type Model struct {
	// Name is the model's short unique name, e.g. "E810-C" or "ConnectX-6".
	Name string `json:"name"`
	// Family groups models sold as one line, e.g. "Intel E810".
	Family string `json:"family"`
	// Vendor is the PCI vendor ID of PF and VF.
	Vendor PCIID `json:"vendor"`
	// PFDevice is the PCI device ID of the physical function.
	PFDevice PCIID `json:"pfDevice"`
	// VFDevice is the PCI device ID of its virtual functions. Many models
	// share one VF ID (NVIDIA's 101e), so a VF's model comes from its PF.
	VFDevice PCIID `json:"vfDevice"`
	// PFDrivers are the kernel drivers that bind the PF, preferred first.
	PFDrivers []string `json:"pfDrivers"`
	// VFDrivers are the kernel drivers that bind a VF as a netdev.
	VFDrivers []string `json:"vfDrivers"`
	// MaxVFs is the largest sriov_totalvfs the model reports per PF.
	MaxVFs int `json:"maxVFs"`
	// MaxSFs is the largest number of mlx5 scalable functions a PF can
	// carry (the firmware's PF_TOTAL_SF, set with mlxconfig); 0 means
	// the model has none. An SF is an auxiliary device below its PF
	// (mlx5_core.sf.N), with a netdev and an RDMA device of its own.
	MaxSFs int `json:"maxSFs,omitempty"`
	// LinkTypes lists the link layers the ports can run, default first.
	LinkTypes []LinkType `json:"linkTypes"`
	// RDMA is true when the VFs expose an RDMA device.
	RDMA bool `json:"rdma"`
	// Switchdev is true when the PF's eswitch supports switchdev mode.
	Switchdev bool `json:"switchdev"`
	// VDPA is true when the model can back vDPA devices.
	VDPA bool `json:"vdpa"`
	// DPDK says how DPDK applications take a VF.
	DPDK DPDKBinding `json:"dpdk"`
	// Class is the PCI class and subclass PF and VFs report, four hex
	// digits as lspci -n prints them, when it is not their link type's
	// (0200 Ethernet, 0207 InfiniBand): ConnectX-3 reports 0280, "other
	// network controller". 0 means the link type's.
	Class PCIID `json:"class,omitempty"`
}

// maxSFsPerPF bounds MaxSFs: the firmware reports the SFs a function may
// have in max_num_sf, a 16-bit capability (mlx5_ifc.h).
const maxSFsPerPF = 65535

// PCIID is a 16-bit PCI vendor or device ID. It reads and writes as four
// hex digits, as sysfs and pci.ids spell it ("8086", "0x8086").
type PCIID uint16
