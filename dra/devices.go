package dra

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/utils/ptr"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
)

// DefaultDriverName is the DRA driver's name: the domain of hwnet's own
// device attributes and of its DeviceClasses' selectors.
const DefaultDriverName = "hwnet.io"

// Attributes of the Network Plumbing Working Group's domain, which Multus
// and the SR-IOV network operator read to tie a device to a network.
const (
	AttrResourceName resourceapi.QualifiedName = "k8s.cni.cncf.io/resourceName"
	AttrDeviceID     resourceapi.QualifiedName = "k8s.cni.cncf.io/deviceID"
)

// hwnet's attributes, in the driver's domain (unqualified in a slice).
const (
	AttrVendor    resourceapi.QualifiedName = "vendor"
	AttrDevice    resourceapi.QualifiedName = "device"
	AttrModel     resourceapi.QualifiedName = "model"
	AttrPFName    resourceapi.QualifiedName = "pfName"
	AttrPFAddress resourceapi.QualifiedName = "pfPCIAddress"
	AttrVFIndex   resourceapi.QualifiedName = "vfIndex"
	AttrDriver    resourceapi.QualifiedName = "driver"
	AttrLinkType  resourceapi.QualifiedName = "linkType"
	AttrRDMA      resourceapi.QualifiedName = "rdma"
	// AttrPKey is an InfiniBand function's default partition key, "0x8001".
	AttrPKey resourceapi.QualifiedName = "pKey"
	// AttrRepresentor is a VF's representor netdev on its PF's switchdev
	// eSwitch, which an OVS or OVN CNI plugs into the bridge.
	AttrRepresentor resourceapi.QualifiedName = "representor"
	AttrESwitchMode resourceapi.QualifiedName = "eswitchMode"
	AttrTags        resourceapi.QualifiedName = "tags"
	// AttrClaimDrivers lists, comma-separated, the drivers a claim may
	// have the VF bound to (the pool's claimDrivers) beside its driver.
	AttrClaimDrivers resourceapi.QualifiedName = "claimDrivers"
	AttrPool         resourceapi.QualifiedName = "pool"
	// AttrNetdev is the netdev of one port of a multi-port function
	// (mlx4), whose two ports are two devices; AttrPort is its dev_port.
	AttrNetdev resourceapi.QualifiedName = "netdev"
	AttrPort   resourceapi.QualifiedName = "port"
	// AttrAuxType and AttrSFNum are a scalable function's auxiliary
	// device type ("sf") and sfnum.
	AttrAuxType resourceapi.QualifiedName = "auxType"
	AttrSFNum   resourceapi.QualifiedName = "sfNum"
)

// TaintKey marks an unhealthy device; its value says why.
const TaintKey = "hwnet.io/unhealthy"

// HeldTaintKey marks a device something other than a claim holds (a
// device plugin pod after the pool switched to DRA, a sandbox whose pod is
// gone); its value names the holder. Prepare refuses such a device even
// to a claim that tolerates the taint, as it refuses every device the
// taints below mark: the device ledger does.
const HeldTaintKey = "hwnet.io/held"

// FencedTaintKey marks a device a fence withdraws: its PF's VF layout is
// changing, or its pool is switching front end; its value says which.
const FencedTaintKey = "hwnet.io/fenced"

// UnknownTaintKey marks every device while a source of the device ledger
// cannot be read (kubelet's PodResources, a DRA checkpoint, the CNI
// records): any device may be held by a holder the agent cannot see.
const UnknownTaintKey = "hwnet.io/unknown"

// Pool is a resource pool served through DRA, its devices and whether
// pods may get each. The driver keeps Devices as they are given, shared
// with the caller's list, which must not change them afterwards.
type Pool struct {
	Resource pools.Resource
	Devices  []offer.State
	// EvictDeadPF makes the taint of an unhealthy VF whose PF is dead
	// (offer.State.DeadPF) NoExecute: Kubernetes evicts the pods whose
	// claims hold it (those that do not tolerate the taint) instead of
	// only scheduling no new ones.
	EvictDeadPF bool
}

// Node is what the mapping reads of the node beside the pools: the PFs'
// eswitch modes and, under SysfsRoot, each function's PCIe root.
type Node struct {
	Inventory *discovery.Inventory
	// SysfsRoot is where the node's sysfs is seen; "" means /sys.
	SysfsRoot string
}

