package virtualnode

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/hwnet-io/hwnet/hwdb"
)

// state is everything a Node knows; it is saved as Dir/state.json so that
// another process can Open the node.
type state struct {
	Name string `json:"name"`
	Dir  string `json:"dir"`
	// Tmpfs says Build mounted a tmpfs on Dir.
	Tmpfs bool `json:"tmpfs,omitempty"`
	// Netns is the node's named network namespace; "" without links.
	Netns string `json:"netns,omitempty"`
	// NUMANodes is the number of NUMA nodes, 0 to NUMANodes-1.
	NUMANodes int `json:"numaNodes"`
	// RouteDev is the netdev holding the default route; "" for none.
	RouteDev string `json:"routeDev,omitempty"`
	// Functions are all PCI functions, root ports included.
	Functions []*Function `json:"functions"`
	Next      counters    `json:"next"`
}

// counters hand out the numbers the kernel allocates at run time.
type counters struct {
	IOMMUGroup int `json:"iommuGroup"`
	// Ifindex numbers netdevs in a tree without real links.
	Ifindex int `json:"ifindex"`
	Uverbs  int `json:"uverbs"`
	Umad    int `json:"umad"`
	UIO     int `json:"uio"`
	LID     int `json:"lid"`
	// AuxIndex numbers auxiliary devices, mlx5_core.sf.<N>.
	AuxIndex int `json:"auxIndex"`
	// RDMA numbers RDMA devices per name prefix, "mlx5_" or "irdma".
	RDMA map[string]int `json:"rdma"`
}

// PCI layout constants.
const (
	// firstHostBus puts the first PF at 0000:3b:00.0, as on many Xeon hosts.
	firstHostBus = 0x3a
	maxBus       = 0xff
	// maxPFs is how many PFs and NICs fit when each takes two buses.
	maxPFs = (maxBus + 1 - firstHostBus) / 2
	// Default VF routing: VF 0 at device 1 of the PF's bus.
	defaultVFOffset = 8
	defaultVFStride = 1
)

// PCI classes.
const (
	classEthernet   = 0x020000
	classInfiniBand = 0x020700
	classPCIBridge  = 0x060400
)

// The root port above each NIC: an Intel Xeon PCIe root port.
const (
	rootPortVendor = 0x8086
	rootPortDevice = 0x2030
)

func newState(name string) *state {
	return &state{
		Name:      name,
		Functions: []*Function{},
		Next:      counters{Ifindex: 2, LID: 1, RDMA: map[string]int{}}, // ifindex 1 is lo
	}
}

// planner lays a spec out as functions on PCI buses.
type planner struct {
	st      *state
	db      *hwdb.DB
	nextBus int
	names   map[string]string // netdev name to the address that has it
}

// plan turns a validated spec into the node's initial state.
func plan(spec *Spec, db *hwdb.DB) (*state, error) {
	p := &planner{st: newState(spec.Name), db: db, nextBus: firstHostBus, names: map[string]string{}}
	for i := range spec.PFs {
		if err := p.addPFs(&spec.PFs[i]); err != nil {
			return nil, withEntry(err, spec.PFs[i].entry(i))
		}
	}
	for i := range spec.NICs {
		if err := p.addNIC(&spec.NICs[i]); err != nil {
			return nil, withEntry(err, spec.NICs[i].entry(i))
		}
	}
	p.st.NUMANodes = 1
	for _, f := range p.st.Functions {
		p.st.NUMANodes = max(p.st.NUMANodes, f.NUMA+1)
	}
	return p.st, nil
}

// addPFs adds the entry's PFs, each with its root port and enabled VFs.
func (p *planner) addPFs(ps *PFSpec) error {
	m, err := p.resolveModel(ps)
	if err != nil {
		return err
	}
	vfio, err := parseRanges(string(ps.VFIO), ps.VFs)
	if err != nil {
		return &SpecError{Field: "vfio", Err: err}
	}
	card := ""
	for k := range max(ps.Count, 1) {
		pf, err := p.addPF(ps, m, k)
		if err != nil {
			return err
		}
		if ps.OneCard {
			card = cmp.Or(card, pf.Addr)
			pf.Card, pf.Port = card, k
		}
		for i := range ps.VFs {
			vf := p.st.newVF(pf, i)
			if slices.Contains(vfio, i) {
				vf.Driver = driverVFIO
			}
			if err := p.add(vf); err != nil {
				return err
			}
		}
		pf.SRIOV.NumVFs = ps.VFs
		if err := p.addSFs(pf, ps.SFs); err != nil {
			return err
		}
	}
	return nil
}

