// Package devhealth judges whether a pooled device can serve a pod: from
// the inventory, link states netlink reported since, which devices
// containers hold, and which functions had a netdev. Both front ends, the
// device plugin (ListAndWatch's Healthy) and the DRA driver (a device taint
// and kubelet's health stream, both of which reach the pods' status), take
// their verdicts from here.
package devhealth

import (
	"fmt"
	"time"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
)

// LinkState is what a netlink event said about a link, newer than the
// inventory when seen after the discovery that made it began.
type LinkState struct {
	OperState string
	Up        bool
	// Gone is true once the link left the namespace, e.g. moved into a pod.
	Gone bool
	Seen time.Time
}

// LinkStates overlays netlink events on the last inventory, by link name.
type LinkStates map[string]LinkState

// Since drops what the inventory begun at start already knows. A link
// netlink said left the namespace stays gone until netlink says it is
// back (a new state replaces it): netlink is the authority on which links
// are in the namespace, and a sysfs listing is only as current as the
// namespace it was mounted in (the virtual node's tree keeps a moved
// netdev), so a discovery must not bring a gone link back.
func (ls LinkStates) Since(start time.Time) {
	for name, st := range ls {
		if st.Seen.Before(start) && !st.Gone {
			delete(ls, name)
		}
	}
}

// carrierLost reports whether the netdev, with any newer netlink state, is
// administratively up yet operationally down: the link is broken, not idle.
func (ls LinkStates) carrierLost(nd *discovery.Netdev) bool {
	up, oper := ls.current(nd)
	return up && operDown(oper)
}

// down reports whether the netdev, with any newer netlink state, does not
// pass traffic at all, whether for lack of carrier or taken down.
func (ls LinkStates) down(nd *discovery.Netdev) bool {
	up, oper := ls.current(nd)
	return !up || operDown(oper)
}

// present reports whether the netdev is in the node's namespace: as the
// newest netlink event says, else as discovery found it.
func (ls LinkStates) present(nd *discovery.Netdev) bool {
	if st, ok := ls[nd.Name]; ok {
		return !st.Gone
	}
	return !nd.Elsewhere
}

func (ls LinkStates) current(nd *discovery.Netdev) (up bool, oper string) {
	if st, ok := ls[nd.Name]; ok {
		if st.Gone {
			return false, "unknown"
		}
		return st.Up, st.OperState
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

// View is what device health is judged from: the inventory, newer
// link states, which devices a container holds and which functions had a
// netdev.
type View struct {
	Inv   *discovery.Inventory
	Links LinkStates
	// Held are the devices a pod, claim or sandbox holds
	// (ledger.Ledger.Held): their netdev may be in a pod. nil
	// means unknown: a device whose netdev is away may be held, or lost,
	// and is not judged healthy.
	Held map[string]bool
	// Netdevs remembers, for each function once seen with a netdev, the
	// driver it had then.
	Netdevs NetdevMemory
}

// NetdevMemory maps a function's PCI address to the driver it had while it
// had a netdev.
type NetdevMemory map[string]string

// Seed remembers the VFs of the inventory that have a netdev and, for each
// VF without one, the driver another VF of its PF has a netdev under: the
// VF had one too, as far as an agent that just started can tell, so that
// a netdev that vanished before a restart still counts as lost after it.
func (m NetdevMemory) Seed(inv *discovery.Inventory) {
	for i := range inv.PFs {
		vfs := inv.PFs[i].VFs
		withNetdev := map[string]bool{}
		for j := range vfs {
			if fn := vfs[j].Function; fn.Netdev != nil && fn.Driver != "" {
				withNetdev[fn.Driver] = true
				m[fn.Address] = fn.Driver
			}
		}
		for j := range vfs {
			fn := vfs[j].Function
			if _, known := m[fn.Address]; !known && withNetdev[fn.Driver] {
				m[fn.Address] = fn.Driver
			}
		}
	}
}

// netdevLost reports a device whose netdev left the node's network
// namespace, or was seen and is gone under the same driver, while no
// container holds the device: nothing moved it into a pod, so it is broken
// (a driver reset, a netdev stuck in a dead namespace), and every
// attachment of it would fail. A held device's netdev is expected to be in
// its pod.
func (v View) netdevLost(d *pools.Device) (bool, string) {
	fn := d.Function
	nd := fn.Netdev
	switch {
	case nd != nil && v.Links.present(nd):
		v.Netdevs[fn.Address] = fn.Driver
		return false, ""
	case !v.NetdevAway(d) || v.Held[d.ID]:
		return false, ""
	case v.Held == nil:
		// No container may hold it, or one may: never judged healthy
		// until the ledger can say.
		return true, "its netdev is away from the node's network namespace and whether a container holds the device is unknown"
	case nd != nil:
		return true, fmt.Sprintf("its netdev %s left the node's network namespace while no container holds the device", nd.Name)
	}
	return true, fmt.Sprintf("its netdev is gone (driver %s had one) while no container holds the device", fn.Driver)
}

// NetdevAway reports whether the device has, or had, a netdev that is not
// in the node's network namespace now: in a pod, or gone. Once nothing
// holds such a device it is lost.
func (v View) NetdevAway(d *pools.Device) bool {
	fn := d.Function
	if nd := fn.Netdev; nd != nil {
		return !v.Links.present(nd)
	}
	return fn.Driver != "" && v.Netdevs[fn.Address] == fn.Driver
}

// Device judges a pooled device: unhealthy when its PF's link is down, its
// own link is up without carrier, its netdev is lost (netdevLost), or it
// is on vfio-pci without the group device a DPDK application opens. An
// administratively down VF is idle and stays healthy: VFs wait down until
// a CNI plugin takes them.
func (v View) Device(d *pools.Device) (healthy bool, reason string) {
	if d.Function.Driver == "vfio-pci" && d.Function.VFIODevice == "" {
		return false, "bound to vfio-pci but its VFIO group device is missing"
	}
	if down, reason := v.pfDown(d); down {
		return false, reason
	}
	if nd := d.Function.Netdev; nd != nil && v.Links.carrierLost(nd) {
		return false, fmt.Sprintf("link %s is up but has no carrier", nd.Name)
	}
	if lost, reason := v.netdevLost(d); lost {
		return false, reason
	}
	return true, ""
}

// pfDown reports a VF whose PF's link is down, and says so.
func (v View) pfDown(d *pools.Device) (bool, string) {
	if d.PF == "" {
		return false, ""
	}
	if pf, ok := v.Inv.Function(d.PF); ok && pf.Netdev != nil && v.Links.down(pf.Netdev) {
		return true, fmt.Sprintf("PF %s link %s is down", d.PF, pf.Netdev.Name)
	}
	return false, ""
}

// DeadPF reports a VF whose PF carries no VF's traffic: the PF's link is
// down (the verdict Device gives every VF of it) or the PF left the PCI
// bus. Unlike a VF's own fault, waiting on this node does not help any
// pod that uses the PF's VFs, so the DRA driver may taint them NoExecute.
func (v View) DeadPF(d *pools.Device) bool {
	if d.PF == "" {
		return false
	}
	if _, ok := v.Inv.Function(d.PF); !ok {
		return true
	}
	down, _ := v.pfDown(d)
	return down
}