// DeviceName is the name of a device in a ResourceSlice: a DNS label,
// "pci-" and its ID with ':' and '.' as '-' (0000:3b:01.6 is
// pci-0000-3b-01-6, port 1 of 0000:03:00.0, 0000:03:00.0:p1, is
// pci-0000-03-00-0-p1); a scalable function, whose ID is its auxiliary
// device name and has no ':', "aux-" and its name with '_' and '.' as
// '-' (mlx5_core.sf.4 is aux-mlx5-core-sf-4).
func DeviceName(id string) string {
	prefix := "pci-"
	if !strings.Contains(id, ":") {
		prefix = "aux-"
	}
	return prefix + strings.NewReplacer(":", "-", ".", "-", "_", "-").Replace(strings.ToLower(id))
}

// layout is the pools' devices in the order the slices list them, each
// mapped to a ResourceSlice device only when a slice of it is compared or
// written: at 2048 VFs the mapped devices are about 12 MB, which made at
// once set the heap's size for as long as the agent ran after.
type layout struct {
	node    Node
	eswitch map[string]string
	order   []placed
}

// placed is one device and its pool, both in the Pool list the layout
// was made of, which must not change afterwards.
type placed struct {
	pool *Pool
	dev  *offer.State
}

// newLayout orders ps's devices by pool and then PCI address, so that
// slices stay stable; a device in two pools is an error naming both.
func newLayout(node Node, ps []Pool) (*layout, error) {
	l := &layout{node: node, eswitch: eswitchModes(node.Inventory)}
	seen := map[string]string{}
	for i := range ps {
		p := &ps[i]
		start := len(l.order)
		for j := range p.Devices {
			l.order = append(l.order, placed{pool: p, dev: &p.Devices[j]})
		}
		slices.SortFunc(l.order[start:], func(a, b placed) int { return strings.Compare(a.dev.ID, b.dev.ID) })
		for _, pd := range l.order[start:] {
			if first, dup := seen[pd.dev.ID]; dup {
				return nil, fmt.Errorf("device %s: in pools %s and %s", pd.dev.ID, first, p.Resource.FullName())
			}
			seen[pd.dev.ID] = p.Resource.FullName()
		}
	}
	return l, nil
}

// slices is how many ResourceSlices the devices take, MaxSliceDevices
// each; an empty pool has one empty slice, which says the driver runs
// and has nothing to offer.
func (l *layout) slices() int {
	return max(1, (len(l.order)+MaxSliceDevices-1)/MaxSliceDevices)
}

// slice is the devices of slice i, made now: what sysfs says (each
// function's PCIe root) is read anew each time.
func (l *layout) slice(i int) []resourceapi.Device {
	return l.devices(l.order[min(i*MaxSliceDevices, len(l.order)):min((i+1)*MaxSliceDevices, len(l.order))])
}

func (l *layout) devices(order []placed) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, len(order))
	for _, pd := range order {
		d := pd.dev
		out = append(out, resourceapi.Device{
			Name:       DeviceName(d.ID),
			Attributes: attributes(l.node, &pd.pool.Resource, d, l.eswitch[d.PF]),
			Taints:     taints(d, pd.pool.EvictDeadPF && d.DeadPF),
		})
	}
	return out
}

// eswitchModes is each PF's eswitch mode by PCI address.
func eswitchModes(inv *discovery.Inventory) map[string]string {
	modes := map[string]string{}
	if inv == nil {
		return modes
	}
	for i := range inv.PFs {
		modes[inv.PFs[i].Address] = inv.PFs[i].ESwitch.Mode
	}
	return modes
}

