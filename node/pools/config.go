// Package pools groups the node's network functions into resource pools
// by the administrator's selectors: it reads the SR-IOV network device
// plugin's configuration file unchanged (resourceList, selectors, device
// types), matches an Inventory against it, and says which pool each
// device belongs to and which selectors conflict.
package pools

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/hwdb"
)

// DefaultConfigFile is where the agent reads the config unless told
// otherwise: the SR-IOV network device plugin's path, so its ConfigMap
// mounts unchanged. hwnetctl reads the same file by default.
const DefaultConfigFile = "/etc/pcidp/config.json"

// DefaultPrefix is the resource prefix of an entry without resourcePrefix,
// as in the SR-IOV network device plugin.
const DefaultPrefix = "intel.com"

// Config is a validated resource pool configuration: the SR-IOV network
// device plugin's config file (its "resourceList"), plus hwnet's admin NIC
// tags. It is not modified after Parse returns it.
type Config struct {
	// Resources are the resourceList entries, in order, with defaults
	// applied.
	Resources []Resource
	// Tags are the admin's NIC tags, in order.
	Tags []Tag
	// VFLayouts are hwnet's declarative VFs (vfLayouts), in order.
	VFLayouts []VFLayout
	// Warnings explain what the config asks for that hwnet cannot do,
	// such as selecting by DDP profile: the selector objects concerned
	// match no device.
	Warnings []string
	// SHA256 is the hex SHA-256 of the bytes parsed, as sha256sum prints
	// it for the file: an admin compares it with what each node's agent
	// says it serves to tell which nodes took a changed ConfigMap.
	SHA256 string
}

// Tag is an admin NIC tag: the functions its selectors match carry it, and
// a PF's tags apply to its VFs too. Pool selectors can select by tag.
type Tag struct {
	Name      string
	Selectors []Selector
}

// FieldError is one problem with a config, naming where it is.
type FieldError struct {
	// Entry is e.g. `resourceList[2] "sriov_dpdk"` or `tags[0] "fabric-a"`;
	// "" for the top level.
	Entry string
	// Field is the path within the entry, e.g. "selectors[0].pfNames[1]".
	Field string
	// Value is the offending value as the config spells it, in JSON
	// syntax (strings quoted); "" when the problem is a missing value.
	Value string
	Err   error
}

