package pools

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/hwnet-io/hwnet/node/devlink"
	"github.com/hwnet-io/hwnet/node/discovery"
)

// VFLayout is a vfLayouts entry, hwnet's own: how many VFs the PFs its
// selectors match should have, and which of them bind to which driver.
// The VFs no range names stay on the driver the kernel binds them to,
// the PF's VF driver.
type VFLayout struct {
	Name      string
	Selectors []Selector
	NumVFs    int
	// ESwitchMode is the PF's eSwitch mode, devlink.ModeLegacy or
	// devlink.ModeSwitchdev; "" leaves the mode as it is.
	ESwitchMode string
	// NumSFs is the PF's number of mlx5 scalable functions (numSfs); nil
	// leaves its SFs as they are.
	NumSFs *int
	// Drivers are the VF ranges that bind to a driver other than the
	// kernel's choice, in the order written; no VF is in two.
	Drivers []VFDriver
	// Index is the entry's place in vfLayouts.
	Index int
}

// VFDriver binds a range of VFs to a driver, such as vfio-pci for DPDK.
type VFDriver struct {
	VFs    []IndexRange
	Driver string
}

// DriverOf is the driver VF index i should be bound to, "" for the
// kernel's choice.
func (l *VFLayout) DriverOf(i int) string {
	for _, d := range l.Drivers {
		for _, r := range d.VFs {
			if r.First <= i && i <= r.Last {
				return d.Driver
			}
		}
	}
	return ""
}

// PFLayout is the layout one PF of an inventory should have.
type PFLayout struct {
	// PF is the PF's PCI address; PFName its netdev, "" without one.
	PF, PFName string
	// TotalVFs is the PF's sriov_totalvfs: a layout asking for more
	// cannot apply (Unfit).
	TotalVFs int
	// Model is the PF's model in the hardware database, "" if unknown;
	// Switchdev says whether the PF can take switchdev mode
	// (discovery.ESwitch.SwitchdevCapable): a layout asking for it
	// cannot apply otherwise (Unfit).
	Model     string
	Switchdev bool
	// Driver is the PF's driver, ESwitchMode its eSwitch mode now and
	// MaxSFs the most SFs its model carries (hwdb's maxSFs, 0 for none or
	// unknown): a layout counting SFs cannot apply but on an mlx5 PF in,
	// or brought to, switchdev mode, within MaxSFs (Unfit).
	Driver      string
	ESwitchMode string
	MaxSFs      int
	Layout      *VFLayout
}

// sfDriver is the driver whose PFs hwnet adds SFs to: mlx5's devlink
// ports of flavour pcisf.
const sfDriver = "mlx5_core"

// Unfit says why the PF cannot take its layout, "" when it can: the
// layout asks for more VFs than the PF's sriov_totalvfs, for switchdev
// mode on a PF that cannot take it, or for SFs the PF cannot have
// (unfitSFs). The change would otherwise take the PF's VFs away (a mode
// change goes through 0 VFs) before the kernel refuses it.
func (l PFLayout) Unfit() string {
	entry := layoutEntry(l.Layout.Index, l.Layout.Name)
	switch {
	case l.Layout.NumVFs > l.TotalVFs:
		return fmt.Sprintf("%s: numVfs %d is more than PF %s has (sriov_totalvfs %d)", entry, l.Layout.NumVFs, l.PF, l.TotalVFs)
	case l.Layout.ESwitchMode != devlink.ModeSwitchdev || l.Switchdev:
		return l.unfitSFs(entry)
	case l.Model == "":
		return fmt.Sprintf("%s: eswitchMode switchdev: PF %s's model is not in the hardware database, which says which models can take switchdev mode (add it with --hwdb, switchdev: true)", entry, l.PF)
	}
	return fmt.Sprintf("%s: eswitchMode switchdev: PF %s's model %s cannot take switchdev mode (hardware database)", entry, l.PF, l.Model)
}