// attributes are a device's attributes: the standard ones, hwnet's and
// the NPWG's. Empty values are left out, as CEL tests presence with
// "in"; a string longer than an attribute may hold is cut.
func attributes(node Node, res *pools.Resource, d *offer.State, eswitch string) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	fn := d.Function
	a := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	standard(a, node, d)
	str := func(name resourceapi.QualifiedName, v string) {
		if v != "" {
			a[name] = resourceapi.DeviceAttribute{StringValue: ptr.To(cut(v))}
		}
	}
	str(AttrVendor, fn.Vendor.String())
	str(AttrDevice, fn.Device.String())
	str(AttrModel, fn.Model)
	str(AttrPFName, d.PFName)
	str(AttrPFAddress, d.PF)
	str(AttrDriver, fn.Driver)
	str(AttrLinkType, string(fn.LinkType))
	str(AttrESwitchMode, eswitch)
	str(AttrRepresentor, d.Representor)
	str(AttrTags, strings.Join(d.Tags, ","))
	if d.VFIndex >= 0 && d.PF != "" {
		str(AttrClaimDrivers, strings.Join(res.ClaimDrivers, ","))
	}
	str(AttrPool, res.FullName())
	str(AttrResourceName, res.FullName())
	str(AttrDeviceID, d.ID)
	if d.VFIndex >= 0 && d.PF != "" {
		a[AttrVFIndex] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(d.VFIndex))}
	}
	a[AttrRDMA] = resourceapi.DeviceAttribute{BoolValue: ptr.To(fn.RDMA != nil)}
	if fn.RDMA != nil {
		str(AttrPKey, fn.RDMA.PKey)
	}
	if len(fn.Ports) > 0 && fn.Netdev != nil {
		str(AttrNetdev, fn.Netdev.Name)
		a[AttrPort] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(fn.Netdev.Port))}
	}
	if d.SF != nil {
		str(AttrAuxType, d.SF.AuxType)
		a[AttrSFNum] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(d.SF.SFNum))}
	}
	return a
}

// standard adds the Kubernetes standard attributes through the DRA
// library's helpers: pciBusID, pcieRoot (from sysfs) and numaNode (left
// out for a device without NUMA affinity, as the library asks).
func standard(a map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, node Node, d *offer.State) {
	add := func(attr deviceattribute.DeviceAttribute, err error) {
		if err == nil {
			a[attr.Name] = attr.Value
		}
	}
	// A scalable function has no PCI address of its own: it shares its
	// PF's PCIe root, which topology alignment needs.
	pci := d.PF
	if d.SF == nil {
		pci = d.Function.Address
		add(deviceattribute.GetPCIBusIDAttribute(pci))
	}
	root := node.SysfsRoot
	if root == "" {
		root = "/sys"
	}
	add(deviceattribute.GetPCIeRootAttributeByPCIBusID(pci, deviceattribute.WithFSFromRoot(root)))
	if d.Function.NUMANode >= 0 {
		add(deviceattribute.GetNUMANodeAttribute(d.Function.NUMANode, deviceattribute.ScalarAttribute))
	}
}

// cut shortens s to what a string attribute may hold.
func cut(s string) string {
	if len(s) > resourceapi.DeviceAttributeMaxValueLength {
		return s[:resourceapi.DeviceAttributeMaxValueLength]
	}
	return s
}

// taints are a device's taints: NoSchedule (NoExecute with evict) with
// the reason while it is unhealthy; NoSchedule with its holder while
// something outside DRA holds it, with the fence's reason while fenced,
// with the unreadable source while holders are unknown; none once it is
// healthy, free and known.
func taints(d *offer.State, evict bool) []resourceapi.DeviceTaint {
	var out []resourceapi.DeviceTaint
	if !d.Healthy {
		effect := resourceapi.DeviceTaintEffectNoSchedule
		if evict {
			effect = resourceapi.DeviceTaintEffectNoExecute
		}
		out = append(out, resourceapi.DeviceTaint{Key: TaintKey, Value: labelValue(d.Reason), Effect: effect})
	}
	for _, t := range []struct{ key, why string }{{HeldTaintKey, d.HeldBy}, {FencedTaintKey, d.Fenced}, {UnknownTaintKey, d.Unknown}} {
		if t.why != "" {
			out = append(out, resourceapi.DeviceTaint{Key: t.key, Value: labelValue(t.why), Effect: resourceapi.DeviceTaintEffectNoSchedule})
		}
	}
	return out
}

// labelValue writes a reason as a label value, which a taint's value must
// be: at most 63 letters, digits, '-', '_' and '.', beginning and ending
// with a letter or digit; anything else becomes '-'.
func labelValue(reason string) string {
	const maxLen = 63
	b := []byte(reason)
	for i, c := range b {
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			b[i] = '-'
		}
	}
	if len(b) > maxLen {
		b = b[:maxLen]
	}
	s := strings.TrimFunc(string(b), func(r rune) bool { return r > 0x7f || !isAlnum(byte(r)) })
	if s == "" {
		return "unhealthy"
	}
	return s
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
