package vflayout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hwnet-io/hwnet/node/pcidriver"
)

// ApplyError is a change that failed, and what putting the PF back did.
type ApplyError struct {
	PF  string
	Err error
	// Rollback is nil when sysfs shows every VF back as it was.
	Rollback error
}

func (e *ApplyError) Error() string {
	if e.Rollback != nil {
		return fmt.Sprintf("PF %s: %v; and putting its VFs back failed: %v", e.PF, e.Err, e.Rollback)
	}
	return fmt.Sprintf("PF %s: %v; its VFs are back as they were", e.PF, e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }

// Apply brings the PF's VFs, and its eSwitch mode and SFs when want
// names them, to want. It writes nothing when they are already so
// (changed false). A change that fails is undone to before (Restore), and
// the error is an *ApplyError. The caller makes sure no VF or SF of the
// PF is held.
func (s Sysfs) Apply(ctx context.Context, pf string, want Want, before Before) (changed bool, err error) {
	cur, err := s.Read(pf)
	if err != nil {
		return false, err
	}
	mode, err := s.ESwitchMode(ctx, pf, want)
	if err != nil {
		return false, err
	}
	sfs, err := s.SFs(pf, want)
	if err != nil {
		return false, err
	}
	if want.SatisfiedBy(cur, mode, sfs) {
		return false, nil
	}
	if err := s.set(ctx, pf, want, mode, sfs); err != nil {
		return true, &ApplyError{PF: pf, Err: err, Rollback: s.Restore(ctx, pf, before)}
	}
	return true, nil
}

// rollbackTimeout gives each step of a rollback of n VFs its Settle.
func rollbackTimeout(s Sysfs, n int) time.Duration {
	return s.Settle * time.Duration(2+3*n)
}

// Restore brings the PF back to before: the SFs it did not have deleted
// when the change counted them, its eSwitch mode when it had one to put
// back, the SFs it had added again, then its VF count, then each VF on
// the driver it had ("" unbound) with its driver_override as it was. It
// is nil only when sysfs (and devlink), read after, show the PF so; else
// it says what went wrong and what differs. It runs even when ctx ended:
// a PF left half way is worse than a late stop.
func (s Sysfs) Restore(ctx context.Context, pf string, before Before) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout(s, len(before.VFs)+len(before.SFs)))
	defer cancel()
	err := s.restore(ctx, pf, before)
	if diff := s.differs(ctx, pf, before); diff != nil {
		return errors.Join(err, diff)
	}
	return nil
}

func (s Sysfs) restore(ctx context.Context, pf string, b Before) error {
	if b.CountsSFs {
		if err := s.removeSFs(ctx, pf, b.SFs); err != nil {
			return err
		}
	}
	if err := s.restoreMode(ctx, pf, b.Mode); err != nil {
		return err
	}
	if b.CountsSFs {
		if err := s.addSFs(ctx, pf, b.SFs); err != nil {
			return err
		}
	}
	before := b.VFs
	cur, err := s.Read(pf)
	if err != nil {
		return err
	}
	if len(cur) != len(before) {
		if cur, err = s.setNumVFs(ctx, pf, len(cur), len(before)); err != nil {
			return err
		}
	}
	// Each VF is tried: one that cannot be put back leaves the others
	// to be. cur has as many VFs as before: setNumVFs returns the VFs it
	// saw at the count it set.
	var errs []error
	for i, vf := range cur {
		if err := s.bind().Restore(ctx, vf.Addr, pcidriver.Binding(before[i])); err != nil {
			errs = append(errs, fmt.Errorf("VF %d (%s): %w", i, vf.Addr, err))
		}
	}
	return errors.Join(errs...)
}

// restoreMode puts the PF's eSwitch mode back to modeBefore, if the
// change had one to put back and the mode is not that already.
func (s Sysfs) restoreMode(ctx context.Context, pf, modeBefore string) error {
	if modeBefore == "" {
		return nil
	}
	mode, err := s.readMode(ctx, pf)
	if err != nil || mode == modeBefore {
		return err
	}
	return s.setMode(ctx, pf, modeBefore)
}

// differs says how the PF's VFs, and its eSwitch mode and SFs when the
// change named them, differ from before, nil when they do not.
func (s Sysfs) differs(ctx context.Context, pf string, b Before) error {
	var diffs []string
	before, modeBefore := b.VFs, b.Mode
	if b.CountsSFs {
		diff, err := s.sfsDiffer(pf, b.SFs)
		if err != nil {
			return err
		}
		if diff != "" {
			diffs = append(diffs, diff)
		}
	}
	if modeBefore != "" {
		mode, err := s.readMode(ctx, pf)
		if err != nil {
			return err
		}
		if mode != modeBefore {
			diffs = append(diffs, fmt.Sprintf("the PF's eSwitch is in %s mode, it was in %s", mode, modeBefore))
		}
	}
	st, err := s.Read(pf)
	if err != nil {
		return err
	}
	if len(st) != len(before) {
		return errors.New(strings.Join(append(diffs, fmt.Sprintf("the PF has %d VFs, it had %d", len(st), len(before))), "; "))
	}
	for i, vf := range st {
		if was := before[i]; vf.Driver != was.Driver || vf.Override != was.Override {
			diffs = append(diffs, fmt.Sprintf("VF %d (%s) is %s, it was %s", i, vf.Addr,
				describeBinding(vf.Driver, vf.Override), describeBinding(was.Driver, was.Override)))
		}
	}
	if len(diffs) > 0 {
		return errors.New(strings.Join(diffs, "; "))
	}
	return nil
}

