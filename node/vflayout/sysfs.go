// Package vflayout brings each PF's VFs to the layout the pools
// configuration declares for it (vfLayouts): the number of VFs and the
// driver each is bound to. It changes a PF only under a fence of the
// device ledger, which withdraws the PF and its VFs from every front end
// and which the ledger refuses while any of them is held. It writes sysfs
// as the kernel wants it (sriov_numvfs through 0; per VF unbind,
// driver_override, drivers_probe), checks each step took, and puts the
// PF back as it was when a step fails: each VF on the driver it had, with
// the driver_override it had. A layout may name the PF's eSwitch mode
// too, set through devlink (ESwitch) with no VF present, as ice and mlx5
// require: the VFs go to 0, the mode is set, then the VFs are laid out;
// a rollback puts the mode back first. A layout may count the PF's mlx5
// scalable functions too, added and deleted through devlink's ports
// (sfTarget says which sfnums): those to go are deleted before the mode
// changes, those to come added after, as SFs are ports of the switchdev
// eSwitch; a rollback does the same towards the sfnums the PF had. A PF
// already as declared is not written to.
package vflayout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/node/devlink"
	"github.com/hwnet-io/hwnet/node/pcidriver"
	"github.com/hwnet-io/hwnet/node/pools"
)

// VF is one VF of a PF as sysfs shows it.
type VF struct {
	Addr string
	// Driver is the bound driver, "" when unbound.
	Driver string
	// Override is driver_override, "" when unset.
	Override string
}

// State is a PF's VFs, by VF index.
type State []VF

// Want is the layout a PF should have.
type Want struct {
	NumVFs int
	// Drivers maps the VF indices an override binds to their driver;
	// the others are left to the kernel's choice, the PF's VF driver.
	Drivers map[int]string
	// ESwitchMode is the PF's eSwitch mode, "" to leave it as it is.
	ESwitchMode string
	// NumSFs is the PF's number of scalable functions, nil to leave them
	// as they are.
	NumSFs *int
}

// ESwitch reads and sets PFs' eSwitch modes: devlink's, or its record.
type ESwitch = devlink.ESwitch

// WantOf is the layout l declares.
func WantOf(l *pools.VFLayout) Want {
	w := Want{NumVFs: l.NumVFs, Drivers: map[int]string{}, ESwitchMode: l.ESwitchMode, NumSFs: l.NumSFs}
	for i := range l.NumVFs {
		if d := l.DriverOf(i); d != "" {
			w.Drivers[i] = d
		}
	}
	return w
}

// layout is w as a fence file records it.
func (w Want) layout() fenceapi.Layout {
	return fenceapi.Layout{NumVFs: w.NumVFs, Drivers: maps.Clone(w.Drivers), ESwitchMode: w.ESwitchMode, NumSFs: w.NumSFs}
}

// Bindings are each VF's driver and driver_override, by index: what a
// rollback puts back, exactly.
func (s State) Bindings() []fenceapi.VF {
	out := make([]fenceapi.VF, len(s))
	for i, vf := range s {
		out[i] = fenceapi.VF{Driver: vf.Driver, Override: vf.Override}
	}
	return out
}

// fits reports whether vf, index i, is as w wants it: on the driver its
// override names, or on the kernel's choice with no override.
func (w Want) fits(i int, vf VF) bool {
	if d, ok := w.Drivers[i]; ok {
		return vf.Driver == d && vf.Override == d
	}
	return vf.Override == "" && vf.Driver != ""
}

// SatisfiedBy reports whether the PF's VFs, its eSwitch mode and its SFs
// are as w wants them; mode is the PF's mode as Sysfs.ESwitchMode reads
// it, "" when w names none, and sfs its sfnums as Sysfs.SFs reads them.
func (w Want) SatisfiedBy(s State, mode string, sfs []int) bool {
	if len(s) != w.NumVFs || (w.ESwitchMode != "" && mode != w.ESwitchMode) || (w.NumSFs != nil && len(sfs) != *w.NumSFs) {
		return false
	}
	for i, vf := range s {
		if !w.fits(i, vf) {
			return false
		}
	}
	return true
}

