package pools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/hwdb"
)

// Selector is one validated selector object. A function matches it when
// every field given matches; a list field matches when any of its values
// does. Field names in comments are the config's.
type Selector struct {
	Vendors []hwdb.PCIID // vendors
	Devices []hwdb.PCIID // devices
	Drivers []string     // drivers
	// PCIAddresses (pciAddresses) are lower-case, with the domain.
	PCIAddresses []string
	// PFNames (pfNames) select by the PF's netdev name; a standalone
	// function (a NIC or a PF without VFs) is its own PF, as in sriovdp.
	PFNames []FunctionSet
	// RootDevices (rootDevices) select by the PF's PCI address.
	RootDevices []FunctionSet
	// LinkTypes (linkTypes) accept sriovdp's "ether" for Ethernet.
	LinkTypes []hwdb.LinkType
	// Models (models, hwnet's) are hardware database model names,
	// compared ignoring case.
	Models []string
	// Tags (tags, hwnet's) are admin NIC tags, any of which matches.
	Tags []string
	// IsRDMA (isRdma) selects functions with an RDMA device.
	IsRDMA bool
	// NeedVhostNet (needVhostNet) selects nothing; see Resource.
	NeedVhostNet bool
	// VDPAType (vdpaType) is "vhost" or "virtio": functions with a vDPA
	// device bound to vhost_vdpa or virtio_vdpa.
	VDPAType string
	// PKeys (pKeys) select InfiniBand functions by their port's default
	// partition key, as sriovdp does: 0x and four lower-case hex digits.
	PKeys []string
	// AuxTypes (auxTypes) select scalable functions by their auxiliary
	// device type, "sf" of mlx5_core.sf.4.
	AuxTypes []string
	// DDPProfiles and ACPIIndexes are sriovdp selectors that hwnet
	// accepts but cannot evaluate, having no such information: a
	// selector object that uses one matches no device, and
	// Config.Warnings says so.
	DDPProfiles []string
	ACPIIndexes []string

	// path is where the object is in its entry, e.g. "selectors[1]".
	path string
	// unevaluated is set when a field hwnet cannot evaluate is given.
	unevaluated bool
}

// FunctionSet is a pfNames or rootDevices value, "PF" or "PF#0,2-7": the
// functions of a PF and, after '#', which of its VFs.
type FunctionSet struct {
	// PF is the PF's netdev name or PCI address.
	PF string
	// VFs are inclusive ranges of VF indices; nil selects every VF of
	// the PF, and the PF itself when it is standalone.
	VFs []IndexRange
}

// IndexRange is an inclusive range of VF indices.
type IndexRange struct{ First, Last int }

// maxVFIndex is the largest VF index: sriov_totalvfs is 16 bits.
const maxVFIndex = 65534

// vdpaDriver returns the vDPA bus driver a vdpaType means, "" for none.
func vdpaDriver(vdpaType string) string {
	switch vdpaType {
	case "vhost":
		return "vhost_vdpa"
	case "virtio":
		return "virtio_vdpa"
	}
	return ""
}

// rawSelector is a selector object as written.
type rawSelector struct {
	Vendors, Devices, Drivers, PCIAddresses, ACPIIndexes []string
	PFNames, RootDevices, LinkTypes, DDPProfiles, PKeys  []string
	AuxTypes, Models, Tags                               []string
	IsRDMA, NeedVhostNet                                 bool
	VDPAType                                             string
}

func (r *rawSelector) fields() []field {
	return []field{
		{"vendors", &r.Vendors}, {"devices", &r.Devices}, {"drivers", &r.Drivers},
		{"pciAddresses", &r.PCIAddresses}, {"acpiIndexes", &r.ACPIIndexes},
		{"pfNames", &r.PFNames}, {"rootDevices", &r.RootDevices}, {"linkTypes", &r.LinkTypes},
		{"ddpProfiles", &r.DDPProfiles}, {"pKeys", &r.PKeys}, {"auxTypes", &r.AuxTypes},
		{"isRdma", &r.IsRDMA}, {"needVhostNet", &r.NeedVhostNet}, {"vdpaType", &r.VDPAType},
		{"models", &r.Models}, {"tags", &r.Tags},
	}
}

func selectorHint(key string) string {
	var r rawResource
	switch {
	case strings.EqualFold(key, "ifNames"):
		return "an sriovdp 1.x selector: use pfNames"
	case lookupField(r.fields(), key) != nil:
		return "a resourceList entry field, not a selector field"
	}
	return ""
}

// selectorKind is the set of selector fields one kind of entry may use.
type selectorKind struct {
	what   string
	fields []string
}

