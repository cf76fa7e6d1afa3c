package pools

import (
	"strings"

	"github.com/hwnet-io/hwnet/node/discovery"
)

// DeviceType says what a pool hands out, with the SR-IOV network device
// plugin's names.
type DeviceType string

const (
	NetDevice    DeviceType = "netDevice"
	Accelerator  DeviceType = "accelerator"
	AuxNetDevice DeviceType = "auxNetDevice"
)

// Policy says how GetPreferredAllocation places a request over PFs once
// NUMA locality is satisfied.
type Policy string

const (
	// Pack fills as few PFs as possible (the default): whole PFs stay free
	// for later large requests.
	Pack Policy = "pack"
	// Spread takes devices from as many PFs as possible, for redundancy.
	Spread Policy = "spread"
)

// Mode says how a pool's devices reach pods: through its kubelet device
// plugin or through the DRA driver. A device is served one way only.
type Mode string

const (
	// DevicePlugin serves the pool as an extended resource through a
	// kubelet device plugin (the default).
	DevicePlugin Mode = "devicePlugin"
	// DRA publishes the pool's devices in ResourceSlices and prepares
	// them for ResourceClaims; no device plugin serves it.
	DRA Mode = "dra"
)

// Resource is one validated resourceList entry with defaults applied.
type Resource struct {
	// Prefix defaults to "intel.com", as in the SR-IOV device plugin.
	Prefix string
	// Name is the resourceName without its prefix.
	Name            string
	DeviceType      DeviceType
	ExcludeTopology bool
	// NeedVhostNet adds /dev/vhost-net and /dev/net/tun to every allocation.
	NeedVhostNet bool
	// IsRDMA says the pool's devices have RDMA devices, which Allocate
	// hands to the container with the device.
	IsRDMA bool
	// VDPAType is "vhost", "virtio" or "" when the pool is not vDPA.
	VDPAType string
	// AdditionalInfo is merged into each device's _INFO env entry: "*"
	// applies to every device, a PCI address to that device only.
	AdditionalInfo map[string]map[string]string
	Policy         Policy
	// Mode is DevicePlugin unless the entry says "dra".
	Mode Mode
	// CDI has the device plugin hand the devices out as CDI devices
	// (kubelet's CDIDevices) of a spec it writes, instead of device nodes.
	CDI bool
	// ClaimDrivers are the drivers a DRA claim may have its VFs bound to
	// at prepare (vfio-pci, the PF's VF netdev driver), beside the one
	// each rests on; none forbids rebinding.
	ClaimDrivers []string
	// Index is the entry's position in resourceList.
	Index int
	// Selectors are the entry's selector objects; a device belongs to the
	// pool when any of them matches it.
	Selectors []Selector
}

// FullName is the extended resource name kubelet sees, prefix/name.
func (r *Resource) FullName() string { return r.Prefix + "/" + r.Name }

// EnvName is the variable that lists a container's devices of the
// resource: sriovdp's PCIDEVICE_<PREFIX>_<NAME>, upper-cased, with every
// character that may not appear in a shell variable name written as '_'
// (sriovdp keeps '-', which shells reject).
func (r *Resource) EnvName() string {
	name := []byte(strings.ToUpper("PCIDEVICE_" + r.Prefix + "_" + r.Name))
	for i, c := range name {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			name[i] = '_'
		}
	}
	return string(name)
}

// Device is one device of a pool: a kubelet device ID and what Allocate
// needs to hand it to a container.
type Device struct {
	// ID is the kubelet device ID: the PCI address, for one port of a
	// function with several (mlx4) "<PCI address>:p<dev_port>", and for
	// a scalable function its auxiliary device name, "mlx5_core.sf.4".
	ID string
	// Function is the discovered function, shared with the inventory it
	// came from, which is immutable: never modify it. For one port of a
	// multi-port function it is a copy whose Netdev is that port's; for
	// an SF, the SF as a function, whose Address is the SF's name.
	Function *discovery.Function
	// SF is the scalable function the device is, nil for a PCI function.
	SF *discovery.SF
	// PF is the PCI address of the device's PF, "" for a standalone NIC
	// or a PF without VFs.
	PF string
	// PFName is the PF's netdev name, "" when it has none.
	PFName string
	// VFIndex is the VF index under its PF, -1 for a standalone NIC or
	// PF.
	VFIndex     int
	Representor string
	// Tags are the admin tags of the NIC (a VF inherits its PF's).
	Tags []string
}

// Pool is a resource and the devices that currently match it, sorted by ID.
type Pool struct {
	Resource Resource
	Devices  []Device
}
