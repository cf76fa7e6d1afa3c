package virtualnode

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/hwdb"
)

// Spec declares a virtual node. It reads from YAML or JSON; see default.yaml
// for an annotated example.
type Spec struct {
	// Name names the node's network namespace (hwnet-vn-<name>) and its
	// default state directory: 1-32 lower-case letters, digits or '-'.
	Name string `json:"name"`
	// PFs are the SR-IOV capable NICs, one entry per group of identical PFs.
	PFs []PFSpec `json:"pfs,omitempty"`
	// NICs are standalone NICs without SR-IOV.
	NICs []NICSpec `json:"nics,omitempty"`
}

// PFSpec declares Count identical SR-IOV physical functions of one model.
type PFSpec struct {
	// Model is the hwdb model name, e.g. "E810-C".
	Model string `json:"model"`
	// Count is the number of PFs; 0 means 1.
	Count int `json:"count,omitempty"`
	// TotalVFs is sriov_totalvfs; 0 means the model's MaxVFs, or VFs if
	// that is larger.
	TotalVFs int `json:"totalVFs,omitempty"`
	// VFs is sriov_numvfs, the number of VFs enabled at build time.
	VFs int `json:"vfs,omitempty"`
	// SFs is the number of mlx5 scalable functions each PF has at build
	// time, at most the model's maxSFs: auxiliary devices mlx5_core.sf.N
	// below the PF, sfnum 88 onwards, each with a netdev
	// (enp<bus>s0f<fn>s<sfnum>) and, on RDMA-capable models, an RDMA
	// device. Ethernet ports only.
	SFs int `json:"sfs,omitempty"`
	// VFIO lists the VF indices bound to vfio-pci, e.g. "0,2-3".
	VFIO VFIndices `json:"vfio,omitempty"`
	// NUMA is the NUMA node of each PF, cycled; empty means node 0.
	NUMA []int `json:"numa,omitempty"`
	// Names are the PFs' netdev names, one per PF in order, e.g. to match
	// a config's pfNames; missing ones get the predictable enp<bus>s0f0.
	Names []string `json:"names,omitempty"`
	// LinkType is the ports' link layer; "" means the model's default.
	LinkType hwdb.LinkType `json:"linkType,omitempty"`
	// OneCard makes the Count PFs the ports of one card, as on a dual-port
	// ConnectX: one phys_switch_id for all of them, uplinks named p0, p1,
	// ... and VF representors pf<P>vf<N>.
	OneCard bool `json:"oneCard,omitempty"`
	// VFOffset and VFStride place VF i at routing ID
	// PF + VFOffset + VFStride*i; 0 means 8 and 1.
	VFOffset int `json:"vfOffset,omitempty"`
	VFStride int `json:"vfStride,omitempty"`
	// Speed is the netdevs' speed in Mb/s; 0 means 100000 (200000 for
	// InfiniBand).
	Speed int `json:"speed,omitempty"`
	// DualPort puts both ports of the card on each PF's one function, as
	// mlx4 does for ConnectX-3: a second netdev, named as systemd names
	// it (<name>d1), with dev_port 1 beside the first's 0.
	DualPort bool `json:"dualPort,omitempty"`
	// SRIOVOff draws PFs whose firmware has SR-IOV disabled: the kernel
	// still shows the capability, with sriov_totalvfs 0.
	SRIOVOff bool `json:"sriovOff,omitempty"`
	// VFPKey is the default partition key (P_Key table entry 0) of the
	// PFs' InfiniBand VFs, e.g. "0x8001"; "" means 0xffff, the default
	// partition's.
	VFPKey string `json:"vfPKey,omitempty"`
}

