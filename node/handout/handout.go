// Package handout computes what a pool's device gives a container, the
// same whichever way it is served (kubelet device plugin or DRA): the
// device nodes, its entry in the SR-IOV network device plugin's
// PCIDEVICE_<PREFIX>_<NAME>_INFO variable and its NPWG device information
// file.
package handout

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
)

// Device nodes every container of some pools gets.
const (
	VFIOContainer = "/dev/vfio/vfio"
	VhostNet      = "/dev/vhost-net"
	Tun           = "/dev/net/tun"
)

// Device is what one device gives a container.
type Device struct {
	// ID is the device's kubelet device ID, its PCI address.
	ID string
	// Nodes are the device nodes the container gets read-write, each at
	// the same path as on the host.
	Nodes []string
	// Env is the device's entry in the _INFO variable.
	Env *EnvInfo
	// Info is the device's device information file.
	Info *devinfo.DeviceInfo
}

// EnvInfo is a device's entry in the PCIDEVICE_<...>_INFO variable.
// Its keys are the SR-IOV network device plugin's info provider names with
// the keys each provider sets, so that workloads reading that variable
// work unchanged; fields are in the order encoding/json sorts a map's keys,
// which is the order that plugin prints them in.
type EnvInfo struct {
	Extra   map[string]string `json:"extra,omitempty"`
	Generic GenericEnvInfo    `json:"generic"`
	RDMA    *RDMAEnvInfo      `json:"rdma,omitempty"`
	UIO     *UIOEnvInfo       `json:"uio,omitempty"`
	VDPA    *VDPAEnvInfo      `json:"vdpa,omitempty"`
	VFIO    *VFIOEnvInfo      `json:"vfio,omitempty"`
	Vhost   *VhostEnvInfo     `json:"vhost,omitempty"`
}

// GenericEnvInfo is the generic provider's entry.
type GenericEnvInfo struct {
	DeviceID string `json:"deviceID"`
}

// RDMAEnvInfo is the RDMA provider's entry: one device node of each kind.
type RDMAEnvInfo struct {
	Issm    string `json:"issm,omitempty"`
	RDMACM  string `json:"rdma_cm,omitempty"`
	RDMADev string `json:"rdma_dev,omitempty"`
	Umad    string `json:"umad,omitempty"`
	Uverbs  string `json:"uverbs,omitempty"`
}

// UIOEnvInfo is the UIO provider's entry.
type UIOEnvInfo struct {
	Mount string `json:"mount"`
}

// VDPAEnvInfo is the vDPA provider's entry.
type VDPAEnvInfo struct {
	Mount string `json:"mount,omitempty"`
}

// VFIOEnvInfo is the VFIO provider's entry.
type VFIOEnvInfo struct {
	DevMount string `json:"dev-mount,omitempty"`
	Mount    string `json:"mount"`
}

// VhostEnvInfo is the vhost-net provider's entry.
type VhostEnvInfo struct {
	NetMount string `json:"net-mount"`
	TunMount string `json:"tun-mount"`
}

// Maker computes hand-outs for the devices of one pool.
type Maker struct {
	res     *pools.Resource
	devRoot string
}

// NewMaker returns the maker of res's devices; devRoot is where discovery
// found device nodes ("" means /dev): paths under it are handed out as
// the same paths under /dev.
func NewMaker(res *pools.Resource, devRoot string) *Maker {
	if devRoot == "" {
		devRoot = "/dev"
	}
	return &Maker{res: res, devRoot: filepath.Clean(devRoot)}
}

// Make computes what dev gives a container.
func (m *Maker) Make(dev *pools.Device) *Device {
	d := &Device{ID: dev.ID, Env: &EnvInfo{Generic: GenericEnvInfo{DeviceID: dev.ID}}}
	d.Env.Extra = additionalInfo(m.res.AdditionalInfo, dev.ID)
	fn := dev.Function
	if fn.Driver == "vfio-pci" {
		d.addVFIO(m.devPath(fn.VFIODevice))
	}
	if fn.UIODevice != "" {
		d.addUIO(m.devPath(fn.UIODevice))
	}
	if rdma := m.rdma(fn); rdma != nil {
		d.addRDMA(rdma, m.devPath)
	}
	vdpa := m.vdpaDevice(fn)
	if vdpa != nil {
		d.addVDPA(m.res.VDPAType, m.devPath(vdpa.Path))
	}
	if m.res.NeedVhostNet {
		d.Env.Vhost = &VhostEnvInfo{NetMount: VhostNet, TunMount: Tun}
		d.addNode(VhostNet)
		d.addNode(Tun)
	}
	d.Info = m.deviceInfo(dev, vdpa)
	return d
}

// EnvVars are the variables a container with devs of res gets, as the
// SR-IOV network device plugin sets them: PCIDEVICE_<PREFIX>_<NAME> with
// the PCI addresses sorted and comma-separated, and its _INFO twin with a
// JSON object of each device's entry by device ID.
func EnvVars(res *pools.Resource, devs []*Device) (map[string]string, error) {
	sorted := slices.Clone(devs)
	slices.SortFunc(sorted, func(a, b *Device) int { return strings.Compare(a.ID, b.ID) })
	ids := make([]string, len(sorted))
	info := make(map[string]*EnvInfo, len(sorted))
	for i, d := range sorted {
		ids[i], info[d.ID] = d.ID, d.Env
	}
	name := res.EnvName()
	infoJSON, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("%s_INFO: %w", name, err)
	}
	return map[string]string{name: strings.Join(ids, ","), name + "_INFO": string(infoJSON)}, nil
}

