// Package offer decides what each pool offers its front end (a device
// plugin's ListAndWatch, the DRA driver's ResourceSlices): the devices that
// match the pool now and the ones it lost but keeps listing, each with its
// health (package devhealth) and what keeps it from being handed out (the
// device ledger: a holder the front end did not hand it to, a fence, a
// source of holders that cannot be read).
package offer

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
)

// State is a device of a pool and whether its front end may hand it out.
type State struct {
	pools.Device
	Healthy bool
	// Reason says why a device is unhealthy.
	Reason string
	// HeldBy names what holds the device other than the pool's own
	// front end (a DRA claim after a mode switch, a sandbox whose pod is
	// gone).
	HeldBy string
	// Fenced says why a fence withdraws the device: its PF's VF layout
	// is changing, its pool is switching front end.
	Fenced string
	// Unknown says why who holds the device is not known: a source of
	// holders cannot be read.
	Unknown string
	// DeadPF is true for a VF whose PF carries no VF's traffic
	// (devhealth.View.DeadPF).
	DeadPF bool
	// NetdevAway is true for a device whose netdev is not in the node's
	// network namespace (devhealth.View.NetdevAway).
	NetdevAway bool
}

// Offered reports whether pods may get the device now.
func (s State) Offered() bool { return s.Withheld() == "" }

// Withheld says why the device is not offered, "" when it is.
func (s State) Withheld() string {
	switch {
	case s.Fenced != "":
		return "fenced: " + s.Fenced
	case s.Unknown != "":
		return s.Unknown
	case s.HeldBy != "":
		return "held by " + s.HeldBy
	case !s.Healthy:
		return "unhealthy: " + s.Reason
	}
	return ""
}

// Pool is what a pool lists: the devices that match it now, and the ones
// it lost but keeps listing as unhealthy.
type Pool struct {
	Matched []pools.Device
	lost    []State
}

// Rematch is the pool's devices after a re-discovery matched it anew. A
// device the pool listed before and no longer matches is kept, unhealthy,
// so that kubelet stops handing it out while pods that hold it run on:
//   - it left the pool's selectors (e.g. its driver changed) and no other
//     pool took it;
//   - it vanished from the PCI bus although its PF still enables it.
//
// It is dropped when another pool took it, or when its PF's sriov_numvfs
// no longer covers it: the admin removed it on purpose.
func (p Pool) Rematch(matched []pools.Device, inv *discovery.Inventory, pooled map[string]bool) Pool {
	next := Pool{Matched: matched}
	inPool := make(map[string]bool, len(matched))
	for _, d := range matched {
		inPool[d.ID] = true
	}
	prev := slices.Concat(p.Matched, lostDevices(p.lost))
	for i := range prev {
		d := &prev[i]
		if inPool[d.ID] || pooled[d.ID] {
			continue
		}
		if reason, keep := lostReason(d, inv); keep {
			next.lost = append(next.lost, State{Device: *d, Reason: reason})
		}
	}
	return next
}

func lostDevices(lost []State) []pools.Device {
	devs := make([]pools.Device, len(lost))
	for i := range lost {
		devs[i] = lost[i].Device
	}
	return devs
}

