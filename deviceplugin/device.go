package deviceplugin

import (
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/node/handout"
)

// prepared is a device with what Allocate hands out for it, computed by
// SetDevices so that Allocate only gathers.
type prepared struct {
	DeviceState
	handout *handout.Device
	specs   []*pluginapi.DeviceSpec
}

// prepare computes what Allocate hands out for one device.
func (p *Plugin) prepare(s DeviceState) *prepared {
	h := p.maker.Make(&s.Device)
	d := &prepared{DeviceState: s, handout: h, specs: make([]*pluginapi.DeviceSpec, len(h.Nodes))}
	for i, n := range h.Nodes {
		d.specs[i] = &pluginapi.DeviceSpec{HostPath: n, ContainerPath: n, Permissions: "rw"}
	}
	return d
}

// listing is what kubelet sees of a device.
func (p *Plugin) listing(s DeviceState) *pluginapi.Device {
	d := &pluginapi.Device{ID: s.ID, Health: pluginapi.Unhealthy}
	if s.Offered() {
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
