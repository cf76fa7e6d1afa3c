package deviceplugin

import (
	"path"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/devinfo"
	"github.com/hwnet-io/hwnet/discovery"
	"github.com/hwnet-io/hwnet/pools"
)

// Device nodes every container of some pools gets.
const (
	vfioContainer = "/dev/vfio/vfio"
	vhostNet      = "/dev/vhost-net"
	tun           = "/dev/net/tun"
)

// prepared is a device with what Allocate hands out for it, computed by
// SetDevices so that Allocate only gathers.
type prepared struct {
	DeviceState
	specs   []*pluginapi.DeviceSpec
	env     *deviceEnvInfo
	devinfo *devinfo.DeviceInfo
}

// deviceEnvInfo is a device's entry in the PCIDEVICE_<...>_INFO variable.
// Its keys are the SR-IOV network device plugin's info provider names with
// the keys each provider sets, so that workloads reading that variable
// work unchanged; fields are in the order encoding/json sorts a map's keys,
// which is the order that plugin prints them in.
type deviceEnvInfo struct {
	Extra   map[string]string `json:"extra,omitempty"`
	Generic genericEnvInfo    `json:"generic"`
	RDMA    *rdmaEnvInfo      `json:"rdma,omitempty"`
	UIO     *uioEnvInfo       `json:"uio,omitempty"`
	VDPA    *vdpaEnvInfo      `json:"vdpa,omitempty"`
	VFIO    *vfioEnvInfo      `json:"vfio,omitempty"`
	Vhost   *vhostEnvInfo     `json:"vhost,omitempty"`
}

type genericEnvInfo struct {
	DeviceID string `json:"deviceID"`
}

type rdmaEnvInfo struct {
	Issm    string `json:"issm,omitempty"`
	RDMACM  string `json:"rdma_cm,omitempty"`
	RDMADev string `json:"rdma_dev,omitempty"`
	Umad    string `json:"umad,omitempty"`
	Uverbs  string `json:"uverbs,omitempty"`
}

type uioEnvInfo struct {
	Mount string `json:"mount"`
}

type vdpaEnvInfo struct {
	Mount string `json:"mount,omitempty"`
}

type vfioEnvInfo struct {
	DevMount string `json:"dev-mount,omitempty"`
	Mount    string `json:"mount"`
}

type vhostEnvInfo struct {
	NetMount string `json:"net-mount"`
	TunMount string `json:"tun-mount"`
}