// NICSpec declares one standalone NIC without SR-IOV.
type NICSpec struct {
	// Name is the netdev's name; "" means the predictable enp<bus>s0.
	Name string `json:"name,omitempty"`
	// Vendor and Device are the PCI IDs as four hex digits, e.g. "8086".
	Vendor string `json:"vendor"`
	Device string `json:"device"`
	// Driver is the kernel driver bound to the NIC, e.g. "igb".
	Driver string `json:"driver"`
	// NUMA is the NIC's NUMA node.
	NUMA int `json:"numa,omitempty"`
	// DefaultRoute gives the NIC 10.255.0.2/24 and the node's default route
	// via 10.255.0.1. At most one NIC may have it.
	DefaultRoute bool `json:"defaultRoute,omitempty"`
	// Speed is the netdev's speed in Mb/s; 0 means 1000.
	Speed int `json:"speed,omitempty"`
	// NetdevUnder hangs the netdev below a sub-device of the function, as
	// virtio-net does: "virtio0" gives <function>/virtio0/net/<name>.
	NetdevUnder string `json:"netdevUnder,omitempty"`
	// Class is the 24-bit PCI class as six hex digits; "" means "020000"
	// (Ethernet). "0c0600" draws an InfiniBand HCA of the serial-bus
	// class, as QLogic's ib_qib cards are.
	Class string `json:"class,omitempty"`
	// LinkType is "ethernet" (the default) or "infiniband", which gives
	// the netdev 20-byte IPoIB addresses.
	LinkType hwdb.LinkType `json:"linkType,omitempty"`
	// Wireless makes the netdev a Wi-Fi interface as cfg80211 registers
	// one: a phy80211 link to the function's ieee80211/phy0 and a
	// wireless directory.
	Wireless bool `json:"wireless,omitempty"`
}

// VFIndices is a list of indices and inclusive ranges, "0,2-3". It also reads
// from a plain JSON number, so that YAML's `vfio: 7` means "7".
type VFIndices string

// UnmarshalJSON accepts a JSON string or a non-negative integer.
func (r *VFIndices) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*r = VFIndices(s)
		return nil
	}
	var n uint
	if err := json.Unmarshal(data, &n); err != nil {
		return fmt.Errorf("%s is not a list of VF indices such as \"0,2-3\"", data)
	}
	*r = VFIndices(strconv.FormatUint(uint64(n), 10))
	return nil
}

// Limits that keep a spec within what PCI and the kernel can express.
const (
	maxVFsPerPF = 65535 // sriov_totalvfs is a 16-bit register
	maxNUMANode = 63
	MaxNameLen  = 32
	maxIfname   = 15 // IFNAMSIZ less the terminating NUL
)

// SpecError says which entry and field of a spec is wrong.
type SpecError struct {
	// Entry is e.g. `pfs[1] "ConnectX-6"`; "" for top-level fields.
	Entry string
	// Field is the spec's field name, e.g. "vfio"; "" when the problem is
	// the entry as a whole.
	Field string
	Err   error
}

