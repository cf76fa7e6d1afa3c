package pools

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/node/discovery"
)

// Result is how a config divides an inventory into pools.
type Result struct {
	// Pools has one pool per resourceList entry, in config order, even
	// when no device matches it.
	Pools []Pool
	// Conflicts lists the devices that more than one pool matches; each
	// went to the first of them.
	Conflicts []Conflict
	// Warnings are what an operator should know about this inventory
	// under this config, such as a matching device that cannot be offered.
	Warnings []string
}

// Conflict is a device that several pools' selectors match.
type Conflict struct {
	// Device is the device's PCI address.
	Device string
	// Pools are the full resource names of every pool that matches it, in
	// config order; the device belongs to the first.
	Pools []string
}

func (c Conflict) String() string {
	return fmt.Sprintf("%s is matched by %s; it goes to %s", c.Device, strings.Join(c.Pools, ", "), c.Pools[0])
}

// candidate is one function as selectors see it. It is kept small:
// Match holds one per device.
type candidate struct {
	fn *discovery.Function
	// pf and vf are set for a VF; a standalone function (a NIC or a PF
	// without VFs) has neither, and is its own PF, as in sriovdp.
	pf *discovery.PF
	vf *discovery.VF
	// sf is set for a scalable function of pf; fn is then its own
	// view as a function (sfFunction).
	sf   *discovery.SF
	tags []string
	// offered is false for the PFs whose VFs are offered instead.
	offered bool
	// port is the one port of a multi-port function (mlx4) cand stands
	// for; nil for a function with one netdev.
	port *discovery.Netdev
	// resting is the driver a VF hwnet bound to another for a DRA claim
	// rests on, "" for any other function.
	resting string
}

// driver is the driver selectors match cand by: the one it rests on when
// a claim has it on another, so that it stays in its pool meanwhile.
func (cand *candidate) driver() string { return cmp.Or(cand.resting, cand.fn.Driver) }

// id is cand's device ID: its PCI address, or PortID for one port of a
// multi-port function.
func (cand *candidate) id() string {
	if cand.port != nil {
		return PortID(cand.fn.Address, cand.port.Port)
	}
	return cand.fn.Address
}

// OnPort is d as one port of its multi-port function (mlx4): the port's
// ID, and a copy of the function whose Netdev is the port's, the shared
// one being immutable.
func (d Device) OnPort(port *discovery.Netdev) Device {
	fn := *d.Function
	fn.Netdev = port
	d.ID, d.Function = PortID(fn.Address, port.Port), &fn
	return d
}

// PortID is the device ID of one port of a multi-port function (mlx4):
// its PCI address and ":p<dev_port>", 0000:03:00.0:p1.
func PortID(address string, devPort int) string {
	return address + ":p" + strconv.Itoa(devPort)
}

// pfName is the netdev name of cand's PF, "" when it has none; for one
// port of a standalone multi-port function, that port's.
func (cand *candidate) pfName() string {
	nd := cand.fn.Netdev
	switch {
	case cand.pf != nil:
		nd = cand.pf.Netdev
	case cand.port != nil:
		nd = cand.port
	}
	if nd == nil {
		return ""
	}
	return nd.Name
}

// pfAddr is the PCI address of cand's PF.
func (cand *candidate) pfAddr() string {
	if cand.pf != nil {
		return cand.pf.Address
	}
	return cand.fn.Address
}

// vfIndex is cand's VF index, or an SF's sfnum, which pfNames and
// rootDevices ranges select SFs by, as sriovdp does; -1 for a standalone
// function.
func (cand *candidate) vfIndex() int {
	switch {
	case cand.vf != nil:
		return cand.vf.Index
	case cand.sf != nil:
		return cand.sf.SFNum
	}
	return -1
}

// Match divides inv's functions among the config's pools. The candidates
// are every VF, and every PF without VFs and standalone NIC, as in
// sriovdp; a function discovery excluded is never pooled. Each device goes
// to the first pool in config order that matches it. Matching uses the
// PF's netdev name, not the VF's, so a VF moved into a pod's network
// namespace keeps its pool. Match reads inv and the config only, so any
// number may run at once.
func (c *Config) Match(inv *discovery.Inventory) *Result { return c.MatchRebound(inv, nil) }

