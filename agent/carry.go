package agent

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
)

// poolDevices is what a pool lists: the devices that match it now, and
// the ones it lost but keeps listing as unhealthy.
type poolDevices struct {
	matched []pools.Device
	lost    []deviceplugin.DeviceState
}

// rematch is the pool's devices after a re-discovery matched it anew. A
// device the pool listed before and no longer matches is kept, unhealthy,
// so that kubelet stops handing it out while pods that hold it run on:
//   - it left the pool's selectors (e.g. its driver changed) and no other
//     pool took it;
//   - it vanished from the PCI bus although its PF still enables it.
//
// It is dropped when another pool took it, or when its PF's sriov_numvfs
// no longer covers it: the admin removed it on purpose.
func (pd poolDevices) rematch(matched []pools.Device, inv *discovery.Inventory, pooled map[string]bool) poolDevices {
	next := poolDevices{matched: matched}
	inPool := make(map[string]bool, len(matched))
	for _, d := range matched {
		inPool[d.ID] = true
	}
	prev := slices.Concat(pd.matched, lostDevices(pd.lost))
	for i := range prev {
		d := &prev[i]
		if inPool[d.ID] || pooled[d.ID] {
			continue
		}
		if reason, keep := lostReason(d, inv); keep {
			next.lost = append(next.lost, deviceplugin.DeviceState{Device: *d, Reason: reason})
		}
	}
	return next
}

func lostDevices(lost []deviceplugin.DeviceState) []pools.Device {
	devs := make([]pools.Device, len(lost))
	for i := range lost {
		devs[i] = lost[i].Device
	}
	return devs
}

// lostReason says why a device the pool no longer matches stays listed,
// or keep=false when it should go.
func lostReason(d *pools.Device, inv *discovery.Inventory) (reason string, keep bool) {
	if f, ok := inv.Function(d.Function.Address); ok {
		if len(f.Excluded) > 0 {
			return fmt.Sprintf("no longer offered: %s", f.Excluded[0]), true
		}
		return fmt.Sprintf("no longer matches the pool's selectors (driver %q)", f.Driver), true
	}
	if d.PF != "" && d.VFIndex >= numVFs(inv, d.PF) {
		if _, ok := inv.Function(d.PF); ok {
			return "", false
		}
	}
	return "disappeared from the PCI bus", true
}

// numVFs is the PF's sriov_numvfs, or 0 when the address is no PF.
func numVFs(inv *discovery.Inventory, pf string) int {
	i, ok := slices.BinarySearchFunc(inv.PFs, pf, func(p discovery.PF, addr string) int { return cmp.Compare(p.Address, addr) })
	if !ok {
		return 0
	}
	return inv.PFs[i].SRIOV.NumVFs
}

// states is the list the pool's front end serves: matched devices with
// their health and what else holds them, and the lost ones, sorted by ID.
func (pd poolDevices) states(v devhealth.View, held *ledger.Ledger, fe ledger.FrontEnd) []deviceplugin.DeviceState {
	out := make([]deviceplugin.DeviceState, 0, len(pd.matched)+len(pd.lost))
	for i := range pd.matched {
		ok, reason := v.Device(&pd.matched[i])
		s := deviceplugin.DeviceState{Device: pd.matched[i], Healthy: ok, Reason: reason, DeadPF: v.DeadPF(&pd.matched[i])}
		if h, foreign := held.Foreign(s.ID, fe); foreign {
			s.HeldBy = h.String()
		}
		out = append(out, s)
	}
	for _, s := range pd.lost {
		s.DeadPF = v.DeadPF(&s.Device)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b deviceplugin.DeviceState) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