// resolveModel finds the entry's model and checks the entry against it.
func (p *planner) resolveModel(ps *PFSpec) (*hwdb.Model, error) {
	m, ok := p.db.ModelByName(ps.Model)
	if !ok {
		return nil, &SpecError{Field: "model", Err: fmt.Errorf("unknown model %q", ps.Model)}
	}
	if len(m.PFDrivers) == 0 || len(m.VFDrivers) == 0 || len(m.LinkTypes) == 0 {
		return nil, &SpecError{Field: "model", Err: fmt.Errorf("model %s lacks PF drivers, VF drivers or link types in hwdb", m.Name)}
	}
	if ps.LinkType != "" && !slices.Contains(m.LinkTypes, ps.LinkType) {
		return nil, &SpecError{Field: "linkType", Err: fmt.Errorf("model %s does not support %q (supports %v)", m.Name, ps.LinkType, m.LinkTypes)}
	}
	if newIOVPKeys(m, cmp.Or(ps.LinkType, m.LinkTypes[0])) != nil && ps.VFPKey != "" {
		return nil, &SpecError{Field: "vfPKey", Err: fmt.Errorf("model %s maps its VFs' partition keys in its iov tree (index 0: %s)", m.Name, iovPKeys[0])}
	}
	return m, checkSFs(ps, m)
}

// addPF adds PF number k of the entry and its root port.
func (p *planner) addPF(ps *PFSpec, m *hwdb.Model, k int) (*Function, error) {
	linkType := cmp.Or(ps.LinkType, m.LinkTypes[0])
	sr := &SRIOV{
		TotalVFs: cmp.Or(ps.TotalVFs, max(m.MaxVFs, ps.VFs)),
		Offset:   cmp.Or(ps.VFOffset, defaultVFOffset),
		Stride:   cmp.Or(ps.VFStride, defaultVFStride),
		VFDevice: m.VFDevice,
		VFDriver: m.VFDrivers[0],
	}
	if ps.SRIOVOff {
		sr.TotalVFs = 0
	}
	if ps.VFPKey != "" {
		sr.VFPKey, _ = hwdb.ParsePKey(ps.VFPKey) // checked with the spec
	}
	sr.PKeys = newIOVPKeys(m, linkType)
	numa := 0
	if len(ps.NUMA) > 0 {
		numa = ps.NUMA[k%len(ps.NUMA)]
	}
	speed := cmp.Or(ps.Speed, 100000)
	if linkType == hwdb.InfiniBand {
		speed = cmp.Or(ps.Speed, 200000)
	}
	rid, rp, err := p.allocBuses(sr, numa)
	if err != nil {
		return nil, err
	}
	pf := &Function{
		Addr: rid.addr(), SysPath: rp.SysPath + "/" + rid.addr(), Model: m.Name,
		Vendor: m.Vendor, Device: m.PFDevice, SubsystemVendor: m.Vendor, SubsystemDevice: 0x0001,
		Class: classOf(m, linkType), Revision: 2, Driver: m.PFDrivers[0], NUMA: numa,
		IOMMUGroup: p.st.allocIOMMUGroup(), LinkType: linkType, Ifname: pciIfname(linkType, rid),
		Speed: speed, RDMACapable: m.RDMA || linkType == hwdb.InfiniBand, SRIOV: sr, DualPort: ps.DualPort,
	}
	if k < len(ps.Names) {
		if err := checkIfname(ps.Names[k]); err != nil {
			return nil, &SpecError{Field: "names", Err: err}
		}
		pf.Ifname = ps.Names[k]
	}
	if ps.DualPort {
		if err := checkIfname(port2Name(pf.Ifname)); err != nil {
			return nil, &SpecError{Field: "dualPort", Err: fmt.Errorf("the second port's netdev name gets too long: %w", err)}
		}
	}
	if sr.TotalVFs > 0 {
		if err := checkIfname(vfIfname(pf, sr.TotalVFs-1)); err != nil {
			return nil, &SpecError{Field: "totalVFs", Err: fmt.Errorf("VF netdev names get too long: %w", err)}
		}
	}
	return pf, p.add(pf)
}

// addNIC adds a standalone NIC and its root port.
func (p *planner) addNIC(ns *NICSpec) error {
	vendor, _ := hwdb.ParsePCIID(ns.Vendor)
	device, _ := hwdb.ParsePCIID(ns.Device)
	rid, rp, err := p.allocBuses(nil, ns.NUMA)
	if err != nil {
		return err
	}
	linkType := cmp.Or(ns.LinkType, hwdb.Ethernet)
	class := uint32(classEthernet)
	if ns.Class != "" {
		class, _ = parseClass(ns.Class) // validated
	}
	nic := &Function{
		Addr: rid.addr(), SysPath: rp.SysPath + "/" + rid.addr(),
		Vendor: vendor, Device: device, SubsystemVendor: vendor, SubsystemDevice: 0x0001,
		Class: class, Revision: 1, Driver: ns.Driver, NUMA: ns.NUMA,
		IOMMUGroup: p.st.allocIOMMUGroup(), LinkType: linkType, NetdevUnder: ns.NetdevUnder,
		Ifname: cmp.Or(ns.Name, nicIfname(linkType, rid)), Speed: cmp.Or(ns.Speed, 1000),
		RDMACapable: linkType == hwdb.InfiniBand, Wireless: ns.Wireless,
	}
	if m, ok := p.db.ModelByPF(vendor, device); ok {
		nic.Model = m.Name // an SR-IOV capable part with SR-IOV off (I350)
	}
	if ns.DefaultRoute {
		p.st.RouteDev = nic.Ifname
	}
	return p.add(nic)
}