func (e *SpecError) Error() string {
	var b strings.Builder
	if e.Entry != "" {
		b.WriteString(e.Entry)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString("field ")
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *SpecError) Unwrap() error { return e.Err }

//go:embed default.yaml
var defaultYAML []byte

// DefaultSpec returns the default node: two E810-C with 8 VFs each (VFs 6-7
// on vfio-pci) on NUMA nodes 0 and 1, one ConnectX-6 on InfiniBand with 4
// VFs on NUMA node 0, and an I350 management NIC holding the default route.
func DefaultSpec() *Spec {
	s, err := ParseSpec(defaultYAML)
	if err != nil {
		panic("virtualnode: default.yaml: " + err.Error())
	}
	return s
}

// ParseSpec reads a YAML or JSON spec, rejecting unknown fields, and checks
// everything that does not need the hardware database; Build checks the
// models.
func ParseSpec(data []byte) (*Spec, error) {
	var s Spec
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("parse spec: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks the spec without the hardware database and returns the
// first problem as a *SpecError.
func (s *Spec) Validate() error {
	if err := checkNodeName(s.Name); err != nil {
		return &SpecError{Field: "name", Err: err}
	}
	for i := range s.PFs {
		if err := s.PFs[i].validate(); err != nil {
			return withEntry(err, s.PFs[i].entry(i))
		}
	}
	routeHolder := -1
	for i := range s.NICs {
		n := &s.NICs[i]
		if err := n.validate(); err != nil {
			return withEntry(err, n.entry(i))
		}
		if n.DefaultRoute && routeHolder >= 0 {
			err := fmt.Errorf("only one NIC may hold the default route, and nics[%d] does", routeHolder)
			return &SpecError{Entry: n.entry(i), Field: "defaultRoute", Err: err}
		}
		if n.DefaultRoute {
			routeHolder = i
		}
	}
	return nil
}

func withEntry(err error, entry string) error {
	if se, ok := errors.AsType[*SpecError](err); ok {
		se.Entry = entry
		return se
	}
	return &SpecError{Entry: entry, Err: err}
}

func checkNodeName(name string) error {
	if name == "" {
		return errors.New("missing")
	}
	ok := len(name) <= MaxNameLen
	for _, c := range name {
		ok = ok && ('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-')
	}
	if !ok {
		return fmt.Errorf("%q is not 1-%d lower-case letters, digits or '-'", name, MaxNameLen)
	}
	return nil
}

func (p *PFSpec) entry(i int) string {
	if p.Model == "" {
		return fmt.Sprintf("pfs[%d]", i)
	}
	return fmt.Sprintf("pfs[%d] %q", i, p.Model)
}

func (p *PFSpec) validate() error {
	if p.Model == "" {
		return &SpecError{Field: "model", Err: errors.New("missing")}
	}
	checks := []struct {
		field string
		value int
		max   int
	}{
		{"count", p.Count, maxPFs},
		{"vfs", p.VFs, maxVFsPerPF},
		{"sfs", p.SFs, maxSFsPerPF},
		{"totalVFs", p.TotalVFs, maxVFsPerPF},
		{"vfOffset", p.VFOffset, maxVFsPerPF},
		{"vfStride", p.VFStride, maxVFsPerPF},
		{"speed", p.Speed, maxSpeed},
	}
	for _, c := range checks {
		if c.value < 0 || c.value > c.max {
			return &SpecError{Field: c.field, Err: fmt.Errorf("%d is out of range 0-%d", c.value, c.max)}
		}
	}
	if p.VFPKey != "" {
		if _, err := hwdb.ParsePKey(p.VFPKey); err != nil {
			return &SpecError{Field: "vfPKey", Err: err}
		}
	}
	if p.SRIOVOff && (p.VFs != 0 || p.TotalVFs != 0) {
		return &SpecError{Field: "sriovOff", Err: errors.New("a PF with SR-IOV off has no VFs: drop vfs and totalVFs")}
	}
	if p.TotalVFs != 0 && p.TotalVFs < p.VFs {
		return &SpecError{Field: "totalVFs", Err: fmt.Errorf("%d is less than vfs (%d)", p.TotalVFs, p.VFs)}
	}
	if len(p.Names) > max(p.Count, 1) {
		return &SpecError{Field: "names", Err: fmt.Errorf("%d names for %d PFs", len(p.Names), max(p.Count, 1))}
	}
	if _, err := parseRanges(string(p.VFIO), p.VFs); err != nil {
		return &SpecError{Field: "vfio", Err: err}
	}
	for _, n := range p.NUMA {
		if err := checkNUMANode(n); err != nil {
			return &SpecError{Field: "numa", Err: err}
		}
	}
	if p.LinkType != "" && p.LinkType != hwdb.Ethernet && p.LinkType != hwdb.InfiniBand {
		return &SpecError{Field: "linkType", Err: fmt.Errorf("%q is neither %q nor %q", p.LinkType, hwdb.Ethernet, hwdb.InfiniBand)}
	}
	return nil
}

// maxSpeed is 1.6 Tb/s, beyond any NIC sold today.
const maxSpeed = 1600000

func checkNUMANode(n int) error {
	if n < 0 || n > maxNUMANode {
		return fmt.Errorf("node %d is out of range 0-%d", n, maxNUMANode)
	}
	return nil
}

func (n *NICSpec) entry(i int) string {
	switch {
	case n.Name != "":
		return fmt.Sprintf("nics[%d] %q", i, n.Name)
	case n.Vendor != "" || n.Device != "":
		return fmt.Sprintf("nics[%d] \"%s:%s\"", i, n.Vendor, n.Device)
	}
	return fmt.Sprintf("nics[%d]", i)
}

func (n *NICSpec) validate() error {
	if n.Name != "" {
		if err := checkIfname(n.Name); err != nil {
			return &SpecError{Field: "name", Err: err}
		}
	}
	for _, id := range []struct{ field, value string }{{"vendor", n.Vendor}, {"device", n.Device}} {
		if id.value == "" {
			return &SpecError{Field: id.field, Err: errors.New("missing")}
		}
		if _, err := hwdb.ParsePCIID(id.value); err != nil {
			return &SpecError{Field: id.field, Err: err}
		}
	}
	if err := checkDriverName(n.Driver); err != nil {
		return &SpecError{Field: "driver", Err: err}
	}
	if err := checkNUMANode(n.NUMA); err != nil {
		return &SpecError{Field: "numa", Err: err}
	}
	if n.Speed < 0 || n.Speed > maxSpeed {
		return &SpecError{Field: "speed", Err: fmt.Errorf("%d is out of range 0-%d", n.Speed, maxSpeed)}
	}
	return n.validateLayout()
}

// validateLayout checks the fields that draw a NIC unlike a plain PCI NIC.
func (n *NICSpec) validateLayout() error {
	if n.NetdevUnder != "" && !validSubdevice(n.NetdevUnder) {
		return &SpecError{Field: "netdevUnder", Err: fmt.Errorf("%q is not a device name such as \"virtio0\"", n.NetdevUnder)}
	}
	if n.Class != "" {
		if _, err := parseClass(n.Class); err != nil {
			return &SpecError{Field: "class", Err: err}
		}
	}
	if n.LinkType != "" && n.LinkType != hwdb.Ethernet && n.LinkType != hwdb.InfiniBand {
		return &SpecError{Field: "linkType", Err: fmt.Errorf("%q is neither %q nor %q", n.LinkType, hwdb.Ethernet, hwdb.InfiniBand)}
	}
	return nil
}

// validSubdevice accepts a sysfs device directory name that no PCI
// attribute of the function already uses.
func validSubdevice(name string) bool {
	reserved := []string{"net", "driver", "subsystem", "physfn", "infiniband", "uio", "iommu_group"}
	return checkDriverName(name) == nil && !slices.Contains(reserved, name)
}

// parseClass reads six hex digits of a 24-bit PCI class, "0c0600".
func parseClass(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 16, 32)
	if err != nil || len(s) != 6 {
		return 0, fmt.Errorf("%q is not a PCI class of six hex digits such as \"020000\"", s)
	}
	return uint32(v), nil
}

// checkIfname applies the kernel's dev_valid_name rules.
func checkIfname(name string) error {
	if name == "" || len(name) > maxIfname || name == "." || name == ".." ||
		strings.ContainsAny(name, "/: \t\n\r\v\f") {
		return fmt.Errorf("%q is not a valid interface name (1-%d characters, no '/', ':' or space)", name, maxIfname)
	}
	return nil
}

// checkDriverName rejects names that cannot be a directory under
// bus/pci/drivers.
func checkDriverName(name string) error {
	if name == "" {
		return errors.New("missing")
	}
	if name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%q is not a driver name", name)
	}
	return nil
}