// prepare computes what Allocate hands out for one device.
func (p *Plugin) prepare(s DeviceState) *prepared {
	d := &prepared{DeviceState: s, env: &deviceEnvInfo{Generic: genericEnvInfo{DeviceID: s.ID}}}
	d.env.Extra = additionalInfo(p.res.AdditionalInfo, s.ID)
	fn := &s.Function
	if fn.Driver == "vfio-pci" {
		d.addVFIO(p.devPath(fn.VFIODevice))
	}
	if fn.UIODevice != "" {
		d.addUIO(p.devPath(fn.UIODevice))
	}
	if rdma := p.rdma(fn); rdma != nil {
		d.addRDMA(rdma, p.devPath)
	}
	vdpa := p.vdpaDevice(fn)
	if vdpa != nil {
		d.addVDPA(p.res.VDPAType, p.devPath(vdpa.Path))
	}
	if p.res.NeedVhostNet {
		d.env.Vhost = &vhostEnvInfo{NetMount: vhostNet, TunMount: tun}
		d.addSpec(vhostNet)
		d.addSpec(tun)
	}
	d.devinfo = p.deviceInfo(s.Device, vdpa)
	return d
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

// addSpec hands out a device node read-write. No device gets "m": a
// container opens its nodes but never creates them, so mknod rights would
// be privilege for nothing (the SR-IOV network device plugin dropped "m"
// too, in its PR #491).
func (d *prepared) addSpec(p string) {
	d.specs = append(d.specs, &pluginapi.DeviceSpec{HostPath: p, ContainerPath: p, Permissions: "rw"})
}

// addVFIO hands out the VFIO container and the device's group, which
// discovery found as /dev/vfio/<group> or, without an IOMMU,
// /dev/vfio/noiommu-<group>.
func (d *prepared) addVFIO(group string) {
	d.env.VFIO = &vfioEnvInfo{Mount: vfioContainer}
	d.addSpec(vfioContainer)
	if group != "" {
		d.env.VFIO.DevMount = group
		d.addSpec(group)
	}
}

// addUIO hands out the /dev/uioN through which a UIO driver gives the
// device to user space.
func (d *prepared) addUIO(node string) {
	d.env.UIO = &uioEnvInfo{Mount: node}
	d.addSpec(node)
}

// rdma is the function's RDMA device when the pool hands RDMA out: only
// an isRdma pool does, as in the SR-IOV network device plugin, since umad
// and issm let a pod send management datagrams and claim to be the
// fabric's subnet manager.
func (p *Plugin) rdma(fn *discovery.Function) *discovery.RDMA {
	if !p.res.IsRDMA || fn.RDMA == nil || len(fn.RDMA.CharDevices) == 0 {
		return nil
	}
	return fn.RDMA
}

// addRDMA hands out every character device of the device's RDMA device.
// The _INFO entry names one of each kind, as the SR-IOV network device
// plugin does: the first, which is port 1's.
func (d *prepared) addRDMA(rdma *discovery.RDMA, devPath func(string) string) {
	info := &rdmaEnvInfo{RDMADev: rdma.Device}
	for _, c := range rdma.CharDevices {
		p := devPath(c)
		d.addSpec(p)
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
	d.env.RDMA = info
}

// addVDPA hands out a vhost-vdpa device node; a virtio-vdpa device is a
// netdev in the host and has none.
func (d *prepared) addVDPA(vdpaType, devPath string) {
	d.env.VDPA = &vdpaEnvInfo{}
	if vdpaType == "vhost" && devPath != "" {
		d.env.VDPA.Mount = devPath
		d.addSpec(devPath)
	}
}

// vdpaDevice is the function's vDPA device bound to the driver of the
// pool's vdpaType, nil when the pool is not a vDPA pool or the function
// has none.
func (p *Plugin) vdpaDevice(fn *discovery.Function) *discovery.VDPADevice {
	var want string
	switch p.res.VDPAType {
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
func (p *Plugin) deviceInfo(dev pools.Device, vdpa *discovery.VDPADevice) *devinfo.DeviceInfo {
	if vdpa != nil {
		return devinfo.NewVDPA(devinfo.VDPA{
			ParentDevice:      vdpa.Name,
			Driver:            p.res.VDPAType,
			Path:              p.vdpaPath(vdpa),
			PCIAddress:        dev.ID,
			PFPCIAddress:      dev.PF,
			RepresentorDevice: dev.Representor,
		})
	}
	info := devinfo.PCI{PCIAddress: dev.ID, PFPCIAddress: dev.PF, RepresentorDevice: dev.Representor}
	if rdma := p.rdma(&dev.Function); rdma != nil {
		info.RDMADevice = rdma.Device
	}
	if p.res.NeedVhostNet {
		info.VhostNet = vhostNet
	}
	return devinfo.NewPCI(info)
}

// vdpaPath is the device node of a vhost-vdpa device and, as a virtio-vdpa
// device has none, the vDPA device's sysfs directory otherwise.
func (p *Plugin) vdpaPath(vdpa *discovery.VDPADevice) string {
	if vdpa.Path != "" {
		return p.devPath(vdpa.Path)
	}
	return "/sys/bus/vdpa/devices/" + vdpa.Name
}

// devPath turns a path discovery found under DevRoot into the /dev path of
// the host, which kubelet and the container see.
func (p *Plugin) devPath(found string) string {
	rest, ok := strings.CutPrefix(found, p.opts.DevRoot)
	if !ok || p.opts.DevRoot == "/dev" || (rest != "" && rest[0] != '/') {
		return found
	}
	return "/dev" + rest
}

// listing is what kubelet sees of a device.
func (p *Plugin) listing(s DeviceState) *pluginapi.Device {
	d := &pluginapi.Device{ID: s.ID, Health: pluginapi.Unhealthy}
	if s.Healthy {
		d.Health = pluginapi.Healthy
	}
	if node := s.Function.NUMANode; node >= 0 && !p.res.ExcludeTopology {
		d.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(node)}}}
	}
	return d
}

// sameListing reports whether kubelet would see no difference.
func sameListing(a, b []*pluginapi.Device) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Health != b[i].Health || numaOf(a[i]) != numaOf(b[i]) {
			return false
		}
	}
	return true
}

func numaOf(d *pluginapi.Device) int64 {
	if d.Topology == nil || len(d.Topology.Nodes) == 0 {
		return -1
	}
	return d.Topology.Nodes[0].ID
}