// add binds the function's driver and appends it, rejecting a netdev name
// that is already taken.
func (p *planner) add(f *Function) error {
	if other, ok := p.names[f.Ifname]; ok {
		return &SpecError{Field: "name", Err: fmt.Errorf("%q is already the netdev name of %s", f.Ifname, other)}
	}
	p.names[f.Ifname] = f.Addr
	if f.DualPort {
		if other, ok := p.names[port2Name(f.Ifname)]; ok {
			return &SpecError{Field: "dualPort", Err: fmt.Errorf("%q is already the netdev name of %s", port2Name(f.Ifname), other)}
		}
		p.names[port2Name(f.Ifname)] = f.Addr
	}
	p.st.attachDriver(f)
	p.st.Functions = append(p.st.Functions, f)
	return nil
}

// allocBuses gives a NIC a host bridge, a root port on it and the buses
// below the root port: one for the NIC, and as many as its VFs spill into.
// It adds the root port and returns it with the NIC's routing ID.
func (p *planner) allocBuses(sr *SRIOV, numa int) (routingID, *Function, error) {
	host := p.nextBus
	first := (host + 1) << 8
	last := first
	if sr != nil && sr.TotalVFs > 0 {
		last += sr.Offset + sr.Stride*(sr.TotalVFs-1)
	}
	if last>>8 > maxBus {
		return 0, nil, fmt.Errorf("PCI bus numbers run out: this NIC needs buses %#02x to %#02x", host, last>>8)
	}
	p.nextBus = last>>8 + 1
	nic := routingID(first)
	port := routingID(host << 8)
	rp := &Function{
		Addr: port.addr(), SysPath: fmt.Sprintf("devices/pci0000:%02x/%s", host, port.addr()),
		Vendor: rootPortVendor, Device: rootPortDevice, SubsystemVendor: rootPortVendor,
		Class: classPCIBridge, Revision: 4, Driver: driverRootPort, NUMA: numa,
		IOMMUGroup: p.st.allocIOMMUGroup(), Bridge: &Bridge{Secondary: nic.bus(), Subordinate: last >> 8},
	}
	p.st.Functions = append(p.st.Functions, rp)
	return nic, rp, nil
}

// newVF makes VF i of pf, bound to the PF's VF driver.
func (st *state) newVF(pf *Function, i int) *Function {
	pfRID, _ := parseRoutingID(pf.Addr)
	rid := pfRID + routingID(pf.SRIOV.Offset+pf.SRIOV.Stride*i)
	return &Function{
		Addr: rid.addr(), SysPath: parentDir(pf.SysPath) + "/" + rid.addr(), PF: pf.Addr, VFIndex: i,
		Model: pf.Model, Vendor: pf.Vendor, Device: pf.SRIOV.VFDevice, SubsystemVendor: pf.Vendor,
		Class: pf.Class, Revision: 1, Driver: pf.SRIOV.VFDriver, NUMA: pf.NUMA,
		IOMMUGroup: st.allocIOMMUGroup(), LinkType: pf.LinkType, Ifname: vfIfname(pf, i),
		Speed: pf.Speed, RDMACapable: pf.RDMACapable, Card: pf.Card, Port: pf.Port,
	}
}

func (st *state) allocIOMMUGroup() int {
	g := st.Next.IOMMUGroup
	st.Next.IOMMUGroup++
	return g
}

// classOf is the PCI class a model's PF reports: the model's own when
// hwdb gives one (ConnectX-3's 0x0280), else its link type's.
func classOf(m *hwdb.Model, lt hwdb.LinkType) uint32 {
	if m.Class != 0 {
		return uint32(m.Class) << 8
	}
	if lt == hwdb.InfiniBand {
		return classInfiniBand
	}
	return classEthernet
}

// pciIfname is systemd's predictable name of a multi-function PCI
// device's netdev: enp59s0f0, or ibp59s0f0 for IPoIB.
func pciIfname(lt hwdb.LinkType, rid routingID) string {
	prefix := "en"
	if lt == hwdb.InfiniBand {
		prefix = "ib"
	}
	return fmt.Sprintf("%sp%ds%df%d", prefix, rid.bus(), rid.slot(), rid.fn())
}

// nicIfname is systemd's predictable name of a single-function NIC's
// netdev: enp59s0, or ibp59s0 for IPoIB.
func nicIfname(lt hwdb.LinkType, rid routingID) string {
	if lt == hwdb.InfiniBand {
		return fmt.Sprintf("ibp%ds0", rid.bus())
	}
	return fmt.Sprintf("enp%ds0", rid.bus())
}

// vfIfname is systemd's name of a VF's netdev: the PF's name with v<N>.
func vfIfname(pf *Function, i int) string { return pf.Ifname + "v" + strconv.Itoa(i) }

func parentDir(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "."
}

// seed makes identities (MACs, GUIDs) differ between nodes of different
// names while staying the same across builds of one.
func (st *state) seed() (byte, byte) {
	h := fnv.New32a()
	h.Write([]byte(st.Name))
	s := h.Sum32()
	return byte(s >> 8), byte(s)
}