// MatchRebound is Match with the VFs hwnet bound to another driver for a
// DRA claim (rebound: the driver each rests on, by PCI address) matched by
// the driver they rest on: a pool listed earlier that matches the claim's
// driver does not take the VF while the claim holds it.
func (c *Config) MatchRebound(inv *discovery.Inventory, rebound map[string]string) *Result {
	m := matching{c: c, res: &Result{Pools: make([]Pool, len(c.Resources))}, names: make([]string, len(c.Resources)),
		outbid: make([]bool, len(c.Resources)), pooled: make([]assignment, 0, inv.Len())}
	for i := range c.Resources {
		m.res.Pools[i].Resource = c.Resources[i]
		m.names[i] = c.Resources[i].FullName()
	}
	for cand := range c.candidates(inv, rebound) {
		if !cand.offered {
			continue
		}
		for pc := range ports(cand) {
			m.assign(pc)
		}
	}
	fillPools(m.res.Pools, m.pooled)
	m.warnEmpty()
	return m.res
}

// matching is the state of one Match.
type matching struct {
	c     *Config
	res   *Result
	names []string
	// outbid marks the pools that matched a device an earlier pool took.
	outbid []bool
	// pooled gathers the devices first: they are large, and fillPools
	// then copies each once, into pools sized to fit.
	pooled  []assignment
	matched []int
}

// assign gives cand to the first pool that matches it, noting conflicts
// and matches discovery excluded.
func (m *matching) assign(cand candidate) {
	m.matched = m.c.matchingPools(&cand, m.matched[:0])
	switch {
	case len(m.matched) == 0:
	case len(cand.fn.Excluded) > 0:
		m.res.Warnings = append(m.res.Warnings, fmt.Sprintf("%s matches %s but is not offered: %s",
			cand.id(), m.names[m.matched[0]], strings.Join(cand.fn.Excluded, "; ")))
	default:
		m.pooled = append(m.pooled, assignment{pool: m.matched[0], cand: cand})
		if len(m.matched) > 1 {
			m.res.Conflicts = append(m.res.Conflicts, conflict(cand.id(), m.matched, m.names))
			for _, p := range m.matched[1:] {
				m.outbid[p] = true
			}
		}
	}
}

// warnEmpty explains each empty pool that Config.Warnings does not.
func (m *matching) warnEmpty() {
	for i, p := range m.res.Pools {
		var why string
		switch {
		case len(p.Devices) > 0 || !p.Resource.canMatch():
			continue
		case m.outbid[i]:
			why = "every device it matches goes to an earlier pool (see conflicts)"
		default:
			why = "no device matches"
		}
		m.res.Warnings = append(m.res.Warnings, fmt.Sprintf("%s %s: %s", resourceEntry(i, p.Resource.Name), m.names[i], why))
	}
}

// assignment is a candidate and the pool it goes to.
type assignment struct {
	pool int
	cand candidate
}

// fillPools gives each pool its devices, sorted by ID, from one array.
func fillPools(ps []Pool, pooled []assignment) {
	sizes := make([]int, len(ps))
	for _, a := range pooled {
		sizes[a.pool]++
	}
	devices := make([]Device, 0, len(pooled))
	for i, n := range sizes {
		ps[i].Devices = devices[len(devices) : len(devices) : len(devices)+n]
		devices = devices[:len(devices)+n]
	}
	for i := range pooled {
		a := &pooled[i]
		ps[a.pool].Devices = append(ps[a.pool].Devices, a.cand.device())
	}
	byID := func(a, b Device) int { return strings.Compare(a.ID, b.ID) }
	for i := range ps {
		// Inventory order is nearly always address order already.
		if !slices.IsSortedFunc(ps[i].Devices, byID) {
			slices.SortFunc(ps[i].Devices, byID)
		}
	}
}

// FunctionTags returns the admin tags of every function of inv that has
// any, by PCI address, in the order the config declares them.
func (c *Config) FunctionTags(inv *discovery.Inventory) map[string][]string {
	out := map[string][]string{}
	for cand := range c.candidates(inv, nil) {
		if len(cand.tags) > 0 && cand.sf == nil {
			out[cand.fn.Address] = cand.tags
		}
	}
	return out
}