func (e *FieldError) Error() string {
	var b strings.Builder
	for _, part := range []string{e.Entry, e.Field, e.Value} {
		if part != "" {
			b.WriteString(part)
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Load reads and parses the config file at path.
func Load(path string) (*Config, error) {
	cfg, _, err := load(path)
	return cfg, err
}

// load is Load, with the bytes the config was read from.
func load(path string) (*Config, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, data, nil
}

// Parse reads a config in JSON (as sriovdp's config.json) or YAML and
// validates it. Unknown fields are errors, where sriovdp ignores them;
// field names otherwise match as in sriovdp, ignoring case. Every problem
// found is reported, each as a *FieldError, joined with errors.Join. Model
// names are checked by CheckModels, which needs the hardware database.
func Parse(data []byte) (*Config, error) {
	js, err := toJSON(data)
	if err != nil {
		return nil, err
	}
	var top rawConfig
	given, errs := decodeObject(js, "", top.fields(), topLevelHint)
	p := &parser{fullNames: map[string]int{}, envNames: map[string]int{}}
	p.add(entry{}, errs)
	if !slices.Contains(given, "resourceList") || len(top.ResourceList) == 0 {
		p.errs = append(p.errs, &FieldError{Field: "resourceList", Err: errors.New("missing: the config declares no resource")})
	}
	cfg := &Config{Tags: p.tags(top.Tags)}
	for i, raw := range top.ResourceList {
		cfg.Resources = append(cfg.Resources, p.resource(i, raw))
	}
	cfg.VFLayouts = p.vfLayouts(top.VFLayouts)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	cfg.Warnings = p.warnings
	sum := sha256.Sum256(data)
	cfg.SHA256 = hex.EncodeToString(sum[:])
	return cfg, nil
}

// CheckModels checks every selector's models against db, which holds the
// names discovery gives functions.
func (c *Config) CheckModels(db *hwdb.DB) error {
	var errs []error
	check := func(entry string, sels []Selector) {
		for _, s := range sels {
			for i, m := range s.Models {
				if _, ok := db.ModelByName(m); !ok {
					errs = append(errs, &FieldError{Entry: entry, Field: fmt.Sprintf("%s.models[%d]", s.path, i),
						Value: strconv.Quote(m), Err: errors.New("not a model in the hardware database")})
				}
			}
		}
	}
	for i := range c.Tags {
		check(tagEntry(i, c.Tags[i].Name), c.Tags[i].Selectors)
	}
	for i := range c.Resources {
		check(resourceEntry(i, c.Resources[i].Name), c.Resources[i].Selectors)
	}
	for i := range c.VFLayouts {
		check(layoutEntry(i, c.VFLayouts[i].Name), c.VFLayouts[i].Selectors)
	}
	return errors.Join(errs...)
}

// rawConfig is the config file's top level.
type rawConfig struct {
	ResourceList []json.RawMessage
	Tags         []json.RawMessage
	VFLayouts    []json.RawMessage
}

func (r *rawConfig) fields() []field {
	return []field{{"resourceList", &r.ResourceList}, {"tags", &r.Tags}, {"vfLayouts", &r.VFLayouts}}
}

func topLevelHint(key string) string {
	switch key {
	case "apiVersion", "kind", "metadata", "data":
		return "this looks like a Kubernetes ConfigMap: pass the config.json it holds"
	}
	return ""
}

// rawResource is one resourceList entry as written.
type rawResource struct {
	ResourceName     string
	ResourcePrefix   string
	DeviceType       string
	ExcludeTopology  bool
	Selectors        json.RawMessage
	AdditionalInfo   map[string]map[string]string
	AllocationPolicy string
	Mode             string
	CDI              bool
	ClaimDrivers     []string
	// sriovdpInternal takes sriovdp's SelectorObj(s), which it fills in
	// itself and so ignores in the file; sriov-network-operator writes
	// them as null.
	sriovdpInternal json.RawMessage
}

func (r *rawResource) fields() []field {
	return []field{
		{"resourceName", &r.ResourceName},
		{"resourcePrefix", &r.ResourcePrefix},
		{"deviceType", &r.DeviceType},
		{"excludeTopology", &r.ExcludeTopology},
		{"selectors", &r.Selectors},
		{"additionalInfo", &r.AdditionalInfo},
		{"allocationPolicy", &r.AllocationPolicy},
		{"mode", &r.Mode},
		{"cdi", &r.CDI},
		{"claimDrivers", &r.ClaimDrivers},
		{"SelectorObj", &r.sriovdpInternal},
		{"SelectorObjs", &r.sriovdpInternal},
	}
}

func resourceHint(key string) string {
	var rs rawSelector
	if lookupField(rs.fields(), key) != nil {
		return "a selector field: put it in each selector object; sriovdp ignores it here"
	}
	return ""
}

// parser collects every error and warning of one Parse.
type parser struct {
	errs     []error
	warnings []string
	tagNames []string
	// fullNames maps each resource's prefix/name to its index, envNames
	// each resource's PCIDEVICE_ variable.
	fullNames map[string]int
	envNames  map[string]int
}

// entry is the config entry being checked, for messages.
type entry struct {
	p     *parser
	label string
}

func resourceEntry(i int, name string) string { return labelEntry("resourceList", i, name) }

func tagEntry(i int, name string) string { return labelEntry("tags", i, name) }

func labelEntry(list string, i int, name string) string {
	if name == "" {
		return fmt.Sprintf("%s[%d]", list, i)
	}
	return fmt.Sprintf("%s[%d] %q", list, i, name)
}

func (p *parser) add(e entry, errs []*FieldError) {
	for _, err := range errs {
		err.Entry = e.label
		p.errs = append(p.errs, err)
	}
}

// uniqueName refuses an entry's name that is missing, not a qualified
// name's part, or among taken.
func (e entry) uniqueName(name string, taken []string) {
	switch err := checkQualifiedNamePart(name); {
	case name == "":
		e.fail("name", "", errors.New("missing"))
	case err != nil:
		e.fail("name", strconv.Quote(name), err)
	case slices.Contains(taken, name):
		e.fail("name", strconv.Quote(name), errors.New("declared twice"))
	}
}

func (e entry) fail(field, value string, err error) {
	e.p.errs = append(e.p.errs, &FieldError{Entry: e.label, Field: field, Value: value, Err: err})
}

func (e entry) warn(field, msg string) {
	e.p.warnings = append(e.p.warnings, fmt.Sprintf("%s: %s: %s", e.label, field, msg))
}

// resource validates resourceList[i] and applies its defaults.
func (p *parser) resource(i int, raw json.RawMessage) Resource {
	var r rawResource
	_, errs := decodeObject(raw, "", r.fields(), resourceHint)
	e := entry{p, resourceEntry(i, r.ResourceName)}
	p.add(e, errs)
	res := Resource{
		Prefix:          orDefault(r.ResourcePrefix, DefaultPrefix),
		Name:            r.ResourceName,
		DeviceType:      DeviceType(orDefault(r.DeviceType, string(NetDevice))),
		ExcludeTopology: r.ExcludeTopology,
		AdditionalInfo:  e.additionalInfo(r.AdditionalInfo),
		Policy:          Policy(orDefault(r.AllocationPolicy, string(Pack))),
		Mode:            Mode(orDefault(r.Mode, string(DevicePlugin))),
		CDI:             r.CDI,
		Index:           i,
	}
	e.checkResourceName(&res)
	kind, ok := kindOf(res.DeviceType)
	if !ok {
		e.fail("deviceType", strconv.Quote(r.DeviceType), fmt.Errorf("want %q, %q or %q", NetDevice, Accelerator, AuxNetDevice))
	}
	if res.Policy != Pack && res.Policy != Spread {
		e.fail("allocationPolicy", strconv.Quote(r.AllocationPolicy), fmt.Errorf("want %q or %q", Pack, Spread))
	}
	if res.Mode != DevicePlugin && res.Mode != DRA {
		e.fail("mode", strconv.Quote(r.Mode), fmt.Errorf("want %q or %q", DevicePlugin, DRA))
	}
	if res.CDI && res.Mode == DRA {
		e.warn("cdi", "a DRA pool always hands its devices out through CDI; the key only changes a device plugin pool")
	}
	res.ClaimDrivers = parseEach(e, "claimDrivers", r.ClaimDrivers, parseDriver)
	if len(res.ClaimDrivers) > 0 && res.Mode != DRA {
		e.warn("claimDrivers", "only a DRA claim asks for a driver; a device plugin pool's devices stay on the one they have")
	}
	if ok {
		res.Selectors = e.selectors(r.Selectors, kind)
		e.applyFlags(&res)
		e.claimDriversMatched(&res)
	}
	return res
}

// claimDriversMatched refuses a driver claims may ask for that a selector
// naming drivers does not: a VF bound to it for a claim would leave the
// pool while the claim holds it.
func (e entry) claimDriversMatched(res *Resource) {
	for i, s := range res.Selectors {
		for _, d := range res.ClaimDrivers {
			if len(s.Drivers) > 0 && !slices.Contains(s.Drivers, d) {
				e.fail("claimDrivers", strconv.Quote(d), fmt.Errorf("selectors[%d] matches drivers %q only: add it there, or a VF bound to it for a claim leaves the pool", i, s.Drivers))
			}
		}
	}
}

// orDefault returns s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkResourceName checks that prefix/name is a valid Kubernetes extended
// resource name that no earlier entry has taken.
func (e entry) checkResourceName(res *Resource) {
	if res.Name == "" {
		e.fail("resourceName", "", errors.New("missing"))
	} else if err := checkQualifiedNamePart(res.Name); err != nil {
		e.fail("resourceName", strconv.Quote(res.Name), err)
	}
	if err := checkResourcePrefix(res.Prefix); err != nil {
		e.fail("resourcePrefix", strconv.Quote(res.Prefix), err)
	}
	full := res.FullName()
	if first, taken := e.p.fullNames[full]; taken && res.Name != "" {
		e.fail("resourceName", strconv.Quote(res.Name), fmt.Errorf("%s is already the name of resourceList[%d]", full, first))
		return
	}
	e.p.fullNames[full] = res.Index
	env := res.EnvName()
	if first, taken := e.p.envNames[env]; taken && res.Name != "" {
		e.fail("resourceName", strconv.Quote(res.Name), fmt.Errorf("its devices' variable %s is already resourceList[%d]'s", env, first))
		return
	}
	e.p.envNames[env] = res.Index
}

// additionalInfo checks the keys of additionalInfo and writes PCI
// addresses the way device IDs are written, in lower case.
func (e entry) additionalInfo(info map[string]map[string]string) map[string]map[string]string {
	if info == nil {
		return nil
	}
	out := make(map[string]map[string]string, len(info))
	for _, key := range slices.Sorted(maps.Keys(info)) {
		if key == "*" {
			out[key] = info[key]
			continue
		}
		if _, err := parsePCIAddress(key); err != nil {
			e.fail("additionalInfo", strconv.Quote(key), fmt.Errorf(`want "*" or a device's PCI address: %w`, err))
		}
		out[strings.ToLower(key)] = info[key]
	}
	return out
}

// applyFlags sets the resource's isRdma, needVhostNet and vdpaType from
// its selector objects. sriovdp sets them per selector object, but they
// say what a device plugin hands out with every device of the resource,
// so hwnet wants one value per resource.
func (e entry) applyFlags(res *Resource) {
	if len(res.Selectors) == 0 {
		return
	}
	first := res.Selectors[0]
	for _, s := range res.Selectors[1:] {
		for _, f := range []struct {
			name      string
			got, want any
		}{
			{"isRdma", s.IsRDMA, first.IsRDMA},
			{"needVhostNet", s.NeedVhostNet, first.NeedVhostNet},
			{"vdpaType", s.VDPAType, first.VDPAType},
		} {
			if f.got != f.want {
				e.fail(s.path+"."+f.name, fmt.Sprintf("%#v", f.got), fmt.Errorf(
					"differs from %s (%#v): hwnet applies %s to the whole resource; split the entry into one resource per value",
					first.path, f.want, f.name))
			}
		}
	}
	res.IsRDMA, res.NeedVhostNet, res.VDPAType = first.IsRDMA, first.NeedVhostNet, first.VDPAType
}

// rawTag is one entry of the top-level tags list.
type rawTag struct {
	Name      string
	Selectors json.RawMessage
}

func (r *rawTag) fields() []field {
	return []field{{"name", &r.Name}, {"selectors", &r.Selectors}}
}

// tags validates the tags list. It runs before the resources, whose
// selectors may name the tags.
func (p *parser) tags(raws []json.RawMessage) []Tag {
	var out []Tag
	for i, raw := range raws {
		var r rawTag
		_, errs := decodeObject(raw, "", r.fields(), nil)
		e := entry{p, tagEntry(i, r.Name)}
		p.add(e, errs)
		e.uniqueName(r.Name, p.tagNames)
		p.tagNames = append(p.tagNames, r.Name)
		out = append(out, Tag{Name: r.Name, Selectors: e.selectors(r.Selectors, tagKind())})
	}
	return out
}