// String says what w asks for, as Events show it.
func (w Want) String() string {
	var parts []string
	if w.ESwitchMode != "" {
		parts = append(parts, "eSwitch "+w.ESwitchMode)
	}
	if w.NumSFs != nil {
		parts = append(parts, fmt.Sprintf("%d SFs", *w.NumSFs))
	}
	for _, i := range slices.Sorted(maps.Keys(w.Drivers)) {
		parts = append(parts, fmt.Sprintf("VF %d on %s", i, w.Drivers[i]))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d VFs", w.NumVFs)
	}
	return fmt.Sprintf("%d VFs, %s", w.NumVFs, strings.Join(parts, ", "))
}

// Sysfs reads and writes PFs' VFs in a sysfs tree.
type Sysfs struct {
	// Root is where sysfs is mounted, /sys on a host.
	Root string
	// Settle bounds how long a write may take to show: the kernel's are
	// done when write returns, an emulation's a moment later.
	Settle time.Duration
	// ESwitch sets PFs' eSwitch modes; nil cannot, and a layout that
	// names a mode fails, saying so.
	ESwitch ESwitch
}

// ESwitchMode is the PF's eSwitch mode when want names one, "" when it
// does not: a layout without a mode never asks devlink.
func (s Sysfs) ESwitchMode(ctx context.Context, pf string, want Want) (string, error) {
	if want.ESwitchMode == "" {
		return "", nil
	}
	return s.readMode(ctx, pf)
}

func (s Sysfs) readMode(ctx context.Context, pf string) (string, error) {
	if s.ESwitch == nil {
		return "", errNoESwitch
	}
	mode, err := s.ESwitch.ESwitchMode(ctx, pf)
	if err != nil {
		return "", fmt.Errorf("read the PF's eSwitch mode: %w", err)
	}
	return mode, nil
}

// errNoESwitch is a layout naming an eSwitch mode in an agent that has
// no devlink to set one with; errNoDevlinkSFs one counting SFs.
var (
	errNoESwitch    = errors.New("the layout names an eSwitch mode, and this agent has no devlink to read or set one with (--devlink)")
	errNoDevlinkSFs = errors.New("the layout counts SFs, and this agent has no devlink to add or delete them with (--devlink)")
)

// Before is what a PF had before a change, which a rollback puts back.
type Before struct {
	VFs []fenceapi.VF
	// Mode is its eSwitch mode, "" when the change leaves the mode be.
	Mode string
	// SFs are its SFs' sfnums, ascending, put back only when CountsSFs:
	// a change that leaves the SFs be does not read them.
	SFs       []int
	CountsSFs bool
}

// BeforeOf is what the change c records the PF had.
func BeforeOf(c *fenceapi.LayoutChange) Before {
	return Before{VFs: c.Before, Mode: c.ESwitchModeBefore, SFs: c.SFsBefore, CountsSFs: c.Target.NumSFs != nil}
}

// bind is s as the binder of single functions.
func (s Sysfs) bind() pcidriver.Sysfs { return pcidriver.Sysfs{Root: s.Root, Settle: s.Settle} }

func (s Sysfs) device(addr string) string { return filepath.Join(s.Root, "bus/pci/devices", addr) }

// Read returns the PF's VFs.
func (s Sysfs) Read(pf string) (State, error) {
	links, err := filepath.Glob(filepath.Join(s.device(pf), "virtfn*"))
	if err != nil {
		return nil, err
	}
	st := make(State, len(links))
	for _, link := range links {
		i, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(link), "virtfn"))
		if err != nil || i < 0 || i >= len(links) {
			return nil, fmt.Errorf("PF %s: %s is not one of its %d VFs", pf, filepath.Base(link), len(links))
		}
		target, err := os.Readlink(link)
		if err != nil {
			return nil, err
		}
		if st[i], err = s.readVF(filepath.Base(target)); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (s Sysfs) readVF(addr string) (VF, error) {
	b, err := s.bind().Read(addr)
	return VF{Addr: addr, Driver: b.Driver, Override: b.Override}, err
}