// lostReason says why a device the pool no longer matches stays listed,
// or keep=false when it should go.
func lostReason(d *pools.Device, inv *discovery.Inventory) (reason string, keep bool) {
	if d.SF != nil {
		return lostSFReason(d, inv)
	}
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

// lostSFReason is lostReason for a scalable function: one its PF no
// longer has was deleted (devlink port del) and goes, as a VF a smaller
// count took away does.
func lostSFReason(d *pools.Device, inv *discovery.Inventory) (reason string, keep bool) {
	i, ok := slices.BinarySearchFunc(inv.PFs, d.PF, func(p discovery.PF, addr string) int { return cmp.Compare(p.Address, addr) })
	if !ok {
		return fmt.Sprintf("its PF %s disappeared from the PCI bus", d.PF), true
	}
	k := slices.IndexFunc(inv.PFs[i].SFs, func(sf discovery.SF) bool { return sf.Name == d.ID })
	switch {
	case k < 0:
		return "", false
	case len(inv.PFs[i].SFs[k].Excluded) > 0:
		return fmt.Sprintf("no longer offered: %s", inv.PFs[i].SFs[k].Excluded[0]), true
	}
	return "no longer matches the pool's selectors", true
}

// numVFs is the PF's sriov_numvfs, or 0 when the address is no PF.
func numVFs(inv *discovery.Inventory, pf string) int {
	i, ok := slices.BinarySearchFunc(inv.PFs, pf, func(p discovery.PF, addr string) int { return cmp.Compare(p.Address, addr) })
	if !ok {
		return 0
	}
	return inv.PFs[i].SRIOV.NumVFs
}

// States is the list the pool's front end serves: matched devices with
// their health and what keeps them from being handed out, and the lost
// ones, sorted by ID.
func (p Pool) States(v devhealth.View, l *ledger.Ledger, fe ledger.FrontEnd) []State {
	out := make([]State, 0, len(p.Matched)+len(p.lost))
	unknown := l.UnknownWhy()
	for i := range p.Matched {
		d := &p.Matched[i]
		ok, reason := v.Device(d)
		s := State{Device: *d, Healthy: ok, Reason: reason, DeadPF: v.DeadPF(d), Unknown: unknown, NetdevAway: v.NetdevAway(d)}
		if h, foreign := l.Foreign(s.ID, fe); foreign {
			s.HeldBy = h.String()
		}
		if f, fenced := l.Fenced(s.ID, d.PF); fenced {
			s.Fenced = f.Reason
		}
		out = append(out, s)
	}
	for _, s := range p.lost {
		s.DeadPF = v.DeadPF(&s.Device)
		s.Unknown = unknown
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b State) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// AwaitsRelease reports whether a device's verdict waits on a hold
// ending, which only reading the ledger again tells: a holder the pool's
// front end did not hand it to (it is offered once that one lets go), or
// device plugin pods alone holding a device whose netdev is away (in a
// pod, or gone: lost once they let go).
func (p Pool) AwaitsRelease(v devhealth.View, l *ledger.Ledger, fe ledger.FrontEnd) bool {
	return slices.ContainsFunc(p.Matched, func(d pools.Device) bool {
		_, foreign := l.Foreign(d.ID, fe)
		return foreign || (l.PodsOnly(d.ID) && v.NetdevAway(&d))
	})
}

// Unmoved reports whether States and AwaitsRelease under v say with the
// ledger now what they said with was, when the two differ only in the
// holders of changed (ledger.Ledger.Changed, not every): for each of the
// pool's devices among them, the foreign holder is as it was and, where
// its netdev is away, whether it is held and whether pods alone hold it.
// It weighs the changed devices only, where States weighs every one: a
// claim prepared, or a pod allocated, a device of its own pool moves no
// list.
func (p Pool) Unmoved(v devhealth.View, was, now *ledger.Ledger, fe ledger.FrontEnd, changed []string) bool {
	for i := range p.Matched {
		d := &p.Matched[i]
		if _, ok := slices.BinarySearch(changed, d.ID); !ok {
			continue
		}
		wasBy, wasForeign := was.Foreign(d.ID, fe)
		nowBy, nowForeign := now.Foreign(d.ID, fe)
		if wasForeign != nowForeign || wasBy.String() != nowBy.String() {
			return false
		}
		// Who holds a device weighs on its health and on the wait for
		// its release only while its netdev is away.
		held := was.IsHeld(d.ID) != now.IsHeld(d.ID) || was.PodsOnly(d.ID) != now.PodsOnly(d.ID)
		if held && v.NetdevAway(d) {
			return false
		}
	}
	return true
}

// Verdicts are what the states say of each device's health, for the
// ledger's Judge.
func Verdicts(states ...[]State) ledger.Verdicts {
	out := ledger.Verdicts{Unhealthy: map[string]string{}, Away: map[string]bool{}}
	for _, ss := range states {
		for _, s := range ss {
			if !s.Healthy {
				out.Unhealthy[s.ID] = s.Reason
			}
			if s.NetdevAway {
				out.Away[s.ID] = true
			}
		}
	}
	return out
}

// Netdevs are the netdevs a hand-out of each device of the states
// probes (devhealth.Probe), by device ID: its own, unless it is away
// already (that has a verdict), and its PF's.
func Netdevs(states ...[]State) map[string]devhealth.Netdevs {
	out := map[string]devhealth.Netdevs{}
	for _, ss := range states {
		for _, s := range ss {
			var n devhealth.Netdevs
			if nd := s.Function.Netdev; nd != nil && !s.NetdevAway {
				n.Own = nd.Name
			}
			n.PF = s.PFName
			if n != (devhealth.Netdevs{}) {
				out[s.ID] = n
			}
		}
	}
	return out
}

// Moving are the devices, sorted, that served lists under one front end
// and res, a new match, serves under another or under none: a pool's mode
// switch, a device moving to another pool, a pool removed.
func Moving(served map[ledger.FrontEnd][]pools.Device, res *pools.Result) []string {
	next := map[string]ledger.FrontEnd{}
	for _, p := range res.Pools {
		fe := ledger.FrontEnd{Resource: p.Resource.FullName(), DRA: p.Resource.Mode == pools.DRA}
		for _, d := range p.Devices {
			next[d.ID] = fe
		}
	}
	var out []string
	for fe, devs := range served {
		for _, d := range devs {
			if now, ok := next[d.ID]; !ok || now != fe {
				out = append(out, d.ID)
			}
		}
	}
	slices.Sort(out)
	return out
}