// unfitSFs says why the PF cannot take the SFs its layout counts, "" when
// it can: SFs are mlx5's ports of the switchdev eSwitch, so the PF must
// be on mlx5_core and in switchdev mode (now, or by its layout), and its
// model carries at most maxSFs.
func (l PFLayout) unfitSFs(entry string) string {
	n := l.Layout.NumSFs
	switch {
	case n == nil || *n == 0:
		return ""
	case l.Driver != sfDriver:
		return fmt.Sprintf("%s: numSfs %d: PF %s is on %q, and hwnet adds SFs only to %s PFs", entry, *n, l.PF, l.Driver, sfDriver)
	case l.Layout.ESwitchMode == "" && l.ESwitchMode != devlink.ModeSwitchdev:
		return fmt.Sprintf("%s: numSfs %d: PF %s's eSwitch is in %s mode, and SFs are ports of the switchdev eSwitch (declare eswitchMode: switchdev)",
			entry, *n, l.PF, l.ESwitchMode)
	case *n <= l.MaxSFs:
		return ""
	case l.Model == "":
		return fmt.Sprintf("%s: numSfs %d: PF %s's model is not in the hardware database, which says how many SFs a model carries (add it with --hwdb, maxSFs)", entry, *n, l.PF)
	}
	return fmt.Sprintf("%s: numSfs %d is more than PF %s's model %s carries (hardware database maxSFs %d)", entry, *n, l.PF, l.Model, l.MaxSFs)
}

// maxNumVFs is the most VFs a PF can have: sriov_totalvfs is 16 bits.
const maxNumVFs = maxVFIndex + 1

type rawVFLayout struct {
	Name      string
	Selectors json.RawMessage
	NumVFs    *int
	// ESwitchMode is *string so that an empty one is told from none.
	ESwitchMode *string
	NumSFs      *int
	Drivers     []json.RawMessage
}

func (r *rawVFLayout) fields() []field {
	return []field{{"name", &r.Name}, {"selectors", &r.Selectors}, {"numVfs", &r.NumVFs}, {"eswitchMode", &r.ESwitchMode},
		{"numSfs", &r.NumSFs}, {"drivers", &r.Drivers}}
}

type rawVFDriver struct {
	VFs    string
	Driver string
}

func (r *rawVFDriver) fields() []field {
	return []field{{"vfs", &r.VFs}, {"driver", &r.Driver}}
}

// layoutKind is the selector fields that pick a PF: those pools use that
// say something about a PF.
func layoutKind() selectorKind {
	return selectorKind{what: "a vfLayouts entry", fields: []string{"vendors", "devices", "drivers", "models",
		"pciAddresses", "pfNames", "rootDevices", "linkTypes", "tags"}}
}

func layoutEntry(i int, name string) string { return labelEntry("vfLayouts", i, name) }

// vfLayouts validates the vfLayouts list.
func (p *parser) vfLayouts(raws []json.RawMessage) []VFLayout {
	var out []VFLayout
	var names []string
	for i, raw := range raws {
		var r rawVFLayout
		_, errs := decodeObject(raw, "", r.fields(), nil)
		e := entry{p, layoutEntry(i, r.Name)}
		p.add(e, errs)
		e.uniqueName(r.Name, names)
		names = append(names, r.Name)
		l := VFLayout{Name: r.Name, Index: i, Selectors: e.selectors(r.Selectors, layoutKind())}
		e.pfSelectors(l.Selectors)
		l.NumVFs = e.numVFs(r.NumVFs)
		l.ESwitchMode = e.eswitchMode(r.ESwitchMode)
		l.NumSFs = e.numSFs(r.NumSFs, l.ESwitchMode)
		l.Drivers = e.vfDrivers(r.Drivers, l.NumVFs)
		out = append(out, l)
	}
	return out
}

// pfSelectors refuses pfNames and rootDevices that name VFs: a layout
// selects PFs.
func (e entry) pfSelectors(sels []Selector) {
	for _, s := range sels {
		for _, f := range []struct {
			name string
			sets []FunctionSet
		}{{"pfNames", s.PFNames}, {"rootDevices", s.RootDevices}} {
			for j, set := range f.sets {
				if set.VFs != nil {
					e.fail(fmt.Sprintf("%s.%s[%d]", s.path, f.name, j), strconv.Quote(set.PF+"#"+formatRanges(set.VFs)),
						errors.New("names VFs: a layout selects PFs, give the PF alone"))
				}
			}
		}
	}
}

// formatRanges writes ranges as parseIndexRanges reads them.
func formatRanges(rs []IndexRange) string {
	var b []byte
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(r.First), 10)
		if r.Last != r.First {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(r.Last), 10)
		}
	}
	return string(b)
}

func (e entry) numVFs(n *int) int {
	switch {
	case n == nil:
		e.fail("numVfs", "", errors.New("missing: want the PF's number of VFs"))
		return 0
	case *n < 0 || *n > maxNumVFs:
		e.fail("numVfs", strconv.Itoa(*n), fmt.Errorf("want 0-%d", maxNumVFs))
		return 0
	}
	return *n
}

// maxNumSFs bounds numSfs before any PF is seen: BlueField-3, the model
// with the most, carries 1000; each PF's model bounds it further (Unfit).
const maxNumSFs = 1 << 16