// candidates yields every function of inv, each PF followed by its VFs,
// then the standalone NICs, with their tags.
func (c *Config) candidates(inv *discovery.Inventory, rebound map[string]string) iter.Seq[candidate] {
	return func(yield func(candidate) bool) {
		for i := range inv.PFs {
			if !c.pfCandidates(&inv.PFs[i], rebound, yield) {
				return
			}
		}
		for i := range inv.NICs {
			nc := c.standalone(&inv.NICs[i])
			nc.offered = true
			if !yield(nc) {
				return
			}
		}
	}
}

// ports yields cand, or one candidate per port when its function has
// several (mlx4): each port is a device, which selectors pick by its
// netdev name (pfNames).
func ports(cand candidate) iter.Seq[candidate] {
	return func(yield func(candidate) bool) {
		if len(cand.fn.Ports) == 0 {
			yield(cand)
			return
		}
		for i := range cand.fn.Ports {
			pc := cand
			pc.port = &cand.fn.Ports[i]
			if !yield(pc) {
				return
			}
		}
	}
}

// pfCandidates yields pf and its VFs; a PF with VFs is not offered, its
// VFs are. VFs with the same tags share one slice of them.
func (c *Config) pfCandidates(pf *discovery.PF, rebound map[string]string, yield func(candidate) bool) bool {
	pc := c.standalone(&pf.Function)
	pc.offered = len(pf.VFs) == 0
	if !yield(pc) {
		return false
	}
	var buf, tags []string
	for j := range pf.VFs {
		vf := &pf.VFs[j]
		vc := candidate{fn: &vf.Function, pf: pf, vf: vf, offered: true, resting: rebound[vf.Address]}
		switch buf = c.appendTags(buf[:0], &vc, pc.tags); {
		case len(buf) == 0:
			tags = nil
		case !slices.Equal(buf, tags):
			tags = slices.Clip(slices.Clone(buf))
		}
		vc.tags = tags
		if !yield(vc) {
			return false
		}
	}
	for k := range pf.SFs {
		sc := candidate{fn: sfFunction(pf, &pf.SFs[k]), pf: pf, sf: &pf.SFs[k], offered: true}
		sc.tags = slices.Clip(c.appendTags(nil, &sc, pc.tags))
		if !yield(sc) {
			return false
		}
	}
	return true
}

// sfFunction is an SF as selectors and front ends see a function: its
// PF's IDs, class, driver, model and link type, as sriovdp matches an
// auxiliary device by its PCI parent's, with the SF's own name for an
// address (its address on the auxiliary bus), netdev, RDMA device and
// exclusions. It has no IOMMU group, VFIO or UIO device of its own.
func sfFunction(pf *discovery.PF, sf *discovery.SF) *discovery.Function {
	return &discovery.Function{
		Address: sf.Name, Vendor: pf.Vendor, Device: pf.Device, VendorName: pf.VendorName, DeviceName: pf.DeviceName,
		Model: pf.Model, Class: pf.Class, Driver: pf.Driver, NUMANode: sf.NUMANode, LinkType: pf.LinkType,
		Netdev: sf.Netdev, RDMA: sf.RDMA, Excluded: sf.Excluded, Problems: sf.Problems,
	}
}

func (c *Config) standalone(fn *discovery.Function) candidate {
	cand := candidate{fn: fn}
	cand.tags = slices.Clip(c.appendTags(nil, &cand, nil))
	return cand
}

// appendTags appends to dst, in declaration order, the tags cand inherits
// and those whose selectors match it.
func (c *Config) appendTags(dst []string, cand *candidate, inherited []string) []string {
	for i := range c.Tags {
		t := &c.Tags[i]
		if slices.Contains(inherited, t.Name) || anyMatches(t.Selectors, cand) {
			dst = append(dst, t.Name)
		}
	}
	return dst
}

// matchingPools appends to dst the indices of the pools that match cand.
func (c *Config) matchingPools(cand *candidate, dst []int) []int {
	for i := range c.Resources {
		if c.Resources[i].accepts(cand) {
			dst = append(dst, i)
		}
	}
	return dst
}