// kindOf returns the selector fields of a device type: sriovdp's
// NetDeviceSelectors, AccelDeviceSelectors and AuxNetDeviceSelectors, and
// hwnet's models and tags.
func kindOf(t DeviceType) (selectorKind, bool) {
	common := []string{"vendors", "devices", "drivers", "models", "tags"}
	switch t {
	case NetDevice:
		return selectorKind{what: `deviceType "netDevice"`, fields: append(common, "pciAddresses", "acpiIndexes",
			"pfNames", "rootDevices", "linkTypes", "ddpProfiles", "pKeys", "isRdma", "needVhostNet", "vdpaType")}, true
	case Accelerator:
		return selectorKind{what: `deviceType "accelerator"`, fields: append(common, "pciAddresses", "acpiIndexes")}, true
	case AuxNetDevice:
		return selectorKind{what: `deviceType "auxNetDevice"`, fields: append(common, "acpiIndexes", "pfNames",
			"rootDevices", "linkTypes", "isRdma", "auxTypes")}, true
	}
	return selectorKind{}, false
}

// tagKind returns the fields of a tag's selectors: those hwnet can
// evaluate, less tags themselves and needVhostNet, which selects nothing.
func tagKind() selectorKind {
	return selectorKind{what: "a tag", fields: []string{"vendors", "devices", "drivers", "models", "pciAddresses",
		"pfNames", "rootDevices", "linkTypes", "isRdma", "vdpaType"}}
}

// selectors validates an entry's selectors: one object or a list of them.
func (e entry) selectors(raw json.RawMessage, kind selectorKind) []Selector {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		e.fail("selectors", "", errors.New("missing: want a selector object or a list of them"))
		return nil
	case raw[0] == '{':
		if s, ok := e.selector("selectors", raw, kind); ok {
			return []Selector{s}
		}
		return nil
	case raw[0] != '[':
		e.fail("selectors", compact(raw), fmt.Errorf("want a selector object or a list of them, got %s", describeJSON(raw)))
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || len(list) == 0 {
		e.fail("selectors", compact(raw), errors.New("want a non-empty list of selector objects"))
		return nil
	}
	var out []Selector
	for j, r := range list {
		if s, ok := e.selector(fmt.Sprintf("selectors[%d]", j), r, kind); ok {
			out = append(out, s)
		}
	}
	return out
}

// selector validates one selector object at path.
func (e entry) selector(path string, raw json.RawMessage, kind selectorKind) (Selector, bool) {
	errsBefore := len(e.p.errs)
	var r rawSelector
	given, errs := decodeObject(raw, path, r.fields(), selectorHint)
	e.p.add(e, errs)
	for _, name := range given {
		if !slices.Contains(kind.fields, name) {
			e.fail(path+"."+name, "", fmt.Errorf("not a selector field of %s", kind.what))
		}
	}
	s := e.fill(path, &r)
	if len(e.p.errs) == errsBefore && !s.selects() {
		e.fail(path, compact(raw), errors.New("selects nothing in particular: name at least one field to match, such as vendors, devices, drivers, pfNames or models"))
	}
	if s.IsRDMA && s.VDPAType != "" {
		e.fail(path+".vdpaType", strconv.Quote(s.VDPAType), errors.New("isRdma and vdpaType are mutually exclusive"))
	}
	field, why := s.unevaluable()
	s.unevaluated = field != ""
	if s.unevaluated {
		e.warn(path+"."+field, why+"; this selector object matches no device")
	}
	return s, len(e.p.errs) == errsBefore
}

// fill parses each field of r.
func (e entry) fill(path string, r *rawSelector) Selector {
	at := func(name string) string { return path + "." + name }
	return Selector{
		Vendors:      parseEach(e, at("vendors"), r.Vendors, parsePCIID),
		Devices:      parseEach(e, at("devices"), r.Devices, parsePCIID),
		Drivers:      parseEach(e, at("drivers"), r.Drivers, parseDriver),
		PCIAddresses: parseEach(e, at("pciAddresses"), r.PCIAddresses, parsePCIAddress),
		PFNames:      parseEach(e, at("pfNames"), r.PFNames, functionSetParser(parseIfname)),
		RootDevices:  parseEach(e, at("rootDevices"), r.RootDevices, functionSetParser(parsePCIAddress)),
		LinkTypes:    parseEach(e, at("linkTypes"), r.LinkTypes, parseLinkType),
		Models:       parseEach(e, at("models"), r.Models, parseNonEmpty),
		Tags:         parseEach(e, at("tags"), r.Tags, e.parseTagRef),
		IsRDMA:       r.IsRDMA,
		NeedVhostNet: r.NeedVhostNet,
		VDPAType:     e.parseVDPAType(at("vdpaType"), r.VDPAType),
		DDPProfiles:  parseEach(e, at("ddpProfiles"), r.DDPProfiles, parseNonEmpty),
		PKeys:        parseEach(e, at("pKeys"), r.PKeys, parsePKey),
		ACPIIndexes:  parseEach(e, at("acpiIndexes"), r.ACPIIndexes, parseACPIIndex),
		AuxTypes:     parseEach(e, at("auxTypes"), r.AuxTypes, parseNonEmpty),
		path:         path,
	}
}

