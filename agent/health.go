package agent

import (
	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/devinfo"
)

// healthView is the agent's current view for health: the device-info
// directory says which devices containers hold.
func (a *Agent) healthView() devhealth.View {
	v := devhealth.View{Inv: a.inv, Links: a.links, Netdevs: a.netdevs}
	held, err := devinfo.Held(a.opts.DevinfoDir)
	if err != nil {
		a.reportOnce("device-info directory unreadable: no device's netdev counts as lost", err.Error())
		return v
	}
	v.Held = held
	return v
}