// numSFs validates the PF's SF count, nil when none is given: SFs are
// ports of the switchdev eSwitch, which a layout bringing the PF to
// legacy mode takes away.
func (e entry) numSFs(n *int, mode string) *int {
	switch {
	case n == nil:
		return nil
	case *n < 0 || *n > maxNumSFs:
		e.fail("numSfs", strconv.Itoa(*n), fmt.Errorf("want 0-%d", maxNumSFs))
		return nil
	case *n > 0 && mode == devlink.ModeLegacy:
		e.fail("numSfs", strconv.Itoa(*n), errors.New("SFs are ports of the switchdev eSwitch, and eswitchMode is legacy"))
		return nil
	}
	return n
}

// eswitchMode validates the PF's eSwitch mode, "" when none is given.
func (e entry) eswitchMode(mode *string) string {
	if mode == nil {
		return ""
	}
	if *mode != devlink.ModeLegacy && *mode != devlink.ModeSwitchdev {
		e.fail("eswitchMode", strconv.Quote(*mode), fmt.Errorf("want %q or %q", devlink.ModeLegacy, devlink.ModeSwitchdev))
		return ""
	}
	return *mode
}

// vfDrivers validates the driver ranges of a layout of numVFs VFs.
func (e entry) vfDrivers(raws []json.RawMessage, numVFs int) []VFDriver {
	var out []VFDriver
	for j, raw := range raws {
		path := fmt.Sprintf("drivers[%d]", j)
		var r rawVFDriver
		given, errs := decodeObject(raw, path, r.fields(), nil)
		e.p.add(e, errs)
		d := VFDriver{Driver: r.Driver}
		if _, err := parseDriver(r.Driver); err != nil {
			e.fail(path+".driver", strconv.Quote(r.Driver), err)
		}
		if !slices.Contains(given, "vfs") {
			e.fail(path+".vfs", "", errors.New(`missing: want VF indices such as "0-1" or "0,4-7"`))
		} else if rs, err := parseIndexRanges(r.VFs); err != nil {
			e.fail(path+".vfs", strconv.Quote(r.VFs), err)
		} else if e.checkRanges(path+".vfs", r.VFs, rs, numVFs, out) {
			d.VFs = rs
		}
		out = append(out, d)
	}
	return out
}

// checkRanges checks that every index is one of the layout's VFs and no
// earlier range has it.
func (e entry) checkRanges(path, value string, rs []IndexRange, numVFs int, earlier []VFDriver) bool {
	for _, r := range rs {
		if r.Last >= numVFs {
			e.fail(path, strconv.Quote(value), fmt.Errorf("VF %d is beyond numVfs %d (VFs 0-%d)", r.Last, numVFs, numVFs-1))
			return false
		}
		for k, d := range earlier {
			for _, o := range d.VFs {
				if r.First <= o.Last && o.First <= r.Last {
					e.fail(path, strconv.Quote(value), fmt.Errorf("VF %d is already in drivers[%d]", max(r.First, o.First), k))
					return false
				}
			}
		}
	}
	return true
}

// Layouts returns the layout each PF of inv should have: the first
// vfLayouts entry that matches it, in inventory order. A PF that several
// entries match goes to the first, and a warning says so; a layout that
// asks for more VFs than the PF has is returned too, for whoever applies
// it to say so (Unfit).
func (c *Config) Layouts(inv *discovery.Inventory) (out []PFLayout, warnings []string) {
	for i := range inv.PFs {
		pf := &inv.PFs[i]
		cand := c.standalone(&pf.Function)
		var matched []int
		for j := range c.VFLayouts {
			if anyMatches(c.VFLayouts[j].Selectors, &cand) {
				matched = append(matched, j)
			}
		}
		if len(matched) == 0 {
			continue
		}
		l := &c.VFLayouts[matched[0]]
		for _, j := range matched[1:] {
			warnings = append(warnings, fmt.Sprintf("PF %s is matched by %s too; %s applies",
				pf.Address, layoutEntry(j, c.VFLayouts[j].Name), layoutEntry(l.Index, l.Name)))
		}
		out = append(out, PFLayout{PF: pf.Address, PFName: cand.pfName(), TotalVFs: pf.SRIOV.TotalVFs, Model: pf.Model,
			Switchdev: pf.ESwitch.SwitchdevCapable, Driver: pf.Driver, ESwitchMode: pf.ESwitch.Mode, MaxSFs: pf.MaxSFs, Layout: l})
	}
	return out, warnings
}