// describeBinding says what a VF is bound to, as ApplyError shows it.
func describeBinding(driver, override string) string {
	on := "unbound"
	if driver != "" {
		on = "on " + driver
	}
	if override == "" {
		return on + " with no driver_override"
	}
	return on + " with driver_override " + override
}

// set writes the PF's VFs, its eSwitch mode if want names another than
// mode, and its SFs if want counts other than sfs, to want and checks
// they are so.
func (s Sysfs) set(ctx context.Context, pf string, want Want, mode string, sfs []int) error {
	var target []int
	if want.NumSFs != nil {
		target = sfTarget(sfs, *want.NumSFs)
		if err := s.removeSFs(ctx, pf, target); err != nil {
			return err
		}
	}
	if want.ESwitchMode != "" && mode != want.ESwitchMode {
		if err := s.setMode(ctx, pf, want.ESwitchMode); err != nil {
			return err
		}
	}
	if want.NumSFs != nil {
		if err := s.addSFs(ctx, pf, target); err != nil {
			return err
		}
	}
	cur, err := s.Read(pf)
	if err != nil {
		return err
	}
	if len(cur) != want.NumVFs {
		if cur, err = s.setNumVFs(ctx, pf, len(cur), want.NumVFs); err != nil {
			return err
		}
	}
	for i, vf := range cur {
		if want.fits(i, vf) {
			continue
		}
		if err := s.bind().Rebind(ctx, vf.Addr, vf.Driver, want.Drivers[i]); err != nil {
			return fmt.Errorf("VF %d (%s): %w", i, vf.Addr, err)
		}
	}
	return s.check(ctx, pf, want)
}

// check reads the PF back and says how it is not as want.
func (s Sysfs) check(ctx context.Context, pf string, want Want) error {
	got, err := s.Read(pf)
	if err != nil {
		return err
	}
	mode, err := s.ESwitchMode(ctx, pf, want)
	if err != nil {
		return err
	}
	sfs, err := s.SFs(pf, want)
	if err != nil {
		return err
	}
	if !want.SatisfiedBy(got, mode, sfs) {
		return fmt.Errorf("VFs are %+v (eSwitch %q, SFs %v) after the change, want %s", got, mode, sfs, want)
	}
	return nil
}

// setMode puts the PF's eSwitch in mode with no VF present: ice refuses
// a mode change while the PF has VFs, and mlx5 wants them gone (their
// representors come and go with the mode).
func (s Sysfs) setMode(ctx context.Context, pf, mode string) error {
	if s.ESwitch == nil {
		return errNoESwitch
	}
	cur, err := s.Read(pf)
	if err != nil {
		return err
	}
	if len(cur) > 0 {
		if _, err := s.setNumVFs(ctx, pf, len(cur), 0); err != nil {
			return fmt.Errorf("eSwitch mode %s: removing the VFs first: %w", mode, err)
		}
	}
	if err := s.ESwitch.SetESwitchMode(ctx, pf, mode); err != nil {
		return fmt.Errorf("eSwitch mode %s: %w", mode, err)
	}
	return nil
}

// setNumVFs changes the PF's VF count as the kernel takes it: a PF with
// VFs refuses another non-zero count, so it goes through 0.
func (s Sysfs) setNumVFs(ctx context.Context, pf string, have, want int) (State, error) {
	attr := "bus/pci/devices/" + pf + "/sriov_numvfs"
	// seen is the last state read at the count asked for: what the PF's
	// VFs are returned as, so that the caller gets exactly that many.
	var seen State
	count := func(n int) func() (bool, error) {
		return func() (bool, error) {
			// An emulation that refuses a count writes the old one back,
			// where the kernel fails the write.
			if v, err := os.ReadFile(filepath.Join(s.Root, attr)); err == nil && strings.TrimSpace(string(v)) != strconv.Itoa(n) {
				return false, fmt.Errorf("sriov_numvfs %d refused: it reads %s", n, strings.TrimSpace(string(v)))
			}
			st, err := s.Read(pf)
			if err != nil || len(st) != n {
				return false, nil
			}
			seen = st
			return true, nil
		}
	}
	if have > 0 {
		if err := s.bind().Write(attr, "0"); err != nil {
			return nil, fmt.Errorf("sriov_numvfs 0: %w", err)
		}
		if err := s.bind().Wait(ctx, "no VFs", count(0)); err != nil {
			return nil, err
		}
	}
	if want > 0 {
		if err := s.bind().Write(attr, strconv.Itoa(want)); err != nil {
			return nil, fmt.Errorf("sriov_numvfs %d: %w", want, err)
		}
		if err := s.bind().Wait(ctx, strconv.Itoa(want)+" VFs", count(want)); err != nil {
			return nil, err
		}
	}
	return seen, nil
}