// selects reports whether the selector constrains anything: without a
// constraint it would take every device.
func (s *Selector) selects() bool {
	lists := len(s.Vendors) + len(s.Devices) + len(s.Drivers) + len(s.PCIAddresses) + len(s.PFNames) +
		len(s.RootDevices) + len(s.LinkTypes) + len(s.Models) + len(s.Tags) + len(s.DDPProfiles) +
		len(s.PKeys) + len(s.ACPIIndexes) + len(s.AuxTypes)
	return lists > 0 || s.IsRDMA || s.VDPAType != ""
}

// unevaluable names a field hwnet cannot evaluate, and why.
func (s *Selector) unevaluable() (field, why string) {
	switch {
	case len(s.DDPProfiles) > 0:
		return "ddpProfiles", "hwnet does not read DDP profiles"
	case len(s.ACPIIndexes) > 0:
		return "acpiIndexes", "hwnet does not read ACPI indexes"
	}
	return "", ""
}

// parseEach parses every value of a list field, failing each bad one by
// its index. Values of an absent field give nil.
func parseEach[T any](e entry, path string, values []string, parse func(string) (T, error)) []T {
	var out []T
	for i, v := range values {
		t, err := parse(v)
		if err != nil {
			e.fail(fmt.Sprintf("%s[%d]", path, i), strconv.Quote(v), err)
			continue
		}
		out = append(out, t)
	}
	return out
}

func parsePCIID(s string) (hwdb.PCIID, error) {
	id, err := hwdb.ParsePCIID(s)
	if err != nil {
		return 0, hwdb.ErrInvalidPCIID
	}
	return id, nil
}

func parseNonEmpty(s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return "", errors.New("empty")
	}
	return s, nil
}

func (e entry) parseTagRef(name string) (string, error) {
	if !slices.Contains(e.p.tagNames, name) {
		return "", errors.New("no such tag in the top-level tags list")
	}
	return name, nil
}

func (e entry) parseVDPAType(path, t string) string {
	if t != "" && vdpaDriver(t) == "" {
		e.fail(path, strconv.Quote(t), errors.New(`want "vhost" or "virtio"`))
		return ""
	}
	return t
}

// parseLinkType reads sriovdp's netlink encapsulation names ("ether",
// "infiniband") and discovery's ("ethernet").
func parseLinkType(s string) (hwdb.LinkType, error) {
	switch s {
	case "ether", "ethernet":
		return hwdb.Ethernet, nil
	case "infiniband":
		return hwdb.InfiniBand, nil
	}
	return "", errors.New(`want "ether" (or "ethernet") or "infiniband"`)
}

// functionSetParser returns a parser of "PF" or "PF#0,2-7", where parsePF
// checks the PF part.
func functionSetParser(parsePF func(string) (string, error)) func(string) (FunctionSet, error) {
	return func(s string) (FunctionSet, error) {
		pf, indices, hasIndices := strings.Cut(s, "#")
		name, err := parsePF(pf)
		if err != nil {
			return FunctionSet{}, err
		}
		set := FunctionSet{PF: name}
		if hasIndices {
			set.VFs, err = parseIndexRanges(indices)
		}
		return set, err
	}
}

// parseIndexRanges parses "0,2-7,9" into inclusive ranges.
func parseIndexRanges(s string) ([]IndexRange, error) {
	if s == "" {
		return nil, errors.New("no VF indices after '#'")
	}
	var out []IndexRange
	for item := range strings.SplitSeq(s, ",") {
		first, last, isRange := strings.Cut(item, "-")
		lo, err := parseIndex(first, item)
		if err != nil {
			return nil, err
		}
		hi := lo
		if isRange {
			if hi, err = parseIndex(last, item); err != nil {
				return nil, err
			}
		}
		if hi < lo {
			return nil, fmt.Errorf("range %s is reversed", item)
		}
		out = append(out, IndexRange{lo, hi})
	}
	return out, nil
}

func parseIndex(s, item string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || s[0] == '+' || n < 0 || n > maxVFIndex {
		return 0, fmt.Errorf("%q in %q is not a VF index (0-%d)", s, item, maxVFIndex)
	}
	return n, nil
}

// parsePKey reads an InfiniBand partition key, "0x7fff" or "7fff".
// parsePKey keeps a partition key as discovery writes one, so that
// "0x7FFF" in the config matches the kernel's "0x7fff".
func parsePKey(s string) (string, error) {
	k, err := hwdb.ParsePKey(s)
	if err != nil {
		return "", errors.New("not a 16-bit hex partition key such as 0x7fff")
	}
	return k, nil
}

func parseACPIIndex(s string) (string, error) {
	if _, err := strconv.ParseUint(s, 10, 32); err != nil || s[0] == '+' {
		return "", errors.New("not an ACPI index (a decimal number)")
	}
	return s, nil
}
