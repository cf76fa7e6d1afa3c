package agent

import (
	"fmt"
	"time"

	"github.com/hwnet-io/hwnet/discovery"
	"github.com/hwnet-io/hwnet/pools"
)

// linkState is what a netlink event said about a link, newer than the
// inventory when seen after the discovery that made it began.
type linkState struct {
	operState string
	up        bool
	// gone is true once the link left the namespace, e.g. moved into a pod.
	gone bool
	seen time.Time
}

// linkStates overlays netlink events on the last inventory, by link name.
type linkStates map[string]linkState

// since drops what the inventory begun at start already knows.
func (ls linkStates) since(start time.Time) {
	for name, st := range ls {
		if st.seen.Before(start) {
			delete(ls, name)
		}
	}
}

// carrierLost reports whether the netdev, with any newer netlink state, is
// administratively up yet operationally down: the link is broken, not idle.
func (ls linkStates) carrierLost(nd *discovery.Netdev) bool {
	up, oper := ls.current(nd)
	return up && operDown(oper)
}

// down reports whether the netdev, with any newer netlink state, does not
// pass traffic at all, whether for lack of carrier or taken down.
func (ls linkStates) down(nd *discovery.Netdev) bool {
	_, oper := ls.current(nd)
	return operDown(oper)
}

func (ls linkStates) current(nd *discovery.Netdev) (up bool, oper string) {
	if st, ok := ls[nd.Name]; ok {
		if st.gone {
			return false, "unknown"
		}
		return st.up, st.operState
	}
	return nd.Up, nd.OperState
}

// operDown is true for the RFC 2863 states in which no frame passes;
// "unknown" is what drivers without carrier reporting say, so it is up.
func operDown(oper string) bool {
	switch oper {
	case "down", "lowerlayerdown", "notpresent":
		return true
	}
	return false
}

// health judges a pooled device: unhealthy when its PF's link is down, its
// own link is up without carrier, or it is on vfio-pci without the group
// device a DPDK application opens. An administratively down VF is idle
// and stays healthy: VFs wait down until a CNI plugin takes them.
func health(d *pools.Device, inv *discovery.Inventory, links linkStates) (bool, string) {
	if d.Function.Driver == "vfio-pci" && d.Function.VFIODevice == "" {
		return false, "bound to vfio-pci but its VFIO group device is missing"
	}
	if d.PF != "" {
		if pf, ok := inv.Function(d.PF); ok && pf.Netdev != nil && links.down(pf.Netdev) {
			return false, fmt.Sprintf("PF %s link %s is down", d.PF, pf.Netdev.Name)
		}
	}
	if nd := d.Function.Netdev; nd != nil && links.carrierLost(nd) {
		return false, fmt.Sprintf("link %s is up but has no carrier", nd.Name)
	}
	return true, ""
}