// additionalInfo merges the resource's "*" entry and the device's own.
func additionalInfo(info map[string]map[string]string, id string) map[string]string {
	var merged map[string]string
	for _, key := range []string{"*", id} {
		for k, v := range info[key] {
			if merged == nil {
				merged = map[string]string{}
			}
			merged[k] = v
		}
	}
	return merged
}

// addNode hands out a device node read-write. No device gets "m": a
// container opens its nodes but never creates them, so mknod rights would
// be privilege for nothing (the SR-IOV network device plugin dropped "m"
// too, in its PR #491).
func (d *Device) addNode(p string) {
	if !slices.Contains(d.Nodes, p) {
		d.Nodes = append(d.Nodes, p)
	}
}

// addVFIO hands out the VFIO container and the device's group, which
// discovery found as /dev/vfio/<group> or, without an IOMMU,
// /dev/vfio/noiommu-<group>.
func (d *Device) addVFIO(group string) {
	d.Env.VFIO = &VFIOEnvInfo{Mount: VFIOContainer}
	d.addNode(VFIOContainer)
	if group != "" {
		d.Env.VFIO.DevMount = group
		d.addNode(group)
	}
}

// addUIO hands out the /dev/uioN through which a UIO driver gives the
// device to user space.
func (d *Device) addUIO(node string) {
	d.Env.UIO = &UIOEnvInfo{Mount: node}
	d.addNode(node)
}

// rdma is the function's RDMA device when the pool hands RDMA out: only
// an isRdma pool does, as in the SR-IOV network device plugin, since umad
// and issm let a pod send management datagrams and claim to be the
// fabric's subnet manager.
func (m *Maker) rdma(fn *discovery.Function) *discovery.RDMA {
	if !m.res.IsRDMA || fn.RDMA == nil || len(fn.RDMA.CharDevices) == 0 {
		return nil
	}
	return fn.RDMA
}

// addRDMA hands out every character device of the device's RDMA device.
// The _INFO entry names one of each kind, as the SR-IOV network device
// plugin does: the first, which is port 1's.
func (d *Device) addRDMA(rdma *discovery.RDMA, devPath func(string) string) {
	info := &RDMAEnvInfo{RDMADev: rdma.Device}
	for _, c := range rdma.CharDevices {
		p := devPath(c)
		d.addNode(p)
		var kind *string
		switch base := path.Base(p); {
		case strings.HasPrefix(base, "uverbs"):
			kind = &info.Uverbs
		case strings.HasPrefix(base, "umad"):
			kind = &info.Umad
		case strings.HasPrefix(base, "issm"):
			kind = &info.Issm
		case base == "rdma_cm":
			kind = &info.RDMACM
		}
		if kind != nil && *kind == "" {
			*kind = p
		}
	}
	d.Env.RDMA = info
}

// addVDPA hands out a vhost-vdpa device node; a virtio-vdpa device is a
// netdev in the host and has none.
func (d *Device) addVDPA(vdpaType, devPath string) {
	d.Env.VDPA = &VDPAEnvInfo{}
	if vdpaType == "vhost" && devPath != "" {
		d.Env.VDPA.Mount = devPath
		d.addNode(devPath)
	}
}

// vdpaDevice is the function's vDPA device bound to the driver of the
// pool's vdpaType, nil when the pool is not a vDPA pool or the function
// has none.
func (m *Maker) vdpaDevice(fn *discovery.Function) *discovery.VDPADevice {
	var want string
	switch m.res.VDPAType {
	case "vhost":
		want = "vhost_vdpa"
	case "virtio":
		want = "virtio_vdpa"
	default:
		return nil
	}
	for i := range fn.VDPA {
		if fn.VDPA[i].Driver == want {
			return &fn.VDPA[i]
		}
	}
	return nil
}

// deviceInfo is the device's device information file.
func (m *Maker) deviceInfo(dev *pools.Device, vdpa *discovery.VDPADevice) *devinfo.DeviceInfo {
	if vdpa != nil {
		return devinfo.NewVDPA(devinfo.VDPA{
			ParentDevice:      vdpa.Name,
			Driver:            m.res.VDPAType,
			Path:              m.vdpaPath(vdpa),
			PCIAddress:        dev.Function.Address,
			PFPCIAddress:      dev.PF,
			RepresentorDevice: dev.Representor,
		})
	}
	info := devinfo.PCI{PCIAddress: dev.Function.Address, PFPCIAddress: dev.PF, RepresentorDevice: dev.Representor}
	if rdma := m.rdma(dev.Function); rdma != nil {
		info.RDMADevice = rdma.Device
	}
	if m.res.NeedVhostNet {
		info.VhostNet = VhostNet
	}
	return devinfo.NewPCI(info)
}

// vdpaPath is the device node of a vhost-vdpa device and, as a virtio-vdpa
// device has none, the vDPA device's sysfs directory otherwise.
func (m *Maker) vdpaPath(vdpa *discovery.VDPADevice) string {
	if vdpa.Path != "" {
		return m.devPath(vdpa.Path)
	}
	return "/sys/bus/vdpa/devices/" + vdpa.Name
}

// devPath turns a path discovery found under the dev root into the /dev
// path of the host, which kubelet and the container see.
func (m *Maker) devPath(found string) string {
	rest, ok := strings.CutPrefix(found, m.devRoot)
	if !ok || m.devRoot == "/dev" || (rest != "" && rest[0] != '/') {
		return found
	}
	return "/dev" + rest
}
