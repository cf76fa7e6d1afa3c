package deviceplugin

import (
	"slices"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/node/offer"
)

// listing is what kubelet sees of a device.
func (p *Plugin) listing(s *offer.State) *pluginapi.Device {
	d := &pluginapi.Device{ID: s.ID, Health: pluginapi.Unhealthy}
	if s.Offered() {
		d.Health = pluginapi.Healthy
	}
	if node := p.numa(s); node >= 0 {
		d.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(node)}}}
	}
	return d
}

// listings is what kubelet sees of the devices.
func (p *Plugin) listings(states []offer.State) []*pluginapi.Device {
	out := make([]*pluginapi.Device, len(states))
	for i := range states {
		out[i] = p.listing(&states[i])
	}
	return out
}

// sameListing reports whether kubelet would see no difference.
func (p *Plugin) sameListing(a, b []offer.State) bool {
	return slices.EqualFunc(a, b, func(x, y offer.State) bool {
		return x.ID == y.ID && x.Offered() == y.Offered() && p.numa(&x) == p.numa(&y)
	})
}

// numa is the NUMA node kubelet sees of a device, -1 for none.
func (p *Plugin) numa(s *offer.State) int {
	if s.Function.NUMANode < 0 || p.res.ExcludeTopology {
		return -1
	}
	return s.Function.NUMANode
}