// conflict names a device and the pools that match it.
func conflict(addr string, pools []int, names []string) Conflict {
	c := Conflict{Device: addr, Pools: make([]string, len(pools))}
	for i, p := range pools {
		c.Pools[i] = names[p]
	}
	return c
}

// canMatch reports whether any device could match the resource.
func (r *Resource) canMatch() bool {
	return slices.ContainsFunc(r.Selectors, func(s Selector) bool { return !s.unevaluated })
}

// accepts reports whether the resource's device type takes cand and any of
// its selector objects matches it.
func (r *Resource) accepts(cand *candidate) bool {
	// An auxNetDevice pool takes SFs only, the others PCI functions only.
	if (r.DeviceType == AuxNetDevice) != (cand.sf != nil) {
		return false
	}
	// Network class: PCI class 0x02.
	if r.DeviceType == NetDevice && !strings.HasPrefix(cand.fn.Class, "0x02") {
		return false
	}
	return anyMatches(r.Selectors, cand)
}

func anyMatches(sels []Selector, cand *candidate) bool {
	for i := range sels {
		if sels[i].matches(cand) {
			return true
		}
	}
	return false
}

// matches reports whether every field the selector gives matches cand.
func (s *Selector) matches(cand *candidate) bool {
	fn := cand.fn
	return !s.unevaluated &&
		(len(s.Vendors) == 0 || slices.Contains(s.Vendors, fn.Vendor)) &&
		(len(s.Devices) == 0 || slices.Contains(s.Devices, fn.Device)) &&
		(len(s.Drivers) == 0 || slices.Contains(s.Drivers, cand.driver())) &&
		(len(s.PCIAddresses) == 0 || slices.Contains(s.PCIAddresses, fn.Address)) &&
		(len(s.LinkTypes) == 0 || slices.Contains(s.LinkTypes, fn.LinkType)) &&
		(len(s.PFNames) == 0 || inSets(s.PFNames, cand.pfName(), cand.vfIndex())) &&
		(len(s.RootDevices) == 0 || inSets(s.RootDevices, cand.pfAddr(), cand.vfIndex())) &&
		(len(s.Models) == 0 || containsFold(s.Models, fn.Model)) &&
		(len(s.Tags) == 0 || slices.ContainsFunc(s.Tags, func(t string) bool { return slices.Contains(cand.tags, t) })) &&
		(!s.IsRDMA || fn.RDMA != nil) &&
		(len(s.PKeys) == 0 || fn.RDMA != nil && slices.Contains(s.PKeys, fn.RDMA.PKey)) &&
		(s.VDPAType == "" || hasVDPA(fn, vdpaDriver(s.VDPAType))) &&
		(len(s.AuxTypes) == 0 || cand.sf != nil && slices.Contains(s.AuxTypes, cand.sf.AuxType))
}

// inSets reports whether any set selects VF vfIndex of the PF pf, or the
// standalone function pf when vfIndex is -1.
func inSets(sets []FunctionSet, pf string, vfIndex int) bool {
	if pf == "" {
		return false
	}
	for _, set := range sets {
		if set.PF != pf {
			continue
		}
		if set.VFs == nil {
			return true
		}
		for _, r := range set.VFs {
			if r.First <= vfIndex && vfIndex <= r.Last {
				return true
			}
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if x == s || strings.EqualFold(x, s) {
			return s != ""
		}
	}
	return false
}

func hasVDPA(fn *discovery.Function, driver string) bool {
	return slices.ContainsFunc(fn.VDPA, func(d discovery.VDPADevice) bool { return d.Driver == driver })
}

// device is cand as a pool's device.
func (cand *candidate) device() Device {
	d := Device{ID: cand.fn.Address, Function: cand.fn, VFIndex: -1, Tags: cand.tags}
	switch {
	case cand.port != nil:
		d = d.OnPort(cand.port)
	case cand.vf != nil:
		d.PF, d.PFName, d.VFIndex, d.Representor = cand.pf.Address, cand.pfName(), cand.vf.Index, cand.vf.Representor
	case cand.sf != nil:
		d.PF, d.PFName, d.Representor, d.SF = cand.pf.Address, cand.pfName(), cand.sf.Representor, cand.sf
	}
	return d
}
