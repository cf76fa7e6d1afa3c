package discovery

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hwnet-io/hwnet/hwdb"
)

// assembler joins scanned functions into an Inventory: VFs under their PFs,
// names and models from hwdb, link state from netlink, eswitch modes,
// vDPA devices and exclusions.
type assembler struct {
	opts  Options
	links linkDump
	vdpa  vdpaTable
	aux   *auxIndex
	// switches maps each (switch, PF port, VF) to its representor, read
	// on the first switchdev PF.
	switches map[switchPort]string
}

func (a *assembler) assemble(ctx context.Context, all []*scanned) *Inventory {
	// Empty lists, not nil: JSON readers expect "pfs": [], never null.
	inv := &Inventory{PFs: []PF{}, NICs: []Function{}, Problems: a.links.problems}
	if a.vdpa.problem != "" {
		inv.Problems = append(inv.Problems, a.vdpa.problem)
	}
	inv.Problems = append(inv.Problems, a.aux.listProblems()...)
	byAddr := make(map[string]*scanned, len(all))
	for _, sc := range all {
		byAddr[sc.fn.Address] = sc
		a.complete(sc)
	}
	claimed := make(map[string]bool, len(all))
	for _, sc := range all {
		if sc.sriov != nil {
			inv.PFs = append(inv.PFs, a.buildPF(ctx, sc, byAddr, claimed))
		}
	}
	for _, sc := range all {
		if sc.sriov == nil && !claimed[sc.fn.Address] {
			inv.NICs = append(inv.NICs, a.orphan(sc))
		}
	}
	inv.index()
	return inv
}

// complete fills in what every function gets alike: names, link type,
// netlink state, vDPA devices and the exclusions that follow from them.
func (a *assembler) complete(sc *scanned) {
	fn, db := &sc.fn, a.opts.DB
	fn.VendorName = db.VendorName(fn.Vendor)
	fn.DeviceName = db.DeviceName(fn.Vendor, fn.Device)
	if fn.Netdev != nil {
		a.links.apply(fn.Netdev)
	}
	for i := 1; i < len(fn.Ports); i++ {
		a.links.apply(&fn.Ports[i])
	}
	fn.LinkType = linkType(fn, sc.class)
	fn.VDPA = a.vdpa.byParent[fn.Address]
	switch {
	case fn.Netdev != nil && fn.Netdev.Wireless:
		fn.Excluded = append(fn.Excluded, fmt.Sprintf("its netdev %s is wireless (Wi-Fi, phy80211), which pods are not given", fn.Netdev.Name))
	case fn.Driver == "":
		fn.Excluded = append(fn.Excluded, "no driver is bound")
	}
	for _, nd := range fn.netdevs() {
		if nd.DefaultRoute {
			fn.Excluded = append(fn.Excluded, fmt.Sprintf("its netdev %s carries the node's default route", nd.Name))
		}
	}
}

// netdevs lists every port's netdev of the function.
func (fn *Function) netdevs() []*Netdev {
	if len(fn.Ports) == 0 {
		if fn.Netdev == nil {
			return nil
		}
		return []*Netdev{fn.Netdev}
	}
	out := make([]*Netdev, len(fn.Ports))
	for i := range fn.Ports {
		out[i] = &fn.Ports[i]
	}
	return out
}

// linkType prefers what the netdev says, then the RDMA port, then the class.
func linkType(fn *Function, class uint32) hwdb.LinkType {
	switch {
	case fn.Netdev != nil && fn.Netdev.Type == arphrdInfiniband:
		return hwdb.InfiniBand
	case fn.Netdev != nil && fn.Netdev.Type == arphrdEther:
		return hwdb.Ethernet
	case fn.RDMA != nil && fn.RDMA.LinkLayer != "":
		return fn.RDMA.LinkLayer
	}
	switch class >> 8 {
	case classInfiniBand:
		return hwdb.InfiniBand
	case classEthernet:
		return hwdb.Ethernet
	}
	return ""
}

// buildPF puts a PF's VFs under it, in virtfn order.
func (a *assembler) buildPF(ctx context.Context, sc *scanned, byAddr map[string]*scanned, claimed map[string]bool) PF {
	pf := PF{Function: sc.fn, SRIOV: *sc.sriov, ESwitch: a.readESwitch(ctx, sc.fn.Address), VFs: []VF{}, SFs: a.completeSFs(sc.sfs)}
	model, ok := a.opts.DB.ModelByPF(sc.fn.Vendor, sc.fn.Device)
	if ok {
		pf.Model, pf.MaxSFs = model.Name, model.MaxSFs
	}
	pf.ESwitch.SwitchdevCapable = (ok && model.Switchdev) || pf.ESwitch.Mode == ModeSwitchdev
	var reps, sfReps map[int]string
	if pf.ESwitch.Mode == ModeSwitchdev {
		reps, sfReps = a.representors(sc)
	}
	for i := range pf.SFs {
		pf.SFs[i].Representor = sfReps[pf.SFs[i].SFNum]
	}
	for _, v := range sc.virtfns {
		vsc, ok := byAddr[v.address]
		if !ok {
			pf.Problems = append(pf.Problems, fmt.Sprintf("virtfn%d points to %s, which is not a PCI function", v.index, v.address))
			continue
		}
		claimed[v.address] = true
		vf := VF{Function: vsc.fn, Index: v.index, PF: sc.fn.Address, Representor: reps[v.index]}
		vf.Model = a.vfModel(model, vf.Vendor, vf.Device)
		pf.VFs = append(pf.VFs, vf)
	}
	if n := len(pf.VFs); n > 0 {
		pf.Excluded = append(pf.Excluded, fmt.Sprintf("SR-IOV PF with %d VFs enabled: its VFs are offered instead", n))
	}
	if pf.SRIOV.NumVFs != len(sc.virtfns) {
		pf.Problems = append(pf.Problems, fmt.Sprintf("sriov_numvfs is %d but %d virtfn links exist", pf.SRIOV.NumVFs, len(sc.virtfns)))
	}
	return pf
}

// vfModel names a VF by its PF's model when the IDs agree: many VFs share
// one device ID (NVIDIA's 101e), so the VF ID alone is often ambiguous.
func (a *assembler) vfModel(pfModel *hwdb.Model, vendor, device hwdb.PCIID) string {
	if pfModel != nil && pfModel.Vendor == vendor && pfModel.VFDevice == device {
		return pfModel.Name
	}
	if m, _ := a.opts.DB.ModelByVF(vendor, device); m != nil {
		return m.Name
	}
	return ""
}

// orphan turns a function that is no PF's VF into a standalone NIC, and
// says so when it is a VF whose PF is missing.
func (a *assembler) orphan(sc *scanned) Function {
	fn := sc.fn
	if m, ok := a.opts.DB.ModelByPF(fn.Vendor, fn.Device); ok {
		fn.Model = m.Name
	} else if m, n := a.opts.DB.ModelByVF(fn.Vendor, fn.Device); m != nil {
		fn.Model = m.Name
	} else if n > 1 {
		fn.Problems = append(fn.Problems, fmt.Sprintf("VF device %s:%s is shared by %d models and its PF is not visible", fn.Vendor, fn.Device, n))
	}
	if sc.hasPhysfn {
		fn.Problems = append(fn.Problems, physfnProblem(sc.dir))
	}
	return fn
}

func physfnProblem(dir string) string {
	target, err := os.Readlink(filepath.Join(dir, "physfn"))
	if err != nil {
		return fmt.Sprintf("VF with an unreadable physfn link: %v", err)
	}
	return fmt.Sprintf("VF of PF %s, which is not present or does not list it", filepath.Base(target))
}
